//! Memory pressure, built in: allocate anonymous memory, fill it with random data (so
//! compressed swap cannot flatter it), keep writing to every page, and report our own RSS and
//! swap as we go. Optionally inside a memory cgroup of our own (or one the user made), and with
//! a zram swap device set up for the experiment. Everything plumb sets up it takes down again,
//! on Ctrl-C too.

use crate::{Error, Result};
use plumb_sys::rng::Rng;
use plumb_sys::signal;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub enum CgroupChoice {
    /// Stay where plumb is.
    None,
    /// Create `plumb-pressure-PID` with this memory limit, run inside, remove it afterwards.
    Create { limit: u64 },
    /// Run inside an existing cgroup directory (plumb leaves it in place).
    Join(PathBuf),
}

#[derive(Debug, Clone)]
pub struct PressureOptions {
    pub size: u64,
    /// MAP_SHARED (like PostgreSQL's shared_buffers) instead of private memory.
    pub shared: bool,
    /// Write every page once, then leave it alone (a cache nobody reads).
    pub idle: bool,
    /// Stop after this long; None runs until Ctrl-C.
    pub hold: Option<Duration>,
    pub cgroup: CgroupChoice,
    /// Set up a zram swap device of this size for the run.
    pub zram_swap: Option<u64>,
    pub every: Duration,
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    pub elapsed_s: f64,
    pub touched_bytes: u64,
    /// Pages written per second since the last tick (0 when idle).
    pub pages_per_s: f64,
    pub vm_rss_bytes: Option<u64>,
    pub rss_anon_bytes: Option<u64>,
    pub rss_shmem_bytes: Option<u64>,
    pub vm_swap_bytes: Option<u64>,
    pub smaps_swap_bytes: Option<u64>,
    pub cgroup_usage_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    pub pid: u32,
    pub size_bytes: u64,
    pub shared: bool,
    pub idle: bool,
    pub cgroup: Option<PathBuf>,
    pub cgroup_limit_bytes: Option<u64>,
    pub zram_device: Option<String>,
}

/// The sizes plumb will not exceed without --force: available memory plus free disk swap,
/// less headroom. zram does not count: random pages compress to their own size in RAM.
pub(crate) fn check_size(size: u64, available: u64, free_disk_swap: u64) -> crate::Result<()> {
    let headroom = (available / 20).max(256 << 20);
    let cap = (available + free_disk_swap).saturating_sub(headroom);
    if size > cap {
        return Err(Error::Refused(format!(
            "{size} bytes is more than this host can give without risk: {available} available + {free_disk_swap} free disk swap - {headroom} headroom = {cap}; pass --force to go ahead"
        )));
    }
    Ok(())
}

/// `check_size` against this host now: its available memory and its free disk swap.
pub fn check_fits(size: u64) -> Result<()> {
    let root = plumb_sys::Root::host();
    let mi = plumb_sys::mem::read_meminfo(&root)?;
    let disk_swap_free: u64 = plumb_sys::mem::read_swaps(&root)?
        .iter()
        .filter(|s| !s.filename.starts_with("/dev/zram"))
        .map(|s| s.size_bytes.saturating_sub(s.used_bytes))
        .sum();
    check_size(size, mi.mem_available_bytes.unwrap_or(0), disk_swap_free)
}

