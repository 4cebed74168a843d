//! What a set of processes asks of the kernel, counted in the kernel: every syscall (count,
//! errors, time from entry to exit, a log-linear histogram of that time), context switches
//! (voluntary and involuntary), run-queue delay, and minor and major page faults, per thread,
//! for the processes followed and every process or thread they start.
//!
//! Small eBPF programs (assembled in [`crate::bpf`]) run at the `raw_syscalls:sys_enter` and
//! `sys_exit`, `sched:sched_switch` and `sched:sched_process_fork` tracepoints (and at
//! `sched:sched_wakeup` on kernels whose BTF cannot give plumb the kernel's own run-queue
//! counts) and at the minor/major page-fault software events, and add into per-CPU maps;
//! plumb reads the maps when asked. No event crosses into user space one by one, which is what
//! keeps the cost low (`perf trace` copies every event through a ring buffer; strace stops the
//! process twice per call). The programs run for every task on the host and first look the
//! task's process up in the followed set (one bit in an array): that is the price everybody
//! pays while plumb traces. A followed thread's open call and scheduling counts sit in its own
//! array slot; a call is timed while its syscall is rare and sampled beyond ([`Timing`]), and a
//! call not timed is counted in a per-CPU array, so most calls cost no hash lookup and no clock
//! read.
//!
//! All of it is held by file descriptors: when plumb exits, however it exits, the kernel
//! detaches the programs and frees the maps.

use crate::bpf::{
    Alloc, Alu, Asm, Cond, Helper, Link, Map, MapType, Prog, ProgType, Size, FP, R0, R1, R2, R3,
    R4, R6, R7, R8, R9,
};
use std::collections::BTreeMap;

/// Log-linear bucket of a value (nanoseconds): values below 4 are their own bucket; above,
/// four buckets per power of two, so a bucket spans at most a quarter of its lower bound. The
/// BPF program computes the same function.
pub fn bucket(v: u64) -> u32 {
    if v < 4 {
        return v as u32;
    }
    let k = 63 - v.leading_zeros();
    k * 4 + ((v >> (k - 2)) & 3) as u32
}

/// The values a bucket holds: `lo..=hi`.
pub(crate) fn bucket_range(b: u32) -> (u64, u64) {
    if b < 4 {
        return (b as u64, b as u64);
    }
    let (k, sub) = (b / 4, (b % 4) as u64);
    if k < 2 {
        // Buckets 4..8 are never used.
        return (0, 0);
    }
    let width = 1u64 << (k - 2);
    let lo = (4 + sub) << (k - 2);
    (lo, lo + width - 1)
}

/// A latency histogram in [`bucket`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogHist {
    pub buckets: BTreeMap<u32, u64>,
}

impl LogHist {
    pub fn add(&mut self, v: u64) {
        *self.buckets.entry(bucket(v)).or_default() += 1;
    }
    pub(crate) fn add_bucket(&mut self, b: u32, n: u64) {
        *self.buckets.entry(b).or_default() += n;
    }
    pub fn merge(&mut self, o: &LogHist) {
        for (b, n) in &o.buckets {
            self.add_bucket(*b, *n);
        }
    }
    pub fn count(&self) -> u64 {
        self.buckets.values().sum()
    }
    /// The value at quantile `q` (0..=1): the middle of the bucket it falls in, so within an
    /// eighth of the true value.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (b, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_range(*b);
                return Some(lo + (hi - lo) / 2);
            }
        }
        None
    }
}

/// One thread's calls of one syscall.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallStat {
    pub tid: u32,
    /// The thread's process (0 when the thread was never seen entering a syscall).
    pub tgid: u32,
    pub nr: u32,
    pub calls: u64,
    /// Calls that returned an error (-4095..-1).
    pub errors: u64,
    /// Time from entry to exit, summed (over the timed calls, each weighted by the calls it
    /// stands for: see [`Timing`]), and the longest timed.
    pub total_ns: u64,
    pub max_ns: u64,
    /// Calls timed (the others were counted only).
    pub timed: u64,
}

/// One thread's scheduling and faults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedStat {
    pub tid: u32,
    pub tgid: u32,
    /// Switches away while waiting for something (I/O, a lock, a sleep).
    pub voluntary: u64,
    /// Switches away while still runnable (preempted, or yielded).
    pub involuntary: u64,
    /// Time runnable but waiting for a CPU, summed over `delays` waits.
    pub run_delay_ns: u64,
    pub delays: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
}

/// Updates the maps could not hold (a map was full): the figures they would have added are
/// missing, and the summary says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lost {
    pub calls: u64,
    pub sched: u64,
    pub processes: u64,
}

impl Lost {
    pub fn any(&self) -> bool {
        self.calls + self.sched + self.processes > 0
    }
}

/// Everything counted so far.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub calls: Vec<CallStat>,
    /// Per process and syscall: the histogram of call times (weighted: an estimate of all
    /// calls' when not every call was timed).
    pub hist: BTreeMap<(u32, u32), LogHist>,
    pub sched: Vec<SchedStat>,
    /// Every thread seen, with its process.
    pub tasks: BTreeMap<u32, u32>,
    /// Task names (`comm`) as the kernel knew them at each thread's first syscall and after
    /// each exec.
    pub comms: BTreeMap<u32, String>,
    /// Every process followed (and, harmlessly, the thread ids of threads started by them).
    pub followed: Vec<u32>,
    pub lost: Lost,
}

// Layouts shared by the programs and the reader.
// Per thread, syscall and latency bucket: count, errors, total_ns, max_ns. One map, so that a
// call's exit costs one hash lookup for its counts and its histogram together.
// count, errors, total_ns (weighted: see [`Timing`]), max_ns, weights (the calls the timed
// ones stand for).
const CALL_VALUE: usize = 40;
/// The bucket of the calls that never return (counted, not timed: in no histogram).
const NORETURN: i32 = -1;
/// The bucket of the calls that were counted but not timed (see [`Timing`]).
const UNTIMED: i32 = -2;
/// Per CPU and syscall number: the jiffy of the window, calls in it, the sampler's state.
const RATE_VALUE: usize = 24;
/// Syscall numbers with a rate entry (above: every call timed).
const RATE_NRS: u32 = 1024;
/// Entries per CPU for the calls counted, not timed (24 bytes each).
const COUNTED: u32 = 4096;

/// Which calls are timed. Reading the clock is the dearest thing the syscall programs do
/// (two reads per call, 30-55 ns each on a VM with return-thunk mitigations), so on each CPU
/// the first `budget` calls of each syscall in every jiffy (1/HZ: 4 ms at HZ=250) are timed,
/// and beyond that one call in `one_in`, chosen at random (a per-CPU xorshift, so a pattern in
/// the calls cannot line up with it). A rare call (an fsync now and then) is always timed; a
/// call made 100,000 times a second is timed often enough for its percentiles. Each timed call
/// carries its weight (1, or `one_in` when sampled), so the total time and the histograms are
/// unbiased estimates of all calls; counts and errors are exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub budget: u32,
    /// A power of two; 1 times every call.
    pub one_in: u32,
}

impl Timing {
    pub const EVERY_CALL: Timing = Timing {
        budget: 0,
        one_in: 1,
    };
    pub const DEFAULT: Timing = Timing {
        budget: 2,
        one_in: 8,
    };
    pub(crate) fn every_call(&self) -> bool {
        self.one_in <= 1
    }
}
/// How many entries the per-CPU hashes hold: the calls (per thread, syscall and latency
/// bucket) and the scheduling counts of threads that exited. They are allocated whole, on every
/// possible CPU, when the tracer starts, which is most of its start: about 0.25 s of kernel time
/// at the host's size on 2 CPUs. A full map loses what does not fit, counted as lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    pub calls: u32,
    pub sched: u32,
}

impl Capacity {
    /// For whatever runs on a host, however many threads come and go.
    pub const HOST: Capacity = Capacity {
        calls: 262_144,
        sched: 65_536,
    };

    /// For `threads` threads that stay about as many (a server running plumb's own bounded
    /// workload): 2,048 call entries and 64 exited threads each (four times what a database
    /// backend's calls take), at least 16,384 and 4,096, at most [`Capacity::HOST`].
    pub fn for_threads(threads: u64) -> Capacity {
        let each = |per: u64, least: u32, most: u32| {
            (threads.max(1).saturating_mul(per))
                .next_power_of_two()
                .clamp(least as u64, most as u64) as u32
        };
        Capacity {
            calls: each(2048, 16_384, Self::HOST.calls),
            sched: each(64, 4096, Self::HOST.sched),
        }
    }
}

const SCHED_VALUE: usize = 48; // voluntary, involuntary, run_delay_ns, delays, minflt, majflt
const LOST_CALLS: i32 = 0;
const LOST_SCHED: i32 = 2;
const LOST_PIDS: i32 = 3;
const NOEXIST: i32 = 1;

struct Maps {
    /// One bit per thread-group id: the followed processes (the test every program makes
    /// first, for every task on the host, so it is an array lookup, not a hash one).
    bits: Map,
    /// The same set as keys, for reading back.
    pids: Map,
    tasks: Map,
    /// Each thread's open call, wake-up and scheduling counts, in an array indexed by TID
    /// (masked): a slot is a thread's own once it holds the thread's TID (at byte 12; the
    /// call's start at 0 (1: open, not timed), its number at 8, since when it waits for a CPU
    /// at 16, the open call's weight at 24, then voluntary and involuntary switches, run-queue
    /// delay and delays at 32, 40, 48 and 56), 64 bytes apart so that threads on different
    /// CPUs do not share a cache line. A thread's exit moves its counts to `sched`. A thread whose slot another TID holds
    /// (pid_max beyond the slots) keeps these in `start` and `wake` instead: an array lookup
    /// costs the programs almost nothing, a hash lookup is the dearest step of a trace.
    slots: Map,
    slot_mask: i32,
    start: Map,
    calls: Map,
    sched: Map,
    wake: Map,
    /// Where the kernel's own run-queue counts are read ([`sched_switch_counted`]): per thread
    /// without a slot, the kernel's run-queue delay and runs when first seen and when last
    /// seen (4 words).
    delay: Map,
    comms: Map,
    lost: Map,
    rate: Map,
    /// Per CPU: calls counted but not timed, per thread and call, in entries found by hashing
    /// the two (tag = TID | nr << 32, count, errors).
    counted: Map,
    counted_mask: i32,
}

