//! psync: blocking pread/pwrite (and fdatasync/fsync), one request at a time. The runner gives
//! each outstanding I/O its own thread, as a database's synchronous writers do.

use super::{sync_fd, Done, Engine, Op, Req, Slots, Submit};
use crate::job::EngineKind;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub struct PsyncEngine {
    fd: RawFd,
    slots: Slots,
    syscalls: u64,
}

impl PsyncEngine {
    pub fn new(fd: RawFd, block: u32) -> PsyncEngine {
        PsyncEngine {
            fd,
            slots: Slots::new(1, block),
            syscalls: 0,
        }
    }
}

impl Engine for PsyncEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Psync
    }

    fn buf(&mut self, slot: u32) -> &mut [u8] {
        self.slots.get(slot)
    }

    fn submit(&mut self, req: Req) -> io::Result<Submit> {
        let ptr = self.slots.ptr(0);
        let mut done = 0usize;
        let len = req.len as usize;
        // Loop over short transfers and EINTR: one request is one block, however it arrives.
        while done < len {
            self.syscalls += 1;
            // SAFETY: ptr points to a buffer of at least `len` bytes owned by this engine; fd is
            // open for the engine's lifetime.
            let r = unsafe {
                let p = ptr.add(done);
                let off = (req.offset + done as u64) as libc::off_t;
                match req.op {
                    Op::Read => libc::pread(self.fd, p.cast(), len - done, off),
                    Op::Write => libc::pwrite(self.fd, p.cast(), len - done, off),
                }
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Ok(Submit::Done(Done {
                    slot: req.slot,
                    res: -(e.raw_os_error().unwrap_or(libc::EIO) as i64),
                    synced: false,
                }));
            }
            if r == 0 {
                break;
            }
            done += r as usize;
        }
        let mut synced = false;
        if let (Op::Write, Some(call)) = (req.op, req.sync) {
            self.syscalls += 1;
            if let Err(e) = sync_fd(self.fd, call) {
                return Ok(Submit::Done(Done {
                    slot: req.slot,
                    res: -(e.raw_os_error().unwrap_or(libc::EIO) as i64),
                    synced: false,
                }));
            }
            synced = true;
        }
        Ok(Submit::Done(Done {
            slot: req.slot,
            res: done as i64,
            synced,
        }))
    }

    fn wait(&mut self, _min: u32, _timeout: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self, _out: &mut Vec<Done>) {}

    fn syscalls(&self) -> u64 {
        self.syscalls
    }

    fn describe(&self) -> String {
        "psync: blocking pread/pwrite, one thread per outstanding I/O".into()
    }
}
