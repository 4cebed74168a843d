//! The kernel's trace ring buffer as it is, page by page (`per_cpu/cpuN/trace_pipe_raw`):
//! binary records read without the kernel printing each one as text first, which is most of
//! what reading a busy trace through `trace_pipe` costs (its `vsnprintf` alone was a fifth of
//! plumb's CPU time reading block events).
//!
//! A page is a header (its first event's timestamp, 8 bytes; the bytes it holds, 8 bytes with
//! flags in the high bits) and then events, each a 32-bit header (5 bits of type or length in
//! words, 27 bits of time since the previous event) before its record; long records carry
//! their length in the next word; time extensions and absolute stamps are events of their own;
//! padding ends a page (`events/header_page`, `events/header_event`).

/// One record: its time on the trace clock (ns) and its bytes (the common fields first:
/// `common_type` at 0, `common_pid` at 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub ts: u64,
    pub data: &'a [u8],
}

impl Record<'_> {
    /// The event's type id (as in its format file's `ID:`).
    pub fn id(&self) -> Option<u16> {
        Some(u16::from_ne_bytes(self.data.get(0..2)?.try_into().ok()?))
    }
    /// The thread that recorded it.
    pub fn pid(&self) -> Option<u32> {
        Some(u32::from_ne_bytes(self.data.get(4..8)?.try_into().ok()?))
    }
    pub(crate) fn u32_at(&self, off: usize) -> Option<u32> {
        Some(u32::from_ne_bytes(
            self.data.get(off..off + 4)?.try_into().ok()?,
        ))
    }
    pub(crate) fn u64_at(&self, off: usize) -> Option<u64> {
        Some(u64::from_ne_bytes(
            self.data.get(off..off + 8)?.try_into().ok()?,
        ))
    }
    /// A NUL-terminated character array of `len` bytes.
    pub(crate) fn str_at(&self, off: usize, len: usize) -> Option<&str> {
        let b = self.data.get(off..off + len)?;
        let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
        std::str::from_utf8(&b[..end]).ok()
    }
}

const HEADER: usize = 16;
/// The commit word's flags (events missed before this page, and their count stored).
const COMMIT_FLAGS: u64 = 0xffff_ffff_c000_0000;
const PADDING: u32 = 29;
const TIME_EXTEND: u32 = 30;
const TIME_STAMP: u32 = 31;
const DELTA_BITS: u32 = 27;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The records of one page, in order. A page the kernel could not have written (a length
/// beyond the page, a record cut short) ends where it stops making sense: what came before
/// stands, nothing panics.
pub fn records(page: &[u8]) -> Vec<Record<'_>> {
    let mut out = Vec::new();
    let (Some(ts), Some(commit)) = (
        page.get(0..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes),
        page.get(8..16)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes),
    ) else {
        return out;
    };
    let end = HEADER.saturating_add((commit & !COMMIT_FLAGS) as usize);
    let end = end.min(page.len());
    let mut ts = ts;
    let mut at = HEADER;
    while at + 4 <= end {
        let Some(h) = u32_at(page, at) else { break };
        let (kind, delta) = (h & 0x1f, (h >> 5) as u64);
        match kind {
            PADDING => {
                // No time: the rest of the page is padding. Else a discarded record, its
                // length after the header (the kernel's reader takes no time from it).
                if delta == 0 {
                    break;
                }
                let Some(len) = u32_at(page, at + 4) else {
                    break;
                };
                at = at.saturating_add(4 + len as usize);
            }
            TIME_EXTEND => {
                let Some(hi) = u32_at(page, at + 4) else {
                    break;
                };
                ts = ts.wrapping_add(((hi as u64) << DELTA_BITS) + delta);
                at += 8;
            }
            TIME_STAMP => {
                let Some(hi) = u32_at(page, at + 4) else {
                    break;
                };
                ts = ((hi as u64) << DELTA_BITS) + delta;
                at += 8;
            }
            0 => {
                // The length word counts itself.
                let Some(len) = u32_at(page, at + 4) else {
                    break;
                };
                let Some(len) = (len as usize).checked_sub(4) else {
                    break;
                };
                let (from, to) = (at + 8, at + 8 + len);
                let Some(data) = page.get(from..to.min(end)).filter(|_| to <= end) else {
                    break;
                };
                ts = ts.wrapping_add(delta);
                out.push(Record { ts, data });
                at = to;
            }
            words => {
                let (from, to) = (at + 4, at + 4 + words as usize * 4);
                let Some(data) = page.get(from..to).filter(|_| to <= end) else {
                    break;
                };
                ts = ts.wrapping_add(delta);
                out.push(Record { ts, data });
                at = to;
            }
        }
    }
    out
}

/// A field's offset and size from an event's format file
/// (`field:unsigned int nr_sector; offset:24; size:4; signed:0;`).
pub fn field(format: &str, name: &str) -> Option<(usize, usize)> {
    format.lines().find_map(|l| {
        let decl = l.trim().strip_prefix("field:")?.split(';').next()?;
        let last = decl.split_whitespace().last()?;
        let fname = last.split('[').next()?;
        if fname != name {
            return None;
        }
        let num = |key: &str| -> Option<usize> {
            l.split(key).nth(1)?.split(';').next()?.trim().parse().ok()
        };
        Some((num("offset:")?, num("size:")?))
    })
}