impl Maps {
    fn pid_max() -> u32 {
        std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4_194_304)
    }

    /// One slot per possible TID up to 65,536 (4 MiB); beyond, TIDs share slots.
    fn default_slots() -> u32 {
        Self::pid_max().next_power_of_two().clamp(64, 65536)
    }

    /// `slots`: a power of two. `alloc`: when the plain hashes take their memory (all at once,
    /// over 60 MiB of kernel memory on a 2-CPU host, most of it never used). The per-CPU
    /// hashes are allocated whole all the same: entries allocated on use made a new thread's
    /// calls ten times dearer (sys_exit 5.6 µs a run against 0.54 under `pgbench -C`, a
    /// backend per connection).
    fn create(slots: u32, alloc: Alloc, cap: Capacity) -> Result<Maps, crate::KernelError> {
        let hash =
            |kind, name: &str, key, value, n| Map::create_with(kind, name, key, value, n, alloc);
        // Per-CPU maps are allocated whole on every possible CPU: fewer entries on big hosts.
        let cpus = crate::bpf::possible_cpus() as u32;
        let scale = |n: u32| (n / cpus.div_ceil(4)).max(4096);
        let pid_max = Self::pid_max();
        Ok(Maps {
            slots: Map::create(MapType::Array, "plumb_slots", 4, 64, slots)?,
            slot_mask: slots as i32 - 1,
            bits: Map::create(MapType::Array, "plumb_bits", 4, 8, pid_max.div_ceil(64))?,
            pids: hash(MapType::Hash, "plumb_pids", 4, 4, 65536)?,
            tasks: hash(MapType::Hash, "plumb_tasks", 4, 4, 131072)?,
            start: hash(MapType::Hash, "plumb_start", 4, 16, 131072)?,
            calls: Map::create(
                MapType::PercpuHash,
                "plumb_calls",
                16,
                CALL_VALUE,
                scale(cap.calls),
            )?,
            sched: Map::create(
                MapType::PercpuHash,
                "plumb_sched",
                4,
                SCHED_VALUE,
                scale(cap.sched),
            )?,
            wake: hash(MapType::Hash, "plumb_wake", 4, 8, 131072)?,
            delay: hash(MapType::Hash, "plumb_delay", 4, 32, 131072)?,
            comms: hash(MapType::Hash, "plumb_comms", 4, 16, 131072)?,
            lost: Map::create(MapType::PercpuArray, "plumb_lost", 4, 8, 4)?,
            rate: Map::create(MapType::PercpuArray, "plumb_rate", 4, RATE_VALUE, RATE_NRS)?,
            counted: Map::create(MapType::PercpuArray, "plumb_counted", 4, 24, COUNTED)?,
            counted_mask: COUNTED as i32 - 1,
        })
    }

    fn all(&self) -> [&Map; 13] {
        [
            &self.bits,
            &self.pids,
            &self.tasks,
            &self.slots,
            &self.start,
            &self.calls,
            &self.sched,
            &self.wake,
            &self.delay,
            &self.comms,
            &self.lost,
            &self.rate,
            &self.counted,
        ]
    }
}

/// Emitters for the pieces the programs share.
struct Emit<'a> {
    a: Asm,
    m: &'a Maps,
    n: usize,
}

impl<'a> Emit<'a> {
    fn new(m: &'a Maps) -> Emit<'a> {
        Emit {
            a: Asm::new(),
            m,
            n: 0,
        }
    }
    fn fresh(&mut self, what: &str) -> String {
        self.n += 1;
        format!("{what}_{}", self.n)
    }
    /// `r0 = &map[key at fp+key]`, creating a zero entry when missing (zeroes written at
    /// fp+zero, `len` bytes); jumps to `fail` when the map is full.
    fn lookup_or_init(
        &mut self,
        map: &'a Map,
        key: i16,
        zero: i16,
        len: usize,
        fail: &str,
    ) -> &mut Self {
        let have = self.fresh("have");
        let a = &mut self.a;
        a.map(R1, map)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, key as i32)
            .call(Helper::MapLookup)
            .jump_k(Cond::Ne, R0, 0, &have);
        for i in (0..len).step_by(8) {
            a.store_k(Size::DW, FP, zero + i as i16, 0);
        }
        a.map(R1, map)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, key as i32)
            .mov(R3, FP)
            .alu_k(Alu::Add, R3, zero as i32)
            .mov_k(R4, NOEXIST)
            .call(Helper::MapUpdate)
            // Whether it was created here or on another CPU meanwhile: look again.
            .map(R1, map)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, key as i32)
            .call(Helper::MapLookup)
            .jump_k(Cond::Eq, R0, 0, fail)
            .label(&have);
        self
    }
    /// `comms[*(u32 *)(fp + key)] = the current task's name` (scratch: 16 bytes at fp + buf).
    fn save_comm(&mut self, key: i16, buf: i16) -> &mut Self {
        let m = self.m;
        self.a
            .mov(R1, FP)
            .alu_k(Alu::Add, R1, buf as i32)
            .mov_k(R2, 16)
            .call(Helper::CurrentComm)
            .map(R1, &m.comms)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, key as i32)
            .mov(R3, FP)
            .alu_k(Alu::Add, R3, buf as i32)
            .mov_k(R4, 0)
            .call(Helper::MapUpdate);
        self
    }
    /// The thread at fp + key waits for a CPU from now: in its slot (at byte 16) when it
    /// holds one, else `wake[tid]`, in place when the thread has an entry (scratch: 8 bytes at
    /// fp + buf, 4 at fp + buf - 8). A zero there means "not waiting".
    fn waiting_since_now(&mut self, key: i16, buf: i16) -> &mut Self {
        let m = self.m;
        let (have, done) = (self.fresh("wake_have"), self.fresh("wake_done"));
        let hashed = self.fresh("wake_hashed");
        self.a.call(Helper::KtimeNs).store(Size::DW, FP, buf, R0);
        self.slot(key, buf - 8, &hashed);
        self.a
            .jump_x(Cond::Ne, R1, R2, &hashed)
            .load(Size::DW, R1, FP, buf)
            .store(Size::DW, R0, 16, R1)
            .goto(&done)
            .label(&hashed)
            .map(R1, &m.wake)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, key as i32)
            .call(Helper::MapLookup)
            .jump_k(Cond::Ne, R0, 0, &have)
            .map(R1, &m.wake)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, key as i32)
            .mov(R3, FP)
            .alu_k(Alu::Add, R3, buf as i32)
            .mov_k(R4, 0)
            .call(Helper::MapUpdate)
            .goto(&done)
            .label(&have)
            .load(Size::DW, R1, FP, buf)
            .store(Size::DW, R0, 0, R1)
            .label(&done);
        self
    }
    /// `*(u64 *)(r0 + off) += 1`.
    fn incr(&mut self, off: i16) -> &mut Self {
        self.a
            .load(Size::DW, R1, R0, off)
            .alu_k(Alu::Add, R1, 1)
            .store(Size::DW, R0, off, R1);
        self
    }
    /// `*(u64 *)(r0 + off) += reg`.
    fn add(&mut self, off: i16, reg: u8) -> &mut Self {
        self.a
            .load(Size::DW, R1, R0, off)
            .alu_x(Alu::Add, R1, reg)
            .store(Size::DW, R0, off, R1);
        self
    }
    /// At `label`: count one lost update of kind `idx`, then go to `then`.
    fn lost(&mut self, label: &str, idx: i32, then: &str) -> &mut Self {
        let m = self.m;
        self.a
            .label(label)
            .store_k(Size::W, FP, -4, idx)
            .map(R1, &m.lost)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, -4)
            .call(Helper::MapLookup)
            .jump_k(Cond::Eq, R0, 0, then);
        self.incr(0);
        self.a.goto(then);
        self
    }
    /// `*(u32 *)(fp + at)` = a task's TID: from the trace record's field, or read from the
    /// `struct task_struct *` a raw tracepoint hands over as argument `arg` (ctx in r6), with
    /// its thread-group id beside it at fp + at + 4 (one read where the kernel keeps the two
    /// side by side, as it does).
    fn task_ids(&mut self, from: &SchedArgs, arg: usize, at: i16) -> &mut Self {
        match from {
            SchedArgs::Record {
                next_pid, wake_pid, ..
            } => {
                let off = if arg == SchedArgs::SWITCH_NEXT {
                    *next_pid
                } else {
                    *wake_pid
                };
                self.a.load(Size::W, R1, R6, off).store(Size::W, FP, at, R1);
            }
            SchedArgs::Raw {
                pid,
                tgid,
                direct: true,
            } => {
                self.a
                    .load(Size::DW, R3, R6, (arg * 8) as i16)
                    .load(Size::W, R1, R3, *pid as i16)
                    .store(Size::W, FP, at, R1)
                    .load(Size::W, R1, R3, *tgid as i16)
                    .store(Size::W, FP, at + 4, R1);
            }
            SchedArgs::Raw { pid, tgid, .. } => {
                let read = |a: &mut Asm, field: u32, to: i16, len: i32| {
                    a.load(Size::DW, R3, R6, (arg * 8) as i16)
                        .alu_k(Alu::Add, R3, field as i32)
                        .mov(R1, FP)
                        .alu_k(Alu::Add, R1, to as i32)
                        .mov_k(R2, len)
                        .call(Helper::ProbeReadKernel);
                };
                self.a.store_k(Size::DW, FP, at, 0);
                if *tgid == pid + 4 {
                    read(&mut self.a, *pid, at, 8);
                } else {
                    read(&mut self.a, *pid, at, 4);
                    read(&mut self.a, *tgid, at + 4, 4);
                }
            }
        }
        self
    }
    /// Go to `not` unless the current task's process is followed; keeps pid_tgid in r7
    /// (scratch: fp-8..fp-1).
    fn followed_or(&mut self, not: &str) -> &mut Self {
        self.a
            .call(Helper::PidTgid)
            .mov(R7, R0)
            .mov(R1, R7)
            .alu_k(Alu::Rsh, R1, 32)
            .store(Size::W, FP, -4, R1);
        self.process_followed_or(-4, -8, not)
    }
    /// Go to `not` unless the process whose id is at fp + at (32 bits) is followed: its bit
    /// in the followed bits, an array lookup the kernel inlines (scratch: 4 bytes at fp + idx).
    fn process_followed_or(&mut self, at: i16, idx: i16, not: &str) -> &mut Self {
        let m = self.m;
        self.a
            .load(Size::W, R1, FP, at)
            .alu_k(Alu::Rsh, R1, 6)
            .store(Size::W, FP, idx, R1)
            .map(R1, &m.bits)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, idx as i32)
            .call(Helper::MapLookup)
            .jump_k(Cond::Eq, R0, 0, not)
            .load(Size::DW, R2, R0, 0)
            .load(Size::W, R3, FP, at)
            .alu_k(Alu::And, R3, 63)
            .mov_k(R4, 1)
            .alu_x(Alu::Lsh, R4, R3)
            .alu_x(Alu::And, R2, R4)
            .jump_k(Cond::Eq, R2, 0, not);
        self
    }
    /// `r0 = &slots[tid & mask]` for the TID at fp+tid (index written at fp+idx; goes to
    /// `fail` if the lookup fails, which it cannot for a masked index), then `r1` = the TID
    /// the slot holds (0: free) and `r2` = this one, for the caller to compare.
    fn slot(&mut self, tid: i16, idx: i16, fail: &str) -> &mut Self {
        let m = self.m;
        self.a
            .load(Size::W, R1, FP, tid)
            .alu_k(Alu::And, R1, m.slot_mask)
            .store(Size::W, FP, idx, R1)
            .map(R1, &m.slots)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, idx as i32)
            .call(Helper::MapLookup)
            .jump_k(Cond::Eq, R0, 0, fail)
            .load(Size::W, R1, R0, 12)
            .load(Size::W, R2, FP, tid);
        self
    }
    /// Go to `not` unless the task whose IDs [`Emit::task_ids`] put at fp + at belongs to a
    /// followed process: its thread-group id against the followed bits (an array lookup), so
    /// that other tasks cost no hash lookup (scratch: 4 bytes at fp + idx). The ordinary
    /// tracepoints' records have no thread-group id: there the caller's hash lookup decides.
    fn followed_task_or(&mut self, from: &SchedArgs, at: i16, idx: i16, not: &str) -> &mut Self {
        if let SchedArgs::Record { .. } = from {
            return self;
        }
        self.process_followed_or(at + 4, idx, not)
    }
    fn out(&mut self) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
        self.a.label("out").mov_k(R0, 0).exit();
        std::mem::take(&mut self.a).finish()
    }
}

