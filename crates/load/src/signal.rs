//! Ctrl-C and SIGTERM: the first one asks every loop to stop, so plumb can drain in-flight I/O
//! and remove what it created; a second one ends the process at once.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    // SAFETY: signal() is async-signal-safe; restoring the default lets a second Ctrl-C kill.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
    }
}

/// Install the handlers. Safe to call more than once.
pub fn install() {
    // SAFETY: the handler only stores to an atomic and calls signal().
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
