//! One window of chosen kernel events from chosen processes, each with its time on the
//! monotonic clock: the syscalls a replicated commit is made of (a WAL write and its fdatasync,
//! a send to the standby, a receive there), and where the server binary allows it, entries to
//! and returns from a few of its functions (uprobes).
//!
//! A tracefs instance of plumb's own (as for block tracing), filtered to the processes given
//! (`set_event_pid`), its clock set to `mono` so that its times are `CLOCK_MONOTONIC`, the
//! clock plumb's own client reads too ([`mono_ns`]): events from two servers and plumb's client
//! are on one time line. Dropping the session removes the instance and the probes; a session
//! whose plumb died is removed by the next plumb that traces ([`remove_dead_probes`]).
//!
//! A uprobe is set on a file: while the window is open every process that runs that binary
//! (other PostgreSQL servers on the host included) takes a trap at the probed functions, about a
//! microsecond each; only the chosen processes' hits are recorded.

use crate::tracefs::{
    buffer_kb, instance_name, instance_overruns, remove_dead_instances, remove_dead_probes,
    remove_instance, tracefs_dir, unmount_if_last, uprobe_line, TraceLock,
};
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};

/// CLOCK_MONOTONIC now, in nanoseconds (the clock the events are stamped with).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A probe on a function of a binary: at its entry, or at its return (`ret`).
#[derive(Debug, Clone, PartialEq)]
pub struct Uprobe {
    /// The event's name (letters, digits, `_`).
    pub name: String,
    pub binary: PathBuf,
    /// The function's offset in the file.
    pub offset: u64,
    pub ret: bool,
}

/// The file offset of the exported function `name` in the ELF file `binary` (its dynamic
/// symbol table: PostgreSQL exports its functions for extensions, so a stripped server binary
/// still names them).
pub fn symbol_offset(binary: &Path, name: &str) -> Result<u64, crate::KernelError> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let data =
        fs::read(binary).map_err(|e| crate::KernelError::io(format!("{}", binary.display()), e))?;
    let file = object::File::parse(&*data)
        .map_err(|e| format!("{}: not an ELF file plumb can read ({e})", binary.display()))?;
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(name) && s.is_definition())
        .ok_or_else(|| format!("{}: exports no function {name}", binary.display()))?;
    let addr = sym.address();
    for seg in file.segments() {
        let (off, size) = seg.file_range();
        if addr >= seg.address() && addr < seg.address() + size {
            return Ok(addr - seg.address() + off);
        }
    }
    Err(format!(
        "{}: {name} is at {addr:#x}, outside every loaded segment",
        binary.display()
    )
    .into())
}

/// What happened, as the trace line says it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum What {
    /// A syscall entered: `fdatasync`, with its arguments as printed.
    Enter { call: String, args: String },
    /// A syscall returned: its value (negative: -errno).
    Exit { call: String, ret: i64 },
    /// A uprobe fired.
    Probe { name: String },
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// The thread (for PostgreSQL, the process).
    pub tid: u32,
    /// CLOCK_MONOTONIC, nanoseconds (microsecond resolution: tracefs prints microseconds).
    pub t_ns: u64,
    pub what: What,
}

/// Parse an instance's `trace` text (one event a line; comments and lines of other shapes are
/// skipped).
pub fn parse_events(text: &str) -> Vec<Event> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Event> {
    if line.starts_with('#') {
        return None;
    }
    // "  comm-TID  [CPU] flags  SECS.USECS: body"
    let (head, body) = line.split_once(": ")?;
    let mut parts = head.split_whitespace();
    let task = parts.next()?;
    let ts = parts.last()?;
    let (_, tid) = task.rsplit_once('-')?;
    let tid: u32 = tid.parse().ok()?;
    let (secs, frac) = ts.split_once('.')?;
    let secs: u64 = secs.parse().ok()?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns: u64 = frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32);
    let t_ns = secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)?;
    let what = if let Some(rest) = body.strip_prefix("sys_") {
        if let Some((call, ret)) = rest.split_once(" -> ") {
            let ret = ret.trim();
            let v = u64::from_str_radix(ret.strip_prefix("0x")?, 16).ok()? as i64;
            What::Exit {
                call: call.to_string(),
                ret: v,
            }
        } else {
            let (call, args) = rest.split_once('(')?;
            What::Enter {
                call: call.to_string(),
                args: args.trim_end_matches(')').to_string(),
            }
        }
    } else {
        let (name, _) = body.split_once(": ")?;
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return None;
        }
        What::Probe {
            name: name.to_string(),
        }
    };
    Some(Event { tid, t_ns, what })
}

/// The uprobe group of this process's sessions.
fn group() -> String {
    format!("plumb_{}", std::process::id())
}

fn write(p: &Path, v: &str) -> Result<(), crate::KernelError> {
    fs::write(p, v).map_err(|e| crate::KernelError::io(format!("cannot write {}", p.display()), e))
}

/// A window of events. Dropping it removes the instance and the probes.
pub struct EventTrace {
    instance: PathBuf,
    tracefs: PathBuf,
    /// Probes this session added (`group/name`).
    probes: Vec<String>,
    overruns_before: u64,
}