struct Mapped {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from a successful mmap.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

fn map(len: usize, shared: bool) -> Result<Mapped> {
    let flags = libc::MAP_ANONYMOUS
        | if shared {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        };
    // SAFETY: anonymous mapping with no address hint.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::Refused(format!(
            "cannot map {len} bytes: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(Mapped { ptr: p.cast(), len })
}

fn write_file(p: &Path, v: &str) -> Result<()> {
    std::fs::write(p, v).map_err(|e| crate::io_err(p, e))
}

/// A cgroup plumb moved itself into; moving back (and removing one it created) on drop.
struct CgroupGuard {
    dir: PathBuf,
    back_to: PathBuf,
    created: bool,
    moved: bool,
    ledger: plumb_sys::ledger::Entry,
}

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        if self.moved {
            let _ = std::fs::write(
                self.back_to.join("cgroup.procs"),
                std::process::id().to_string(),
            );
        }
        if self.created {
            // The memory was freed before this guard drops; retry briefly while the kernel
            // uncharges it.
            for _ in 0..50 {
                if std::fs::remove_dir(&self.dir).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.ledger.done();
    }
}

/// Our memory cgroup directory, its version, and the mount point of its hierarchy.
fn own_memory_cgroup() -> Result<(PathBuf, u8, PathBuf)> {
    let root = plumb_sys::Root::host();
    let mounts =
        plumb_sys::mount::read_mountinfo(&root, None).map_err(|e| Error::Refused(e.to_string()))?;
    let cg = plumb_sys::cgroup::CgroupMounts::from_mounts(&mounts);
    let me = plumb_sys::process::read(&root, std::process::id())
        .map_err(|e| Error::Refused(e.to_string()))?;
    let pc = plumb_sys::cgroup::read_for_process(&root, &cg, &me.cgroups);
    match (pc.memory, cg.memory_mount()) {
        (Some(m), Some(mp)) => Ok((m.at.dir.clone(), m.at.version, mp)),
        _ => Err(Error::Refused(
            "no memory cgroup controller is available here (neither v1 nor enabled in v2)".into(),
        )),
    }
}

fn enter_cgroup(choice: &CgroupChoice) -> Result<Option<(CgroupGuard, Option<u64>)>> {
    match choice {
        CgroupChoice::None => Ok(None),
        CgroupChoice::Join(dir) => {
            if !dir.join("cgroup.procs").exists() {
                return Err(Error::Refused(format!(
                    "--cgroup {}: not a cgroup directory (no cgroup.procs)",
                    dir.display()
                )));
            }
            let (back, _, _) = own_memory_cgroup()?;
            let mut g = CgroupGuard {
                dir: dir.clone(),
                back_to: back,
                created: false,
                moved: false,
                ledger: plumb_sys::ledger::Entry::NONE,
            };
            write_file(&dir.join("cgroup.procs"), &std::process::id().to_string())?;
            g.moved = true;
            Ok(Some((g, None)))
        }
        CgroupChoice::Create { limit } => {
            let (here, version, mount) = own_memory_cgroup()?;
            // Directly under the hierarchy's root, so only our limit applies above the root's.
            let dir = mount.join(format!("plumb-pressure-{}", std::process::id()));
            let ledger = plumb_sys::ledger::note(plumb_sys::ledger::Item::Cgroup {
                dir: dir.clone(),
                back_to: here.clone(),
            });
            std::fs::create_dir(&dir).map_err(|e| {
                ledger.done();
                Error::Refused(format!(
                    "cannot create the cgroup {}: {e}{}",
                    dir.display(),
                    if e.kind() == std::io::ErrorKind::PermissionDenied {
                        " (creating cgroups needs root)"
                    } else {
                        ""
                    }
                ))
            })?;
            let mut guard = CgroupGuard {
                dir: dir.clone(),
                back_to: here,
                created: true,
                moved: false,
                ledger,
            };
            let limit_file = if version == 1 {
                "memory.limit_in_bytes"
            } else {
                "memory.max"
            };
            if !dir.join(limit_file).exists() {
                return Err(Error::Refused(format!(
                    "{}: the memory controller is not enabled for child cgroups here (cgroup.subtree_control); plumb does not change that",
                    mount.display()
                )));
            }
            write_file(&dir.join(limit_file), &limit.to_string())?;
            write_file(&dir.join("cgroup.procs"), &std::process::id().to_string())?;
            guard.moved = true;
            Ok(Some((guard, Some(*limit))))
        }
    }
}

/// VmRSS, RssAnon, RssShmem, VmSwap and smaps_rollup Swap of this process.
type OwnNumbers = (
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
);

fn own_numbers() -> OwnNumbers {
    let (st, sm) = plumb_sys::process::read_memory(&plumb_sys::Root::host(), std::process::id());
    (
        st.as_ref().and_then(|s| s.vm_rss_bytes),
        st.as_ref().and_then(|s| s.rss_anon_bytes),
        st.as_ref().and_then(|s| s.rss_shmem_bytes),
        st.as_ref().and_then(|s| s.vm_swap_bytes),
        sm.and_then(|s| s.swap_bytes),
    )
}

/// Run the pressure program. `on_setup` is called once everything is in place, `on_tick` every
/// `every`. Returns after `hold` or Ctrl-C, with everything taken down.
pub fn run(
    o: &PressureOptions,
    on_setup: &mut dyn FnMut(&Setup),
    on_tick: &mut dyn FnMut(&Tick),
) -> Result<()> {
    signal::install();
    let page = plumb_sys::host::page_size_bytes().unwrap_or(4096) as usize;
    let len = (o.size as usize).div_ceil(page) * page;
    if len == 0 {
        return Err(Error::Refused("the size must be more than 0".into()));
    }
    // Order matters for cleanup: drop runs in reverse, so memory is freed first, then we leave
    // the cgroup, then swap is turned off.
    let _zram = match o.zram_swap {
        Some(s) => {
            Some(plumb_sys::zram::Zram::setup(s).map_err(|e| Error::Refused(e.to_string()))?)
        }
        None => None,
    };
    let cg = enter_cgroup(&o.cgroup)?;
    let cg_dir = cg.as_ref().map(|(g, _)| g.dir.clone());
    let usage_file = cg_dir.as_ref().map(|d| {
        if d.join("memory.usage_in_bytes").exists() {
            d.join("memory.usage_in_bytes")
        } else {
            d.join("memory.current")
        }
    });
    let mem = map(len, o.shared)?;
    // SAFETY: the mapping is len bytes, readable and writable, and only this thread uses it.
    let buf = unsafe { std::slice::from_raw_parts_mut(mem.ptr, len) };
    on_setup(&Setup {
        pid: std::process::id(),
        size_bytes: len as u64,
        shared: o.shared,
        idle: o.idle,
        cgroup: cg_dir.clone(),
        cgroup_limit_bytes: cg.as_ref().and_then(|(_, l)| *l),
        zram_device: _zram.as_ref().map(|z| format!("/dev/{}", z.name)),
    });
    let mut rng = Rng::new(o.seed);
    let t0 = Instant::now();
    let mut next_tick = o.every;
    let mut touched: u64 = 0;
    let mut pages_since: u64 = 0;
    let mut last_tick_at = Duration::ZERO;
    let done = |t: Duration| o.hold.is_some_and(|h| t >= h) || signal::stop_requested();
    let mut tick = |touched: u64, pages_since: &mut u64, last: &mut Duration| {
        let e = t0.elapsed();
        let (rss, anon, shmem, vmswap, smswap) = own_numbers();
        let dt = (e - *last).as_secs_f64().max(1e-9);
        on_tick(&Tick {
            elapsed_s: e.as_secs_f64(),
            touched_bytes: touched,
            pages_per_s: *pages_since as f64 / dt,
            vm_rss_bytes: rss,
            rss_anon_bytes: anon,
            rss_shmem_bytes: shmem,
            vm_swap_bytes: vmswap,
            smaps_swap_bytes: smswap,
            cgroup_usage_bytes: usage_file
                .as_ref()
                .and_then(|f| std::fs::read_to_string(f).ok())
                .and_then(|t| t.trim().parse().ok()),
        });
        *pages_since = 0;
        *last = e;
    };
    // First pass: random data into every page.
    for chunk in buf.chunks_mut(page) {
        rng.fill(chunk);
        touched += chunk.len() as u64;
        pages_since += 1;
        if pages_since.is_multiple_of(256) {
            let e = t0.elapsed();
            if done(e) {
                break;
            }
            if e >= next_tick {
                tick(touched, &mut pages_since, &mut last_tick_at);
                next_tick = e + o.every;
            }
        }
    }
    // Then keep every page hot (or leave it idle).
    let mut off = 0usize;
    loop {
        let e = t0.elapsed();
        if done(e) {
            break;
        }
        if e >= next_tick {
            tick(touched, &mut pages_since, &mut last_tick_at);
            next_tick = e + o.every;
        }
        if o.idle {
            std::thread::sleep(
                Duration::from_millis(50)
                    .min(next_tick.saturating_sub(e))
                    .max(Duration::from_millis(1)),
            );
            continue;
        }
        for _ in 0..256 {
            let v = rng.next_u64().to_le_bytes();
            buf[off..off + 8].copy_from_slice(&v);
            off += page;
            if off >= len {
                off = 0;
            }
            pages_since += 1;
        }
    }
    tick(touched, &mut pages_since, &mut last_tick_at);
    drop(mem);
    drop(cg);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_guard() {
        assert!(check_size(1 << 30, 8 << 30, 0).is_ok());
        let e = check_size(9 << 30, 8 << 30, 0).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        assert!(check_size(9 << 30, 8 << 30, 4 << 30).is_ok());
    }

    #[test]
    fn private_pressure_is_resident_and_released() {
        let opts = PressureOptions {
            size: 32 << 20,
            shared: false,
            idle: false,
            hold: Some(Duration::from_millis(600)),
            cgroup: CgroupChoice::None,
            zram_swap: None,
            every: Duration::from_millis(200),
            seed: 1,
        };
        let mut ticks = Vec::new();
        let mut setup = None;
        run(&opts, &mut |s| setup = Some(s.clone()), &mut |t| {
            ticks.push(t.clone())
        })
        .unwrap();
        assert_eq!(setup.unwrap().size_bytes, 32 << 20);
        let last = ticks.last().unwrap();
        assert_eq!(last.touched_bytes, 32 << 20);
        assert!(last.rss_anon_bytes.unwrap() >= 32 << 20, "{last:?}");
        assert!(ticks.iter().any(|t| t.pages_per_s > 0.0));
    }
}