/// Where the scheduler programs find what they need: in the ordinary tracepoints' records, or
/// (cheaper: no record is built) in the raw tracepoints' arguments, with the task's PID read at
/// this kernel's offset in `struct task_struct` (from its BTF): with `bpf_probe_read_kernel`
/// from a plain raw tracepoint, or (`direct`: cheaper still, no helper call) by ordinary loads
/// from a BTF-typed one, whose arguments the verifier knows to be `struct task_struct *`.
#[derive(Debug, Clone)]
enum SchedArgs {
    Record {
        state: i16,
        next_pid: i16,
        wake_pid: i16,
    },
    Raw {
        pid: u32,
        tgid: u32,
        direct: bool,
    },
}

impl SchedArgs {
    /// sched_switch(preempt, prev, next, prev_state): `prev` is argument 1, `next` 2.
    const SWITCH_PREV: usize = 1;
    const SWITCH_NEXT: usize = 2;
    /// sched_wakeup(p): argument 0.
    const WAKEUP_TASK: usize = 0;
}

fn offset(format: &str, field: &str, event: &str) -> Result<i16, crate::KernelError> {
    crate::bpf::field_offset(format, field)
        .ok_or_else(|| format!("{event}: no field {field} in its format").into())
}

/// `raw_syscalls:sys_enter`: note when the call began and which it is.
/// Calls that never return (`exit`, `exit_group`) are counted here, taking no time: no
/// `sys_exit` follows them.
fn sys_enter(
    m: &Maps,
    id_off: i16,
    noreturn: &[u32],
    timing: Timing,
) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut e = Emit::new(m);
    e.a.mov(R6, R1);
    e.followed_or("out");
    e.a.load(Size::DW, R1, R6, id_off);
    for &nr in noreturn {
        e.a.jump_k(Cond::Eq, R1, nr as i32, "noreturn");
    }
    // The thread's open call, written in place: its slot (or entry) stays for the session
    // (cheaper than an insert and a delete per call).
    e.a.mov(R8, R1) // nr
        .store(Size::W, FP, -8, R7); // tid
                                     // Whether this call is timed (see Timing): r9 = its start, or 1 (open, not timed); r6 =
                                     // its weight (0 when not timed).
    if timing.every_call() {
        e.a.mov_k(R6, 1);
    } else {
        e.a.store(Size::W, FP, -36, R8)
            .map(R1, &m.rate)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, -36)
            .call(Helper::MapLookup)
            .mov_k(R6, 1)
            .jump_k(Cond::Eq, R0, 0, "timed")
            .mov(R6, R0)
            .call(Helper::Jiffies64)
            .load(Size::DW, R1, R6, 0)
            .jump_x(Cond::Eq, R1, R0, "same_jiffy")
            .store(Size::DW, R6, 0, R0)
            .store_k(Size::DW, R6, 8, 0)
            .label("same_jiffy")
            .load(Size::DW, R1, R6, 8)
            .alu_k(Alu::Add, R1, 1)
            .store(Size::DW, R6, 8, R1)
            .jump_k(Cond::Gt, R1, timing.budget as i32, "beyond")
            .mov_k(R6, 1)
            .goto("timed")
            // Beyond the budget: one call in `one_in`, by a xorshift64 kept per CPU and call.
            .label("beyond")
            .load(Size::DW, R1, R6, 16)
            .jump_k(Cond::Ne, R1, 0, "seeded")
            .mov(R1, R7)
            .alu_k(Alu::Or, R1, 1)
            .label("seeded");
        for (op, k) in [(Alu::Lsh, 13), (Alu::Rsh, 7), (Alu::Lsh, 17)] {
            e.a.mov(R2, R1).alu_k(op, R2, k).alu_x(Alu::Xor, R1, R2);
        }
        e.a.store(Size::DW, R6, 16, R1)
            .mov(R2, R1)
            .alu_k(Alu::Rsh, R2, 32)
            .alu_k(Alu::And, R2, timing.one_in as i32 - 1)
            .mov_k(R6, 0)
            .mov_k(R9, 1)
            .jump_k(Cond::Ne, R2, 0, "decided")
            .mov_k(R6, timing.one_in as i32)
            .label("timed");
    }
    e.a.call(Helper::KtimeNs).mov(R9, R0).label("decided");
    e.slot(-8, -32, "out");
    e.a.jump_x(Cond::Eq, R1, R2, "mine")
        .jump_k(Cond::Ne, R1, 0, "hashed")
        // A free slot: the thread's first call claims it (no wait of a thread before it).
        .store(Size::W, R0, 12, R2)
        .store_k(Size::DW, R0, 16, 0)
        .store(Size::DW, R0, 0, R9)
        .store(Size::W, R0, 8, R8)
        .store(Size::W, R0, 24, R6)
        .goto("first")
        .label("mine")
        .store(Size::DW, R0, 0, R9)
        .store(Size::W, R0, 8, R8)
        .store(Size::W, R0, 24, R6)
        .goto("out")
        // Another thread holds the slot: this one's open call lives in the hash.
        .label("hashed")
        .map(R1, &m.start)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -8)
        .call(Helper::MapLookup)
        .jump_k(Cond::Eq, R0, 0, "first_hashed")
        .store(Size::DW, R0, 0, R9)
        .store(Size::W, R0, 8, R8)
        .store(Size::W, R0, 12, R6)
        .goto("out")
        .label("first_hashed")
        .store(Size::DW, FP, -24, R9)
        .store(Size::W, FP, -16, R8)
        .store(Size::W, FP, -12, R6)
        .map(R1, &m.start)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -8)
        .mov(R3, FP)
        .alu_k(Alu::Add, R3, -24)
        .mov_k(R4, 0)
        .call(Helper::MapUpdate)
        .jump_k(Cond::Ne, R0, 0, "lost_start")
        // The thread's first call: its process, its name.
        .label("first")
        .mov(R1, R7)
        .alu_k(Alu::Rsh, R1, 32)
        .store(Size::W, FP, -28, R1)
        .map(R1, &m.tasks)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -8)
        .mov(R3, FP)
        .alu_k(Alu::Add, R3, -28)
        .mov_k(R4, 0)
        .call(Helper::MapUpdate);
    // Its name, for a thread that may be gone before plumb looks.
    e.save_comm(-8, -48);
    e.a.goto("out")
        .label("noreturn")
        .store(Size::W, FP, -72, R7)
        .store(Size::W, FP, -68, R1)
        .store_k(Size::W, FP, -64, NORETURN)
        .store_k(Size::W, FP, -60, 0);
    e.lookup_or_init(&m.calls, -72, -56, CALL_VALUE, "lost_calls");
    e.incr(0);
    // The thread is gone: its scheduling counts move to the hash, and its slot is free for
    // the next thread with its TID.
    e.slot(-72, -76, "out");
    e.a.jump_x(Cond::Ne, R1, R2, "out").mov(R9, R0);
    // (The hash full: the slot stays the dead thread's, its counts in it.)
    e.lookup_or_init(&m.sched, -72, -136, SCHED_VALUE, "out");
    for (from, to) in [(32, 0), (40, 8), (48, 16), (56, 24)] {
        e.a.load(Size::DW, R2, R9, from)
            .store_k(Size::DW, R9, from, 0);
        e.add(to, R2);
    }
    e.a.store_k(Size::W, R9, 12, 0).goto("out");
    e.lost("lost_calls", LOST_CALLS, "out");
    e.lost("lost_start", LOST_CALLS, "out");
    e.out()
}

