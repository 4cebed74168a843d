//! Where a thread's time goes, to the nanosecond: for each thread plumb watches (a database
//! server's backend serving one of plumb's connections), the kernel keeps a running clock per
//! part (on a CPU in user code or in the kernel, waiting for a CPU, asleep in a storage read,
//! an fsync, a file write, on a futex or semaphore, on a latch (epoll/poll/select), waiting
//! for the client, sleeping, or asleep in anything else) and counts its fsyncs, the requests
//! its client sent, and the block requests it submitted (flushes, FUA writes, reads, writes).
//!
//! Small eBPF programs (assembled with [`crate::bpf`]) run at the scheduler's switch and wake-up
//! (BTF-typed raw tracepoints), at every syscall's entry and exit (raw tracepoints) and where a
//! bio is queued (`block:block_bio_queue`). Each first tests the task's bit in an array (one
//! array lookup, the cost every other task on the host pays), then finds the watched thread's
//! entry: the part its time goes to now (`cur`) and since when. At every change of state the
//! time since is added to the part it was in and the part changes, so the parts of a thread
//! always add up to the time since plumb began watching it: a reader adds the open interval
//! (now less `since`) to the current part. A transaction's parts are two readings' difference
//! ([`Clock::since`]), one map lookup at each end.
//!
//! Which part a sleep goes to is decided when the thread leaves its CPU: preempted or still
//! runnable, it waits for a CPU; otherwise by the syscall it sleeps in (the numbers from this
//! system's own table), and while it waits for its client's next request (from a `recvfrom`
//! or `recvmsg` until one returns anything but EAGAIN: a server polls its socket between the
//! two) the sleep is the client's, whatever the call. Asleep in no syscall and uninterruptible
//! is a page fault's read.
//!
//! Everything is held by file descriptors: when plumb exits, however it exits, the kernel
//! detaches the programs and frees the maps.

use crate::bpf::{
    Alu, Asm, Cond, Helper, Link, Map, MapType, Prog, ProgType, Size, FP, R0, R1, R2, R3, R6, R7,
    R8, R9,
};
use std::sync::Mutex;

/// Where a thread's time went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// On a CPU, in the program's own code.
    User,
    /// On a CPU, in the kernel (syscalls, faults, interrupts while it ran).
    System,
    /// Runnable, waiting for a CPU (preempted, or woken and not yet running).
    RunQueue,
    /// Asleep in a read of a file (`read`, `pread64`, `preadv`, an asynchronous I/O wait), or
    /// in a page fault that reads.
    StorageRead,
    /// Asleep in `fsync`, `fdatasync`, `sync_file_range`, `msync`, `syncfs` or `sync`.
    DurableWrite,
    /// Asleep on a futex until another watched thread woke it that, while it slept, made a
    /// write durable or was itself woken from such a wait: waiting for another thread of the
    /// server to make a write durable (a commit whose log the group-commit leader, or the
    /// backend holding `WALWriteLock`, flushed; a buffer lock held by a backend that flushes
    /// the WAL before it writes the buffer out).
    OthersDurable,
    /// Asleep in a file write (`write`, `pwrite64`, `writev`…): throttled writeback, or an
    /// `O_DSYNC` write.
    FileWrite,
    /// Asleep on a futex or a System V semaphore: a lock or latch of the server's own, or
    /// another of its threads.
    Futex,
    /// Asleep in `epoll_wait`, `poll` or `select` mid-request: PostgreSQL's latches (its
    /// heavyweight lock waits among them).
    Latch,
    /// Waiting for the client's next request (the time between statements belongs to the
    /// client and the network).
    Client,
    /// In `nanosleep` or `clock_nanosleep`.
    Sleep,
    /// Asleep in any other call, or in no call and interruptible.
    Other,
}

/// How many parts there are.
pub const PARTS: usize = 12;

impl Part {
    pub const ALL: [Part; PARTS] = [
        Part::User,
        Part::System,
        Part::RunQueue,
        Part::StorageRead,
        Part::DurableWrite,
        Part::OthersDurable,
        Part::FileWrite,
        Part::Futex,
        Part::Latch,
        Part::Client,
        Part::Sleep,
        Part::Other,
    ];

    /// Its name in data (JSON keys, CSV columns).
    pub fn key(self) -> &'static str {
        match self {
            Part::User => "cpu_user",
            Part::System => "cpu_system",
            Part::RunQueue => "run_queue",
            Part::StorageRead => "storage_read",
            Part::DurableWrite => "durable_write",
            Part::OthersDurable => "others_durable",
            Part::FileWrite => "file_write",
            Part::Futex => "futex",
            Part::Latch => "latch",
            Part::Client => "client",
            Part::Sleep => "sleep",
            Part::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Its clock's byte offset in a thread's entry.
    fn off(self) -> i32 {
        PART_AT + 8 * self.index() as i32
    }
}

/// What a thread did that is counted, not timed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// fsync-family calls returned.
    pub syncs: u64,
    /// Requests received from the client: the first receive with data after each reply (one
    /// a round trip).
    pub requests: u64,
    /// Block requests the thread submitted that flush the device's cache first.
    pub flushes: u64,
    /// Writes it submitted with FUA (forced unit access).
    pub fua: u64,
    /// Read and write requests it submitted.
    pub read_bios: u64,
    pub write_bios: u64,
}

