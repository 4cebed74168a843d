//! `plumb load --explain` in words: where each transaction type's time went on the server, per
//! transaction and over its slowest 1%, as a table of the parts the kernel timed, and the one
//! line the first screen gives it (the slowest type's largest part).

use plumb_analyze::explain::{Split, TypeSplit};
use plumb_analyze::load::LoadReport;
use std::io::{self, Write};

/// A part's name in words, as a column heading and in a sentence.
pub(crate) fn part_words(key: &str) -> (&'static str, &'static str) {
    match key {
        "cpu_user" => ("cpu user", "on a CPU in the server's code"),
        "cpu_system" => ("cpu kernel", "on a CPU in the kernel"),
        "run_queue" => ("cpu wait", "waiting for a CPU"),
        "storage_read" => ("read", "reading from storage"),
        "durable_write" => ("durable", "waiting for durable writes"),
        "file_write" => ("write", "writing files"),
        "futex" => (
            "futex",
            "waiting on locks, latches or another server process (futex)",
        ),
        "latch" => ("latch", "waiting on a latch or lock (epoll/poll)"),
        "sleep" => ("sleep", "sleeping"),
        "other" => ("other", "asleep in other calls"),
        "client" => ("client", "the client's, between statements"),
        _ => ("?", "unknown"),
    }
}

fn ms(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 0.01 {
        "<0.01".into()
    } else {
        format!("{v:.2}")
    }
}

/// The parts any row has time in (server parts in the order of the first row's, then the
/// client's): the columns of the table.
fn columns(rows: &[(&str, &Split)]) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = Vec::new();
    for (_, s) in rows {
        for p in &s.parts {
            if p.ms > 0.0 && !keys.contains(&p.part) && p.part != "client" {
                keys.push(p.part);
            }
        }
    }
    keys.push("client");
    keys
}

/// The table's rows: per type, its mean and its slowest 1%.
fn rows(r: &LoadReport) -> Vec<(String, &TypeSplit)> {
    r.types
        .iter()
        .filter_map(|t| t.explained.as_ref().map(|e| (t.name.clone(), e)))
        .collect()
}

/// The table: ms per transaction by part, the server's total, fsyncs and cache flushes per
/// transaction, and how many transactions' parts closed on their wall time.
pub(crate) fn text(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    let types = rows(r);
    if types.is_empty() {
        return Ok(());
    }
    let splits: Vec<(&str, &Split)> = types
        .iter()
        .flat_map(|(_, t)| [("mean", &t.mean), ("slowest", &t.slowest)])
        .collect();
    let keys = columns(&splits);
    writeln!(out)?;
    writeln!(
        out,
        "where the server's time went (--explain: ms per transaction, timed by the kernel on each connection's server process)"
    )?;
    let mut head = vec![
        format!("{:<22}", "type"),
        format!("{:>7}", "txns"),
        format!("{:>8}", "server"),
    ];
    head.extend(keys.iter().map(|k| format!("{:>11}", part_words(k).0)));
    head.extend(["fsyncs", "flushes", "closed"].map(|h| format!("{h:>8}")));
    writeln!(out, "{}", head.concat())?;
    for (name, t) in &types {
        for (label, s) in [(name.clone(), &t.mean), ("  slowest 1%".into(), &t.slowest)] {
            let mut row = vec![
                format!("{label:<22}"),
                format!("{:>7}", crate::fmt::count(s.transactions as f64)),
                format!("{:>8}", ms(s.server_ms)),
            ];
            for k in &keys {
                let v = s.parts.iter().find(|p| p.part == *k).map_or(0.0, |p| p.ms);
                row.push(format!("{:>11}", ms(v)));
            }
            row.push(format!("{:>8.2}", s.syncs));
            row.push(format!("{:>8.2}", s.flushes));
            row.push(if label == *name {
                format!("{:>8}", crate::fmt::pct(100.0 * t.closed))
            } else {
                String::new()
            });
            writeln!(out, "{}", row.concat().trim_end())?;
        }
    }
    writeln!(
        out,
        "  server: the transaction's wall time less the client's part; flushes: cache flushes the server process itself sent to the disk; closed: transactions whose parts add up to their wall time within 5% (the rest is unexplained, never added to a part)."
    )
}

/// The first screen's line: the slowest type (by p99, else the mean) and the largest parts of
/// its slowest 1%'s server time.
pub(crate) fn verdict_line(r: &LoadReport) -> Option<String> {
    let slowest = r
        .types
        .iter()
        .filter(|t| t.explained.is_some())
        .max_by(|a, b| {
            let key = |t: &plumb_analyze::load::TxFigures| {
                t.latency.p99_s.or(t.latency.mean_s).unwrap_or(0.0)
            };
            key(a).total_cmp(&key(b))
        })?;
    let e = slowest.explained.as_ref()?;
    let (what, at) = match slowest.latency.p99_s {
        Some(p) => ("p99", p),
        None => ("mean", slowest.latency.mean_s?),
    };
    let mut parts: Vec<_> = e
        .slowest
        .parts
        .iter()
        .filter(|p| p.share.is_some_and(|s| s >= 0.1))
        .collect();
    parts.truncate(2);
    if parts.is_empty() {
        return None;
    }
    let words: Vec<String> = parts
        .iter()
        .map(|p| {
            let mut w = format!(
                "{} {}",
                crate::fmt::pct(100.0 * p.share.unwrap_or(0.0)),
                part_words(p.part).1
            );
            if p.part == "durable_write" {
                w.push_str(&format!(
                    " ({:.1} fsync and {:.1} cache flush a transaction)",
                    e.slowest.syncs, e.slowest.flushes
                ));
            }
            w
        })
        .collect();
    Some(format!(
        "{} {what} {}: its slowest 1% spent {} ms on the server, {}",
        slowest.name,
        crate::fmt::ms(at),
        ms(e.slowest.server_ms),
        words.join(", ")
    ))
}