/// `raw_syscalls:sys_exit`: add the call to its thread's counts and its process's histogram.
fn sys_exit(
    m: &Maps,
    ret_off: i16,
    exec: &[u32],
) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut e = Emit::new(m);
    e.a.mov(R6, R1);
    e.followed_or("out");
    e.a.store(Size::W, FP, -4, R7);
    e.slot(-4, -8, "out");
    e.a.jump_x(Cond::Ne, R1, R2, "hashed")
        .load(Size::DW, R8, R0, 0) // ts (1: not timed); 0: no call open
        .jump_k(Cond::Eq, R8, 0, "out")
        .load(Size::W, R9, R0, 8) // nr
        .load(Size::W, R1, R0, 24) // weight (0: not timed)
        .store(Size::W, FP, -28, R1)
        .store_k(Size::DW, R0, 0, 0)
        .goto("open")
        .label("hashed")
        .map(R1, &m.start)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -4)
        .call(Helper::MapLookup)
        .jump_k(Cond::Eq, R0, 0, "out")
        .load(Size::DW, R8, R0, 0)
        .jump_k(Cond::Eq, R8, 0, "out")
        .load(Size::W, R9, R0, 8)
        .load(Size::W, R1, R0, 12)
        .store(Size::W, FP, -28, R1)
        .store_k(Size::DW, R0, 0, 0)
        .label("open");
    // After an exec the thread has its new name.
    for &nr in exec {
        e.a.jump_k(Cond::Eq, R9, nr as i32, "exec");
    }
    e.a.goto("counted").label("exec");
    e.save_comm(-4, -96);
    e.a.label("counted")
        .load(Size::DW, R1, R6, ret_off)
        .store_k(Size::DW, FP, -24, 0)
        .jump_k(Cond::SGe, R1, 0, "noerr")
        .jump_k(Cond::SLt, R1, -4095, "noerr")
        .store_k(Size::DW, FP, -24, 1)
        .label("noerr")
        .load(Size::W, R1, FP, -28)
        .jump_k(Cond::Eq, R1, 0, "untimed")
        .call(Helper::KtimeNs)
        .mov(R1, R0)
        .alu_x(Alu::Sub, R1, R8)
        .mov(R8, R1) // duration
        // The bucket: k = index of the highest bit set, by halving.
        .mov(R1, R8)
        .mov_k(R2, 0);
    for shift in [32, 16, 8, 4, 2, 1] {
        let skip = e.fresh("skip");
        e.a.mov(R3, R1)
            .alu_k(Alu::Rsh, R3, shift)
            .jump_k(Cond::Eq, R3, 0, &skip)
            .alu_k(Alu::Add, R2, shift)
            .mov(R1, R3)
            .label(&skip);
    }
    e.a.jump_k(Cond::Ge, R2, 2, "big")
        .mov(R2, R8)
        .goto("key")
        .label("big")
        .mov(R3, R2)
        .alu_k(Alu::Sub, R3, 2)
        .mov(R1, R8)
        .alu_x(Alu::Rsh, R1, R3)
        .alu_k(Alu::And, R1, 3)
        .alu_k(Alu::Lsh, R2, 2)
        .alu_x(Alu::Add, R2, R1)
        .label("key")
        .store(Size::W, FP, -72, R7)
        .store(Size::W, FP, -68, R9)
        .store(Size::W, FP, -64, R2)
        .store_k(Size::W, FP, -60, 0);
    e.lookup_or_init(&m.calls, -72, -136, CALL_VALUE, "lost_calls");
    e.incr(0);
    e.a.load(Size::DW, R2, FP, -24);
    e.add(8, R2);
    // A timed call: its time (weighted), the longest, the calls it stands for.
    e.a.load(Size::W, R9, FP, -28)
        .jump_k(Cond::Eq, R9, 0, "out")
        .load(Size::DW, R1, R0, 24)
        .jump_x(Cond::Ge, R1, R8, "not_longest")
        .store(Size::DW, R0, 24, R8)
        .label("not_longest")
        .alu_x(Alu::Mul, R8, R9);
    e.add(16, R8).add(32, R9);
    e.a.goto("out");
    // A call counted, not timed: in this CPU's entry for the thread and call, an array slot
    // found by hashing the two (no hash map lookup); an entry another thread and call hold
    // sends it to the hash map's untimed bucket instead. Entries are never given up, so that
    // nothing moves between the two while plumb reads them.
    e.a.label("untimed")
        .mov(R1, R9)
        .alu_k(Alu::Lsh, R1, 32)
        .mov(R2, R7)
        .alu_k(Alu::Lsh, R2, 32)
        .alu_k(Alu::Rsh, R2, 32)
        .alu_x(Alu::Or, R1, R2)
        .store(Size::DW, FP, -40, R1) // tag: tid | nr << 32
        .alu_k(Alu::Mul, R1, 0x2545_F491)
        .alu_k(Alu::Rsh, R1, 24)
        .alu_k(Alu::And, R1, m.counted_mask)
        .store(Size::W, FP, -44, R1)
        .map(R1, &m.counted)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -44)
        .call(Helper::MapLookup)
        .mov_k(R2, UNTIMED)
        .jump_k(Cond::Eq, R0, 0, "key")
        .load(Size::DW, R1, R0, 0)
        .load(Size::DW, R3, FP, -40)
        .jump_x(Cond::Eq, R1, R3, "counted_here")
        .mov_k(R2, UNTIMED)
        .jump_k(Cond::Ne, R1, 0, "key")
        .store(Size::DW, R0, 0, R3)
        .label("counted_here");
    e.incr(8);
    e.a.load(Size::DW, R2, FP, -24);
    e.add(16, R2);
    e.a.goto("out");
    e.lost("lost_calls", LOST_CALLS, "out");
    e.out()
}

/// `sched:sched_switch`: the outgoing task's switch, voluntary or not (a task switched out
/// while runnable waits for a CPU from now); the incoming task's wait for a CPU ends.
fn sched_switch(m: &Maps, from: &SchedArgs) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut e = Emit::new(m);
    e.a.mov(R6, R1);
    // The outgoing task is the current one: its IDs at fp-8 and fp-4.
    if let SchedArgs::Raw { direct: true, .. } = from {
        e.task_ids(from, SchedArgs::SWITCH_PREV, -8);
        e.followed_task_or(from, -8, -12, "next");
    } else {
        e.followed_or("next");
        e.a.store(Size::W, FP, -8, R7);
    }
    e.a.mov_k(R8, 0); // r8: 1 when the switch is voluntary
    match from {
        // The record's prev_state: 0 ("R") or TASK_REPORT_MAX ("R+") when preempted.
        SchedArgs::Record { state, .. } => {
            e.a.load(Size::DW, R1, R6, *state)
                .alu_k(Alu::And, R1, 0xff)
                .jump_k(Cond::Eq, R1, 0, "kind");
        }
        // (preempt, prev, next, prev_state): voluntary when not preempted and not runnable.
        SchedArgs::Raw { .. } => {
            e.a.load(Size::DW, R1, R6, 0)
                .jump_k(Cond::Ne, R1, 0, "kind")
                .load(Size::DW, R1, R6, 24)
                .alu_k(Alu::And, R1, 0xffff)
                .jump_k(Cond::Eq, R1, 0, "kind");
        }
    }
    e.a.mov_k(R8, 1).label("kind");
    // The outgoing thread's counts: in its slot when it holds one (bytes 32..64), else the
    // hash.
    e.slot(-8, -80, "prev_hashed");
    e.a.jump_x(Cond::Ne, R1, R2, "prev_hashed")
        .jump_k(Cond::Eq, R8, 0, "prev_invol_slot");
    e.incr(32);
    e.a.goto("next").label("prev_invol_slot");
    e.incr(40);
    e.a.mov(R9, R0)
        .call(Helper::KtimeNs)
        .store(Size::DW, R9, 16, R0)
        .goto("next")
        .label("prev_hashed");
    e.lookup_or_init(&m.sched, -8, -56, SCHED_VALUE, "lost_prev");
    e.a.jump_k(Cond::Ne, R8, 0, "vol");
    e.incr(8);
    e.waiting_since_now(-8, -16);
    e.a.goto("next").label("vol");
    e.incr(0);
    e.a.label("next");
    // The incoming task: its IDs at fp-72 and fp-68; its wait in its slot, else the hash.
    e.task_ids(from, SchedArgs::SWITCH_NEXT, -72);
    e.followed_task_or(from, -72, -76, "out");
    e.slot(-72, -76, "out");
    e.a.jump_x(Cond::Ne, R1, R2, "next_hashed")
        .load(Size::DW, R8, R0, 16)
        .jump_k(Cond::Eq, R8, 0, "out")
        .store_k(Size::DW, R0, 16, 0)
        .mov(R9, R0)
        .call(Helper::KtimeNs)
        .alu_x(Alu::Sub, R0, R8)
        .mov(R8, R0)
        .mov(R0, R9);
    e.add(48, R8).incr(56);
    e.a.goto("out")
        .label("next_hashed")
        .map(R1, &m.wake)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -72)
        .call(Helper::MapLookup)
        .jump_k(Cond::Eq, R0, 0, "out")
        .load(Size::DW, R8, R0, 0)
        .jump_k(Cond::Eq, R8, 0, "out")
        .store_k(Size::DW, R0, 0, 0)
        .label("waited")
        .call(Helper::KtimeNs)
        .mov(R9, R0)
        .alu_x(Alu::Sub, R9, R8);
    e.lookup_or_init(&m.sched, -72, -56, SCHED_VALUE, "lost_next");
    e.add(16, R9).incr(24);
    e.a.goto("out");
    e.lost("lost_prev", LOST_SCHED, "next");
    e.lost("lost_next", LOST_SCHED, "out");
    e.out()
}

/// `sched:sched_wakeup`: a followed thread becomes runnable; its wait for a CPU starts.
fn sched_wakeup(m: &Maps, from: &SchedArgs) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut e = Emit::new(m);
    e.a.mov(R6, R1);
    e.task_ids(from, SchedArgs::WAKEUP_TASK, -8);
    e.followed_task_or(from, -8, -12, "out");
    if let SchedArgs::Record { .. } = from {
        e.a.map(R1, &m.tasks)
            .mov(R2, FP)
            .alu_k(Alu::Add, R2, -8)
            .call(Helper::MapLookup)
            .jump_k(Cond::Eq, R0, 0, "out");
    }
    e.waiting_since_now(-8, -24);
    e.out()
}

