//! Just enough eBPF to count in the kernel: maps, programs assembled here instruction by
//! instruction (no compiler, no object files, no libbpf), loading through the `bpf(2)` syscall
//! with the verifier's log kept for the error, and attaching through perf events.
//!
//! Everything here is held by file descriptors: when plumb exits, however it exits (kill -9
//! too), the kernel detaches the programs and frees the maps. Nothing stays enabled.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// One instruction as the kernel reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

// Instruction classes, sizes, modes and operations (linux/bpf.h, bpf_common.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const JMP: u8 = 0x05;
const ALU64: u8 = 0x07;
const MEM: u8 = 0x60;
const IMM: u8 = 0x00;
const K: u8 = 0x00;
const X: u8 = 0x08;
const EXIT: u8 = 0x90;
const CALL: u8 = 0x80;
const PSEUDO_MAP_FD: u8 = 1;

/// Operand sizes.
#[derive(Clone, Copy)]
pub enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    DW = 0x18,
}

/// ALU operations.
#[derive(Clone, Copy)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Xor = 0xa0,
    Mov = 0xb0,
}

/// Jump conditions (unsigned unless named signed).
#[derive(Clone, Copy)]
pub enum Cond {
    Always = 0x00,
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Ne = 0x50,
    SGe = 0x70,
    Lt = 0xa0,
    SLt = 0xc0,
}

/// Kernel helpers used here (their numbers are ABI).
#[derive(Clone, Copy)]
pub enum Helper {
    MapLookup = 1,
    MapUpdate = 2,
    MapDelete = 3,
    KtimeNs = 5,
    PidTgid = 14,
    CurrentComm = 16,
    ProbeReadKernel = 113,
    /// Inlined by the verifier on 64-bit hosts: a load of `jiffies`, no call.
    Jiffies64 = 118,
}

pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;
pub const FP: u8 = 10;