impl Counts {
    fn less(&self, o: &Counts) -> Counts {
        Counts {
            syncs: self.syncs.saturating_sub(o.syncs),
            requests: self.requests.saturating_sub(o.requests),
            flushes: self.flushes.saturating_sub(o.flushes),
            fua: self.fua.saturating_sub(o.fua),
            read_bios: self.read_bios.saturating_sub(o.read_bios),
            write_bios: self.write_bios.saturating_sub(o.write_bios),
        }
    }
}

/// A watched thread's clocks at one moment (CLOCK_MONOTONIC, the clock the programs read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub at_ns: u64,
    pub parts: [u64; PARTS],
    pub counts: Counts,
}

impl Clock {
    /// What the thread spent between `earlier` and this reading.
    pub fn since(&self, earlier: &Clock) -> Spent {
        let mut parts = [0; PARTS];
        for (i, p) in parts.iter_mut().enumerate() {
            *p = self.parts[i].saturating_sub(earlier.parts[i]);
        }
        Spent {
            wall_ns: self.at_ns.saturating_sub(earlier.at_ns),
            parts,
            counts: self.counts.less(&earlier.counts),
        }
    }
}

/// A thread's time over a window, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub wall_ns: u64,
    pub parts: [u64; PARTS],
    pub counts: Counts,
}

impl Spent {
    pub fn part(&self, p: Part) -> u64 {
        self.parts[p.index()]
    }

    /// The parts' sum: the window's wall time when no event was missed.
    pub fn accounted_ns(&self) -> u64 {
        self.parts.iter().sum()
    }
}

// A thread's entry: since (ns), the byte offset of the part its time goes to now, its open
// syscall's number + 1 (0: none), 1 while it waits for its client (32 bits), 1 once it replied
// to its client until it receives again (32 bits), then the parts' clocks and the counts.
const SINCE: i16 = 0;
const CUR: i16 = 8;
const NR: i16 = 16;
const CLIENT: i16 = 24;
const REPLIED: i16 = 28;
const PART_AT: i32 = 32;
const COUNT_AT: i16 = (PART_AT + 8 * PARTS as i32) as i16;
const SYNCS: i16 = COUNT_AT;
const REQUESTS: i16 = COUNT_AT + 8;
const FLUSHES: i16 = COUNT_AT + 16;
const FUA: i16 = COUNT_AT + 24;
const READ_BIOS: i16 = COUNT_AT + 32;
const WRITE_BIOS: i16 = COUNT_AT + 40;
/// When the thread last finished waiting for a durable write, its own call's or another
/// thread's (ns; 0: not yet).
const SYNC_AT: i16 = COUNT_AT + 48;
const VALUE: usize = COUNT_AT as usize + 56;
/// How many threads can be watched at once.
const THREADS: u32 = 8192;
const EAGAIN: i32 = -11;

/// The syscalls each kind of sleep is, by number on this system.
#[derive(Debug, Default, Clone)]
struct Calls {
    durable: Vec<u32>,
    read: Vec<u32>,
    write: Vec<u32>,
    futex: Vec<u32>,
    latch: Vec<u32>,
    client: Vec<u32>,
    recv: Vec<u32>,
    send: Vec<u32>,
    sleep: Vec<u32>,
}

impl Calls {
    fn from_table(t: &std::collections::BTreeMap<u32, String>) -> Calls {
        let n = |names: &[&str]| -> Vec<u32> {
            t.iter()
                .filter(|(_, name)| names.contains(&name.as_str()))
                .map(|(nr, _)| *nr)
                .collect()
        };
        Calls {
            durable: n(&[
                "fsync",
                "fdatasync",
                "sync_file_range",
                "msync",
                "syncfs",
                "sync",
            ]),
            read: n(&[
                "read",
                "pread64",
                "readv",
                "preadv",
                "preadv2",
                "io_getevents",
                "io_pgetevents",
                "io_uring_enter",
            ]),
            write: n(&["write", "pwrite64", "writev", "pwritev", "pwritev2"]),
            futex: n(&["futex", "futex_waitv", "semop", "semtimedop"]),
            latch: n(&[
                "epoll_wait",
                "epoll_pwait",
                "epoll_pwait2",
                "poll",
                "ppoll",
                "select",
                "pselect6",
            ]),
            client: n(&["recvfrom", "recvmsg", "sendto", "sendmsg"]),
            recv: n(&["recvfrom", "recvmsg"]),
            send: n(&["sendto", "sendmsg"]),
            sleep: n(&["nanosleep", "clock_nanosleep"]),
        }
    }
}

struct Maps {
    /// One bit per TID: the watched threads (an array lookup every program makes first).
    bits: Map,
    /// The watched threads' entries, by TID.
    threads: Map,
}

/// The pieces the programs share; r9 holds a watched thread's entry, r8 the time.
struct Gen<'a> {
    a: Asm,
    m: &'a Maps,
    n: usize,
}

