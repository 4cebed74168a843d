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
        "others_durable" => (
            "others' durable",
            "waiting for another server process's durable write (group commit)",
        ),
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

/// The table's heading and rows (cells, unpadded): ms per transaction by part, the server's
/// total, fsyncs and cache flushes per transaction, and how many transactions' parts closed on
/// their wall time. None when no type was taken apart.
pub(crate) fn table(r: &LoadReport) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    let types = rows(r);
    if types.is_empty() {
        return None;
    }
    let splits: Vec<(&str, &Split)> = types
        .iter()
        .flat_map(|(_, t)| [("mean", &t.mean), ("slowest", &t.slowest)])
        .collect();
    let keys = columns(&splits);
    let mut head: Vec<&'static str> = vec!["type", "txns", "server"];
    head.extend(keys.iter().map(|k| part_words(k).0));
    head.extend(["fsyncs", "flushes", "closed"]);
    let mut out = Vec::new();
    for (name, t) in &types {
        for (label, s, first) in [
            (name.clone(), &t.mean, true),
            ("  slowest 1%".into(), &t.slowest, false),
        ] {
            let mut row = vec![
                label,
                crate::fmt::count(s.transactions as f64),
                ms(s.server_ms),
            ];
            for k in &keys {
                let v = s.parts.iter().find(|p| p.part == *k).map_or(0.0, |p| p.ms);
                row.push(ms(v));
            }
            row.push(format!("{:.2}", s.syncs));
            row.push(format!("{:.2}", s.flushes));
            row.push(if first {
                crate::fmt::pct(100.0 * t.closed)
            } else {
                String::new()
            });
            out.push(row);
        }
    }
    Some((head, out))
}

pub(crate) const TITLE: &str = "where the server's time went (--explain: ms per transaction, timed by the kernel on each connection's server process)";
pub(crate) const NOTE: &str = "server: the transaction's wall time less the client's part; flushes: cache flushes the server process itself sent to the disk; closed: transactions whose parts add up to their wall time within 5% (the rest is unexplained, never added to a part).";

