//! One signal policy for every plumb command: SIGINT (Ctrl-C), SIGTERM and SIGHUP (a closed
//! terminal) all ask every loop to stop, so plumb drains in-flight I/O, forwards the signal to
//! the children it started and removes what it created. Sleeps wake on them ([`sleep`]).
//!
//! A second signal only says that plumb is still cleaning up; a third ends the process at once
//! (leaving whatever the cleanup had not reached yet), for a cleanup that hangs.
//!
//! After SIGHUP the terminal is gone: standard input, output and error that were the terminal
//! are pointed at /dev/null, so the cleanup's messages cannot fail.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);
static OUTPUT_CLOSED: AtomicBool = AtomicBool::new(false);
static FIRST: AtomicI32 = AtomicI32::new(0);
static COUNT: AtomicU32 = AtomicU32::new(0);

const AGAIN: &[u8] =
    b"\nplumb: still stopping and cleaning up; a third signal quits at once and leaves what plumb created\n";
const QUIT: &[u8] = b"\nplumb: quitting at once; what plumb created may be left behind\n";

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe calls here: atomics, write, open, dup2, isatty, _exit.
    if sig == libc::SIGHUP {
        // SAFETY: open, isatty, dup2 and close are async-signal-safe.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            if null >= 0 {
                for fd in 0..3 {
                    if libc::isatty(fd) == 1 {
                        libc::dup2(null, fd);
                    }
                }
                libc::close(null);
            }
        }
    }
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    if n == 1 {
        FIRST.store(sig, Ordering::SeqCst);
        STOP.store(true, Ordering::SeqCst);
    } else if n == 2 {
        // SAFETY: write is async-signal-safe; the buffer is static.
        unsafe { libc::write(2, AGAIN.as_ptr().cast(), AGAIN.len()) };
    } else {
        // SAFETY: write and _exit are async-signal-safe.
        unsafe {
            libc::write(2, QUIT.as_ptr().cast(), QUIT.len());
            libc::_exit(128 + sig);
        }
    }
}

/// SIGPIPE: a write to a pipe or socket whose reader is gone. When that is plumb's own standard
/// output or error (`plumb lab 2>&1 | head -4`), plumb stops as it would on SIGTERM: both are
/// pointed at /dev/null (so neither the write that failed nor the cleanup's messages can fail
/// again), the stop flag is set, and [`output_closed`] says so for the exit status. A SIGPIPE
/// from any other pipe (a child's) changes nothing: its write fails with EPIPE, as it did.
extern "C" fn on_pipe(_sig: libc::c_int) {
    // Only async-signal-safe calls here: poll, open, dup2, close, atomics.
    // SAFETY: as above, on descriptors 1 and 2 and one this handler opens.
    unsafe {
        let mut closed = false;
        for fd in [1, 2] {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            };
            if libc::poll(&mut p, 1, 0) == 1 && p.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                closed = true;
            }
        }
        if !closed {
            return;
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null >= 0 {
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            libc::close(null);
        }
    }
    OUTPUT_CLOSED.store(true, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Handle SIGPIPE as above, for every command (main installs it first).
pub fn install_pipe() {
    // SAFETY: a zeroed sigaction with our handler.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_pipe as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGPIPE, &sa, std::ptr::null_mut());
    }
}

/// Whether plumb's standard output or error lost its reader (and now goes to /dev/null).
pub fn output_closed() -> bool {
    OUTPUT_CLOSED.load(Ordering::SeqCst)
}

/// The exit status of a command whose output lost its reader, as a shell shows one that
/// SIGPIPE ended (128 + 13).
pub const OUTPUT_CLOSED_CODE: i32 = 128 + libc::SIGPIPE;

/// Install the handlers for SIGINT, SIGTERM and SIGHUP. Safe to call more than once.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with our handler; SA_RESTART so that interrupted system
        // calls (reads, io_uring waits) resume instead of failing with EINTR: loops see the
        // stop flag through their bounded waits instead.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// For a command that waits on a server it does not control (`plumb load --engine`): once a
/// stop is asked for, the command gets `grace` to clean up and end; one still running then (a
/// server that answers nothing holds it) exits at once with 128 + the signal, saying so, and
/// leaves what its cleanup had not reached to the ledger (as root, the next plumb takes it
/// down). Ctrl-C then ends plumb whatever the server does.
pub fn quit_after_stop(grace: Duration) {
    let _ = std::thread::Builder::new()
        .name("plumb-stop-deadline".into())
        .spawn(move || {
            while !stop_requested() {
                std::thread::sleep(WAKE_EVERY);
            }
            std::thread::sleep(grace);
            let code = if output_closed() {
                OUTPUT_CLOSED_CODE
            } else {
                exit_code_for(received().unwrap_or(SIGINT))
            };
            // SAFETY: write is async-signal-safe; any thread may call it.
            unsafe { libc::write(2, LATE.as_ptr().cast(), LATE.len()) };
            std::process::exit(code);
        });
}

const LATE: &[u8] = b"plumb: the server did not let plumb finish stopping in time; quitting now (as root, the next plumb command drops what this run left on the server)\n";

/// Whether a stop was asked for.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The first signal received, if any (to forward it to children).
pub fn received() -> Option<i32> {
    match FIRST.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The longest plumb sleeps without looking at the stop flag.
pub const WAKE_EVERY: Duration = Duration::from_millis(50);

/// Sleep for `d`, waking early when a stop is asked for. Returns false when woken by a stop.
pub fn sleep(d: Duration) -> bool {
    sleep_until(Instant::now() + d)
}

/// Sleep until `t`, waking early when a stop is asked for. Returns false when woken by a stop.
pub fn sleep_until(t: Instant) -> bool {
    sleep_until_or(t, &stop_requested)
}

/// Sleep until `t` or until `stop()` says so (looked at every [`WAKE_EVERY`]).
pub(crate) fn sleep_until_or(t: Instant, stop: &dyn Fn() -> bool) -> bool {
    loop {
        if stop() {
            return false;
        }
        let now = Instant::now();
        if now >= t {
            return true;
        }
        std::thread::sleep((t - now).min(WAKE_EVERY));
    }
}

/// Ctrl-C's signal, for exit codes.
pub const SIGINT: i32 = libc::SIGINT;

/// Send the signal plumb received (SIGTERM when it was asked to stop otherwise) to a child.
pub fn forward_to(pid: u32) {
    let sig = received().unwrap_or(libc::SIGTERM);
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: signalling a child plumb started.
        unsafe { libc::kill(pid, sig) };
    }
}

/// The exit code a shell gives a process a signal killed (128 + the signal).
pub fn exit_code_for(sig: i32) -> i32 {
    128 + sig
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_wake_on_a_stop() {
        use std::sync::Arc;
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let t0 = Instant::now();
        let h = std::thread::spawn(move || {
            sleep_until_or(Instant::now() + Duration::from_secs(30), &|| {
                f.load(Ordering::SeqCst)
            })
        });
        std::thread::sleep(Duration::from_millis(100));
        flag.store(true, Ordering::SeqCst);
        assert!(!h.join().unwrap());
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(sleep_until_or(
            Instant::now() + Duration::from_millis(10),
            &|| false
        ));
    }
}
