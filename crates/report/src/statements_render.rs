//! The statements a recording followed, between two points (`plumb report FILE --statements`)
//! and on the report page: the heaviest by time, with calls, mean time, rows and the engine's
//! blocks, the normalized texts listed under the table by number.

use crate::fmt::clock;
use crate::html::Html;
use crate::{Render, Table};
use plumb_analyze::statements::{StatementRow, StatementTable};
use std::io::{self, Write};

/// The table as a result of its own.
#[derive(serde::Serialize)]
#[serde(transparent)]
pub struct Statements(pub StatementTable);

fn num(v: f64) -> String {
    if v >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

const HEADERS: [&str; 9] = [
    "#",
    "time ms",
    "share",
    "calls",
    "mean ms",
    "rows",
    "blocks read",
    "cache hit",
    "statement",
];

fn cells(i: usize, r: &StatementRow) -> Vec<String> {
    vec![
        (i + 1).to_string(),
        num(r.time_ms),
        format!("{:.1}%", r.time_share_pct),
        num(r.calls),
        opt(r.mean_ms, num),
        num(r.rows),
        opt(r.blocks_read, num),
        opt(r.hit_pct, |p| format!("{p:.1}%")),
    ]
}

/// What the table covers, in words.
fn heading(t: &StatementTable) -> String {
    format!(
        "statements from {} to {} of the recording: the {} heaviest by execution time of {} followed",
        clock(t.from_s as u64),
        clock(t.to_s.ceil() as u64),
        t.rows.len(),
        t.followed
    )
}

impl Render for Statements {
    const KIND: &'static str = "statements";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let t = &self.0;
        if t.followed == 0 {
            writeln!(
                out,
                "no statements in this recording (plumb record --engine URL follows them where the server keeps them: pg_stat_statements, performance_schema, query stats)"
            )?;
            return Ok(());
        }
        writeln!(out, "{}", heading(t))?;
        if t.rows.is_empty() {
            writeln!(out, "  none ran in this stretch")?;
            return Ok(());
        }
        let rows: Vec<Vec<String>> = t
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| cells(i, r))
            .collect();
        crate::table::write_aligned(out, &HEADERS[..8], &rows)?;
        writeln!(out)?;
        for (i, r) in t.rows.iter().enumerate() {
            writeln!(out, "  {:>2}  {}  ({})", i + 1, r.text, r.id)?;
        }
        Ok(())
    }

    fn table(&self) -> Option<Table> {
        let headers = [
            "rank",
            "id",
            "time_ms",
            "time_share_pct",
            "calls",
            "mean_ms",
            "rows",
            "blocks_read",
            "blocks_hit",
            "hit_pct",
            "text",
        ]
        .map(String::from)
        .to_vec();
        let o = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
        let rows = self
            .0
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                vec![
                    (i + 1).to_string(),
                    r.id.clone(),
                    r.time_ms.to_string(),
                    r.time_share_pct.to_string(),
                    r.calls.to_string(),
                    o(r.mean_ms),
                    r.rows.to_string(),
                    o(r.blocks_read),
                    o(r.blocks_hit),
                    o(r.hit_pct),
                    r.text.clone(),
                ]
            })
            .collect();
        Some(Table { headers, rows })
    }
}

/// The report page's section: the whole recording's heaviest statements (nothing when it
/// followed none).
pub fn html(label: &str, t: &StatementTable) -> String {
    if t.rows.is_empty() {
        return String::new();
    }
    let mut h = Html::new();
    h.el("h2", &[], &format!("Statements: {label}"));
    h.el(
        "p",
        &[("class", "sub")],
        &format!(
            "{}; any stretch: plumb report FILE --statements --from TIME --to TIME",
            heading(t)
        ),
    );
    h.with("table", &[("class", "statements")], |h| {
        h.with("tr", &[], |h| {
            for c in HEADERS {
                h.el("th", &[], c);
            }
        });
        for (i, r) in t.rows.iter().enumerate() {
            h.with("tr", &[], |h| {
                for c in cells(i, r) {
                    h.el("td", &[], &c);
                }
                h.el("td", &[("class", "stmt"), ("title", &r.id)], &r.text);
            });
        }
    });
    h.finish()
}
