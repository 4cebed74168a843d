//! Exact syscall counts for a process tree, counted in the kernel: one counting perf event per
//! syscall tracepoint (`syscalls:sys_enter_NAME`, this kernel's own list of syscalls), attached
//! to a process with `inherit`, so that every thread and child it starts from then on counts
//! too. No ring buffer and no samples: the kernel increments a counter at each call, and plumb
//! reads the counters at the end. (Threads and children that already exist when the counters
//! are attached are not covered: attach before the process starts work, as `plumb trace -- CMD`
//! will.) Opening 360 counters takes about 40 ms here; closing them takes the kernel about
//! 35 ms each (a tracepoint unregistration waits for RCU), some 13 s in all, so the tool built on
//! this must close them off the critical path.

use perf_event_open_sys as sys;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Counters attached to one process tree; closed on drop.
pub struct SyscallCounters {
    counters: Vec<(String, OwnedFd)>,
}

/// Raise the soft limit on open files to the hard one: a counter per syscall is hundreds of
/// descriptors.
fn raise_nofile() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to an rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 && r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        // SAFETY: as above.
        unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

impl SyscallCounters {
    /// Count every syscall `pid` (and what it starts from now on) makes. `tracepoints` are
    /// `(sys_enter_NAME, id)` pairs, from [`crate::tracefs::tracepoint_ids`].
    pub fn attach(
        pid: u32,
        tracepoints: &[(String, u64)],
    ) -> Result<SyscallCounters, crate::KernelError> {
        raise_nofile();
        let mut counters = Vec::with_capacity(tracepoints.len());
        for (name, id) in tracepoints {
            let Some(call) = name.strip_prefix("sys_enter_") else {
                continue;
            };
            let mut a = sys::bindings::perf_event_attr {
                type_: sys::bindings::PERF_TYPE_TRACEPOINT,
                size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
                config: *id,
                ..Default::default()
            };
            a.set_inherit(1);
            // SAFETY: a is a valid, initialised attr; the result is checked.
            let fd = unsafe {
                sys::perf_event_open(
                    &mut a,
                    pid as i32,
                    -1,
                    -1,
                    sys::bindings::PERF_FLAG_FD_CLOEXEC as u64,
                )
            };
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                return Err(match e.raw_os_error() {
                    Some(libc::ESRCH) => {
                        crate::KernelError::new(format!("PID {pid}: no such process (at {call})"))
                    }
                    Some(libc::EACCES) | Some(libc::EPERM) => crate::KernelError::io(
                        format!("counting PID {pid}'s syscalls needs root (or kernel.perf_event_paranoid at -1)"),
                        e,
                    ),
                    _ => crate::KernelError::io(format!("counting {call} for PID {pid}"), e),
                });
            }
            // SAFETY: fd was just returned by the kernel and is ours.
            counters.push((call.to_string(), unsafe { OwnedFd::from_raw_fd(fd) }));
        }
        Ok(SyscallCounters { counters })
    }

    /// Calls so far, by syscall, those made at least once, most first.
    pub fn read(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .counters
            .iter()
            .filter_map(|(name, fd)| {
                let mut n = 0u64;
                // SAFETY: reading 8 bytes into a u64 from a counting perf fd we own.
                let r = unsafe { libc::read(fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
                (r == 8 && n > 0).then(|| (name.clone(), n))
            })
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    use crate::test_skip as skip;

    /// The counted program: one thread, waiting for the go byte before it makes a known
    /// number of three syscalls the interpreter itself never makes, then runs a grandchild.
    const CHILD: &str = "import ctypes, os, sys\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        sys.stdin.buffer.read(1)\n\
        for _ in range(1000): libc.getppid()\n\
        for _ in range(300): libc.sched_yield()\n\
        for _ in range(77): libc.umask(0o022)\n\
        os.spawnv(os.P_WAIT, '/bin/true', ['true'])\n";

    #[test]
    fn a_programs_syscalls_are_counted_exactly() {
        if unsafe { libc::geteuid() } != 0 {
            skip("counting syscalls needs root");
            return;
        }
        let ids = match crate::tracefs::tracepoint_ids("syscalls", "sys_enter_") {
            Ok(v) if !v.is_empty() => v,
            other => {
                skip(&format!("no syscall tracepoints here: {other:?}"));
                return;
            }
        };
        // Names come from this kernel: the usual ones are there, and hundreds of others.
        assert!(ids.len() > 200, "{}", ids.len());
        assert!(ids.iter().any(|(n, _)| n == "sys_enter_fdatasync"));
        let mut child = match std::process::Command::new("/usr/bin/python3")
            .args(["-c", CHILD])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                skip(&format!("no python3 for the counted program: {e}"));
                return;
            }
        };
        // The syscalls under test (closing a tracepoint counter costs the kernel ~35 ms: the
        // test does not pay that 360 times).
        let wanted: Vec<(String, u64)> = ids
            .iter()
            .filter(|(n, _)| {
                ["getppid", "sched_yield", "umask", "execve", "fdatasync"]
                    .iter()
                    .any(|w| n.strip_prefix("sys_enter_") == Some(*w))
            })
            .cloned()
            .collect();
        assert_eq!(wanted.len(), 5, "{wanted:?}");
        let counters = SyscallCounters::attach(child.id(), &wanted).unwrap();
        child.stdin.take().unwrap().write_all(b"x").unwrap();
        assert!(child.wait().unwrap().success());
        let got = counters.read();
        let n = |s: &str| got.iter().find(|(k, _)| k == s).map_or(0, |x| x.1);
        assert_eq!(n("getppid"), 1000, "{got:?}");
        assert_eq!(n("sched_yield"), 300, "{got:?}");
        assert_eq!(n("umask"), 77, "{got:?}");
        // /bin/true ran in a grandchild: its exec is counted.
        assert!(n("execve") >= 1, "{got:?}");
        assert_eq!(n("fdatasync"), 0, "{got:?}");
        // A process that is gone is named.
        let e = SyscallCounters::attach(4_000_000, &ids[..1]).err().unwrap();
        assert!(e.to_string().contains("4000000"), "{e}");
    }
}