/// Where `struct task_struct` keeps what [`sched_switch_counted`] reads (from the kernel's BTF).
#[derive(Debug, Clone, Copy)]
struct TaskFields {
    pid: u32,
    tgid: u32,
    /// `sched_info.run_delay` (ns) and `sched_info.pcount` (runs on a CPU): the kernel's own
    /// run-queue accounting, kept for every task (what `/proc/PID/schedstat` shows).
    run_delay: u32,
    runs: u32,
}

/// `sched_switch` as a BTF-typed raw tracepoint, the outgoing task only: its switch, voluntary
/// or not, and the kernel's own run-queue delay and run count, read from its `task_struct`.
/// No clock is read and no wake-up program is needed (the kernel has already measured the
/// waits): a thread's delay is its kernel figure now less its figure when plumb first saw it
/// switch out. In the thread's slot (the first figures at 16, with bit 63 set, and at 28,
/// the low 32 bits of the runs; the differences at 48 and 56), else in the `delay` hash.
fn sched_switch_counted(
    m: &Maps,
    f: TaskFields,
) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut e = Emit::new(m);
    let ids = SchedArgs::Raw {
        pid: f.pid,
        tgid: f.tgid,
        direct: true,
    };
    e.a.mov(R6, R1);
    e.task_ids(&ids, SchedArgs::SWITCH_PREV, -8);
    e.followed_task_or(&ids, -8, -12, "out");
    // r8: 1 when voluntary (not preempted, and not runnable: prev_state is not 0).
    e.a.mov_k(R8, 0)
        .load(Size::DW, R1, R6, 0)
        .jump_k(Cond::Ne, R1, 0, "kind")
        .load(Size::DW, R1, R6, 24)
        .alu_k(Alu::And, R1, 0xffff)
        .jump_k(Cond::Eq, R1, 0, "kind")
        .mov_k(R8, 1)
        .label("kind")
        .load(Size::DW, R3, R6, (SchedArgs::SWITCH_PREV * 8) as i16)
        .load(Size::DW, R1, R3, f.run_delay as i16)
        .store(Size::DW, FP, -72, R1)
        .load(Size::DW, R1, R3, f.runs as i16)
        .store(Size::DW, FP, -80, R1);
    e.slot(-8, -60, "hashed");
    e.a.jump_x(Cond::Ne, R1, R2, "hashed")
        .jump_k(Cond::Eq, R8, 0, "invol");
    e.incr(32);
    e.a.goto("delay").label("invol");
    e.incr(40);
    e.a.label("delay")
        .load(Size::DW, R1, R0, 16)
        .load(Size::DW, R2, FP, -72)
        .load(Size::DW, R3, FP, -80)
        .jump_k(Cond::Ne, R1, 0, "based")
        // First seen in this slot: the figures to count from.
        .mov_k(R4, 1)
        .alu_k(Alu::Lsh, R4, 63)
        .alu_x(Alu::Or, R2, R4)
        .store(Size::DW, R0, 16, R2)
        .store(Size::W, R0, 28, R3)
        .goto("out")
        .label("based")
        .alu_k(Alu::Lsh, R1, 1)
        .alu_k(Alu::Rsh, R1, 1)
        .alu_x(Alu::Sub, R2, R1)
        .store(Size::DW, R0, 48, R2)
        .load(Size::W, R1, R0, 28)
        .alu_x(Alu::Sub, R3, R1)
        .alu_k(Alu::Lsh, R3, 32)
        .alu_k(Alu::Rsh, R3, 32)
        .store(Size::DW, R0, 56, R3)
        .goto("out")
        .label("hashed");
    e.lookup_or_init(&m.sched, -8, -56, SCHED_VALUE, "lost");
    e.a.jump_k(Cond::Ne, R8, 0, "vol");
    e.incr(8);
    e.a.goto("hashed_delay").label("vol");
    e.incr(0);
    e.a.label("hashed_delay")
        .map(R1, &m.delay)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -8)
        .call(Helper::MapLookup)
        .jump_k(Cond::Eq, R0, 0, "first_delay")
        .load(Size::DW, R1, FP, -72)
        .store(Size::DW, R0, 16, R1)
        .load(Size::DW, R1, FP, -80)
        .store(Size::DW, R0, 24, R1)
        .goto("out")
        .label("first_delay")
        .load(Size::DW, R1, FP, -72)
        .store(Size::DW, FP, -112, R1)
        .store(Size::DW, FP, -96, R1)
        .load(Size::DW, R1, FP, -80)
        .store(Size::DW, FP, -104, R1)
        .store(Size::DW, FP, -88, R1)
        .map(R1, &m.delay)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -8)
        .mov(R3, FP)
        .alu_k(Alu::Add, R3, -112)
        .mov_k(R4, NOEXIST)
        .call(Helper::MapUpdate)
        .jump_k(Cond::Eq, R0, 0, "out");
    e.lost("lost", LOST_SCHED, "out");
    e.out()
}

/// `sched:sched_process_fork`: what a followed process starts is followed too.
fn process_fork(m: &Maps, child_off: i16) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut e = Emit::new(m);
    e.a.mov(R6, R1);
    e.followed_or("out");
    e.a.load(Size::W, R8, R6, child_off)
        .mov(R1, R8)
        .alu_k(Alu::Rsh, R1, 6)
        .store(Size::W, FP, -16, R1)
        .map(R1, &m.bits)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -16)
        .call(Helper::MapLookup)
        .jump_k(Cond::Eq, R0, 0, "lost")
        .mov(R3, R8)
        .alu_k(Alu::And, R3, 63)
        .mov_k(R4, 1)
        .alu_x(Alu::Lsh, R4, R3)
        .atomic_or(R0, 0, R4)
        .mov(R1, R8)
        .store(Size::W, FP, -8, R1)
        .store_k(Size::W, FP, -12, 1)
        .map(R1, &m.pids)
        .mov(R2, FP)
        .alu_k(Alu::Add, R2, -8)
        .mov(R3, FP)
        .alu_k(Alu::Add, R3, -12)
        .mov_k(R4, 0)
        .call(Helper::MapUpdate)
        .jump_k(Cond::Eq, R0, 0, "out")
        .goto("lost");
    e.lost("lost", LOST_PIDS, "out");
    e.out()
}

/// A page fault (minor or major, by the event attached to): count it for the thread.
fn fault(m: &Maps, field: i16) -> Result<Vec<crate::bpf::Insn>, crate::KernelError> {
    let mut e = Emit::new(m);
    e.followed_or("out");
    e.a.store(Size::W, FP, -8, R7);
    e.lookup_or_init(&m.sched, -8, -56, SCHED_VALUE, "lost");
    e.incr(field);
    e.a.goto("out");
    e.lost("lost", LOST_SCHED, "out");
    e.out()
}

/// A tracing session on some processes and what they start. Dropping it detaches everything.
pub struct ProcTracer {
    timing: Timing,
    maps: Maps,
    alloc: Alloc,
    raw: bool,
    sched_via: &'static str,
    _progs: Vec<Prog>,
    _links: Vec<Link>,
}

