//! A recording in the foreground (`plumb record`): sample on the schedule until the duration
//! is up, the command plumb started exits, or plumb is asked to stop; then stop the command
//! the way a shell would (the signal plumb received, a grace period, then SIGKILL).

use crate::Collector;
use crate::{Error, Result};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How long a command has to end after it was passed the stop signal.
pub const GRACE: Duration = Duration::from_secs(10);

pub struct Foreground<'a> {
    pub interval: Duration,
    /// Stop after this long (None: until the command exits or `cancel`).
    pub duration: Option<Duration>,
    /// Polled between ticks: true ends the recording.
    pub cancel: &'a dyn Fn() -> bool,
    /// How often `cancel` is polled while waiting for a tick.
    pub cancel_every: Duration,
    /// Passes the stop on to the command (the signal plumb received).
    pub signal_command: &'a dyn Fn(u32),
}

/// How a foreground recording ended.
#[derive(Debug)]
pub struct Recorded {
    /// The command's status, when there was one.
    pub exit: Option<ExitStatus>,
    /// The command did not end within [`GRACE`] of the signal and was killed.
    pub killed: bool,
    /// Ticks skipped because plumb fell behind.
    pub late: u64,
}

/// Start a command to record (its PID joins the recording's scope) and mark "command
/// started"; None for no command.
pub(crate) fn start_command(rec: &mut Collector, command: &[String]) -> Result<Option<Child>> {
    let Some((prog, args)) = command.split_first() else {
        return Ok(None);
    };
    let c = Command::new(prog)
        .args(args)
        .spawn()
        .map_err(|e| Error::Command {
            program: prog.clone(),
            source: Some(e),
        })?;
    adopt_command(rec, &c, command)?;
    Ok(Some(c))
}

/// Record a command started elsewhere (held for tracing, then let run): its PID joins the
/// recording's scope, marked "command started".
pub(crate) fn adopt_command(rec: &mut Collector, c: &Child, command: &[String]) -> Result<()> {
    rec.add_command(c.id());
    rec.mark(
        "command started",
        Some(format!("PID {}: {}", c.id(), command.join(" "))),
    )?;
    Ok(())
}

/// Record until the duration is up, the command exits (marked "command exited") or `cancel`;
/// a command still running then is stopped.
pub fn record(rec: &mut Collector, mut child: Option<Child>, f: &Foreground) -> Result<Recorded> {
    use crate::ticks::{self, Flow, Ticking};
    let mut exit = None;
    let ticking = Ticking::every(f.interval, f.cancel)
        .for_(f.duration)
        .cancel_every(f.cancel_every);
    let ticked = ticks::run(&ticking, |_| -> Result<Flow> {
        // Whether the command has ended is asked before the sample, so that the last sample
        // holds everything it did.
        let ended = match child.as_mut() {
            Some(c) => c.try_wait()?,
            None => None,
        };
        if ended.is_some() {
            // The last sample reads everything, the slow metrics too.
            rec.slow_next();
        }
        let t_ms = rec.tick()?;
        if let Some(st) = ended {
            exit = Some(st);
            rec.mark_at(t_ms, "command exited", Some(format!("{st}")))?;
            return Ok(Flow::Stop);
        }
        Ok(Flow::Go)
    })?;
    let mut killed = false;
    if let (Some(c), None) = (child.as_mut(), exit) {
        // Stopped before the command ended (Ctrl-C reaches the command too from a terminal; a
        // signal sent to plumb alone does not): it gets the same signal, then GRACE to end.
        let (st, k) = stop(c, f.signal_command)?;
        killed = k;
        let _ = rec.mark("command exited", Some(format!("{st}")));
        exit = Some(st);
    }
    Ok(Recorded {
        exit,
        killed,
        late: ticked.late,
    })
}

/// Signal the child, wait up to GRACE, then kill it; its status and whether it was killed.
pub(crate) fn stop(c: &mut Child, signal: &dyn Fn(u32)) -> Result<(ExitStatus, bool)> {
    if let Some(st) = c.try_wait()? {
        return Ok((st, false));
    }
    signal(c.id());
    let t = Instant::now();
    loop {
        if let Some(st) = c.try_wait()? {
            return Ok((st, false));
        }
        if t.elapsed() > GRACE {
            let _ = c.kill();
            return Ok((c.wait()?, true));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn collector(path: &std::path::Path) -> Collector {
        Collector::create(
            path,
            plumb_sys::Root::host(),
            plumb_sys::rawsample::Scope {
                pids: vec![],
                children: false,
            },
            crate::EngineSampler::new(None),
            &crate::Setup {
                interval: Duration::from_millis(50),
                labels: Default::default(),
                command_line: "test".into(),
            },
        )
        .unwrap()
    }

    fn foreground<'a>(cancel: &'a dyn Fn() -> bool, signal: &'a dyn Fn(u32)) -> Foreground<'a> {
        Foreground {
            interval: Duration::from_millis(50),
            duration: Some(Duration::from_secs(20)),
            cancel,
            cancel_every: crate::schedule::WAKE_EVERY,
            signal_command: signal,
        }
    }

    fn marks(path: &std::path::Path) -> Vec<String> {
        plumb_store::read(path)
            .unwrap()
            .marks
            .into_iter()
            .map(|m| m.name)
            .collect()
    }

    #[test]
    fn the_recording_ends_with_the_command_and_keeps_its_status() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.plumb");
        let mut rec = collector(&path);
        let cmd = ["sh".to_string(), "-c".into(), "sleep 0.2; exit 3".into()];
        let child = start_command(&mut rec, &cmd).unwrap();
        let r = record(&mut rec, child, &foreground(&|| false, &|_| {})).unwrap();
        assert_eq!(r.exit.and_then(|s| s.code()), Some(3));
        assert!(!r.killed);
        assert!(rec.samples >= 2, "{} samples", rec.samples);
        assert_eq!(marks(&path), ["command started", "command exited"]);
    }

    #[test]
    fn a_stop_passes_the_signal_to_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.plumb");
        let mut rec = collector(&path);
        let child = start_command(&mut rec, &["sleep".into(), "30".into()]).unwrap();
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        let cancel = || {
            if started.elapsed() > Duration::from_millis(200) {
                stop.store(true, Ordering::SeqCst);
            }
            stop.load(Ordering::SeqCst)
        };
        let signalled = AtomicBool::new(false);
        let signal = |pid: u32| {
            signalled.store(true, Ordering::SeqCst);
            plumb_sys::os::signal(pid, libc::SIGTERM);
        };
        let r = record(&mut rec, child, &foreground(&cancel, &signal)).unwrap();
        assert!(signalled.load(Ordering::SeqCst));
        assert!(started.elapsed() < GRACE, "the command ended on the signal");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(r.exit.and_then(|s| s.signal()), Some(libc::SIGTERM));
        assert!(!r.killed);
        assert_eq!(marks(&path), ["command started", "command exited"]);
    }

    #[test]
    fn a_command_that_cannot_start_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = collector(&dir.path().join("r.plumb"));
        let e = start_command(&mut rec, &["/no/such/program".into()]).unwrap_err();
        assert!(e.to_string().contains("/no/such/program"), "{e}");
        assert!(start_command(&mut rec, &[]).unwrap().is_none());
    }
}