impl<'a> Gen<'a> {
    fn new(m: &'a Maps) -> Gen<'a> {
        Gen {
            a: Asm::new(),
            m,
            n: 0,
        }
    }
    fn fresh(&mut self, what: &str) -> String {
        self.n += 1;
        format!("{what}_{}", self.n)
    }
    /// The thread whose TID is at fp + tid: go to `not` unless watched; else r9 = its entry
    /// (scratch: 4 bytes at fp + idx).
    fn entry_or(&mut self, tid: i16, idx: i16, not: &str) -> &mut Self {
        let m = self.m;
        self.a
            .load(Size::W, R1, FP, tid)
            .alu_k(Alu::Rsh, R1, 6)
            .store(Size::W, FP, idx, R1)
            .map(R1, &m.bits)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, idx as i32)
            .call(Helper::MapLookup)
            .jump_k(Cond::Eq, R0, 0, not)
            .load(Size::DW, R2, R0, 0)
            .load(Size::W, R3, FP, tid)
            .alu_k(Alu::And, R3, 63)
            .mov_k(R1, 1)
            .alu_x(Alu::Lsh, R1, R3)
            .alu_x(Alu::And, R2, R1)
            .jump_k(Cond::Eq, R2, 0, not)
            .map(R1, &m.threads)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, tid as i32)
            .call(Helper::MapLookup)
            .jump_k(Cond::Eq, R0, 0, not)
            .mov(R9, R0);
        self
    }
    /// r8 = now; the time since the entry's `since` added to its current part; since = now.
    fn account(&mut self) -> &mut Self {
        let skip = self.fresh("unaccounted");
        let last = Part::ALL[PARTS - 1].off();
        self.a
            .call(Helper::KtimeNs)
            .mov(R8, R0)
            .load(Size::DW, R1, R9, SINCE)
            .jump_x(Cond::Gt, R1, R8, &skip)
            .mov(R2, R8)
            .alu_x(Alu::Sub, R2, R1)
            .load(Size::DW, R3, R9, CUR)
            .jump_k(Cond::Gt, R3, last, &skip)
            .jump_k(Cond::Lt, R3, PART_AT, &skip)
            .alu_k(Alu::And, R3, -8)
            .mov(R1, R9)
            .alu_x(Alu::Add, R1, R3)
            .load(Size::DW, R3, R1, 0)
            .alu_x(Alu::Add, R3, R2)
            .store(Size::DW, R1, 0, R3)
            .label(&skip)
            .store(Size::DW, R9, SINCE, R8);
        self
    }
    /// The entry's current part becomes `p`.
    fn now_in(&mut self, p: Part) -> &mut Self {
        self.a.store_k(Size::DW, R9, CUR, p.off());
        self
    }
    /// One more at the entry's byte `at` (scratch: r3).
    fn incr(&mut self, at: i16) -> &mut Self {
        self.a
            .load(Size::DW, R3, R9, at)
            .alu_k(Alu::Add, R3, 1)
            .store(Size::DW, R9, at, R3);
        self
    }
    /// The current task's TID at fp + at.
    fn current(&mut self, at: i16) -> &mut Self {
        self.a.call(Helper::PidTgid).store(Size::W, FP, at, R0);
        self
    }
    /// The TID of the `struct task_struct *` a BTF-typed tracepoint has as argument `arg`
    /// (ctx in r6), at fp + at.
    fn task(&mut self, arg: usize, pid_off: u32, at: i16) -> &mut Self {
        self.a
            .load(Size::DW, R3, R6, (arg * 8) as i16)
            .load(Size::W, R1, R3, pid_off as i16)
            .store(Size::W, FP, at, R1);
        self
    }
    fn out(&mut self) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
        self.a.label("out").mov_k(R0, 0).exit();
        std::mem::take(&mut self.a).finish()
    }
}

/// `raw_syscalls:sys_enter` (raw: regs, id): the thread is in the kernel from now; a receive
/// from the client starts a wait for it.
fn sys_enter(m: &Maps, c: &Calls) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut g = Gen::new(m);
    g.a.mov(R6, R1);
    g.current(-4).entry_or(-4, -8, "out").account();
    g.now_in(Part::System);
    g.a.load(Size::DW, R1, R6, 8)
        .mov(R2, R1)
        .alu_k(Alu::Add, R2, 1)
        .store(Size::DW, R9, NR, R2);
    for &nr in &c.recv {
        g.a.jump_k(Cond::Eq, R1, nr as i32, "recv");
    }
    g.a.goto("out")
        .label("recv")
        .store_k(Size::W, R9, CLIENT, 1);
    g.out()
}

