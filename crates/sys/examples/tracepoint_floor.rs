//! The cost floor of `plumb trace`, for `bench/trace_overhead.py`: programs that do nothing
//! (return at once) on the four raw tracepoints `plumb trace` uses (`sys_enter`, `sys_exit`,
//! `sched_switch`, `sched_wakeup`). Whatever a workload loses under this is the kernel's
//! tracepoint machinery alone (with a program on the syscall tracepoints every syscall of every
//! task takes the slower entry path); what it loses beyond this under `plumb trace` is plumb's
//! counting. Runs until SIGINT or SIGTERM; the kernel detaches the programs when it exits.
//!
//! `cargo run --release -p plumb-sys --example tracepoint_floor` (as root).

use plumb_sys::bpf::{Asm, Link, Prog, ProgType};

fn main() {
    if let Err(e) = run() {
        eprintln!("tracepoint_floor: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), plumb_sys::KernelError> {
    let mut a = Asm::new();
    a.mov_k(0, 0).exit();
    let insns = a.finish()?;
    let mut held = Vec::new();
    for tp in ["sys_enter", "sys_exit", "sched_switch", "sched_wakeup"] {
        let p = Prog::load(ProgType::RawTracepoint, "plumb_floor", &insns)?;
        held.push((Link::raw_tracepoint(&p, tp)?, p));
    }
    // Wait for SIGINT or SIGTERM, then let the descriptors go.
    // SAFETY: a signal set on the stack, blocked so sigwait receives the signals.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        println!("attached: empty programs on sys_enter, sys_exit, sched_switch, sched_wakeup");
        let mut sig = 0;
        libc::sigwait(&set, &mut sig);
    }
    drop(held);
    Ok(())
}
