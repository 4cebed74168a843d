//! The kernel's BTF (`/sys/kernel/btf/vmlinux`): where a field sits in a kernel structure, so
//! that an eBPF program handed a `struct task_struct *` (a raw tracepoint's argument) can read
//! the task's PID with `bpf_probe_read_kernel` at this kernel's offset, not a guessed one.
//!
//! Only what that needs is read: the type section's records (to step over them) and the
//! members of structs and unions. Format: the kernel's Documentation/bpf/btf.rst.

use std::path::Path;

const MAGIC: u16 = 0xeb9f;

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_TYPE_TAG: u32 = 18;

/// One type record: where it starts in the type section, its kind, name, vlen and `type`/`size`.
#[derive(Debug, Clone, Copy)]
struct Type {
    at: usize,
    kind: u32,
    name: u32,
    vlen: u32,
    kflag: bool,
    size_or_type: u32,
}

pub struct Btf {
    types: Vec<u8>,
    strings: Vec<u8>,
    /// By id; id 0 is `void`.
    index: Vec<Type>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl Btf {
    /// This kernel's BTF.
    pub fn kernel() -> Result<Btf, crate::KernelError> {
        Btf::load(Path::new("/sys/kernel/btf/vmlinux"))
    }

    pub fn load(path: &Path) -> Result<Btf, crate::KernelError> {
        let data = std::fs::read(path)
            .map_err(|e| crate::KernelError::io(format!("{}", path.display()), e))?;
        Btf::parse(&data).map_err(|e| crate::KernelError::new(format!("{}: {e}", path.display())))
    }

    /// Read BTF data (little-endian, as on the hosts plumb runs on).
    pub fn parse(data: &[u8]) -> Result<Btf, crate::KernelError> {
        let bad = |what: &str| crate::KernelError::new(format!("not BTF data I can read: {what}"));
        if u16_at(data, 0) != Some(MAGIC) {
            return Err(bad("wrong magic"));
        }
        let h = |at| u32_at(data, at).ok_or_else(|| bad("header cut short"));
        let (hdr_len, type_off, type_len, str_off, str_len) = (
            h(4)? as usize,
            h(8)? as usize,
            h(12)? as usize,
            h(16)? as usize,
            h(20)? as usize,
        );
        let section = |off: usize, len: usize| {
            let start = hdr_len.checked_add(off)?;
            data.get(start..start.checked_add(len)?)
        };
        let types = section(type_off, type_len)
            .ok_or_else(|| bad("type section out of bounds"))?
            .to_vec();
        let strings = section(str_off, str_len)
            .ok_or_else(|| bad("string section out of bounds"))?
            .to_vec();
        let mut index = vec![Type {
            at: 0,
            kind: 0,
            name: 0,
            vlen: 0,
            kflag: false,
            size_or_type: 0,
        }];
        let mut at = 0usize;
        while at < types.len() {
            let (name, info, st) = match (
                u32_at(&types, at),
                u32_at(&types, at + 4),
                u32_at(&types, at + 8),
            ) {
                (Some(a), Some(b), Some(c)) => (a, b, c),
                _ => return Err(bad("type record cut short")),
            };
            let kind = (info >> 24) & 0x1f;
            let vlen = info & 0xffff;
            let extra = match kind {
                1 | 14 | 17 => 4,                      // int, var, decl_tag
                2 | 7..=12 | 16 | 18 => 0,             // ptr, fwd, typedef…func, float, type_tag
                3 => 12,                               // array
                4 | 5 | 15 | 19 => 12 * vlen as usize, // struct, union, datasec, enum64
                6 | 13 => 8 * vlen as usize,           // enum, func_proto
                k => return Err(bad(&format!("unknown kind {k}"))),
            };
            index.push(Type {
                at,
                kind,
                name,
                vlen,
                kflag: info >> 31 == 1,
                size_or_type: st,
            });
            at += 12 + extra;
        }
        if at != types.len() {
            return Err(bad("type section cut short"));
        }
        Ok(Btf {
            types,
            strings,
            index,
        })
    }

    fn name(&self, off: u32) -> &str {
        let s = self.strings.get(off as usize..).unwrap_or_default();
        let end = s.iter().position(|b| *b == 0).unwrap_or(s.len());
        std::str::from_utf8(&s[..end]).unwrap_or("")
    }

    /// Through typedefs and qualifiers to the type itself.
    fn resolve(&self, mut id: u32) -> Option<Type> {
        for _ in 0..32 {
            let t = *self.index.get(id as usize)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type
                }
                _ => return Some(t),
            }
        }
        None
    }

    /// A member of a struct or union by name, looking inside anonymous members too: its bit
    /// offset and type id.
    fn member(&self, t: Type, name: &str, depth: u32) -> Option<(u32, u32)> {
        if !matches!(t.kind, KIND_STRUCT | KIND_UNION) || depth > 8 {
            return None;
        }
        for i in 0..t.vlen as usize {
            let at = t.at + 12 + 12 * i;
            let (m_name, m_type, m_off) = (
                u32_at(&self.types, at)?,
                u32_at(&self.types, at + 4)?,
                u32_at(&self.types, at + 8)?,
            );
            let bits = if t.kflag { m_off & 0xff_ffff } else { m_off };
            if m_name == 0 {
                if let Some((b, ty)) = self
                    .resolve(m_type)
                    .and_then(|inner| self.member(inner, name, depth + 1))
                {
                    return Some((bits + b, ty));
                }
            } else if self.name(m_name) == name {
                return Some((bits, m_type));
            }
        }
        None
    }

    /// The id of the typedef named `name` (`btf_trace_sched_switch`: what a BTF-typed raw
    /// tracepoint program attaches to).
    pub(crate) fn typedef_id(&self, name: &str) -> Option<u32> {
        self.index
            .iter()
            .position(|t| t.kind == KIND_TYPEDEF && self.name(t.name) == name)
            .map(|i| i as u32)
    }

    /// The byte offset of `path` (`["pid"]`, `["sched_info", "run_delay"]`) in the struct
    /// named `strukt`; None when it has no such member or the member is a bit field.
    pub(crate) fn offset_of(&self, strukt: &str, path: &[&str]) -> Option<u32> {
        let mut t = *self
            .index
            .iter()
            .find(|t| t.kind == KIND_STRUCT && t.vlen > 0 && self.name(t.name) == strukt)?;
        let mut bits = 0u32;
        for (i, field) in path.iter().enumerate() {
            let (b, ty) = self.member(t, field, 0)?;
            bits += b;
            if i + 1 < path.len() {
                t = self.resolve(ty)?;
            }
        }
        bits.is_multiple_of(8).then_some(bits / 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BTF with `struct inner { int a; int b; }` and
    /// `struct outer { long x; union { int y; int z; }; struct inner in; }`.
    fn sample() -> Vec<u8> {
        let strings = b"\0int\0long\0inner\0a\0b\0outer\0x\0y\0z\0in\0outer_t\0".to_vec();
        let s = |name: &str| {
            let pat = format!("\0{name}\0");
            strings
                .windows(pat.len())
                .position(|w| w == pat.as_bytes())
                .unwrap() as u32
                + 1
        };
        let mut t = Vec::new();
        let mut rec = |name: u32, kind: u32, vlen: u32, st: u32, extra: &[u32]| {
            t.extend(name.to_le_bytes());
            t.extend(((kind << 24) | vlen).to_le_bytes());
            t.extend(st.to_le_bytes());
            for x in extra {
                t.extend(x.to_le_bytes());
            }
        };
        rec(s("int"), 1, 0, 4, &[32]); // 1: int
        rec(s("long"), 1, 0, 8, &[64]); // 2: long
        rec(s("inner"), 4, 2, 8, &[s("a"), 1, 0, s("b"), 1, 32]); // 3
        rec(0, 5, 2, 4, &[s("y"), 1, 0, s("z"), 1, 0]); // 4: anonymous union
        rec(
            s("outer"),
            4,
            3,
            24,
            &[s("x"), 2, 0, 0, 4, 64, s("in"), 3, 128],
        ); // 5
        rec(s("outer_t"), 8, 0, 5, &[]); // 6: typedef struct outer outer_t
        let mut out = Vec::new();
        out.extend(MAGIC.to_le_bytes());
        out.extend([1u8, 0]);
        out.extend(24u32.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend((t.len() as u32).to_le_bytes());
        out.extend((t.len() as u32).to_le_bytes());
        out.extend((strings.len() as u32).to_le_bytes());
        out.extend(t);
        out.extend(strings);
        out
    }

    #[test]
    fn offsets_of_members_nested_and_anonymous() {
        let b = Btf::parse(&sample()).unwrap();
        assert_eq!(b.offset_of("outer", &["x"]), Some(0));
        assert_eq!(
            b.offset_of("outer", &["z"]),
            Some(8),
            "inside the anonymous union"
        );
        assert_eq!(b.offset_of("outer", &["in", "b"]), Some(20));
        assert_eq!(b.offset_of("outer", &["nope"]), None);
        assert_eq!(b.offset_of("nope", &["x"]), None);
        assert_eq!(b.typedef_id("outer_t"), Some(6));
        assert_eq!(b.typedef_id("outer"), None, "a struct, not a typedef");
    }

    #[test]
    fn damaged_data_is_an_error_not_a_panic() {
        let d = sample();
        for cut in [0, 3, 10, 30, d.len() - 5] {
            assert!(Btf::parse(&d[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = d.clone();
        bad[24 + 7] = 0x7f; // the first record's kind: unknown
        assert!(Btf::parse(&bad).is_err());
    }

    #[test]
    fn this_kernels_task_struct_has_a_pid() {
        let Ok(b) = Btf::kernel() else {
            crate::test_skip("no /sys/kernel/btf/vmlinux here");
            return;
        };
        let pid = b.offset_of("task_struct", &["pid"]).unwrap();
        let tgid = b.offset_of("task_struct", &["tgid"]).unwrap();
        assert_eq!(tgid, pid + 4, "pid_t pid; pid_t tgid; side by side");
        assert!(b.typedef_id("btf_trace_sched_switch").is_some());
    }
}