/// The event's type id from its format file (`ID: 2097`).
pub(crate) fn format_id(format: &str) -> Option<u16> {
    format
        .lines()
        .find_map(|l| l.strip_prefix("ID:").and_then(|v| v.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page as the kernel writes one: header, then events.
    struct Page(Vec<u8>);

    impl Page {
        fn new(ts: u64) -> Page {
            let mut b = ts.to_ne_bytes().to_vec();
            b.extend_from_slice(&0u64.to_ne_bytes());
            Page(b)
        }
        fn word(&mut self, w: u32) -> &mut Self {
            self.0.extend_from_slice(&w.to_ne_bytes());
            self
        }
        fn small(&mut self, delta: u32, data: &[u8]) -> &mut Self {
            assert_eq!(data.len() % 4, 0);
            self.word(delta << 5 | (data.len() / 4) as u32);
            self.0.extend_from_slice(data);
            self
        }
        fn long(&mut self, delta: u32, data: &[u8]) -> &mut Self {
            self.word(delta << 5).word(data.len() as u32 + 4);
            self.0.extend_from_slice(data);
            self
        }
        fn done(&mut self, flags: u64) -> Vec<u8> {
            let n = (self.0.len() - HEADER) as u64;
            self.0[8..16].copy_from_slice(&(n | flags).to_ne_bytes());
            let mut p = self.0.clone();
            p.resize(4096, 0);
            p
        }
    }

    fn rec(id: u16, pid: u32, extra: &[u8]) -> Vec<u8> {
        let mut r = id.to_ne_bytes().to_vec();
        r.extend_from_slice(&[0, 0]);
        r.extend_from_slice(&pid.to_ne_bytes());
        r.extend_from_slice(extra);
        r
    }

    #[test]
    fn records_come_with_their_times_through_extends_and_padding() {
        let big = rec(7, 42, &[9u8; 120]);
        let page = Page::new(1_000)
            .small(5, &rec(1, 100, &[]))
            .long(10, &big)
            // A time extension: 3 << 27 ns and 2 more.
            .word(2 << 5 | TIME_EXTEND)
            .word(3)
            .small(1, &rec(2, 101, &7u32.to_ne_bytes()))
            // A discarded record (padding with a time): 8 bytes after its header.
            .word(4 << 5 | PADDING)
            .word(8)
            .word(0)
            .small(6, &rec(3, 102, &[]))
            .done(1 << 31);
        let r = records(&page);
        assert_eq!(r.len(), 4);
        assert_eq!(
            (r[0].ts, r[0].id(), r[0].pid()),
            (1_005, Some(1), Some(100))
        );
        assert_eq!((r[1].ts, r[1].id(), r[1].data.len()), (1_015, Some(7), 128));
        let t2 = 1_015 + (3u64 << 27) + 2 + 1;
        assert_eq!((r[2].ts, r[2].u32_at(8)), (t2, Some(7)));
        assert_eq!((r[3].ts, r[3].pid()), (t2 + 6, Some(102)));
    }

    #[test]
    fn padding_without_time_ends_the_page_and_nonsense_stops_the_walk() {
        let page = Page::new(0)
            .small(1, &rec(1, 1, &[]))
            .word(PADDING)
            .small(1, &rec(2, 2, &[]))
            .done(0);
        assert_eq!(records(&page).len(), 1);
        // A long record claiming more bytes than the page holds.
        let page = Page::new(0)
            .small(1, &rec(1, 1, &[]))
            .word(0)
            .word(100_000)
            .done(0);
        assert_eq!(records(&page).len(), 1);
        // A commit beyond the page, a page shorter than its header: no panic.
        let mut p = Page::new(0).small(1, &rec(1, 1, &[])).done(0);
        p[8..16].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(records(&p).len(), 1);
        assert!(records(&p[..10]).is_empty());
        // Every prefix of a real page decodes without panicking.
        let page = Page::new(5)
            .small(1, &rec(1, 1, b"abcd"))
            .long(2, &rec(2, 2, &[1; 64]))
            .done(0);
        for n in 0..page.len().min(200) {
            let _ = records(&page[..n]);
        }
    }

    #[test]
    fn fields_and_ids_come_from_format_files() {
        let f = "name: block_bio_queue\nID: 2097\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:char rwbs[10];\toffset:28;\tsize:10;\tsigned:0;\n";
        assert_eq!(format_id(f), Some(2097));
        assert_eq!(field(f, "dev"), Some((8, 4)));
        assert_eq!(field(f, "sector"), Some((16, 8)));
        assert_eq!(field(f, "rwbs"), Some((28, 10)));
        assert_eq!(field(f, "comm"), None);
        let r = Record {
            ts: 0,
            data: b"\x01\x00\x00\x00\x02\x00\x00\x00WS\0\0",
        };
        assert_eq!(r.str_at(8, 4), Some("WS"));
        assert_eq!(r.str_at(8, 40), None);
    }
}
