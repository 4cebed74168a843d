//! io_uring: requests go into the submission ring with no syscall; one io_uring_enter both
//! submits everything queued and waits for completions, which are read straight from the
//! completion ring. Buffers and the file are registered once, so the kernel neither maps pages
//! nor takes file references per I/O. Durable writes link a write and an fsync in the ring.

use super::{Done, Engine, Op, Req, Slots, Submit};
use crate::job::{EngineKind, SyncCall};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// user_data layout: low 32 bits the slot, high bits what the entry is.
const KIND_IO: u64 = 0;
const KIND_LINKED_WRITE: u64 = 1;
const KIND_SYNC: u64 = 2;

pub struct UringEngine {
    ring: IoUring<squeue::Entry, cqueue::Entry>,
    slots: Slots,
    fd: RawFd,
    fixed_file: bool,
    fixed_bufs: bool,
    setup: &'static str,
    /// The write's result while its linked sync is still running.
    pending_write: Vec<i64>,
    enters: u64,
    batch_submit: usize,
    /// Entries the kernel holds (submitted, completion not yet reaped).
    in_kernel: usize,
    half_qd: usize,
}

fn build_ring(entries: u32) -> io::Result<(IoUring<squeue::Entry, cqueue::Entry>, &'static str)> {
    // Newest first: deferred task work (6.1+) runs completions only when we ask for them, so a
    // single-threaded submitter pays no interrupts-to-task-work round trips.
    let cq = entries * 2;
    if let Ok(r) = IoUring::builder()
        .setup_cqsize(cq)
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
    {
        return Ok((r, "single_issuer+defer_taskrun"));
    }
    if let Ok(r) = IoUring::builder()
        .setup_cqsize(cq)
        .setup_coop_taskrun()
        .build(entries)
    {
        return Ok((r, "coop_taskrun"));
    }
    Ok((IoUring::builder().build(entries)?, "plain"))
}

impl UringEngine {
    pub fn new(fd: RawFd, qd: u32, block: u32, batch_submit: u32) -> io::Result<UringEngine> {
        // A durable write takes two entries (write + fsync).
        let entries = (qd * 2).next_power_of_two().max(8);
        let (ring, setup) = build_ring(entries)?;
        let mut slots = Slots::new(qd, block);
        let iov = slots.iovecs(qd);
        // SAFETY: the iovecs point into `slots`, which lives as long as the ring (both are
        // fields of this engine, and `ring` is declared first, so it is dropped first).
        let fixed_bufs =
            qd <= u16::MAX as u32 && unsafe { ring.submitter().register_buffers(&iov) }.is_ok();
        let fixed_file = ring.submitter().register_files(&[fd]).is_ok();
        Ok(UringEngine {
            ring,
            slots,
            fd,
            fixed_file,
            fixed_bufs,
            setup,
            pending_write: vec![0; qd as usize],
            enters: 0,
            batch_submit: batch_submit.max(1) as usize,
            in_kernel: 0,
            half_qd: (qd as usize / 2).max(1),
        })
    }

    fn push(&mut self, e: &squeue::Entry) -> bool {
        // SAFETY: every buffer an entry points at lives in self.slots until its completion is
        // reaped; the runner never reuses a slot before that.
        unsafe { self.ring.submission().push(e).is_ok() }
    }

    fn rw_entry(&mut self, req: &Req) -> squeue::Entry {
        let ptr = self.slots.ptr(req.slot);
        macro_rules! build {
            ($fd:expr) => {
                match (req.op, self.fixed_bufs) {
                    (Op::Read, true) => opcode::ReadFixed::new($fd, ptr, req.len, req.slot as u16)
                        .offset(req.offset)
                        .build(),
                    (Op::Write, true) => {
                        opcode::WriteFixed::new($fd, ptr, req.len, req.slot as u16)
                            .offset(req.offset)
                            .build()
                    }
                    (Op::Read, false) => opcode::Read::new($fd, ptr, req.len)
                        .offset(req.offset)
                        .build(),
                    (Op::Write, false) => opcode::Write::new($fd, ptr, req.len)
                        .offset(req.offset)
                        .build(),
                }
            };
        }
        if self.fixed_file {
            build!(types::Fixed(0))
        } else {
            build!(types::Fd(self.fd))
        }
    }

