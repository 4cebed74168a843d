//! `plumb load`'s result in words: what ran where, NOPM beside the engine's TPM, each
//! transaction type's counts and latency percentiles, failures by class, the checks.

use crate::fmt::{count, duration, ms, MISSING};
use crate::html::Html;
use crate::record_render::{charts_html, page, Run};
use crate::Render;
use plumb_analyze::load::{LoadReport, Percentiles};
use std::io::{self, Write};

/// `plumb load`'s result with its verdict (text opens on the block; JSON's top-level
/// `verdict`).
pub fn output(r: &LoadReport) -> crate::verdict_render::Verdicted<'_, LoadReport> {
    crate::verdict_render::Verdicted {
        report: r,
        verdict: plumb_analyze::load_verdict::load(r),
        block: block(r),
    }
}

/// The load's verdict block: its window's trust (watched where the server is on this host),
/// the figures, what needs action.
pub fn block(r: &LoadReport) -> crate::verdict_render::Block {
    use crate::verdict_render::{figure_lines, Line, Mark};
    use plumb_analyze::lab::Severity;
    let v = plumb_analyze::load_verdict::load(r);
    let plain = |text: String| Line {
        text,
        mark: Mark::Plain,
    };
    let mut figures = figure_lines(&v);
    if let Some(n) = v.headline.iter().find(|h| h.code == "nopm") {
        figures.push(plain(format!(
            "{}: {} new orders a minute (NOPM), {} transactions a minute (TPM, {})",
            n.of,
            count(n.value.round()),
            r.tpm
                .map(|t| count(t.round()))
                .unwrap_or_else(|| MISSING.into()),
            r.tpm_source
        )));
    }
    if let Some(l) = crate::explain_render::verdict_line(r) {
        figures.push(plain(l));
    }
    let done: u64 = r.types.iter().map(|t| t.committed + t.rolled_back).sum();
    let actions: Vec<Line> = v
        .actions
        .iter()
        .map(|a| {
            let text = match a.rule.as_str() {
                "load-interrupted" => "interrupted: the window was cut short, the figures cover what ran".to_string(),
                "load-lost-clients" => format!(
                    "{} client(s) lost their connection: {}",
                    r.lost_clients.len(),
                    r.lost_clients.join("; ")
                ),
                "load-check-broken" => format!(
                    "{} of {} consistency conditions broken (listed below)",
                    r.checks.iter().filter(|c| c.violations != 0).count(),
                    r.checks.len()
                ),
                "load-failed" => format!(
                    "{} transactions failed ({} of those that ended; by type and error below)",
                    count(r.failures() as f64),
                    crate::fmt::pct(100.0 * r.failures() as f64 / (done + r.failures()).max(1) as f64)
                ),
                "load-nothing-committed" => format!(
                    "not one transaction committed: all {} failed{}; these figures are not a result",
                    count(r.failures() as f64),
                    if r.types.iter().any(|t| t.codes.contains_key("rows")) {
                        ", their reads finding no row (an emptied schema, or a server that answers nothing)"
                    } else {
                        " (by type and error below)"
                    }
                ),
                "load-late" => format!(
                    "the open loop fell behind: {} transactions started over 1 ms late (of {}); the rate asked for is more than the clients could start",
                    count(r.late as f64),
                    count(done as f64)
                ),
                other => other.to_string(),
            };
            let sev = if a.severity == Severity::Critical { "critical" } else { "warn" };
            Line {
                text: format!("[{sev}] {text}"),
                mark: if a.severity == Severity::Critical { Mark::Crit } else { Mark::Warn },
            }
        })
        .collect();
    crate::verdict_render::Block {
        rows: vec![
            (
                "trust",
                if r.interference.is_some() {
                    crate::verdict_render::trust_lines(&v, "windows")
                } else {
                    vec![plain(
                        "not watched: the server is not on this host, so its neighbours could not be measured; read the figures knowing that".into(),
                    )]
                },
            ),
            ("figures", figures),
            (
                "needs action",
                if actions.is_empty() {
                    vec![plain(
                        "none: no transaction failed, no client was lost".into(),
                    )]
                } else {
                    actions
                },
            ),
        ],
    }
}

