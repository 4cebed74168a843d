//! The one aligned-text table writer: each column as wide as its widest cell, the first column
//! left-aligned (names), the others right-aligned (figures), two spaces between, no trailing
//! blanks. For tables known whole before they are written; rows printed as they come (watch
//! modes, diskspd-compatible output) keep their fixed widths.

use std::io::{self, Write};

pub(crate) fn write_aligned(
    out: &mut dyn Write,
    headers: &[&str],
    rows: &[Vec<String>],
) -> io::Result<()> {
    let n = headers.len();
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut s = String::from(" ");
        for (i, c) in cells.enumerate().take(n) {
            let pad = " ".repeat(w[i] - c.chars().count());
            if i == 0 {
                s.push_str(&format!(" {c}{pad}"));
            } else {
                s.push_str(&format!("  {pad}{c}"));
            }
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", line(&mut headers.iter().copied()))?;
    for r in rows {
        writeln!(out, "{}", line(&mut r.iter().map(String::as_str)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_align_on_their_widest_cell() {
        let mut v = Vec::new();
        super::write_aligned(
            &mut v,
            &["name", "n"],
            &[
                vec!["fdatasync".into(), "1".into()],
                vec!["é".into(), "1,234".into()],
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "  name           n\n  fdatasync      1\n  é          1,234\n"
        );
    }
}