    fn sync_entry(&self, call: SyncCall) -> squeue::Entry {
        let flags = match call {
            SyncCall::Fdatasync => types::FsyncFlags::DATASYNC,
            SyncCall::Fsync => types::FsyncFlags::empty(),
        };
        if self.fixed_file {
            opcode::Fsync::new(types::Fixed(0)).flags(flags).build()
        } else {
            opcode::Fsync::new(types::Fd(self.fd)).flags(flags).build()
        }
    }
}

impl Engine for UringEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::IoUring
    }

    fn buf(&mut self, slot: u32) -> &mut [u8] {
        self.slots.get(slot)
    }

    fn submit(&mut self, req: Req) -> io::Result<Submit> {
        let slot = req.slot as u64;
        let rw = self.rw_entry(&req);
        match (req.op, req.sync) {
            (Op::Write, Some(call)) => {
                let sq = self.ring.submission();
                if sq.capacity() - sq.len() < 2 {
                    return Ok(Submit::Busy);
                }
                drop(sq);
                let w = rw
                    .flags(squeue::Flags::IO_LINK)
                    .user_data(slot | (KIND_LINKED_WRITE << 32));
                let s = self.sync_entry(call).user_data(slot | (KIND_SYNC << 32));
                if !self.push(&w) || !self.push(&s) {
                    return Ok(Submit::Busy);
                }
            }
            _ => {
                if !self.push(&rw.user_data(slot | (KIND_IO << 32))) {
                    return Ok(Submit::Busy);
                }
            }
        }
        // Feed the device at once while its queue is short; once it holds half the queue depth,
        // gather requests into groups. Submitting only at the next wait lets the device queue
        // run dry between refills (measured: -15% IOPS at QD32 on a virtio disk); submitting
        // every request alone costs a syscall per I/O.
        let queued = self.ring.submission().len();
        if queued >= self.batch_submit || self.in_kernel < self.half_qd {
            self.enters += 1;
            self.in_kernel += self.ring.submitter().submit()?;
        }
        Ok(Submit::Queued)
    }

    fn wait(&mut self, min: u32, timeout: Option<Duration>) -> io::Result<()> {
        self.enters += 1;
        let r = match timeout {
            Some(t) => {
                let ts = types::Timespec::new()
                    .sec(t.as_secs())
                    .nsec(t.subsec_nanos());
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(min as usize, &args)
            }
            None => self.ring.submitter().submit_and_wait(min as usize),
        };
        if let Ok(n) = r {
            self.in_kernel += n;
        }
        match r {
            Ok(_) => Ok(()),
            // Timeout, a signal (Ctrl-C), or a full completion ring: the caller reaps and loops.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn reap(&mut self, out: &mut Vec<Done>) {
        for cqe in self.ring.completion() {
            self.in_kernel = self.in_kernel.saturating_sub(1);
            let ud = cqe.user_data();
            let slot = (ud & 0xffff_ffff) as u32;
            let res = cqe.result() as i64;
            match ud >> 32 {
                KIND_LINKED_WRITE => {
                    self.pending_write[slot as usize] = res;
                    // A failed write cancels its linked sync, which still posts -ECANCELED.
                }
                KIND_SYNC => {
                    let w = self.pending_write[slot as usize];
                    let (res, synced) = if w < 0 {
                        (w, false)
                    } else if res < 0 {
                        (res, false)
                    } else {
                        (w, true)
                    };
                    out.push(Done { slot, res, synced });
                }
                _ => out.push(Done {
                    slot,
                    res,
                    synced: false,
                }),
            }
        }
    }

    fn syscalls(&self) -> u64 {
        self.enters
    }

    fn describe(&self) -> String {
        format!(
            "io_uring ({}; submits in groups of {}; {} buffers; {} file)",
            self.setup,
            self.batch_submit,
            if self.fixed_bufs {
                "registered"
            } else {
                "plain"
            },
            if self.fixed_file {
                "registered"
            } else {
                "plain"
            }
        )
    }
}