impl Render for LoadReport {
    const KIND: &'static str = "load";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        header(self, out)?;
        writeln!(out)?;
        headline(self, out)?;
        writeln!(out)?;
        types(self, out)?;
        crate::explain_render::text(self, out)?;
        failures(self, out)?;
        checks(self, out)?;
        if let Some(f) = &self.recording {
            writeln!(out)?;
            writeln!(
                out,
                "recording: {f} (the host, the server and the workload each second; `plumb report {f}` draws it)"
            )?;
        }
        Ok(())
    }
}

fn header(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    for (i, l) in header_lines(r).iter().enumerate() {
        writeln!(out, "{}{l}", if i > 0 { "  " } else { "" })?;
    }
    Ok(())
}

/// What ran, where, and how: the first line names the workload and the server.
/// The workload in words: "tpcb (pgbench's TPC-B-like transaction)".
pub(crate) fn what(r: &LoadReport) -> &str {
    match r.workload.as_str() {
        "order-entry" => "order-entry (TPC-C-like, not a TPC result)",
        "tpcb" => "tpcb (pgbench's TPC-B-like transaction)",
        "point-select" => "point-select (pgbench -S's select)",
        "insert-single" => {
            "insert-single (the insert/CHECKPOINT loops: 100 single-row commits, then a checkpoint)"
        }
        "insert-bulk" => {
            "insert-bulk (the insert/CHECKPOINT loops: 10,000 inserts in one transaction, then a checkpoint)"
        }
        w => w,
    }
}

pub(crate) fn header_lines(r: &LoadReport) -> Vec<String> {
    let what = what(r);
    let loaded = match (r.loaded, r.load_s) {
        (true, Some(s)) => format!("loaded in {}", duration(s)),
        _ => "a kept schema, reused".into(),
    };
    vec![
        format!(
            "plumb load: {what} on {} {}, {}",
            r.engine, r.version, r.target
        ),
        format!(
            "database {} ({}, {loaded}{}), {} client{}, {}",
            r.database,
            scale(r),
            if r.kept { ", kept" } else { ", dropped after" },
            r.clients,
            plural(r.clients as u64),
            match r.rate_per_s {
                Some(v) => format!("open loop at {} tx/s (Poisson arrivals)", count(v)),
                None => "closed loop (no keying or thinking time)".into(),
            }
        ),
        format!(
            "ramp-up {}, timed window {} (ran {})",
            duration(r.rampup_s),
            duration(r.duration_s),
            duration(r.window_s)
        ),
    ]
}

