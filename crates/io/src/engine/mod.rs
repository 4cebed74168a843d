//! I/O engines behind one trait with a tri-state submit, so one runner loop drives synchronous
//! and asynchronous engines alike (fio's `queued / completed / busy`).

use crate::job::{EngineKind, SyncCall};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

mod null;
mod psync;
mod uring;

pub use null::NullEngine;
pub use psync::PsyncEngine;
pub use uring::UringEngine;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

/// One request. `slot` names the buffer (and the request) until it completes.
#[derive(Debug, Clone, Copy)]
pub struct Req {
    pub slot: u32,
    pub op: Op,
    pub offset: u64,
    pub len: u32,
    /// Make this write durable with a sync call once it is written.
    pub sync: Option<SyncCall>,
}

/// A finished request: `res` is the byte count, or a negative errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub slot: u32,
    pub res: i64,
    /// A sync call ran (and succeeded) after the write.
    pub synced: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    /// Accepted; it completes later through `reap`.
    Queued,
    /// Done already (synchronous engines).
    Done(Done),
    /// No room now; wait for completions first.
    Busy,
}

pub trait Engine {
    fn kind(&self) -> EngineKind;
    /// The buffer of a slot, `block_size` bytes, aligned for O_DIRECT.
    fn buf(&mut self, slot: u32) -> &mut [u8];
    fn submit(&mut self, req: Req) -> io::Result<Submit>;
    /// Hand queued requests to the kernel and wait until `min` have completed, or `timeout`
    /// passes, or a signal arrives.
    fn wait(&mut self, min: u32, timeout: Option<Duration>) -> io::Result<()>;
    /// Move finished requests into `out`.
    fn reap(&mut self, out: &mut Vec<Done>);
    /// Syscalls spent talking to the kernel (io_uring_enter, or pread/pwrite/sync calls).
    fn syscalls(&self) -> u64;
    /// A line on how it was set up (registered buffers, flags), for the report.
    fn describe(&self) -> String;
}

/// Memory aligned for O_DIRECT, freed on drop.
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align).expect("valid layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in new().
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// Per-slot buffers in one aligned region.
pub(crate) struct Slots {
    mem: AlignedBuf,
    block: usize,
}

impl Slots {
    pub fn new(count: u32, block: u32) -> Slots {
        // 4 KiB alignment satisfies O_DIRECT on every logical block size up to 4 KiB.
        let block = block as usize;
        Slots {
            mem: AlignedBuf::new(block * count as usize, 4096),
            block,
        }
    }

    pub fn get(&mut self, slot: u32) -> &mut [u8] {
        let b = self.block;
        let s = slot as usize * b;
        &mut self.mem.as_mut_slice()[s..s + b]
    }

    /// The slot's buffer as a pointer for the kernel (io_uring, iovecs); a slot out of range
    /// panics here, through the bounds check of `get`, instead of pointing past the buffer.
    pub fn ptr(&mut self, slot: u32) -> *mut u8 {
        self.get(slot).as_mut_ptr()
    }

    pub(crate) fn iovecs(&mut self, count: u32) -> Vec<libc::iovec> {
        (0..count)
            .map(|i| libc::iovec {
                iov_base: self.ptr(i).cast(),
                iov_len: self.block,
            })
            .collect()
    }
}

/// Make the engine a job asked for. `qd` is the outstanding I/Os this engine instance carries
/// (always 1 for psync, whose parallelism comes from threads).
pub fn make(
    kind: EngineKind,
    fd: RawFd,
    qd: u32,
    block: u32,
    batch_submit: u32,
) -> io::Result<Box<dyn Engine>> {
    Ok(match kind {
        EngineKind::IoUring => Box::new(UringEngine::new(fd, qd, block, batch_submit)?),
        EngineKind::Psync => Box::new(PsyncEngine::new(fd, block)),
        EngineKind::Null => Box::new(NullEngine::new(qd, block)),
    })
}

pub(crate) fn sync_fd(fd: RawFd, call: SyncCall) -> io::Result<()> {
    // SAFETY: fd is an open descriptor owned by the caller for the engine's lifetime.
    let r = unsafe {
        match call {
            SyncCall::Fdatasync => libc::fdatasync(fd),
            SyncCall::Fsync => libc::fsync(fd),
        }
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn slot_pointers_stay_inside_the_buffer() {
        let mut s = super::Slots::new(4, 4096);
        let base = s.ptr(0) as usize;
        // Aligned for O_DIRECT, one block apart.
        assert_eq!(base % 4096, 0);
        assert_eq!(s.ptr(3) as usize - base, 3 * 4096);
        // A slot past the end is a panic, not a pointer past the buffer.
        let past = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.ptr(4)));
        assert!(past.is_err());
    }
}