/// `raw_syscalls:sys_exit` (raw: regs, ret): back in user code; an fsync counted; a receive
/// that got anything but EAGAIN ends the wait for the client; the first one with data after a
/// reply (a send) is the client's next request: one a round trip, however many receives the
/// server reads it in (MariaDB reads a packet's header, then its body).
fn sys_exit(m: &Maps, c: &Calls) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut g = Gen::new(m);
    g.a.mov(R6, R1);
    g.current(-4).entry_or(-4, -8, "out").account();
    g.now_in(Part::User);
    g.a.load(Size::DW, R7, R9, NR)
        .store_k(Size::DW, R9, NR, 0)
        .jump_k(Cond::Eq, R7, 0, "out")
        .alu_k(Alu::Sub, R7, 1);
    for &nr in &c.durable {
        g.a.jump_k(Cond::Eq, R7, nr as i32, "sync");
    }
    for &nr in &c.recv {
        g.a.jump_k(Cond::Eq, R7, nr as i32, "recv");
    }
    for &nr in &c.send {
        g.a.jump_k(Cond::Eq, R7, nr as i32, "send");
    }
    g.a.goto("out")
        .label("sync")
        .store(Size::DW, R9, SYNC_AT, R8);
    g.incr(SYNCS);
    g.a.goto("out")
        .label("send")
        .load(Size::DW, R1, R6, 8)
        .jump_k(Cond::SLt, R1, 1, "out")
        .store_k(Size::W, R9, REPLIED, 1)
        .goto("out")
        .label("recv")
        .load(Size::DW, R1, R6, 8)
        .jump_k(Cond::Eq, R1, EAGAIN, "out")
        .store_k(Size::W, R9, CLIENT, 0)
        .jump_k(Cond::SLt, R1, 1, "out")
        .load(Size::W, R2, R9, REPLIED)
        .jump_k(Cond::Eq, R2, 0, "out")
        .store_k(Size::W, R9, REPLIED, 0);
    g.incr(REQUESTS);
    g.out()
}

/// `sched_switch(preempt, prev, next, prev_state)`, BTF-typed: the outgoing thread's time on
/// its CPU ends and its wait begins, in the part its state and open call say; the incoming
/// thread's wait ends.
fn sched_switch(
    m: &Maps,
    c: &Calls,
    pid_off: u32,
) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut g = Gen::new(m);
    g.a.mov(R6, R1);
    g.task(1, pid_off, -4).entry_or(-4, -8, "next").account();
    // r7: the part the outgoing thread's time goes to now.
    g.a.mov_k(R7, Part::RunQueue.off())
        .load(Size::DW, R1, R6, 0)
        .jump_k(Cond::Ne, R1, 0, "set_prev")
        .load(Size::DW, R2, R6, 24)
        .alu_k(Alu::And, R2, 0xffff)
        .jump_k(Cond::Eq, R2, 0, "set_prev")
        .mov_k(R7, Part::Client.off())
        .load(Size::W, R3, R9, CLIENT)
        .jump_k(Cond::Ne, R3, 0, "set_prev")
        .load(Size::DW, R3, R9, NR)
        .jump_k(Cond::Ne, R3, 0, "in_call")
        // In no call: uninterruptible is a page fault's read.
        .mov_k(R7, Part::Other.off())
        .alu_k(Alu::And, R2, 2)
        .jump_k(Cond::Eq, R2, 0, "set_prev")
        .mov_k(R7, Part::StorageRead.off())
        .goto("set_prev")
        .label("in_call")
        .alu_k(Alu::Sub, R3, 1);
    let kinds: [(&Vec<u32>, Part); 7] = [
        (&c.durable, Part::DurableWrite),
        (&c.read, Part::StorageRead),
        (&c.write, Part::FileWrite),
        (&c.futex, Part::Futex),
        (&c.latch, Part::Latch),
        (&c.client, Part::Client),
        (&c.sleep, Part::Sleep),
    ];
    for (nrs, part) in &kinds {
        for &nr in nrs.iter() {
            g.a.jump_k(Cond::Eq, R3, nr as i32, &format!("is_{}", part.key()));
        }
    }
    g.a.mov_k(R7, Part::Other.off()).goto("set_prev");
    for (_, part) in &kinds {
        g.a.label(&format!("is_{}", part.key()))
            .mov_k(R7, part.off())
            .goto("set_prev");
    }
    g.a.label("set_prev")
        .store(Size::DW, R9, CUR, R7)
        .label("next");
    g.task(2, pid_off, -12).entry_or(-12, -16, "out").account();
    g.a.load(Size::DW, R1, R9, NR)
        .mov_k(R2, Part::User.off())
        .jump_k(Cond::Eq, R1, 0, "set_next")
        .mov_k(R2, Part::System.off())
        .label("set_next")
        .store(Size::DW, R9, CUR, R2);
    g.out()
}

