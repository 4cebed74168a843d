//! `plumb load`'s result in words: what ran where, NOPM beside the engine's TPM, each
//! transaction type's counts and latency percentiles, failures by class, the checks.

use crate::fmt::{count, duration, ms, MISSING};
use crate::Render;
use plumb_analyze::load::{LoadReport, Percentiles};
use std::io::{self, Write};

impl Render for LoadReport {
    const KIND: &'static str = "load";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        header(self, out)?;
        writeln!(out)?;
        headline(self, out)?;
        writeln!(out)?;
        types(self, out)?;
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
    let what = match r.workload.as_str() {
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
    };
    writeln!(
        out,
        "plumb load: {what} on {} {}, {}",
        r.engine, r.version, r.target
    )?;
    let loaded = match (r.loaded, r.load_s) {
        (true, Some(s)) => format!("loaded in {}", duration(s)),
        _ => "a kept schema, reused".into(),
    };
    writeln!(
        out,
        "  database {} ({}, {loaded}{}), {} client{}, {}",
        r.database,
        scale(r),
        if r.kept { ", kept" } else { ", dropped after" },
        r.clients,
        plural(r.clients as u64),
        match r.rate_per_s {
            Some(v) => format!("open loop at {} tx/s (Poisson arrivals)", count(v)),
            None => "closed loop (no keying or thinking time)".into(),
        }
    )?;
    writeln!(
        out,
        "  ramp-up {}, timed window {} (ran {})",
        duration(r.rampup_s),
        duration(r.duration_s),
        duration(r.window_s)
    )
}

fn scale(r: &LoadReport) -> String {
    if r.scale_unit == "warehouses" {
        format!("{} warehouse{}", r.scale, plural(r.scale as u64))
    } else if r.scale_unit == "no scale" {
        "one round's rows at most".into()
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
    let or_missing = |v: Option<f64>| v.map(|v| count(v.round())).unwrap_or(MISSING.into());
    if let Some(n) = r.new_orders {
        writeln!(
            out,
            "NOPM  {:>10}  new orders a minute, from the schema (sum of d_next_o_id: {} in the window)",
            or_missing(r.nopm),
            count(n as f64)
        )?;
    }
    writeln!(
        out,
        "TPM   {:>10}  transactions a minute as the engine counts them ({})",
        or_missing(r.tpm),
        r.tpm_source
    )?;
    writeln!(
        out,
        "tps   {:>10}  transactions a second the clients saw end, all types",
        r.tps().map(|v| format!("{v:.1}")).unwrap_or(MISSING.into())
    )?;
    if let Some(lag) = &r.lag {
        writeln!(
            out,
            "lag   {:>10}  p99 of how late transactions started against their schedule; {} started over 1 ms late",
            cell(lag.p99_s),
            count(r.late as f64)
        )?;
    }
    Ok(())
}

fn cell(v: Option<f64>) -> String {
    v.map(ms).unwrap_or_else(|| MISSING.into())
}

fn row(out: &mut dyn Write, name: &str, p: &Percentiles, counts: &str) -> io::Result<()> {
    writeln!(
        out,
        "{name:<14}{counts}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}",
        cell(p.min_s),
        cell(p.p50_s),
        cell(p.p95_s),
        cell(p.p99_s),
        cell(p.p99_9_s),
        cell(p.max_s)
    )
}

fn types(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    let open = r.rate_per_s.is_some();
    writeln!(
        out,
        "{:<14}{:>10}{:>10}{:>8}{:>8}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}",
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
        "max"
    )?;
    for t in &r.types {
        let counts = format!(
            "{:>10}{:>10}{:>8}{:>8}",
            count(t.committed as f64),
            count(t.rolled_back as f64),
            count(t.failures() as f64),
            count(t.retries as f64)
        );
        row(out, &t.name, &t.latency, &counts)?;
        if let Some(s) = &t.service {
            row(out, "  service", s, &" ".repeat(36))?;
        }
    }
    writeln!(
        out,
        "  Latency from {}; a percentile shows only where the count supports it (p95 20, p99 100, p99.9 1,000).",
        if open {
            "the intended start (the schedule), \"service\" from the actual start"
        } else {
            "each transaction's start to its end, as the client saw it"
        }
    )
}

fn failures(r: &LoadReport, out: &mut dyn Write) -> io::Result<()> {
    for t in r.types.iter().filter(|t| t.failures() > 0) {
        let classes: Vec<String> = t.failed.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let codes: Vec<String> = t.codes.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
        writeln!(
            out,
            "failed {}: {} (codes: {})",
            t.name,
            classes.join(", "),
            codes.join(", ")
        )?;
    }
    for l in &r.lost_clients {
        writeln!(out, "a client lost its connection: {l}")?;
    }
    Ok(())
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