/// A program being written, with named jump targets.
#[derive(Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: HashMap<String, usize>,
    fixups: Vec<(usize, String)>,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }
    /// `dst op= imm` (64-bit).
    pub(crate) fn alu_k(&mut self, op: Alu, dst: u8, imm: i32) -> &mut Self {
        self.insns.push(insn(ALU64 | op as u8 | K, dst, 0, 0, imm));
        self
    }
    /// `dst op= src` (64-bit).
    pub(crate) fn alu_x(&mut self, op: Alu, dst: u8, src: u8) -> &mut Self {
        self.insns.push(insn(ALU64 | op as u8 | X, dst, src, 0, 0));
        self
    }
    pub(crate) fn mov(&mut self, dst: u8, src: u8) -> &mut Self {
        self.alu_x(Alu::Mov, dst, src)
    }
    pub fn mov_k(&mut self, dst: u8, imm: i32) -> &mut Self {
        self.alu_k(Alu::Mov, dst, imm)
    }
    /// `dst = *(size *)(src + off)`.
    pub fn load(&mut self, size: Size, dst: u8, src: u8, off: i16) -> &mut Self {
        self.insns
            .push(insn(LDX | MEM | size as u8, dst, src, off, 0));
        self
    }
    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: u8, off: i16, src: u8) -> &mut Self {
        self.insns
            .push(insn(STX | MEM | size as u8, dst, src, off, 0));
        self
    }
    /// `*(size *)(dst + off) = imm`.
    pub(crate) fn store_k(&mut self, size: Size, dst: u8, off: i16, imm: i32) -> &mut Self {
        self.insns
            .push(insn(ST | MEM | size as u8, dst, 0, off, imm));
        self
    }
    /// `dst = the map` (a two-slot load the kernel resolves from the descriptor).
    pub fn map(&mut self, dst: u8, map: &Map) -> &mut Self {
        self.insns.push(insn(
            LD | IMM | Size::DW as u8,
            dst,
            PSEUDO_MAP_FD,
            0,
            map.fd.as_raw_fd(),
        ));
        self.insns.push(Insn::default());
        self
    }
    /// `*(u64 *)(dst + off) |= src`, atomically.
    pub(crate) fn atomic_or(&mut self, dst: u8, off: i16, src: u8) -> &mut Self {
        const ATOMIC: u8 = 0xc0;
        self.insns.push(insn(
            STX | ATOMIC | Size::DW as u8,
            dst,
            src,
            off,
            Alu::Or as i32,
        ));
        self
    }
    pub fn call(&mut self, h: Helper) -> &mut Self {
        self.insns.push(insn(JMP | CALL, 0, 0, 0, h as i32));
        self
    }
    /// Jump to `label` when `dst cond imm`.
    pub(crate) fn jump_k(&mut self, cond: Cond, dst: u8, imm: i32, label: &str) -> &mut Self {
        self.fixups.push((self.insns.len(), label.to_string()));
        self.insns.push(insn(JMP | cond as u8 | K, dst, 0, 0, imm));
        self
    }
    /// Jump to `label` when `dst cond src`.
    pub(crate) fn jump_x(&mut self, cond: Cond, dst: u8, src: u8, label: &str) -> &mut Self {
        self.fixups.push((self.insns.len(), label.to_string()));
        self.insns.push(insn(JMP | cond as u8 | X, dst, src, 0, 0));
        self
    }
    pub(crate) fn goto(&mut self, label: &str) -> &mut Self {
        self.jump_k(Cond::Always, 0, 0, label)
    }
    pub fn label(&mut self, name: &str) -> &mut Self {
        let prev = self.labels.insert(name.to_string(), self.insns.len());
        assert!(prev.is_none(), "label {name} defined twice");
        self
    }
    pub fn exit(&mut self) -> &mut Self {
        self.insns.push(insn(JMP | EXIT, 0, 0, 0, 0));
        self
    }
    /// The instructions, jumps resolved.
    pub fn finish(mut self) -> Result<Vec<Insn>, crate::KernelError> {
        for (at, label) in std::mem::take(&mut self.fixups) {
            let to = *self
                .labels
                .get(&label)
                .ok_or_else(|| format!("BPF program: no label {label}"))?;
            let off = to as i64 - at as i64 - 1;
            self.insns[at].off =
                i16::try_from(off).map_err(|_| format!("BPF program: jump to {label} too far"))?;
        }
        Ok(self.insns)
    }
}

// bpf(2) commands, map and program types.
const MAP_CREATE: i32 = 0;
const MAP_LOOKUP_ELEM: i32 = 1;
const MAP_UPDATE_ELEM: i32 = 2;
const MAP_DELETE_ELEM: i32 = 3;
const MAP_GET_NEXT_KEY: i32 = 4;
const MAP_LOOKUP_BATCH: i32 = 24;
const PROG_LOAD: i32 = 5;
const RAW_TRACEPOINT_OPEN: i32 = 17;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    Hash = 1,
    Array = 2,
    PercpuHash = 5,
    PercpuArray = 6,
    LruHash = 9,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgType {
    Tracepoint = 5,
    PerfEvent = 7,
    /// Runs on the tracepoint's raw arguments, before the kernel builds a trace record: the
    /// cheapest way in.
    RawTracepoint = 17,
    /// Attached to a kernel function or tracepoint by its BTF type: here a BTF-typed raw
    /// tracepoint (`tp_btf`), whose pointer arguments the program may read directly (the
    /// verifier knows their types from the kernel's BTF), no helper call needed.
    Tracing = 26,
}

/// `expected_attach_type` of a [`ProgType::Tracing`] program run at a raw tracepoint.
const TRACE_RAW_TP: u32 = 23;

/// The attribute block every command takes (a union in the kernel: zeroed, then the fields of
/// one command, at their offsets).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, name: &str) -> &mut Self {
        let b = name.as_bytes();
        let n = b.len().min(15);
        self.0[off..off + n].copy_from_slice(&b[..n]);
        self
    }
}