fn ne_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl ProcTracer {
    /// Start following `pids` (processes: all their threads) and whatever they start from now
    /// on. Processes they started before now are not followed unless listed (see
    /// [`crate::process::descendants`]). Needs root.
    pub fn start(pids: &[u32]) -> Result<ProcTracer, crate::KernelError> {
        Self::start_timed(pids, Timing::DEFAULT)
    }

    /// [`ProcTracer::start`], timing the calls as `timing` says.
    pub fn start_timed(pids: &[u32], timing: Timing) -> Result<ProcTracer, crate::KernelError> {
        Self::start_sized(pids, timing, Capacity::HOST)
    }

    /// [`ProcTracer::start_timed`], its per-CPU maps sized as `cap` says.
    pub fn start_sized(
        pids: &[u32],
        timing: Timing,
        cap: Capacity,
    ) -> Result<ProcTracer, crate::KernelError> {
        Self::start_with(pids, Maps::default_slots(), timing, cap)
    }

    /// `slots`: how many threads keep their open call in the array (a power of two); the
    /// others in the hash. Tests use few, so that both ways are taken.
    fn start_with(
        pids: &[u32],
        slots: u32,
        timing: Timing,
        cap: Capacity,
    ) -> Result<ProcTracer, crate::KernelError> {
        if !timing.one_in.is_power_of_two() {
            return Err(format!("one call in {} timed: not a power of two", timing.one_in).into());
        }
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(
                "tracing processes needs root (plumb loads eBPF programs: CAP_BPF and CAP_PERFMON)"
                    .into(),
            );
        }
        // The plain hashes take memory as they fill where the kernel lets tracing programs use such
        // maps (its BPF allocator, 6.1). Not tried before: 5.x kernels refuse them to
        // perf_event programs, and load tracepoint ones with a kernel warning (which taints
        // the kernel). A kernel that refuses them anyway gets them allocated whole.
        if crate::bpf::kernel_version().is_none_or(|v| v < (6, 1)) {
            return Self::start_alloc(pids, slots, timing, Alloc::Whole, cap);
        }
        match Self::start_alloc(pids, slots, timing, Alloc::OnUse, cap) {
            Err(e) if e.to_string().contains("preallocated") => {
                Self::start_alloc(pids, slots, timing, Alloc::Whole, cap)
            }
            r => r,
        }
    }

    fn start_alloc(
        pids: &[u32],
        slots: u32,
        timing: Timing,
        alloc: Alloc,
        cap: Capacity,
    ) -> Result<ProcTracer, crate::KernelError> {
        let tps = crate::tracefs::tracepoint_formats(&[
            ("raw_syscalls", "sys_enter"),
            ("raw_syscalls", "sys_exit"),
            ("sched", "sched_switch"),
            ("sched", "sched_wakeup"),
            ("sched", "sched_process_fork"),
        ])?;
        let maps = Maps::create(slots, alloc, cap)?;
        let t = ProcTracer {
            timing,
            maps,
            alloc,
            raw: false,
            sched_via: "tracepoints",
            _progs: Vec::new(),
            _links: Vec::new(),
        };
        for &p in pids {
            t.follow(p)?;
        }
        let m = &t.maps;
        let id = offset(&tps[0].1, "id", "sys_enter")?;
        let ret = offset(&tps[1].1, "ret", "sys_exit")?;
        let record = SchedArgs::Record {
            state: offset(&tps[2].1, "prev_state", "sched_switch")?,
            next_pid: offset(&tps[2].1, "next_pid", "sched_switch")?,
            wake_pid: offset(&tps[3].1, "pid", "sched_wakeup")?,
        };
        // The raw arguments need the PID's place in struct task_struct, and sched_switch's
        // fourth argument (prev_state, since Linux 5.18): its record says prev_state is there.
        let btf = crate::btf::Btf::kernel().ok();
        let raw = btf.as_ref().and_then(|b| {
            Some(SchedArgs::Raw {
                pid: b.offset_of("task_struct", &["pid"])?,
                tgid: b.offset_of("task_struct", &["tgid"])?,
                direct: false,
            })
        });
        let fields = btf.as_ref().and_then(|b| {
            Some(TaskFields {
                pid: b.offset_of("task_struct", &["pid"])?,
                tgid: b.offset_of("task_struct", &["tgid"])?,
                run_delay: b.offset_of("task_struct", &["sched_info", "run_delay"])?,
                runs: b.offset_of("task_struct", &["sched_info", "pcount"])?,
            })
        });
        let child = offset(&tps[4].1, "child_pid", "sched_process_fork")?;
        // This system's numbers for the calls that never return.
        let table = crate::syscalls::table(&crate::Root::host()).unwrap_or_default();
        let numbers = |names: &[&str]| -> Vec<u32> {
            table
                .iter()
                .filter(|(_, n)| names.contains(&n.as_str()))
                .map(|(nr, _)| *nr)
                .collect()
        };
        let noreturn = numbers(&["exit", "exit_group"]);
        let exec = numbers(&["execve", "execveat"]);
        let (mut progs, mut links) = (Vec::new(), Vec::new());
        // Fork first, so that nothing started while the rest attaches escapes.
        attach_fork_and_faults(m, child, tps[4].0, &mut progs, &mut links)?;
        let sched_via = attach_sched(
            m,
            &tps,
            fields,
            raw.as_ref(),
            &record,
            btf.as_ref(),
            &mut progs,
            &mut links,
        )?;
        let syscalls = SyscallArgs {
            id,
            ret,
            noreturn: &noreturn,
            exec: &exec,
        };
        let raw_used = attach_syscalls(m, &tps, &syscalls, timing, &mut progs, &mut links)?;
        Ok(ProcTracer {
            timing,
            raw: raw_used,
            sched_via,
            _progs: progs,
            _links: links,
            ..t
        })
    }

    /// Follow one more process (and its threads).
    pub fn follow(&self, pid: u32) -> Result<(), crate::KernelError> {
        let word = (pid / 64).to_ne_bytes();
        let bits = self
            .maps
            .bits
            .lookup(&word)
            .and_then(|v| v.into_iter().next())
            .ok_or_else(|| format!("PID {pid} is beyond this kernel's pid_max"))?;
        let bits = u64::from_ne_bytes(bits[..8].try_into().expect("8 bytes")) | 1 << (pid % 64);
        self.maps.bits.update(&word, &bits.to_ne_bytes())?;
        self.maps
            .pids
            .update(&pid.to_ne_bytes(), &1u32.to_ne_bytes())?;
        // Its threads, so that their wake-ups count before their first syscall.
        if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in rd.flatten() {
                if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                    let _ = self
                        .maps
                        .tasks
                        .update(&tid.to_ne_bytes(), &pid.to_ne_bytes());
                }
            }
        }
        Ok(())
    }

    /// Stop following one process (plumb's own connection to a server it traces): what it
    /// does from now on is not counted, and what it starts is not followed.
    pub fn unfollow(&self, pid: u32) {
        let word = (pid / 64).to_ne_bytes();
        if let Some(v) = self
            .maps
            .bits
            .lookup(&word)
            .and_then(|v| v.into_iter().next())
        {
            let bits = u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")) & !(1 << (pid % 64));
            let _ = self.maps.bits.update(&word, &bits.to_ne_bytes());
        }
        self.maps.pids.delete(&pid.to_ne_bytes());
    }

    /// Which calls are timed.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// When the maps' hashes take their memory: as they fill (Linux 6.1 on) or all at start.
    pub fn alloc(&self) -> Alloc {
        self.alloc
    }

    /// The kernel memory the maps hold now, as the kernel accounts it (None where it does
    /// not say).
    pub fn kernel_bytes(&self) -> Option<u64> {
        self.maps.all().iter().map(|m| m.kernel_bytes()).sum()
    }

    /// How the scheduler programs are attached: one BTF-typed raw tracepoint reading the
    /// kernel's run-queue counts (the cheapest), `BTF-typed raw tracepoints`, `raw tracepoints`
    /// or `tracepoints`.
    pub fn sched_via(&self) -> &'static str {
        self.sched_via
    }

    /// How syscalls are caught: `raw tracepoints` (the cheap way) or `tracepoints`.
    pub fn syscalls_via(&self) -> &'static str {
        if self.raw {
            "raw tracepoints"
        } else {
            "tracepoints"
        }
    }

    /// Threads seen so far, with their process.
    pub fn tasks(&self) -> BTreeMap<u32, u32> {
        self.maps
            .tasks
            .entries_per_cpu()
            .into_iter()
            .map(|(k, v)| (ne_u32(&k, 0), v[0][0] as u32))
            .collect()
    }

    /// Everything counted so far (the counting goes on).
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_with(true)
    }

    /// The counts so far without the latency histograms (the largest map: a recording that
    /// reads counts every second does not need them).
    pub fn counts(&self) -> Snapshot {
        self.snapshot_with(false)
    }

    fn snapshot_with(&self, histograms: bool) -> Snapshot {
        let m = &self.maps;
        let tasks = self.tasks();
        let tgid = |tid: u32| tasks.get(&tid).copied().unwrap_or(0);
        // Per thread and syscall: the sum over its buckets; per process and syscall: the
        // histogram of all its threads.
        let mut calls: BTreeMap<(u32, u32), CallStat> = BTreeMap::new();
        let mut hist: BTreeMap<(u32, u32), LogHist> = BTreeMap::new();
        for (k, per_cpu) in m.calls.entries_per_cpu() {
            let (tid, nr, b) = (ne_u32(&k, 0), ne_u32(&k, 4), ne_u32(&k, 8));
            let c = calls.entry((tid, nr)).or_insert_with(|| CallStat {
                tid,
                tgid: tgid(tid),
                nr,
                ..Default::default()
            });
            let (mut n, mut weights) = (0, 0);
            for v in per_cpu {
                n += v[0];
                c.errors += v[1];
                c.total_ns += v[2];
                c.max_ns = c.max_ns.max(v[3]);
                weights += v[4];
            }
            c.calls += n;
            if b != NORETURN as u32 && b != UNTIMED as u32 {
                c.timed += n;
                if histograms && weights > 0 {
                    hist.entry((c.tgid, nr)).or_default().add_bucket(b, weights);
                }
            }
        }
        for (_, per_cpu) in m.counted.entries_per_cpu() {
            for v in per_cpu {
                let (tag, n, errors) = (v[0], v[1], v[2]);
                if tag == 0 || n == 0 {
                    continue;
                }
                let (tid, nr) = (tag as u32, (tag >> 32) as u32);
                let c = calls.entry((tid, nr)).or_insert_with(|| CallStat {
                    tid,
                    tgid: tgid(tid),
                    nr,
                    ..Default::default()
                });
                c.calls += n;
                c.errors += errors;
            }
        }
        let calls = calls.into_values().filter(|c| c.calls > 0).collect();
        // The hash first, then the slots: counts a thread's exit moves from its slot to the
        // hash meanwhile are missed once (and read next time), never read twice.
        let mut sched: BTreeMap<u32, SchedStat> = m
            .sched
            .entries_per_cpu()
            .into_iter()
            .map(|(k, per_cpu)| {
                let tid = ne_u32(&k, 0);
                let s = |i: usize| per_cpu.iter().map(|v| v[i]).sum::<u64>();
                let stat = SchedStat {
                    tid,
                    tgid: tgid(tid),
                    voluntary: s(0),
                    involuntary: s(1),
                    run_delay_ns: s(2),
                    delays: s(3),
                    minor_faults: s(4),
                    major_faults: s(5),
                };
                (tid, stat)
            })
            .collect();
        // Each known thread's slot (one lookup per thread, not the whole 4 MiB array): its
        // counts when it holds it.
        for &tid in tasks.keys() {
            let idx = (tid & m.slot_mask as u32).to_ne_bytes();
            let Some(v) = m.slots.lookup(&idx).and_then(|v| v.into_iter().next()) else {
                continue;
            };
            let word = |i: usize| u64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().expect("8"));
            if v.len() < 64 || ne_u32(&v, 12) != tid || (4..8).all(|i| word(i) == 0) {
                continue;
            }
            let s = sched.entry(tid).or_insert_with(|| SchedStat {
                tid,
                tgid: tgid(tid),
                ..Default::default()
            });
            s.voluntary += word(4);
            s.involuntary += word(5);
            s.run_delay_ns += word(6);
            s.delays += word(7);
        }
        // Threads without a slot, where the kernel's run-queue counts are read: the change
        // since plumb first saw them.
        for (k, v) in m.delay.entries_per_cpu() {
            let (Some(tid), Some(v)) = (k.get(..4).map(|b| ne_u32(b, 0)), v.first()) else {
                continue;
            };
            if v.len() < 4 || (v[2] == v[0] && v[3] == v[1]) {
                continue;
            }
            let s = sched.entry(tid).or_insert_with(|| SchedStat {
                tid,
                tgid: tgid(tid),
                ..Default::default()
            });
            s.run_delay_ns += v[2].saturating_sub(v[0]);
            s.delays += v[3].saturating_sub(v[1]);
        }
        let sched = sched.into_values().collect();
        let lost_at = |i: u32| {
            m.lost.lookup(&i.to_ne_bytes()).map_or(0, |per_cpu| {
                per_cpu
                    .iter()
                    .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
                    .sum()
            })
        };
        let comms = m
            .comms
            .keys()
            .into_iter()
            .filter_map(|k| {
                let v = m.comms.lookup(&k)?.pop()?;
                let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
                Some((
                    ne_u32(&k, 0),
                    String::from_utf8_lossy(&v[..end]).into_owned(),
                ))
            })
            .collect();
        Snapshot {
            comms,
            calls,
            hist,
            sched,
            followed: m.pids.keys().iter().map(|k| ne_u32(k, 0)).collect(),
            tasks,
            lost: Lost {
                calls: lost_at(LOST_CALLS as u32),
                sched: lost_at(LOST_SCHED as u32),
                processes: lost_at(LOST_PIDS as u32),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_s_maps_are_sized_for_its_threads_within_the_host_s() {
        // PostgreSQL running the loops: eight processes, a tenth of the host's entries.
        let pg = Capacity::for_threads(8);
        assert_eq!((pg.calls, pg.sched), (16_384, 4096));
        // MariaDB's forty threads: 81,920 rounds up to the next power of two.
        assert_eq!(Capacity::for_threads(40).calls, 131_072);
        // Never more than a host-wide tracer's, never nothing.
        assert_eq!(Capacity::for_threads(10_000), Capacity::HOST);
        assert_eq!(Capacity::for_threads(0), Capacity::for_threads(1));
    }

    #[test]
    fn buckets_are_log_linear_and_ranges_hold_their_values() {
        for v in [
            0u64,
            1,
            3,
            4,
            5,
            7,
            8,
            9,
            15,
            16,
            100,
            1000,
            123_456_789,
            u64::MAX / 3,
        ] {
            let (lo, hi) = bucket_range(bucket(v));
            assert!(lo <= v && v <= hi, "{v}: {lo}..{hi}");
            assert!(hi - lo <= lo / 4 + 1, "{v}: {lo}..{hi} too wide");
        }
        assert!(bucket(1000) < bucket(1300));
        let mut h = LogHist::default();
        for v in 1..=1000u64 {
            h.add(v * 1000);
        }
        let p50 = h.quantile(0.5).unwrap() as f64;
        let p99 = h.quantile(0.99).unwrap() as f64;
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.125, "{p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.125, "{p99}");
        assert_eq!(LogHist::default().quantile(0.5), None);
    }

    use crate::test_skip as skip;

    /// The traced program: waits for the go byte, then makes a known number of three
    /// syscalls the interpreter itself never makes, touches fresh memory, sleeps, and runs a
    /// grandchild.
    const CHILD: &str = "import ctypes, os, sys, time\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        sys.stdin.buffer.read(1)\n\
        for _ in range(1000): libc.getppid()\n\
        for _ in range(300): libc.sched_yield()\n\
        for _ in range(77): libc.umask(0o022)\n\
        for _ in range(40): libc.close(-1)\n\
        b = bytearray(64 << 20)\n\
        for _ in range(20): time.sleep(0.005)\n\
        os.spawnv(os.P_WAIT, '/bin/true', ['true'])\n";

    /// The plain hashes take kernel memory as they fill: tracing one small process they hold
    /// a small part of what the same hashes allocated whole hold (over 60 MiB on a 2-CPU
    /// host), and the trace still counts.
    #[test]
    fn the_maps_take_kernel_memory_as_they_fill() {
        if unsafe { libc::geteuid() } != 0 {
            skip("tracing processes needs root");
            return;
        }
        // Allocation on use from 6.1; the kernel accounts what a map holds from 6.4.
        if crate::bpf::kernel_version().unwrap() < (6, 4) {
            skip("this kernel accounts a map's memory as used from 6.4 on");
            return;
        }
        // The child loops once the tracer is on (a byte on its stdin): on a busy host the
        // tracer's start once took longer than a second of the loop.
        let mut kid = std::process::Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import os, sys, time\nsys.stdin.read(1)\nfor _ in range(400): os.getppid(); time.sleep(0.005)",
            ])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t = ProcTracer::start(&[kid.id()]).unwrap();
        use std::io::Write;
        kid.stdin.take().unwrap().write_all(b"x").unwrap();
        kid.wait().unwrap();
        let s = t.snapshot();
        assert_eq!(t.alloc(), Alloc::OnUse);
        // Every loop's two calls at least.
        let calls: u64 = s
            .calls
            .iter()
            .filter(|c| c.tgid == kid.id())
            .map(|c| c.calls)
            .sum();
        assert!(calls >= 800, "{:?}", s.calls);
        let hashes = |m: &Maps| -> u64 {
            m.all()
                .iter()
                .filter(|m| m.kind == MapType::Hash)
                .map(|m| m.kernel_bytes().unwrap())
                .sum()
        };
        let used = hashes(&t.maps);
        let whole =
            hashes(&Maps::create(Maps::default_slots(), Alloc::Whole, Capacity::HOST).unwrap());
        eprintln!("hashes: {used} bytes as used, {whole} allocated whole");
        assert!(used * 4 < whole, "{used} bytes used, {whole} whole");
        // All the maps together: what plumb trace says it holds.
        assert!(t.kernel_bytes().unwrap() > used);
    }

    #[test]
    fn a_programs_syscalls_faults_and_switches_are_counted_in_the_kernel() {
        counted_with(Maps::default_slots(), Timing::EVERY_CALL);
    }

    /// One slot: the first thread to call holds it, every other thread (the grandchild, and
    /// the child itself if a thread of this test got there first) keeps its calls in the
    /// hash, and the counts are the same; with the hashes allocated whole (as on kernels
    /// before 6.1) too.
    #[test]
    fn threads_without_a_slot_of_their_own_are_counted_the_same() {
        counted_with(1, Timing::EVERY_CALL);
        counted_alloc(1, Timing::EVERY_CALL, Alloc::Whole);
    }

    /// As plumb trace times by default: counts stay exact, a call made a thousand times in a
    /// millisecond or two is timed in part and its time estimated, a sleep now and then is
    /// always timed.
    #[test]
    fn sampled_timing_keeps_counts_exact_and_times_rare_calls_always() {
        for slots in [Maps::default_slots(), 1] {
            counted_with(slots, Timing::DEFAULT);
        }
    }

    /// Two processes that never sleep, on one CPU: each waits for it about half the time.
    /// The run-queue delay plumb reports for each is what the kernel's own schedstat grew by
    /// over the trace (within a few time slices: plumb counts from each thread's first switch
    /// out), with a slot per thread and with none (the `delay` hash).
    #[test]
    fn run_queue_delay_is_the_kernels_own() {
        if unsafe { libc::geteuid() } != 0 {
            skip("tracing processes needs root");
            return;
        }
        const BUSY: &str = concat!(
            "import os, time\n",
            "os.sched_setaffinity(0, {0})\n",
            "t = time.time()\n",
            "while time.time() - t < 4: os.getppid()\n",
        );
        let delay = |pid: u32| -> u64 {
            let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
            s.split_whitespace().nth(1).unwrap().parse().unwrap()
        };
        for slots in [Maps::default_slots(), 1] {
            let mut kids: Vec<std::process::Child> = (0..2)
                .map(|_| {
                    std::process::Command::new("/usr/bin/python3")
                        .args(["-c", BUSY])
                        .spawn()
                        .unwrap()
                })
                .collect();
            let pids: Vec<u32> = kids.iter().map(|k| k.id()).collect();
            std::thread::sleep(std::time::Duration::from_millis(300));
            let t = ProcTracer::start_with(&pids, slots, Timing::DEFAULT, Capacity::HOST).unwrap();
            let before: Vec<u64> = pids.iter().map(|&p| delay(p)).collect();
            std::thread::sleep(std::time::Duration::from_secs(2));
            let after: Vec<u64> = pids.iter().map(|&p| delay(p)).collect();
            let s = t.snapshot();
            for k in &mut kids {
                let _ = k.kill();
                let _ = k.wait();
            }
            for (i, &pid) in pids.iter().enumerate() {
                let kernel = after[i] - before[i];
                let mine: u64 = s
                    .sched
                    .iter()
                    .filter(|x| x.tid == pid)
                    .map(|x| x.run_delay_ns)
                    .sum();
                let runs: u64 = s
                    .sched
                    .iter()
                    .filter(|x| x.tid == pid)
                    .map(|x| x.delays)
                    .sum();
                assert!(
                    kernel > 500_000_000,
                    "{slots} slots: {pid} waited {kernel} ns only"
                );
                let off = mine.abs_diff(kernel) as f64 / kernel as f64;
                assert!(
                    off < 0.15,
                    "{slots} slots: {pid}: plumb {mine} ns, the kernel {kernel} ns ({:?})",
                    s.sched
                );
                assert!(runs > 50, "{slots} slots: {pid}: {runs} runs");
            }
            assert!(!s.lost.any(), "{:?}", s.lost);
        }
    }

    fn counted_with(slots: u32, timing: Timing) {
        counted_alloc(slots, timing, Alloc::OnUse);
    }

    fn counted_alloc(slots: u32, timing: Timing, alloc: Alloc) {
        if unsafe { libc::geteuid() } != 0 {
            skip("tracing processes needs root");
            return;
        }
        use std::io::Write;
        let mut child = match std::process::Command::new("/usr/bin/python3")
            .args(["-c", CHILD])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                skip(&format!("no python3 for the traced program: {e}"));
                return;
            }
        };
        let pid = child.id();
        let t = ProcTracer::start_alloc(&[pid], slots, timing, alloc, Capacity::HOST).unwrap();
        assert_eq!(t.alloc(), alloc);
        // This kernel (6.x) has raw tracepoints: the cheap way is the one taken.
        assert_eq!(t.syscalls_via(), "raw tracepoints");
        // It has BTF too: the scheduler programs read the task's IDs directly.
        assert_eq!(
            t.sched_via(),
            "a BTF-typed raw tracepoint, the kernel's run-queue counts"
        );
        child.stdin.take().unwrap().write_all(b"x").unwrap();
        assert!(child.wait().unwrap().success());
        let s = t.snapshot();
        let table = crate::syscalls::table(&crate::Root::host()).unwrap();
        let n = |name: &str, tgid: Option<u32>| -> (u64, u64) {
            s.calls
                .iter()
                .filter(|c| crate::syscalls::name(&table, c.nr) == name)
                .filter(|c| tgid.is_none_or(|t| c.tgid == t))
                .fold((0, 0), |(a, b), c| (a + c.calls, b + c.errors))
        };
        assert_eq!(n("getppid", Some(pid)), (1000, 0));
        assert_eq!(n("sched_yield", Some(pid)), (300, 0));
        assert_eq!(n("umask", Some(pid)), (77, 0));
        assert_eq!(n("close", Some(pid)).1, 40, "close(-1) fails with EBADF");
        // The call that never returns is counted on entry.
        assert_eq!(n("exit_group", Some(pid)), (1, 0));
        // The grandchild was followed from its fork: its exec is counted, under its own PID.
        let grandchildren: Vec<u32> = s
            .calls
            .iter()
            .filter(|c| c.tgid != pid && crate::syscalls::name(&table, c.nr) == "execve")
            .map(|c| c.tgid)
            .collect();
        assert!(!grandchildren.is_empty(), "{:?}", s.calls);
        assert!(s.followed.contains(&grandchildren[0]));
        // Its name as the kernel had it after the exec, though it is long gone.
        assert_eq!(
            s.comms.get(&grandchildren[0]).map(String::as_str),
            Some("true")
        );
        // Times: every call took some time; the histogram holds every call.
        let getppid = table.iter().find(|(_, v)| *v == "getppid").unwrap().0;
        let c = s.calls.iter().find(|c| c.nr == *getppid).unwrap();
        assert!(
            c.total_ns > 0 && c.max_ns > 0 && c.max_ns <= c.total_ns,
            "{c:?}"
        );
        if timing.every_call() {
            assert_eq!(c.timed, 1000);
            assert_eq!(s.hist[&(pid, *getppid)].count(), 1000);
        } else {
            // Timed in part; the weighted histogram stands for all 1000 (an estimate: the
            // standard deviation is about 90 calls).
            assert!(c.timed > 0 && c.timed < 1000, "{c:?}");
            let est = s.hist[&(pid, *getppid)].count();
            assert!((500..=1500).contains(&est), "{est} for 1000: {c:?}");
            assert!(c.total_ns > c.max_ns, "{c:?}");
        }
        // The 20 sleeps (5 ms each: rare, one or two in a jiffy at most) are all timed.
        let sleeps: Vec<&CallStat> = s
            .calls
            .iter()
            .filter(|c| c.tgid == pid)
            .filter(|c| {
                let n = crate::syscalls::name(&table, c.nr);
                ["clock_nanosleep", "nanosleep", "select", "pselect6"].contains(&n.as_str())
            })
            .collect();
        let (calls, timed, ns) = sleeps.iter().fold((0, 0, 0), |(a, b, t), c| {
            (a + c.calls, b + c.timed, t + c.total_ns)
        });
        assert!(calls >= 20, "{sleeps:?}");
        assert_eq!(timed, calls, "{sleeps:?}");
        assert!(ns >= 100_000_000, "{sleeps:?}");
        // 64 MiB of fresh memory is thousands of minor faults; 20 sleeps are 20 voluntary
        // switches at least.
        let sched: Vec<&SchedStat> = s.sched.iter().filter(|x| x.tgid == pid).collect();
        let minor: u64 = sched.iter().map(|x| x.minor_faults).sum();
        let voluntary: u64 = sched.iter().map(|x| x.voluntary).sum();
        assert!(minor > 4000, "{sched:?}");
        assert!(voluntary >= 20, "{sched:?}");
        // Each sleep ends in a wake-up and a switch back in: the wait for a CPU between the
        // two is timed (the scheduler programs found the thread's process followed).
        let delays: u64 = sched.iter().map(|x| x.delays).sum();
        assert!(delays >= 20, "{sched:?}");
        assert!(!s.lost.any(), "{:?}", s.lost);
        // Other processes are not counted: this test's own thread made syscalls meanwhile.
        assert!(s.calls.iter().all(|c| c.tgid != std::process::id()));
    }
}