/// The engine's view, a line a type: its top wait events and lock holders by share of the
/// samples, or that it was not sampled.
pub(crate) fn engine_lines(r: &LoadReport) -> Vec<String> {
    let mut out = Vec::new();
    for (name, t) in rows(r) {
        let Some(v) = &t.engine else { continue };
        if v.samples == 0 {
            out.push(if !v.source.starts_with("not ") {
                format!("{name}: no read fell inside one of its transactions (shorter than a read)")
            } else {
                format!("{name}: {}", v.source)
            });
            continue;
        }
        let top = |s: &[plumb_analyze::explain::Share], n: usize| -> String {
            s.iter()
                .take(n)
                .map(|x| format!("{} {}", crate::fmt::pct(100.0 * x.share), x.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut l = format!(
            "{name}: {} samples: {}",
            crate::fmt::count(v.samples as f64),
            top(&v.events, 4)
        );
        if !v.holders.is_empty() {
            l.push_str(&format!(
                "; the locks waited for were held by {}",
                top(&v.holders, 3)
            ));
        }
        if !v.checks.is_empty() {
            let each: Vec<String> = v
                .checks
                .iter()
                .map(|c| {
                    format!(
                        "{} {} of the samples, {} of the time ({}){}",
                        c.wait,
                        crate::fmt::pct(100.0 * c.engine_share),
                        crate::fmt::pct(100.0 * c.kernel_share),
                        c.parts
                            .iter()
                            .map(|p| part_words(p).0)
                            .collect::<Vec<_>>()
                            .join(" + "),
                        if c.agree { "" } else { ": they disagree" }
                    )
                })
                .collect();
            l.push_str(&format!("; beside the kernel: {}", each.join(", ")));
        }
        out.push(l);
    }
    out
}

/// The engine's view's heading.
pub(crate) fn engine_title(r: &LoadReport) -> Option<String> {
    let v = rows(r).into_iter().find_map(|(_, t)| t.engine.clone())?;
    Some(if v.samples > 0 || !v.source.starts_with("not ") {
        format!("the engine's view ({}, over the ramp-up and the window; a share of the samples of its sessions in a transaction of the type):", v.source)
    } else {
        "the engine's view:".to_string()
    })
}

/// The table in text.
pub(crate) fn text(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    let Some((head, rows)) = table(r) else {
        return Ok(());
    };
    let width = |i: usize| match i {
        0 => 22,
        1 => 7,
        2 => 8,
        i if i + 3 >= head.len() => 8,
        _ => 11,
    };
    let line = |cells: &[String]| -> String {
        let s: String = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = width(i);
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        s.trim_end().to_string()
    };
    writeln!(out)?;
    writeln!(out, "{TITLE}")?;
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    writeln!(out, "{}", line(&head))?;
    for row in &rows {
        writeln!(out, "{}", line(row))?;
    }
    writeln!(out, "  {NOTE}")?;
    if let Some(title) = engine_title(r) {
        writeln!(out, "{title}")?;
        for l in engine_lines(r) {
            writeln!(out, "  {l}")?;
        }
    }
    Ok(())
}

/// A part's colour in the chart.
fn colour(key: &str) -> &'static str {
    match key {
        "cpu_user" => "#4e79a7",
        "cpu_system" => "#a0cbe8",
        "run_queue" => "#f28e2b",
        "storage_read" => "#59a14f",
        "durable_write" => "#e15759",
        "others_durable" => "#b6464a",
        "file_write" => "#ff9d9a",
        "futex" => "#b07aa1",
        "latch" => "#d4a6c8",
        "sleep" => "#9c755f",
        "other" => "#bab0ac",
        _ => "#e8e8e8",
    }
}

/// Each type's mean and slowest 1% as bars of 100%: the parts' shares of the wall time, the
/// client's last (pale), the unexplained rest white; the wall time at each bar's end.
fn chart(r: &LoadReport) -> Option<String> {
    use std::fmt::Write as _;
    let types = rows(r);
    if types.is_empty() {
        return None;
    }
    let bars: Vec<(String, &Split)> = types
        .iter()
        .flat_map(|(n, t)| {
            [
                (n.clone(), &t.mean),
                (format!("{n}, slowest 1%"), &t.slowest),
            ]
        })
        .collect();
    let splits: Vec<(&str, &Split)> = bars.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    let keys = columns(&splits);
    let (left, bar_w, row_h) = (190.0, 560.0, 28.0);
    let legend_y = 16.0 + row_h * bars.len() as f64 + 14.0;
    let per_line = 4;
    let legend_rows = (keys.len() + 1).div_ceil(per_line);
    let (w, h) = (880.0, legend_y + 20.0 * legend_rows as f64 + 8.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12" role="img" aria-label="where each transaction type's time went"><rect width="100%" height="100%" fill="#fff"/>"##
    );
    for (i, (label, sp)) in bars.iter().enumerate() {
        let y = 16.0 + row_h * i as f64;
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{}</text>"##,
            left - 8.0,
            y + 14.0,
            crate::html::escape(label)
        );
        let mut x = left;
        let wall = sp.wall_ms.max(f64::MIN_POSITIVE);
        for k in &keys {
            let Some(p) = sp.parts.iter().find(|p| p.part == *k) else {
                continue;
            };
            let bw = bar_w * p.ms / wall;
            if bw <= 0.0 {
                continue;
            }
            let share = p
                .share
                .map(|v| format!(", {} of the server's time", crate::fmt::pct(100.0 * v)))
                .unwrap_or_default();
            let _ = write!(
                s,
                r##"<rect x="{x:.1}" y="{y}" width="{bw:.1}" height="20" fill="{}"><title>{}: {} ms{share}</title></rect>"##,
                colour(k),
                part_words(k).0,
                ms(p.ms)
            );
            x += bw;
        }
        if x < left + bar_w - 0.5 {
            let _ = write!(
                s,
                r##"<rect x="{x:.1}" y="{y}" width="{:.1}" height="20" fill="#fff" stroke="#999"><title>unexplained: {} ms</title></rect>"##,
                left + bar_w - x,
                ms(sp.unexplained_ms)
            );
        }
        let _ = write!(
            s,
            r##"<text x="{}" y="{}">{} ms</text>"##,
            left + bar_w + 8.0,
            y + 14.0,
            ms(sp.wall_ms)
        );
    }
    let mut items: Vec<(&str, &str)> = keys.iter().map(|k| (part_words(k).0, colour(k))).collect();
    items.push(("unexplained", "#fff"));
    for (i, (name, fill)) in items.iter().enumerate() {
        let x = left + 150.0 * (i % per_line) as f64;
        let y = legend_y + 20.0 * (i / per_line) as f64;
        let _ = write!(
            s,
            r##"<rect x="{x}" y="{}" width="12" height="12" fill="{fill}" stroke="#999"/><text x="{}" y="{}">{name}</text>"##,
            y - 10.0,
            x + 16.0,
            y
        );
    }
    s.push_str("</svg>");
    Some(s)
}

/// The section of the `--out` page: the chart, then the table.
pub(crate) fn html(r: &LoadReport, h: &mut crate::html::Html) {
    let (Some(svg), Some((head, rows))) = (chart(r), table(r)) else {
        return;
    };
    h.el("h2", &[("id", "explain")], "Where the server's time went");
    h.el(
        "p",
        &[("class", "sub")],
        "Each transaction type's wall time by part, per transaction (mean) and over its slowest 1% (what its p99 is made of), timed by the kernel on each connection's server process (--explain).",
    );
    h.raw(&svg);
    h.with("table", &[], |h| {
        h.with("tr", &[], |h| {
            for c in &head {
                h.el("th", &[], c);
            }
        });
        for row in &rows {
            h.with("tr", &[], |h| {
                for (i, c) in row.iter().enumerate() {
                    let class: &[(&str, &str)] = if i > 0 { &[("class", "n")] } else { &[] };
                    h.el("td", class, c.trim_start());
                }
            });
        }
    });
    h.el("p", &[("class", "sub")], NOTE);
    if let Some(title) = engine_title(r) {
        h.el("p", &[], &title);
        h.list(&engine_lines(r));
    }
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
    let mut line = format!(
        "{} {what} {}: its slowest 1% spent {} ms on the server, {}",
        slowest.name,
        crate::fmt::ms(at),
        ms(e.slowest.server_ms),
        words.join(", ")
    );
    // What the engine named, where it waited on a lock.
    if let Some(v) = &e.engine {
        if let Some(lock) = v
            .events
            .iter()
            .find(|x| x.name.starts_with("Lock:") && x.share >= 0.05)
        {
            line.push_str(&format!(
                "; the engine said {} in {} of its samples",
                lock.name,
                crate::fmt::pct(100.0 * lock.share)
            ));
            if let Some(h) = v.holders.first() {
                line.push_str(&format!(", the lock held by {}", h.name));
            }
        }
    }
    Some(line)
}