fn bpf(cmd: i32, attr: &mut Attr) -> std::io::Result<i64> {
    // SAFETY: attr is a zero-initialised 128-byte block laid out as the command expects; the
    // kernel reads at most its size.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut Attr, 128u32) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// CPUs the kernel may ever bring up: per-CPU maps hold one value for each.
pub(crate) fn possible_cpus() -> usize {
    let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/possible") else {
        // SAFETY: sysconf has no preconditions.
        return unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize;
    };
    s.trim()
        .split(',')
        .filter_map(|r| match r.split_once('-') {
            Some((a, b)) => Some(b.parse::<usize>().ok()? + 1 - a.parse::<usize>().ok()?),
            None => r.parse::<usize>().ok().map(|_| 1),
        })
        .sum::<usize>()
        .max(1)
}

/// A map, held by its descriptor.
pub struct Map {
    fd: OwnedFd,
    pub kind: MapType,
    pub key_size: usize,
    pub value_size: usize,
    cpus: usize,
    /// A hash whose entries are allocated on use.
    on_use: bool,
}

/// The running kernel's major and minor version.
pub fn kernel_version() -> Option<(u32, u32)> {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut v = r.trim().split(|c: char| !c.is_ascii_digit());
    Some((v.next()?.parse().ok()?, v.next()?.parse().ok()?))
}

/// When a hash map's entries are allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alloc {
    /// All `max_entries` at creation (what the kernel does by default, and the only safe way
    /// for tracing programs before Linux 6.1).
    Whole,
    /// Each entry when it is first inserted (`BPF_F_NO_PREALLOC`; from the kernel's BPF memory
    /// allocator, safe in any context, since 6.1): the map takes what it holds.
    OnUse,
}

impl Map {
    pub fn create(
        kind: MapType,
        name: &str,
        key_size: usize,
        value_size: usize,
        max_entries: u32,
    ) -> Result<Map, crate::KernelError> {
        Self::create_with(kind, name, key_size, value_size, max_entries, Alloc::Whole)
    }