/// The tracepoints' numbers and formats, in `start_alloc`'s order.
type Tracepoints = [(u64, String)];

/// Where the syscall programs find their arguments, and the calls they treat apart.
struct SyscallArgs<'a> {
    /// The call's number in sys_enter's record, and the return value in sys_exit's.
    id: i16,
    ret: i16,
    /// The calls that never return, and those that replace the program.
    noreturn: &'a [u32],
    exec: &'a [u32],
}

/// The fork program (new processes of a followed one are followed) and the page-fault
/// counters.
fn attach_fork_and_faults(
    m: &Maps,
    child: i16,
    fork_tp: u64,
    progs: &mut Vec<Prog>,
    links: &mut Vec<Link>,
) -> Result<(), crate::KernelError> {
    use ProgType::{PerfEvent, Tracepoint};
    let plan: Vec<(ProgType, &str, Vec<crate::bpf::Insn>, Option<u64>)> = vec![
        (
            Tracepoint,
            "plumb_fork",
            process_fork(m, child)?,
            Some(fork_tp),
        ),
        (PerfEvent, "plumb_minflt", fault(m, 32)?, None),
        (PerfEvent, "plumb_majflt", fault(m, 40)?, None),
    ];
    for (kind, name, insns, tp) in plan {
        let p = Prog::load(kind, name, &insns)?;
        match tp {
            Some(id) => links.push(Link::tracepoint(&p, id)?),
            None => {
                use perf_event_open_sys::bindings as b;
                let config = if name == "plumb_minflt" {
                    b::PERF_COUNT_SW_PAGE_FAULTS_MIN
                } else {
                    b::PERF_COUNT_SW_PAGE_FAULTS_MAJ
                };
                links.extend(Link::software(&p, config as u64)?);
            }
        }
        progs.push(p);
    }
    Ok(())
}