fn scale(r: &LoadReport) -> String {
    if r.scale_unit == "warehouses" {
        format!("{} warehouse{}", r.scale, plural(r.scale as u64))
    } else if r.scale_unit == "no scale" {
        "one round's rows at most".into()
    } else if r.scale_unit == "rows" {
        format!(
            "scale {}: {} rows",
            r.scale,
            crate::fmt::count(r.scale as f64 * 100_000.0)
        )
    } else {
        format!("{} {}", r.scale_unit, r.scale)
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn headline(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    for (label, value, meaning) in headline_rows(r) {
        writeln!(out, "{label:<5} {value:>10}  {meaning}")?;
    }
    Ok(())
}

/// The run's figures: (label, value, what it is).
pub(crate) fn headline_rows(r: &LoadReport) -> Vec<(&'static str, String, String)> {
    let or_missing = |v: Option<f64>| v.map(|v| count(v.round())).unwrap_or(MISSING.into());
    let mut rows = Vec::new();
    if let Some(n) = r.new_orders {
        rows.push((
            "NOPM",
            or_missing(r.nopm),
            format!(
                "new orders a minute, from the schema (sum of d_next_o_id: {} in the window)",
                count(n as f64)
            ),
        ));
    }
    rows.push((
        "TPM",
        or_missing(r.tpm),
        format!(
            "transactions a minute as the engine counts them ({})",
            r.tpm_source
        ),
    ));
    rows.push((
        "tps",
        r.tps().map(|v| format!("{v:.1}")).unwrap_or(MISSING.into()),
        "transactions a second the clients saw end, all types".into(),
    ));
    if let Some(lag) = &r.lag {
        rows.push((
            "lag",
            cell(lag.p99_s),
            format!(
                "p99 of how late transactions started against their schedule; {} started over 1 ms late",
                count(r.late as f64)
            ),
        ));
    }
    rows
}

fn cell(v: Option<f64>) -> String {
    v.map(ms).unwrap_or_else(|| MISSING.into())
}

pub(crate) const TYPE_COLUMNS: [&str; 11] = [
    "transaction",
    "committed",
    "rolled bk",
    "failed",
    "retries",
    "min",
    "p50",
    "p95",
    "p99",
    "p99.9",
    "max",
];

/// One row per transaction type (and its service time, open loop), cells as `TYPE_COLUMNS`.
pub(crate) fn type_rows(r: &LoadReport) -> Vec<Vec<String>> {
    let pct = |p: &Percentiles| {
        [p.min_s, p.p50_s, p.p95_s, p.p99_s, p.p99_9_s, p.max_s]
            .into_iter()
            .map(cell)
            .collect::<Vec<_>>()
    };
    let mut rows = Vec::new();
    for t in &r.types {
        let mut row = vec![
            t.name.clone(),
            count(t.committed as f64),
            count(t.rolled_back as f64),
            count(t.failures() as f64),
            count(t.retries as f64),
        ];
        row.extend(pct(&t.latency));
        rows.push(row);
        if let Some(s) = &t.service {
            let mut row = vec!["  service".to_string()];
            row.extend(std::iter::repeat_n(String::new(), 4));
            row.extend(pct(s));
            rows.push(row);
        }
    }
    rows
}

pub(crate) fn latency_note(r: &LoadReport) -> String {
    format!(
        "Latency from {}; a percentile shows only where the count supports it (p95 20, p99 100, p99.9 1,000).",
        if r.rate_per_s.is_some() {
            "the intended start (the schedule), \"service\" from the actual start"
        } else {
            "each transaction's start to its end, as the client saw it"
        }
    )
}

fn types(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    let widths = [14usize, 10, 10, 8, 8, 9, 9, 9, 9, 9, 9];
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<String>()
    };
    let head: Vec<String> = TYPE_COLUMNS.iter().map(|s| s.to_string()).collect();
    writeln!(out, "{}", line(&head))?;
    for row in type_rows(r) {
        writeln!(out, "{}", line(&row).trim_end())?;
    }
    writeln!(out, "  {}", latency_note(r))
}

fn failures(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    for line in failure_lines(r) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Each type's failures by class and code, and each client that lost its connection.
pub(crate) fn failure_lines(r: &LoadReport) -> Vec<String> {
    let mut v = Vec::new();
    for t in r.types.iter().filter(|t| t.failures() > 0) {
        let classes: Vec<String> = t.failed.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let codes: Vec<String> = t.codes.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
        v.push(format!(
            "failed {}: {} (codes: {})",
            t.name,
            classes.join(", "),
            codes.join(", ")
        ));
    }
    for l in &r.lost_clients {
        v.push(format!("a client lost its connection: {l}"));
    }
    v
}

fn checks(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    if r.checks.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    let held = r.checks.iter().filter(|c| c.violations == 0).count();
    writeln!(
        out,
        "consistency: {held} of {} conditions hold",
        r.checks.len()
    )?;
    for c in &r.checks {
        let v = if c.violations == 0 {
            "holds".to_string()
        } else {
            format!("BROKEN ({} rows)", count(c.violations as f64))
        };
        writeln!(out, "  {:<72} {v}", c.condition)?;
    }
    Ok(())
}

/// `plumb load --out DIR`'s index.html: what ran, the figures, each type's table, failures and
/// checks, then the recording's charts (the workload beside the host and the engine).
/// load.json, summary.txt and index.html (with the recording's charts) into `out`, each a new
/// file (never over one).
pub fn write_dir(
    r: &LoadReport,
    out: &std::path::Path,
    rec: Option<&plumb_store::Recording>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let w = |name: &str, body: Vec<u8>| crate::out::write_new("--out", &out.join(name), &body);
    let o = output(r);
    let mut json = Vec::new();
    crate::emit(&o, crate::Format::Json, &mut json)?;
    w("load.json", json)?;
    let mut text = Vec::new();
    crate::emit(&o, crate::Format::Text, &mut text)?;
    w("summary.txt", text)?;
    w("index.html", html(r, rec).into_bytes())?;
    Ok(())
}

pub fn html(r: &LoadReport, rec: Option<&plumb_store::Recording>) -> String {
    let mut h = Html::new();
    let lines = header_lines(r);
    h.el("h1", &[], "plumb load");
    h.el("p", &[], lines[0].trim_start_matches("plumb load: "));
    crate::verdict_render::html(&block(r), &mut h);
    h.list(&lines[1..]);
    h.el("h2", &[("id", "figures")], "Figures");
    h.with("table", &[], |h| {
        for (label, value, meaning) in headline_rows(r) {
            h.with("tr", &[], |h| {
                h.el("th", &[], label)
                    .el("td", &[("class", "n")], &value)
                    .el("td", &[], &meaning);
            });
        }
    });
    h.el("h2", &[("id", "types")], "Transactions");
    h.with("table", &[], |h| {
        h.with("tr", &[], |h| {
            for c in TYPE_COLUMNS {
                h.el("th", &[], c);
            }
        });
        for row in type_rows(r) {
            h.with("tr", &[], |h| {
                for (i, c) in row.iter().enumerate() {
                    let class: &[(&str, &str)] = if i > 0 { &[("class", "n")] } else { &[] };
                    h.el("td", class, c.trim_start());
                }
            });
        }
    });
    h.el("p", &[("class", "sub")], &latency_note(r));
    crate::explain_render::html(r, &mut h);
    let mut problems = Vec::new();
    let _ = failures(r, &mut problems);
    let problems = String::from_utf8_lossy(&problems).to_string();
    if !problems.is_empty() {
        h.el("h2", &[("id", "failures")], "Failures");
        let lines: Vec<String> = problems.lines().map(str::to_string).collect();
        h.list(&lines);
    }
    if !r.checks.is_empty() {
        let held = r.checks.iter().filter(|c| c.violations == 0).count();
        h.el(
            "h2",
            &[("id", "checks")],
            &format!("Consistency: {held} of {} conditions hold", r.checks.len()),
        );
        let lines: Vec<String> = r
            .checks
            .iter()
            .map(|c| {
                if c.violations == 0 {
                    format!("{}: holds", c.condition)
                } else {
                    format!(
                        "{}: BROKEN ({} rows)",
                        c.condition,
                        count(c.violations as f64)
                    )
                }
            })
            .collect();
        h.list(&lines);
    }
    if let Some(rec) = rec {
        let run = Run::new(rec, "load".into());
        h.el("h2", &[("id", "recording")], "Recording");
        h.el(
            "p",
            &[("class", "sub")],
            "Every second of the run: the workload's transactions and p95 per type, the host, the server's processes and the engine's counters of the load's database; the marks are the load, the ramp-up and the timed window.",
        );
        h.raw(&charts_html(std::slice::from_ref(&run)));
    }
    page("plumb load", &h.finish())
}