    /// [`Map::create`], a hash's entries allocated as `alloc` says (arrays are always whole).
    pub(crate) fn create_with(
        kind: MapType,
        name: &str,
        key_size: usize,
        value_size: usize,
        max_entries: u32,
        alloc: Alloc,
    ) -> Result<Map, crate::KernelError> {
        const NO_PREALLOC: u32 = 1;
        let hash = matches!(kind, MapType::Hash | MapType::PercpuHash);
        let mut a = Attr::new();
        a.u32(0, kind as u32)
            .u32(4, key_size as u32)
            .u32(8, value_size as u32)
            .u32(12, max_entries)
            .u32(
                16,
                if hash && alloc == Alloc::OnUse {
                    NO_PREALLOC
                } else {
                    0
                },
            )
            .name(28, name);
        let fd = bpf(MAP_CREATE, &mut a).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) => format!("creating a BPF map needs root (CAP_BPF): {e}"),
            _ => format!("cannot create BPF map {name}: {e}"),
        })?;
        let per_cpu = matches!(kind, MapType::PercpuHash | MapType::PercpuArray);
        Ok(Map {
            // SAFETY: the kernel returned a new descriptor we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            kind,
            key_size,
            value_size,
            cpus: if per_cpu { possible_cpus() } else { 1 },
            on_use: hash && alloc == Alloc::OnUse,
        })
    }

    /// The kernel memory the map holds now, as the kernel accounts it (`memlock` in the
    /// descriptor's fdinfo). None where the kernel does not say, or (before Linux 6.4, which
    /// counts what a hash allocated on use has taken) would give its greatest size instead.
    pub fn kernel_bytes(&self) -> Option<u64> {
        if self.on_use && kernel_version()? < (6, 4) {
            return None;
        }
        let p = format!("/proc/self/fdinfo/{}", self.fd.as_raw_fd());
        std::fs::read_to_string(p)
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("memlock:"))
            .and_then(|v| v.trim().parse().ok())
    }

    /// The value's bytes, one slot per possible CPU for per-CPU maps (each slot rounded up to
    /// 8 bytes).
    fn slot(&self) -> usize {
        if matches!(self.kind, MapType::PercpuHash | MapType::PercpuArray) {
            self.value_size.div_ceil(8) * 8
        } else {
            self.value_size
        }
    }

    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<(), crate::KernelError> {
        assert_eq!(key.len(), self.key_size);
        let mut v = value.to_vec();
        v.resize(self.slot() * self.cpus, 0);
        let s = self.slot();
        for c in 1..self.cpus {
            v[c * s..c * s + value.len()].copy_from_slice(value);
        }
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, key.as_ptr() as u64)
            .u64(16, v.as_ptr() as u64)
            .u64(24, 0);
        bpf(MAP_UPDATE_ELEM, &mut a)
            .map(|_| ())
            .map_err(|e| crate::KernelError::io("BPF map update", e))
    }

    /// Remove a key (absent already: fine).
    pub fn delete(&self, key: &[u8]) {
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, key.as_ptr() as u64);
        let _ = bpf(MAP_DELETE_ELEM, &mut a);
    }

    /// A key's value: for per-CPU maps, each CPU's value.
    pub fn lookup(&self, key: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut v = vec![0u8; self.slot() * self.cpus];
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, key.as_ptr() as u64)
            .u64(16, v.as_mut_ptr() as u64);
        bpf(MAP_LOOKUP_ELEM, &mut a).ok()?;
        Some(
            v.chunks(self.slot())
                .map(|c| c[..self.value_size].to_vec())
                .collect(),
        )
    }

    /// Every key (as at the moment of each step: entries added meanwhile may or may not show).
    pub fn keys(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut next = vec![0u8; self.key_size];
        loop {
            let mut a = Attr::new();
            a.u32(0, self.fd.as_raw_fd() as u32);
            // The first call passes no key: the kernel starts from the beginning.
            a.u64(8, out.last().map_or(0, |k| k.as_ptr() as u64));
            a.u64(16, next.as_mut_ptr() as u64);
            if bpf(MAP_GET_NEXT_KEY, &mut a).is_err() {
                break;
            }
            out.push(next.clone());
            if out.len() > 10_000_000 {
                break;
            }
        }
        out
    }

    /// Every entry, each value as 64-bit words (a shorter value zero-padded), one value per
    /// CPU for per-CPU maps. Read in batches of entries per system call where the kernel
    /// can (Linux 5.6), else a key and a lookup at a time.
    pub(crate) fn entries_per_cpu(&self) -> Vec<(Vec<u8>, Vec<Vec<u64>>)> {
        // One CPU's value as words.
        let words = |v: &[u8]| -> Vec<u64> {
            let mut v = v[..self.value_size.min(v.len())].to_vec();
            v.resize(v.len().div_ceil(8) * 8, 0);
            v.chunks_exact(8)
                .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
                .collect()
        };
        if let Some(all) = self.batched() {
            return all
                .into_iter()
                .map(|(k, v)| (k, v.chunks(self.slot()).map(words).collect()))
                .collect();
        }
        self.keys()
            .into_iter()
            .filter_map(|k| {
                let per_cpu = self.lookup(&k)?;
                Some((k, per_cpu.iter().map(|v| words(v)).collect()))
            })
            .collect()
    }

    /// Every entry with its whole value (every CPU's slot), by BPF_MAP_LOOKUP_BATCH; None
    /// when this kernel or map type has no batches.
    fn batched(&self) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        const CHUNK: usize = 512;
        let value = self.slot() * self.cpus;
        let mut out = Vec::new();
        // The position between calls: a bucket number for hash maps, a key for arrays.
        let token_len = self.key_size.max(8);
        let (mut in_tok, mut out_tok) = (vec![0u8; token_len], vec![0u8; token_len]);
        let mut first = true;
        let mut chunk = CHUNK;
        loop {
            let mut keys = vec![0u8; chunk * self.key_size];
            let mut vals = vec![0u8; chunk * value];
            let mut a = Attr::new();
            a.u64(0, if first { 0 } else { in_tok.as_ptr() as u64 })
                .u64(8, out_tok.as_mut_ptr() as u64)
                .u64(16, keys.as_mut_ptr() as u64)
                .u64(24, vals.as_mut_ptr() as u64)
                .u32(32, chunk as u32)
                .u32(36, self.fd.as_raw_fd() as u32);
            let r = bpf(MAP_LOOKUP_BATCH, &mut a);
            let n =
                (u32::from_ne_bytes(a.0[32..36].try_into().expect("4 bytes")) as usize).min(chunk);
            let done = match r {
                Ok(_) => false,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
                // One bucket holds more entries than asked for: ask for more.
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && chunk < 1 << 20 => {
                    chunk *= 4;
                    continue;
                }
                Err(_) if first => return None,
                // The map changed shape under the walk: what was read so far stands.
                Err(_) => true,
            };
            for i in 0..n {
                out.push((
                    keys[i * self.key_size..(i + 1) * self.key_size].to_vec(),
                    vals[i * value..(i + 1) * value].to_vec(),
                ));
            }
            if done || out.len() > 10_000_000 {
                return Some(out);
            }
            in_tok.copy_from_slice(&out_tok);
            first = false;
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A loaded program.
pub struct Prog {
    fd: OwnedFd,
}

impl Prog {
    /// Load `insns`; a verifier refusal carries the end of the verifier's log.
    pub fn load(kind: ProgType, name: &str, insns: &[Insn]) -> Result<Prog, crate::KernelError> {
        Self::load_attr(kind, name, insns, None)
    }

    /// Load `insns` as a BTF-typed raw tracepoint program for the tracepoint whose
    /// `btf_trace_<name>` typedef has id `btf_id` in the kernel's BTF; attach it with
    /// [`Link::btf_tracepoint`].
    pub(crate) fn load_btf_tracepoint(
        name: &str,
        insns: &[Insn],
        btf_id: u32,
    ) -> Result<Prog, crate::KernelError> {
        Self::load_attr(ProgType::Tracing, name, insns, Some((TRACE_RAW_TP, btf_id)))
    }

    /// `attach`: the expected attach type and the BTF id of what it attaches to.
    fn load_attr(
        kind: ProgType,
        name: &str,
        insns: &[Insn],
        attach: Option<(u32, u32)>,
    ) -> Result<Prog, crate::KernelError> {
        let license = c"Dual MIT/GPL";
        let mut log = vec![0u8; 1 << 20];
        let attempt = |log_level: u32, log: &mut Vec<u8>| {
            let mut a = Attr::new();
            a.u32(0, kind as u32)
                .u32(4, insns.len() as u32)
                .u64(8, insns.as_ptr() as u64)
                .u64(16, license.as_ptr() as u64)
                .u32(24, log_level)
                .u32(28, if log_level > 0 { log.len() as u32 } else { 0 })
                .u64(
                    32,
                    if log_level > 0 {
                        log.as_mut_ptr() as u64
                    } else {
                        0
                    },
                )
                .name(48, name);
            if let Some((kind, id)) = attach {
                a.u32(68, kind).u32(108, id);
            }
            bpf(PROG_LOAD, &mut a)
        };
        match attempt(0, &mut log) {
            Ok(fd) => Ok(Prog {
                // SAFETY: a new descriptor we own.
                fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            }),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(crate::KernelError::io(
                "loading a BPF program needs root (CAP_BPF and CAP_PERFMON)",
                e,
            )),
            Err(e) => {
                // Again with the log, to say why.
                let _ = attempt(1, &mut log);
                let text = String::from_utf8_lossy(&log);
                let text = text.trim_end_matches('\0');
                let tail: Vec<&str> = text.lines().rev().take(12).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(crate::KernelError::new(format!(
                    "the kernel refused BPF program {name}: {e}\n{}",
                    tail.join("\n")
                )))
            }
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A program attached to a perf event (a tracepoint, or a software event on one CPU); the
/// event's descriptor holds the attachment.
pub struct Link {
    _event: OwnedFd,
}

fn perf_open(
    attr: &mut perf_event_open_sys::bindings::perf_event_attr,
    cpu: i32,
) -> Result<OwnedFd, std::io::Error> {
    // SAFETY: attr is a valid, initialised attr; the result is checked.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            -1,
            cpu,
            -1,
            perf_event_open_sys::bindings::PERF_FLAG_FD_CLOEXEC as u64,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_bpf(event: &OwnedFd, prog: &Prog) -> Result<(), std::io::Error> {
    // SAFETY: ioctls on a perf event descriptor we own, with a program descriptor we own.
    unsafe {
        if perf_event_open_sys::ioctls::SET_BPF(event.as_raw_fd(), prog.fd() as u32) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if perf_event_open_sys::ioctls::ENABLE(event.as_raw_fd(), 0) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Link {
    /// Run a [`ProgType::RawTracepoint`] program at every hit of the tracepoint `name`
    /// (`sys_enter`); its context is the tracepoint's arguments, 8 bytes each.
    pub fn raw_tracepoint(prog: &Prog, name: &str) -> Result<Link, crate::KernelError> {
        let c = std::ffi::CString::new(name).map_err(|_| format!("tracepoint name {name:?}"))?;
        let mut a = Attr::new();
        a.u64(0, c.as_ptr() as u64).u32(8, prog.fd() as u32);
        let fd = bpf(RAW_TRACEPOINT_OPEN, &mut a).map_err(|e| {
            crate::KernelError::io(format!("attaching to raw tracepoint {name}"), e)
        })?;
        Ok(Link {
            // SAFETY: a new descriptor we own.
            _event: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
        })
    }

    /// Attach a program loaded with [`Prog::load_btf_tracepoint`] (it names its tracepoint).
    pub(crate) fn btf_tracepoint(prog: &Prog) -> Result<Link, crate::KernelError> {
        let mut a = Attr::new();
        a.u64(0, 0).u32(8, prog.fd() as u32);
        let fd = bpf(RAW_TRACEPOINT_OPEN, &mut a)
            .map_err(|e| crate::KernelError::io("attaching to a BTF-typed tracepoint", e))?;
        Ok(Link {
            // SAFETY: a new descriptor we own.
            _event: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
        })
    }

    /// Run `prog` at every hit of the tracepoint with this id, on every CPU (a tracepoint's
    /// programs run wherever it fires: one event carries them).
    pub fn tracepoint(prog: &Prog, id: u64) -> Result<Link, crate::KernelError> {
        use perf_event_open_sys::bindings as b;
        let mut a = b::perf_event_attr {
            type_: b::PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<b::perf_event_attr>() as u32,
            config: id,
            ..Default::default()
        };
        a.__bindgen_anon_1.sample_period = 1;
        a.set_disabled(1);
        let ev = perf_open(&mut a, 0)
            .map_err(|e| crate::KernelError::io(format!("tracepoint {id}"), e))?;
        set_bpf(&ev, prog)
            .map_err(|e| crate::KernelError::io(format!("attaching to tracepoint {id}"), e))?;
        Ok(Link { _event: ev })
    }

    /// Run `prog` at every occurrence of a software event (`PERF_COUNT_SW_*`) on each CPU.
    pub(crate) fn software(prog: &Prog, config: u64) -> Result<Vec<Link>, crate::KernelError> {
        use perf_event_open_sys::bindings as b;
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as i32;
        let mut out = Vec::new();
        for cpu in 0..possible_cpus() as i32 {
            let mut a = b::perf_event_attr {
                type_: b::PERF_TYPE_SOFTWARE,
                size: std::mem::size_of::<b::perf_event_attr>() as u32,
                config,
                ..Default::default()
            };
            a.__bindgen_anon_1.sample_period = 1;
            a.set_disabled(1);
            match perf_open(&mut a, cpu) {
                Ok(ev) => {
                    set_bpf(&ev, prog).map_err(|e| {
                        crate::KernelError::io(format!("attaching to software event {config}"), e)
                    })?;
                    out.push(Link { _event: ev });
                }
                // A CPU that is offline: nothing runs there.
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) && cpu >= online => {}
                Err(e) => {
                    return Err(crate::KernelError::io(
                        format!("software event {config} on CPU {cpu}"),
                        e,
                    ))
                }
            }
        }
        Ok(out)
    }
}

/// A field's offset in a tracepoint's record, from its `format` file:
/// `field:long id; offset:8; size:8; signed:1;` (tab-separated).
pub(crate) fn field_offset(format: &str, field: &str) -> Option<i16> {
    format.lines().find_map(|l| {
        let decl = l.trim().strip_prefix("field:")?;
        let (decl, rest) = decl.split_once(';')?;
        let name = decl.split_whitespace().last()?;
        let name = name.split('[').next()?;
        if name != field {
            return None;
        }
        let off = rest.split("offset:").nth(1)?.split(';').next()?;
        off.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_resolve_to_their_labels() {
        let mut a = Asm::new();
        a.mov_k(R0, 0)
            .jump_k(Cond::Eq, R1, 0, "out")
            .mov_k(R0, 1)
            .label("out")
            .exit();
        let p = a.finish().unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p[1].off, 1, "skips one instruction");
        assert_eq!(p[1].code, 0x15);
        let mut b = Asm::new();
        b.goto("nowhere");
        assert!(b.finish().unwrap_err().to_string().contains("nowhere"));
    }

    #[test]
    fn offsets_come_from_the_format_file() {
        let f = "name: sys_exit\nID: 20\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n\tfield:char prev_comm[16];\toffset:24;\tsize:16;\tsigned:0;\n";
        assert_eq!(field_offset(f, "id"), Some(8));
        assert_eq!(field_offset(f, "ret"), Some(16));
        assert_eq!(field_offset(f, "prev_comm"), Some(24));
        assert_eq!(field_offset(f, "nope"), None);
    }

    /// Maps of thousands of entries (several batches) with values that are not whole words:
    /// the batched read gives every entry, each CPU's value in its place, as the key-by-key
    /// read does.
    #[test]
    fn batched_reads_match_key_by_key_reads() {
        if unsafe { libc::geteuid() } != 0 {
            crate::test_skip("BPF maps need root");
            return;
        }
        for kind in [MapType::Hash, MapType::PercpuHash] {
            let m = Map::create(kind, "plumb_test", 8, 12, 4096).unwrap();
            for i in 0..3000u64 {
                let mut v = [0u8; 12];
                v[..8].copy_from_slice(&(i * 7).to_ne_bytes());
                v[8..].copy_from_slice(&(i as u32 ^ 0xabcd).to_ne_bytes());
                m.update(&(i << 20).to_ne_bytes(), &v).unwrap();
            }
            let mut batched = m.batched().expect("this kernel reads maps in batches");
            assert_eq!(batched.len(), 3000, "{kind:?}");
            batched.sort();
            let mut by_key: Vec<(Vec<u8>, Vec<Vec<u64>>)> = m
                .keys()
                .into_iter()
                .map(|k| {
                    let v = m.lookup(&k).unwrap();
                    let w = v
                        .iter()
                        .map(|c| {
                            let mut c = c.clone();
                            c.resize(16, 0);
                            vec![
                                u64::from_ne_bytes(c[..8].try_into().unwrap()),
                                u64::from_ne_bytes(c[8..].try_into().unwrap()),
                            ]
                        })
                        .collect();
                    (k, w)
                })
                .collect();
            by_key.sort();
            let mut all = m.entries_per_cpu();
            all.sort();
            assert_eq!(all, by_key, "{kind:?}");
            let (k, v) = &all[1234];
            let i = u64::from_ne_bytes(k[..].try_into().unwrap()) >> 20;
            assert!(v
                .iter()
                .all(|c| c == &vec![i * 7, (i as u32 ^ 0xabcd) as u64]));
        }
    }

    #[test]
    fn cpu_ranges_are_counted() {
        assert!(possible_cpus() >= 1);
    }
}