/// The scheduler programs (run at every context switch and wake-up on the host): on
/// BTF-typed raw tracepoints where the kernel takes them, else on plain raw tracepoints where
/// its BTF gives the offsets, else on the ordinary ones. How they are attached, in words.
#[allow(clippy::too_many_arguments)]
fn attach_sched(
    m: &Maps,
    tps: &Tracepoints,
    fields: Option<TaskFields>,
    raw: Option<&SchedArgs>,
    record: &SchedArgs,
    btf: Option<&crate::btf::Btf>,
    progs: &mut Vec<Prog>,
    links: &mut Vec<Link>,
) -> Result<&'static str, crate::KernelError> {
    let mut sched_via = "tracepoints";
    let typedef = |name: &str| btf?.typedef_id(&format!("btf_trace_{name}"));
    // Cheapest of all: sched_switch alone, reading the kernel's own run-queue counts.
    let counted = fields
        .zip(typedef("sched_switch"))
        .ok_or_else(|| crate::KernelError::new(""))
        .and_then(|(f, id)| {
            let p = Prog::load_btf_tracepoint("plumb_switch", &sched_switch_counted(m, f)?, id)?;
            Ok((Link::btf_tracepoint(&p)?, p))
        });
    let sched_plan = if let Ok((l, p)) = counted {
        links.push(l);
        progs.push(p);
        sched_via = "a BTF-typed raw tracepoint, the kernel's run-queue counts";
        Vec::new()
    } else {
        vec![
            (
                "plumb_switch",
                "sched_switch",
                tps[2].0,
                sched_switch
                    as fn(&Maps, &SchedArgs) -> Result<Vec<crate::bpf::Insn>, crate::KernelError>,
            ),
            ("plumb_wakeup", "sched_wakeup", tps[3].0, sched_wakeup),
        ]
    };
    for (name, raw_name, tp, build) in sched_plan {
        let none = || crate::KernelError::new("");
        let direct = raw.ok_or_else(none).and_then(|r| {
            let SchedArgs::Raw { pid, tgid, .. } = *r else {
                return Err(none());
            };
            let d = SchedArgs::Raw {
                pid,
                tgid,
                direct: true,
            };
            let id = typedef(raw_name).ok_or_else(none)?;
            let p = Prog::load_btf_tracepoint(name, &build(m, &d)?, id)?;
            Ok((Link::btf_tracepoint(&p)?, p, "BTF-typed raw tracepoints"))
        });
        let fast = direct.or_else(|_| {
            let r = raw.ok_or_else(none)?;
            let p = Prog::load(ProgType::RawTracepoint, name, &build(m, r)?)?;
            Ok::<_, crate::KernelError>((Link::raw_tracepoint(&p, raw_name)?, p, "raw tracepoints"))
        });
        match fast {
            Ok((l, p, via)) => {
                links.push(l);
                progs.push(p);
                sched_via = via;
            }
            Err(_) => {
                let p = Prog::load(ProgType::Tracepoint, name, &build(m, record)?)?;
                links.push(Link::tracepoint(&p, tp)?);
                progs.push(p);
            }
        }
    }
    Ok(sched_via)
}

/// The syscall programs (twice per call of every task on the host): on the raw tracepoints
/// (arguments as the kernel has them: 8 bytes each, the call's number or return value
/// second), else on the ordinary ones (a record built first, costlier). (BTF-typed, reading
/// the current task without bpf_get_current_pid_tgid, measured no cheaper here.) Whether the
/// raw tracepoints took them.
fn attach_syscalls(
    m: &Maps,
    tps: &Tracepoints,
    a: &SyscallArgs,
    timing: Timing,
    progs: &mut Vec<Prog>,
    links: &mut Vec<Link>,
) -> Result<bool, crate::KernelError> {
    let mut raw_used = false;
    let (m, tp_ids) = (m, [tps[0].0, tps[1].0]);
    for (name, raw, raw_insns, tp, tp_insns) in [
        (
            "plumb_sys_exit",
            "sys_exit",
            sys_exit(m, 8, a.exec)?,
            tp_ids[1],
            sys_exit(m, a.ret, a.exec)?,
        ),
        (
            "plumb_sys_enter",
            "sys_enter",
            sys_enter(m, 8, a.noreturn, timing)?,
            tp_ids[0],
            sys_enter(m, a.id, a.noreturn, timing)?,
        ),
    ] {
        let fast = Prog::load(ProgType::RawTracepoint, name, &raw_insns)
            .and_then(|p| Ok((Link::raw_tracepoint(&p, raw)?, p)));
        match fast {
            Ok((l, p)) => {
                links.push(l);
                progs.push(p);
                raw_used = true;
            }
            Err(_) => {
                let p = Prog::load(ProgType::Tracepoint, name, &tp_insns)?;
                links.push(Link::tracepoint(&p, tp)?);
                progs.push(p);
            }
        }
    }
    Ok(raw_used)
}