impl EventTrace {
    /// Start recording, for the processes `pids`, the entries to and returns from `syscalls`
    /// (`"fdatasync"`, `"sendto"`…) and the `probes`. Needs root.
    pub fn start(
        pids: &[u32],
        syscalls: &[&str],
        probes: &[Uprobe],
    ) -> Result<EventTrace, crate::KernelError> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("tracing events needs root".into());
        }
        if pids.is_empty() {
            return Err("no process to trace".into());
        }
        let _lock = TraceLock::take()?;
        let dir = tracefs_dir()?;
        remove_dead_instances(&dir);
        remove_dead_probes(&dir);
        let instance = dir.join("instances").join(instance_name());
        fs::create_dir(&instance).map_err(|e| {
            crate::KernelError::io(format!("cannot create {}", instance.display()), e)
        })?;
        let mut t = EventTrace {
            instance: instance.clone(),
            tracefs: dir.clone(),
            probes: Vec::new(),
            overruns_before: 0,
        };
        write(&instance.join("trace_clock"), "mono")?;
        let _ = write(&instance.join("buffer_size_kb"), &buffer_kb().to_string());
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        write(&instance.join("set_event_pid"), &list.join(" "))?;
        for s in syscalls {
            for side in ["enter", "exit"] {
                let ev = instance.join(format!("events/syscalls/sys_{side}_{s}"));
                if !ev.is_dir() {
                    return Err(
                        format!("this kernel has no syscalls:sys_{side}_{s} tracepoint").into(),
                    );
                }
                write(&ev.join("enable"), "1")?;
            }
        }
        let g = group();
        for p in probes {
            if p.name.is_empty()
                || !p
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(format!("{:?}: not a probe name", p.name).into());
            }
            let path = p.binary.display().to_string();
            if path.contains(char::is_whitespace) {
                return Err(format!("{path}: a space in the path; uprobes cannot name it").into());
            }
            let name = format!("{g}/{}", p.name);
            uprobe_line(
                &dir,
                &format!(
                    "{}:{name} {path}:{:#x}",
                    if p.ret { 'r' } else { 'p' },
                    p.offset
                ),
            )?;
            t.probes.push(name);
            write(&instance.join(format!("events/{g}/{}/enable", p.name)), "1")?;
        }
        Ok(t)
    }

    /// The instance's directory (to check it is gone after the run).
    pub fn instance(&self) -> &Path {
        &self.instance
    }

    /// The events since the last call (the buffer is emptied), and how many the kernel dropped.
    pub fn take(&mut self) -> Result<(Vec<Event>, u64), crate::KernelError> {
        // Paused while read: when plumb's own threads are traced, reading the buffer would
        // add to it as fast as it is read.
        let on = self.instance.join("tracing_on");
        write(&on, "0")?;
        let p = self.instance.join("trace");
        let text = fs::read_to_string(&p)
            .map_err(|e| crate::KernelError::io(format!("cannot read {}", p.display()), e))?;
        write(&p, "")?;
        write(&on, "1")?;
        let o = instance_overruns(&self.instance);
        let lost = o.saturating_sub(self.overruns_before);
        self.overruns_before = o;
        Ok((parse_events(&text), lost))
    }
}

impl Drop for EventTrace {
    fn drop(&mut self) {
        let lock = TraceLock::take();
        remove_instance(&self.instance);
        for p in &self.probes {
            let _ = uprobe_line(&self.tracefs, &format!("-:{p}"));
        }
        if lock.is_ok() {
            remove_dead_instances(&self.tracefs);
            remove_dead_probes(&self.tracefs);
            unmount_if_last(&self.tracefs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_parse_into_calls_returns_and_probes() {
        let t = "# tracer: nop\n\
            postgres-32514   [001] ..... 36155.069424: sys_fdatasync(fd: 0xb)\n\
            postgres-32514   [001] ..... 36155.069827: sys_fdatasync -> 0x0\n\
            postgres-32463   [000] ..... 36155.069874: sys_recvfrom -> 0xfffffffffffffff5\n\
            postgres-32514   [001] DBZff 36155.069382: commitrec: (0x5564cfbc9fe0)\n\
            postgres-32514   [001] DBZff 36155.070448: syncwait_ret: (0x5564cfbcaa09 <- 0x5564cfe073d0)\n\
            kworker/u4:1-77  [000] ..... 1.5: sys_write(fd: 1, buf: 0x55, count: 2)\n\
            garbage\n";
        let e = parse_events(t);
        assert_eq!(e.len(), 6);
        assert_eq!(e[0].tid, 32514);
        assert_eq!(e[0].t_ns, 36_155_069_424_000);
        assert_eq!(
            e[0].what,
            What::Enter {
                call: "fdatasync".into(),
                args: "fd: 0xb".into()
            }
        );
        assert_eq!(
            e[1].what,
            What::Exit {
                call: "fdatasync".into(),
                ret: 0
            }
        );
        assert_eq!(
            e[2].what,
            What::Exit {
                call: "recvfrom".into(),
                ret: -11
            }
        );
        assert_eq!(
            e[3].what,
            What::Probe {
                name: "commitrec".into()
            }
        );
        assert_eq!(
            e[4].what,
            What::Probe {
                name: "syncwait_ret".into()
            }
        );
        assert_eq!((e[5].tid, e[5].t_ns), (77, 1_500_000_000));
    }

    #[test]
    fn exported_functions_are_found_in_an_elf_file() {
        // This test binary exports nothing of its own, but libc does.
        let libc = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists());
        let Some(libc) = libc else {
            eprintln!("skipped: no libc.so.6 where Debian keeps it");
            return;
        };
        let off = symbol_offset(libc, "fdatasync").unwrap();
        assert!(off > 0);
        let e = symbol_offset(libc, "no_such_function_here").unwrap_err();
        assert!(e.to_string().contains("exports no function"), "{e}");
        let e = symbol_offset(Path::new("/etc/hostname"), "x").unwrap_err();
        assert!(e.to_string().contains("not an ELF file"), "{e}");
    }
}