/// `sched_wakeup(p)`, BTF-typed (in the waker's context): a sleeping thread waits for a CPU
/// from now. A futex sleep that a watched thread ends after it finished waiting for a durable
/// write (its own or another's) since the sleep began was a wait for that durable write.
fn sched_wakeup(m: &Maps, pid_off: u32) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut g = Gen::new(m);
    g.a.mov(R6, R1);
    g.task(0, pid_off, -4).entry_or(-4, -8, "out");
    // On a CPU still, or already waiting for one: nothing changes.
    g.a.load(Size::DW, R1, R9, CUR)
        .jump_k(Cond::Lt, R1, Part::StorageRead.off(), "out")
        .jump_k(Cond::Ne, R1, Part::Futex.off(), "woken");
    // r7: the sleeper's entry while the waker's is looked up.
    g.a.mov(R7, R9);
    g.current(-12).entry_or(-12, -16, "not_handed");
    g.a.load(Size::DW, R8, R9, SYNC_AT)
        .jump_k(Cond::Eq, R8, 0, "not_handed")
        .load(Size::DW, R1, R7, SINCE)
        .jump_x(Cond::Gt, R1, R8, "not_handed")
        .store_k(Size::DW, R7, CUR, Part::OthersDurable.off())
        .label("not_handed")
        .mov(R9, R7)
        .label("woken");
    g.account();
    // A wait for a durable write ends now: whom this thread wakes later waited for it too.
    g.a.load(Size::DW, R1, R9, CUR)
        .jump_k(Cond::Ne, R1, Part::OthersDurable.off(), "runnable")
        .store(Size::DW, R9, SYNC_AT, R8)
        .label("runnable");
    g.now_in(Part::RunQueue);
    g.out()
}

/// `block:block_bio_queue` (its record: `rwbs` at `rwbs`): the bios a watched thread submits,
/// by kind. rwbs is an optional F (flush first), the operation (R, W, D, F…), then F for FUA.
fn bio_queue(m: &Maps, rwbs: i16) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut g = Gen::new(m);
    g.a.mov(R6, R1);
    g.current(-4).entry_or(-4, -8, "out");
    g.a.load(Size::B, R7, R6, rwbs)
        .load(Size::B, R8, R6, rwbs + 1)
        .jump_k(Cond::Ne, R7, b'F' as i32, "op");
    g.incr(FLUSHES);
    g.a.mov(R7, R8).load(Size::B, R8, R6, rwbs + 2).label("op");
    // r7: the operation, r8: the character after it.
    g.a.jump_k(Cond::Ne, R7, b'R' as i32, "not_read");
    g.incr(READ_BIOS);
    g.a.label("not_read")
        .jump_k(Cond::Ne, R7, b'W' as i32, "fua");
    g.incr(WRITE_BIOS);
    g.a.label("fua").jump_k(Cond::Ne, R8, b'F' as i32, "out");
    g.incr(FUA);
    g.out()
}

/// The kernel's per-thread clocks for the threads plumb watches.
pub struct ThreadTimes {
    maps: Maps,
    /// One writer of the bits at a time.
    lock: Mutex<()>,
    _progs: Vec<Prog>,
    _links: Vec<Link>,
}

