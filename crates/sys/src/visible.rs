//! What a server, a query or a file says is data, not terminal control. Before plumb prints
//! text that came from outside (an error a server sent, an authentication plugin's name, a
//! query, an application name), every control character that would act on the reader's
//! terminal (ESC, BEL, the rest of C0 but line breaks and tabs, DEL, C1) is escaped: `\x1b`,
//! `\u{9b}`. One function ([`lines`]) serves the error printer, the text reports (through
//! [`Writer`]), the progress line and the warnings; HTML escapes its own way.

use std::borrow::Cow;
use std::io::{self, Write};

/// Push `c`, or, for a control character that would act on a terminal, its escape as COPY
/// reads it: `\b`, `\f`, `\v`, else `\xHH` (`\u{HH}` for C1).
pub fn push(c: char, out: &mut String) {
    match c {
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\u{b}' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            out.push_str(&format!("\\x{:02x}", c as u32));
        }
        c if (0x80..0xa0).contains(&(c as u32)) => {
            out.push_str(&format!("\\u{{{:02x}}}", c as u32));
        }
        c => out.push(c),
    }
}

fn harmless(c: char) -> bool {
    c == '\n' || c == '\t' || !(c.is_control())
}

/// Text for a terminal: line breaks and tabs kept, every other control character escaped.
pub fn lines(s: &str) -> Cow<'_, str> {
    if s.chars().all(harmless) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if harmless(c) {
            out.push(c);
        } else {
            push(c, &mut out);
        }
    }
    Cow::Owned(out)
}

/// A writer that passes text on with its control characters escaped as [`lines`] does, byte
/// by byte (a character split across two writes is held until it is whole; bytes that are
/// not UTF-8 pass as they are, the terminal shows them as replacement characters).
pub struct Writer<W: Write> {
    inner: W,
    /// The start of a character the last write ended in the middle of.
    held: Vec<u8>,
}

impl<W: Write> Writer<W> {
    pub fn new(inner: W) -> Writer<W> {
        Writer {
            inner,
            held: Vec::new(),
        }
    }

    fn pass(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match b {
                b'\n' | b'\t' => out.push(b),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0b => out.extend_from_slice(b"\\v"),
                0x0c => out.extend_from_slice(b"\\f"),
                0x00..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                // U+0080..U+009F, C1, is 0xC2 0x80..0x9F in UTF-8.
                0xc2 if i + 1 < bytes.len() && (0x80..0xa0).contains(&bytes[i + 1]) => {
                    out.extend_from_slice(format!("\\u{{{:02x}}}", bytes[i + 1]).as_bytes());
                    i += 1;
                }
                b => out.push(b),
            }
            i += 1;
        }
        self.inner.write_all(&out)
    }
}

impl<W: Write> Write for Writer<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut all = std::mem::take(&mut self.held);
        all.extend_from_slice(buf);
        // A lone 0xC2 at the end may start a C1 character: held for the next write.
        let keep = usize::from(all.last() == Some(&0xc2));
        let (now, later) = all.split_at(all.len() - keep);
        self.pass(now)?;
        self.held = later.to_vec();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let held = std::mem::take(&mut self.held);
        if !held.is_empty() {
            self.inner.write_all(&held)?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for Writer<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A title change, a screen clear, a forged coloured line and a C1 CSI are shown as text;
    /// line breaks, tabs and plain UTF-8 pass.
    #[test]
    fn control_characters_are_shown_never_acted_on() {
        let hostile =
            "FATAL: \u{1b}]0;owned\u{7}\u{1b}[2J\r\u{1b}[32mall good\u{1b}[0m \u{9b}2J é\tx\n";
        let want =
            "FATAL: \\x1b]0;owned\\x07\\x1b[2J\\x0d\\x1b[32mall good\\x1b[0m \\u{9b}2J é\tx\n";
        assert_eq!(lines(hostile), want);
        assert!(matches!(lines("plain é\n"), Cow::Borrowed(_)));
        // The writer gives the same, however the text is cut into writes.
        for cut in 0..hostile.len() {
            let mut w = Writer::new(Vec::new());
            w.write_all(&hostile.as_bytes()[..cut]).unwrap();
            w.write_all(&hostile.as_bytes()[cut..]).unwrap();
            w.flush().unwrap();
            assert_eq!(String::from_utf8_lossy(&w.inner), want, "cut at {cut}");
        }
    }
}
