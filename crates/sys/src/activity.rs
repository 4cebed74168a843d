//! Who did what on the host: every process's storage I/O and CPU, the disks' counters, CPU
//! steal and the run queue, read at one moment. Two readings bound a measured window;
//! `plumb_analyze::interference` compares them with what plumb itself did in it.

use crate::block::DiskStats;
use crate::cpu::CpuTicks;
use crate::Root;
use serde::Serialize;
use std::time::Instant;

/// One process at the moment of reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcActivity {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    /// A kernel thread (kthreadd or one of its children): it works for every process.
    pub kernel_thread: bool,
    /// Since the process started, from /proc/PID/io (None when unreadable: another user's
    /// process without root, or a kernel without task I/O accounting).
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// When it started (ticks after boot): a PID reused in the window is another process.
    pub start_time_ticks: u64,
}

#[derive(Debug, Clone)]
pub struct Activity {
    pub at: Instant,
    pub procs: Vec<ProcActivity>,
    pub disks: Vec<DiskStats>,
    /// The host's CPU time (all CPUs), for steal and busy time.
    pub cpu: Option<CpuTicks>,
    pub procs_running: Option<u64>,
    pub ticks_per_s: u64,
}

/// Read everything now. A process that exits while it is read is left out; nothing here
/// fails (a window with less evidence says so, it does not stop a measurement).
pub fn read(root: &Root) -> Activity {
    let at = Instant::now();
    let stat = crate::cpu::read_stat(root).ok();
    let mut procs = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root.path("/proc")) {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(st) = crate::process::stat(root, pid) else {
                continue;
            };
            let io = crate::process::io(root, pid).ok();
            procs.push(ProcActivity {
                pid,
                ppid: st.ppid,
                kernel_thread: pid == 2 || st.ppid == 2,
                comm: st.comm,
                read_bytes: io.as_ref().and_then(|i| i.read_bytes),
                write_bytes: io.as_ref().and_then(|i| i.write_bytes),
                cpu_ticks: st.utime_ticks + st.stime_ticks,
                start_time_ticks: st.start_time_ticks,
            });
        }
    }
    procs.sort_by_key(|p| p.pid);
    Activity {
        at,
        procs,
        disks: crate::block::read_diskstats(root).unwrap_or_default(),
        procs_running: stat.as_ref().and_then(|s| s.procs_running),
        cpu: stat.map(|s| s.total),
        ticks_per_s: crate::host::clock_ticks_per_s().unwrap_or(100),
    }
}

/// This process's PID as the root sees it (the fixtures' `self` link, or ours).
pub fn own_pid(root: &Root) -> u32 {
    crate::snapshot::self_pid(root).unwrap_or_else(|_| std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_host_reads_its_processes_disks_and_cpu() {
        let root = Root::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/v2-systemd-lvm"
        ));
        let a = read(&root);
        let pg = a.procs.iter().find(|p| p.pid == 812).expect("PID 812");
        assert_eq!(pg.comm, "postgres");
        assert!(!pg.kernel_thread);
        assert!(pg.read_bytes.is_some() && pg.write_bytes.is_some());
        assert!(a.disks.iter().any(|d| d.name == "nvme1n1"));
        assert!(a.cpu.as_ref().is_some_and(|c| c.total_ticks() > 0));
    }

    #[test]
    fn this_host_shows_this_process() {
        let a = read(&Root::host());
        let me = std::process::id();
        assert!(
            a.procs.iter().any(|p| p.pid == me),
            "our PID {me} is listed"
        );
        assert!(
            a.procs.iter().any(|p| p.kernel_thread),
            "kthreadd's children"
        );
    }
}