impl std::fmt::Debug for ThreadTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ThreadTimes")
    }
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl ThreadTimes {
    /// Load and attach the programs. Needs root, a kernel with BTF (for the scheduler's
    /// tasks) and this system's syscall table.
    pub fn start() -> Result<ThreadTimes, crate::KernelError> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(
                "taking a thread's time apart needs root (plumb loads eBPF programs: CAP_BPF and CAP_PERFMON)"
                    .into(),
            );
        }
        let btf = crate::btf::Btf::kernel().map_err(|e| {
            format!("taking a thread's time apart needs the kernel's BTF (/sys/kernel/btf/vmlinux): {e}")
        })?;
        let pid_off = btf
            .offset_of("task_struct", &["pid"])
            .ok_or("the kernel's BTF has no task_struct.pid")?;
        let typedef = |name: &str| {
            btf.typedef_id(&format!("btf_trace_{name}"))
                .ok_or_else(|| format!("the kernel's BTF has no {name} tracepoint"))
        };
        let (switch_id, wakeup_id) = (typedef("sched_switch")?, typedef("sched_wakeup")?);
        if crate::bpf::kernel_version().is_none_or(|v| v < (5, 18)) {
            return Err("taking a thread's time apart needs Linux 5.18 or later (sched_switch's prev_state)".into());
        }
        let calls = Calls::from_table(&crate::syscalls::table(&crate::Root::host())?);
        let tps = crate::tracefs::tracepoint_formats(&[("block", "block_bio_queue")])?;
        let rwbs = crate::bpf::field_offset(&tps[0].1, "rwbs")
            .ok_or("block_bio_queue: no field rwbs in its format")?;
        let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(4_194_304);
        let maps = Maps {
            bits: Map::create(MapType::Array, "plumb_tt_bits", 4, 8, pid_max.div_ceil(64))?,
            threads: Map::create(MapType::Hash, "plumb_tt", 4, VALUE, THREADS)?,
        };
        let m = &maps;
        let (mut progs, mut links) = (Vec::new(), Vec::new());
        for (name, insns, id) in [
            (
                "plumb_tt_switch",
                sched_switch(m, &calls, pid_off)?,
                switch_id,
            ),
            ("plumb_tt_wakeup", sched_wakeup(m, pid_off)?, wakeup_id),
        ] {
            let p = Prog::load_btf_tracepoint(name, &insns, id)?;
            links.push(Link::btf_tracepoint(&p)?);
            progs.push(p);
        }
        for (name, insns, raw) in [
            ("plumb_tt_exit", sys_exit(m, &calls)?, "sys_exit"),
            ("plumb_tt_enter", sys_enter(m, &calls)?, "sys_enter"),
        ] {
            let p = Prog::load(ProgType::RawTracepoint, name, &insns)?;
            links.push(Link::raw_tracepoint(&p, raw)?);
            progs.push(p);
        }
        let p = Prog::load(ProgType::Tracepoint, "plumb_tt_bio", &bio_queue(m, rwbs)?)?;
        links.push(Link::tracepoint(&p, tps[0].0)?);
        progs.push(p);
        Ok(ThreadTimes {
            maps,
            lock: Mutex::new(()),
            _progs: progs,
            _links: links,
        })
    }

    /// Watch thread `tid` from now, which should be idle, waiting for its client's next
    /// request (a backend just connected): its time counts as the client's until it wakes. The
    /// call it waits in is read from /proc, so that its return is seen for what it is.
    pub fn watch(&self, tid: u32) -> Result<(), crate::KernelError> {
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = vec![0u8; VALUE];
        let open = std::fs::read_to_string(format!("/proc/{tid}/syscall"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
        if let Some(nr) = open {
            v[NR as usize..NR as usize + 8].copy_from_slice(&(nr + 1).to_ne_bytes());
        }
        v[SINCE as usize..8].copy_from_slice(&now_ns().to_ne_bytes());
        v[CUR as usize..CUR as usize + 8]
            .copy_from_slice(&(Part::Client.off() as u64).to_ne_bytes());
        v[CLIENT as usize..CLIENT as usize + 4].copy_from_slice(&1u32.to_ne_bytes());
        v[REPLIED as usize..REPLIED as usize + 4].copy_from_slice(&1u32.to_ne_bytes());
        self.maps
            .threads
            .update(&tid.to_ne_bytes(), &v)
            .map_err(|e| {
                crate::KernelError::new(format!("watching thread {tid} (at most {THREADS}): {e}"))
            })?;
        self.set_bit(tid, true)
    }

    /// Watch the server's own threads besides its connections' (`pid`, its main process: every
    /// thread of it and of its child processes, PostgreSQL's WAL writer and checkpointer,
    /// MariaDB's background threads): nobody reads their clocks, but when one of them makes a
    /// write durable and then wakes a connection's thread, that thread's wait is seen for what it
    /// was ([`Part::OthersDurable`]). Threads already watched are left as they are; how many
    /// were added.
    pub fn watch_server(&self, pid: u32) -> usize {
        let root = crate::Root::host();
        let mut procs = vec![pid];
        procs.extend(crate::process::children(&root, pid));
        let mut added = 0;
        for p in procs {
            let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/task")) else {
                continue;
            };
            for tid in rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
                if self.read(tid).is_none() && self.watch(tid).is_ok() {
                    added += 1;
                }
            }
        }
        added
    }

    /// Stop watching `tid` (not watched: fine).
    pub fn unwatch(&self, tid: u32) {
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.set_bit(tid, false);
        self.maps.threads.delete(&tid.to_ne_bytes());
    }

    fn set_bit(&self, tid: u32, on: bool) -> Result<(), crate::KernelError> {
        let key = (tid / 64).to_ne_bytes();
        let old = self
            .maps
            .bits
            .lookup(&key)
            .and_then(|v| v.into_iter().next())
            .ok_or_else(|| format!("thread {tid} is beyond this kernel's pid_max"))?;
        let mut w = word(&old, 0);
        let bit = 1u64 << (tid % 64);
        w = if on { w | bit } else { w & !bit };
        self.maps.bits.update(&key, &w.to_ne_bytes())
    }

    /// A watched thread's clocks now (None: not watched).
    pub fn read(&self, tid: u32) -> Option<Clock> {
        let v = self
            .maps
            .threads
            .lookup(&tid.to_ne_bytes())?
            .into_iter()
            .next()?;
        let at_ns = now_ns();
        Some(clock_of(&v, at_ns))
    }
}

/// A thread's entry read at `at_ns`: the open interval added to its current part.
fn clock_of(v: &[u8], at_ns: u64) -> Clock {
    let mut parts = [0; PARTS];
    for (i, p) in parts.iter_mut().enumerate() {
        *p = word(v, PART_AT as usize + 8 * i);
    }
    let (since, cur) = (word(v, SINCE as usize), word(v, CUR as usize));
    let i = (cur as usize).wrapping_sub(PART_AT as usize) / 8;
    if cur >= PART_AT as u64 && i < PARTS && at_ns > since {
        parts[i] += at_ns - since;
    }
    let c = |at: i16| word(v, at as usize);
    Clock {
        at_ns,
        parts,
        counts: Counts {
            syncs: c(SYNCS),
            requests: c(REQUESTS),
            flushes: c(FLUSHES),
            fua: c(FUA),
            read_bios: c(READ_BIOS),
            write_bios: c(WRITE_BIOS),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_skip as skip;

    fn entry(since: u64, cur: Part, parts: [u64; PARTS]) -> Vec<u8> {
        let mut v = vec![0u8; VALUE];
        v[0..8].copy_from_slice(&since.to_ne_bytes());
        v[8..16].copy_from_slice(&(cur.off() as u64).to_ne_bytes());
        for (i, p) in parts.iter().enumerate() {
            let at = PART_AT as usize + 8 * i;
            v[at..at + 8].copy_from_slice(&p.to_ne_bytes());
        }
        v[SYNCS as usize..SYNCS as usize + 8].copy_from_slice(&3u64.to_ne_bytes());
        v
    }

    #[test]
    fn a_reading_adds_the_open_interval_to_the_part_the_thread_is_in() {
        let mut parts = [0; PARTS];
        parts[Part::User.index()] = 100;
        parts[Part::Client.index()] = 900;
        // Since 1,000 ns (when watching began) the thread has been in the kernel.
        let c = clock_of(&entry(2_000, Part::System, parts), 2_500);
        assert_eq!(c.parts[Part::System.index()], 500);
        assert_eq!(c.parts.iter().sum::<u64>(), 1_500);
        assert_eq!(c.counts.syncs, 3);
        // A reading taken before the entry's own time adds nothing (no negative interval).
        let early = clock_of(&entry(2_000, Part::System, parts), 1_999);
        assert_eq!(early.parts[Part::System.index()], 0);
        // Two readings' difference: the window and its parts.
        let s = c.since(&clock_of(&entry(2_000, Part::System, parts), 2_100));
        assert_eq!(s.wall_ns, 400);
        assert_eq!(s.part(Part::System), 400);
        assert_eq!(s.accounted_ns(), s.wall_ns);
        assert_eq!(s.counts.syncs, 0);
    }

    #[test]
    fn every_part_has_its_own_clock_in_the_entry() {
        let offs: Vec<i32> = Part::ALL.iter().map(|p| p.off()).collect();
        assert!(offs.windows(2).all(|w| w[1] == w[0] + 8), "{offs:?}");
        // The wake-up program treats the parts before StorageRead as awake.
        assert!(Part::RunQueue.off() < Part::StorageRead.off());
        assert!(Part::Other.off() + 8 <= COUNT_AT as i32);
        let keys: std::collections::BTreeSet<_> = Part::ALL.iter().map(|p| p.key()).collect();
        assert_eq!(keys.len(), PARTS);
    }

    /// A program whose phases each spend their time one way: each phase starts when the test
    /// sends its name over a socket and ends with the program's reply, so that between phases
    /// the program waits for its client in `recvfrom`, as a server's backend does.
    const PHASES: &str = r#"
import mmap, os, queue, select, socket, sys, threading, time
s = socket.socket(fileno=int(sys.argv[1]))
path = sys.argv[2]
# A second thread that makes writes durable, then releases the lock it was handed: the
# group-commit leader's part.
work = queue.Queue()
def leader():
    while True:
        held = work.get()
        fd = os.open(path + ".leader", os.O_WRONLY | os.O_CREAT, 0o600)
        for i in range(20):
            os.pwrite(fd, b"z" * 4096, i * 4096)
            os.fdatasync(fd)
        os.close(fd)
        held.release()
threading.Thread(target=leader, daemon=True).start()
def spin(sec):
    # perf_counter reads the clock without a syscall: all of it user time.
    t = time.perf_counter()
    while time.perf_counter() - t < sec:
        pass
while True:
    what = s.recv(64).decode()
    if what == "spin":
        spin(0.3)
    elif what == "crowded":
        hog = os.fork()
        if hog == 0:
            os.sched_setaffinity(0, {0})
            while True:
                pass
        os.sched_setaffinity(0, {0})
        spin(0.6)
        os.kill(hog, 9)
        os.waitpid(hog, 0)
        os.sched_setaffinity(0, set(range(os.cpu_count())))
    elif what == "fsync":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        for i in range(40):
            os.pwrite(fd, b"x" * 4096, i * 4096)
            os.fdatasync(fd)
        os.close(fd)
    elif what == "direct":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.pwrite(fd, b"y" * (8 << 20), 0)
        os.fsync(fd)
        os.close(fd)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, 65536)
        for off in range(0, 8 << 20, 65536):
            os.preadv(fd, [buf], off)
        os.close(fd)
    elif what == "lock":
        l = threading.Lock()
        l.acquire()
        threading.Timer(0.25, l.release).start()
        l.acquire()
    elif what == "handoff":
        l = threading.Lock()
        l.acquire()
        work.put(l)
        l.acquire()
    elif what == "sleep":
        time.sleep(0.25)
    elif what == "poll":
        select.poll().poll(250)
    else:
        break
    s.send(b"done")
"#;

    /// Whether the disk under `path` has a volatile write cache.
    fn write_back(path: &std::path::Path) -> bool {
        let Some(dev) = crate::block::device_under(&crate::Root::host(), path) else {
            return false;
        };
        let sys = std::path::Path::new("/sys/class/block").join(dev);
        [
            sys.join("queue/write_cache"),
            sys.join("../queue/write_cache"),
        ]
        .iter()
        .any(|p| std::fs::read_to_string(p).is_ok_and(|s| s.trim() == "write back"))
    }

    #[test]
    fn each_kind_of_wait_is_charged_to_its_own_part_and_the_parts_add_up() {
        if unsafe { libc::geteuid() } != 0 {
            skip("taking a thread's time apart needs root");
            return;
        }
        use std::os::fd::AsRawFd;
        // On the disk (not tmpfs), for the fsyncs and the O_DIRECT reads.
        let tmp = tempfile::Builder::new()
            .prefix("plumb-tt-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let dir = tmp.path().to_path_buf();
        let file = dir.join("phases");
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        // The child's end must survive exec: clear close-on-exec on a duplicate.
        let fd = unsafe { libc::dup(theirs.as_raw_fd()) };
        assert!(fd >= 0);
        let child = std::process::Command::new("/usr/bin/python3")
            .args(["-c", PHASES, &fd.to_string(), file.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .spawn();
        unsafe { libc::close(fd) };
        drop(theirs);
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                skip(&format!("no python3 for the traced program: {e}"));
                return;
            }
        };
        let t = ThreadTimes::start().unwrap();
        let tid = child.id();
        // Watch it once it waits for its first request, as a backend just connected does.
        let table = crate::syscalls::table(&crate::Root::host()).unwrap();
        let recvfrom = table.iter().find(|(_, n)| *n == "recvfrom").unwrap().0;
        let waiting = || {
            std::fs::read_to_string(format!("/proc/{tid}/syscall"))
                .is_ok_and(|s| s.split_whitespace().next() == Some(&recvfrom.to_string()))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !waiting() {
            assert!(
                std::time::Instant::now() < deadline,
                "the program never waited for its client"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        t.watch(tid).unwrap();
        // The program's second thread (its leader, started first), watched too: the server's
        // threads are.
        let leader: u32 = std::fs::read_dir(format!("/proc/{tid}/task"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .find(|&t| t != tid)
            .expect("the program's second thread");
        t.watch(leader).unwrap();
        let ours = std::cell::RefCell::new(ours);
        let phase = |what: &str| -> Spent {
            use std::io::{Read, Write};
            let before = t.read(tid).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
            ours.borrow_mut().write_all(what.as_bytes()).unwrap();
            let mut b = [0u8; 4];
            ours.borrow_mut().read_exact(&mut b).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
            let s = t.read(tid).unwrap().since(&before);
            eprintln!("{what}: {s:?}");
            // The accounting closes: every nanosecond of the window is in one part.
            let gap = s.wall_ns.abs_diff(s.accounted_ns());
            assert!(gap * 100 <= s.wall_ns, "{what}: {s:?}");
            // The test's own waits are the client's: at least the 50 ms before it sends (after
            // the reply, a busy host may keep the program waiting for a CPU before its recv).
            assert!(s.part(Part::Client) >= 45_000_000, "{what}: {s:?}");
            assert_eq!(s.counts.requests, 1, "{what}: {s:?}");
            s
        };
        let ms = |s: &Spent, p: Part| s.part(p) / 1_000_000;
        // Spinning is user time (a busy host may keep it waiting for a CPU meanwhile).
        let s = phase("spin");
        assert!(ms(&s, Part::User) + ms(&s, Part::RunQueue) >= 250, "{s:?}");
        assert!(s.part(Part::User) > 9 * s.part(Part::System), "{s:?}");
        let s = phase("crowded");
        assert!(ms(&s, Part::User) >= 100, "{s:?}");
        // Sharing one CPU with a process that spins: about as long waiting as running.
        assert!(ms(&s, Part::RunQueue) >= 100, "{s:?}");
        let s = phase("fsync");
        assert_eq!(s.counts.syncs, 40, "{s:?}");
        assert!(s.part(Part::DurableWrite) > 0, "{s:?}");
        assert!(s.counts.write_bios >= 40, "{s:?}");
        // On a disk with a volatile write cache, each fdatasync has the cache flushed.
        if write_back(&dir) {
            assert!(s.counts.flushes >= 40, "{s:?}");
        } else {
            eprintln!(
                "the disk under {} writes through: no flushes to count",
                dir.display()
            );
        }
        let s = phase("direct");
        // 128 reads of 64 KiB straight from the device.
        assert!(s.counts.read_bios >= 128, "{s:?}");
        assert!(s.part(Part::StorageRead) > 0, "{s:?}");
        let s = phase("lock");
        assert!(ms(&s, Part::Futex) >= 200, "{s:?}");
        // Released by a thread that is not watched: a lock wait, nobody's durable write.
        assert_eq!(s.part(Part::OthersDurable), 0, "{s:?}");
        // Released by the watched leader just after its fdatasyncs: waiting for them.
        let s = phase("handoff");
        assert_eq!(s.counts.syncs, 0, "{s:?}");
        assert!(
            s.part(Part::OthersDurable) > 4 * s.part(Part::Futex),
            "{s:?}"
        );
        let s = phase("sleep");
        assert!(ms(&s, Part::Sleep) >= 200, "{s:?}");
        let s = phase("poll");
        assert!(ms(&s, Part::Latch) >= 200, "{s:?}");
        {
            use std::io::Write;
            ours.borrow_mut().write_all(b"end").unwrap();
        }
        assert!(child.wait().unwrap().success());
        t.unwatch(leader);
        t.unwatch(tid);
        assert!(t.read(tid).is_none());
    }
}
