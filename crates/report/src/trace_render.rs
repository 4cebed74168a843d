//! `plumb trace` as text: the syscall table of everything followed (as `strace -c -f` prints
//! it, with percentiles), faults and scheduling, block requests by process beside each
//! device's total, then each process.

use crate::fmt::{bytes, count, duration, pct, short_time, MISSING};
use crate::table::write_aligned;
use crate::{Render, Table};
use plumb_analyze::trace::{BlockRow, Latency, SchedRow, SyscallRow, TraceReport};
use std::io::{self, Write};

/// Syscalls shown per process (all of them in the first table and in JSON).
const PER_PROCESS: usize = 12;

fn opt_time(v: Option<f64>) -> String {
    v.map(short_time).unwrap_or_else(|| MISSING.to_string())
}

/// When some calls were counted but not timed: how many were timed, and that the times of
/// those rows are estimates.
fn timing_note(out: &mut dyn Write, rows: &[SyscallRow]) -> io::Result<()> {
    let sampled = rows.iter().filter(|r| r.timed > 0 && r.timed < r.calls);
    let (timed, calls) = sampled.fold((0, 0), |(t, c), r| (t + r.timed, c + r.calls));
    if calls == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "  times of the busiest calls are estimates from {} of their {} calls (a syscall is timed at \
         every call while rare,\n  up to 2 a jiffy per CPU, then 1 call in 8); counts are exact; \
         --time-every-call times them all",
        count(timed as f64),
        count(calls as f64)
    )
}

fn syscall_table(out: &mut dyn Write, rows: &[SyscallRow], limit: Option<usize>) -> io::Result<()> {
    let shown = limit.map_or(rows.len(), |l| l.min(rows.len()));
    let mut cells: Vec<Vec<String>> = rows[..shown]
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                pct(r.share * 100.0),
                short_time(r.total_s),
                count(r.calls as f64),
                if r.errors > 0 {
                    count(r.errors as f64)
                } else {
                    String::new()
                },
                short_time(r.mean_s),
                opt_time(r.p50_s),
                opt_time(r.p99_s),
                short_time(r.max_s),
            ]
        })
        .collect();
    if shown < rows.len() {
        let rest = &rows[shown..];
        cells.push(vec![
            format!("({} more)", rest.len()),
            pct(rest.iter().map(|r| r.share).sum::<f64>() * 100.0),
            short_time(rest.iter().map(|r| r.total_s).sum()),
            count(rest.iter().map(|r| r.calls).sum::<u64>() as f64),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
    }
    cells.push(vec![
        "total".into(),
        String::new(),
        short_time(rows.iter().map(|r| r.total_s).sum()),
        count(rows.iter().map(|r| r.calls).sum::<u64>() as f64),
        match rows.iter().map(|r| r.errors).sum::<u64>() {
            0 => String::new(),
            n => count(n as f64),
        },
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ]);
    write_aligned(
        out,
        &[
            "syscall", "% time", "time", "calls", "errors", "mean", "p50", "p99", "max",
        ],
        &cells,
    )
}

fn sched_line(s: &SchedRow) -> String {
    let per_wait = if s.run_delays > 0 {
        format!(
            " ({} per wait)",
            short_time(s.run_delay_s / s.run_delays as f64)
        )
    } else {
        String::new()
    };
    format!(
        "faults {} minor, {} major; switches {} voluntary, {} involuntary; waited for a CPU {} in {} waits{per_wait}",
        count(s.minor_faults as f64),
        count(s.major_faults as f64),
        count(s.voluntary_switches as f64),
        count(s.involuntary_switches as f64),
        short_time(s.run_delay_s),
        count(s.run_delays as f64),
    )
}

fn latency_text(l: &std::collections::BTreeMap<String, Latency>) -> String {
    l.iter()
        .map(|(k, v)| {
            format!(
                "{k} {} (p50 {}, p99 {})",
                count(v.requests as f64),
                opt_time(v.p50_s),
                opt_time(v.p99_s)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn patterns(p: &std::collections::BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = p.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .take(6)
        .map(|(k, n)| format!("{k} {}", count(**n as f64)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn block_lines(
    out: &mut dyn Write,
    b: &BlockRow,
    rows: &[SyscallRow],
    indent: &str,
) -> io::Result<()> {
    let syncs = plumb_analyze::trace::sync_calls(rows);
    let x = &b.bios;
    writeln!(
        out,
        "{indent}bios: {} writes ({}), {} with FUA, {} FLUSH; {} reads ({}); {} discards",
        count(x.writes as f64),
        bytes(x.write_bytes),
        count(x.fua_writes as f64),
        count(x.flushes as f64),
        count(x.reads as f64),
        bytes(x.read_bytes),
        count(x.discards as f64),
    )?;
    if !x.patterns.is_empty() {
        writeln!(
            out,
            "{indent}as blktrace flags them: {}",
            patterns(&x.patterns)
        )?;
    }
    if syncs > 0 && x.writes + x.flushes > 0 {
        let per = |n: u64| n as f64 / syncs as f64;
        writeln!(
            out,
            "{indent}per fsync/fdatasync call: {:.2} write bios, {:.2} FLUSH, {:.2} FUA",
            per(x.writes),
            per(x.flushes),
            per(x.fua_writes)
        )?;
    }
    let writes = plumb_analyze::trace::write_calls(rows);
    if syncs == 0 && writes > 0 && x.flushes > 0 {
        let per = |n: u64| n as f64 / writes as f64;
        writeln!(
            out,
            "{indent}no fsync/fdatasync calls; per write call: {:.2} write bios, {:.2} FLUSH, {:.2} FUA (writes to a file opened O_DSYNC carry their own flush)",
            per(x.writes),
            per(x.flushes),
            per(x.fua_writes)
        )?;
    }
    if !b.latency.is_empty() {
        writeln!(
            out,
            "{indent}requests it started: {}",
            latency_text(&b.latency)
        )?;
    }
    Ok(())
}

impl Render for TraceReport {
    const KIND: &'static str = "trace";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let exit = match self.exit_code {
            Some(c) => format!(", status {c}"),
            None => String::new(),
        };
        writeln!(
            out,
            "plumb trace: {}\n  {} ({}{exit}); {} process{} followed; counted in the kernel ({}{})",
            self.target,
            duration(self.window_s),
            self.ended,
            self.processes.len(),
            if self.processes.len() == 1 { "" } else { "es" },
            self.syscalls_via,
            match self.maps_bytes {
                Some(b) => format!("; its maps held {} of kernel memory", bytes(b)),
                None => String::new(),
            },
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "Syscalls of every followed process (time is entry to exit, blocking included)"
        )?;
        syscall_table(out, &self.syscalls, None)?;
        timing_note(out, &self.syscalls)?;
        writeln!(out)?;
        writeln!(out, "Faults and scheduling")?;
        writeln!(out, "  {}", sched_line(&self.sched))?;
        if let Some(devs) = &self.devices {
            writeln!(out)?;
            writeln!(out, "Block requests")?;
            let mut any = false;
            for p in &self.processes {
                if let Some(b) = &p.block {
                    any = true;
                    writeln!(out, "  PID {} {}:", p.pid, p.name.as_deref().unwrap_or("?"))?;
                    block_lines(out, b, &p.syscalls, "    ")?;
                }
            }
            if !any {
                writeln!(out, "  the followed processes submitted no bio")?;
            }
            for d in devs {
                writeln!(
                    out,
                    "  device {} (everybody's requests): {} writes ({}), {} FLUSH, {} FUA, {} with preflush; {} reads ({}); {} discards",
                    d.device,
                    count(d.writes as f64),
                    bytes(d.write_bytes),
                    count(d.flushes as f64),
                    count(d.fua_writes as f64),
                    count(d.preflush_writes as f64),
                    count(d.reads as f64),
                    bytes(d.read_bytes),
                    count(d.discards as f64),
                )?;
                if !d.patterns.is_empty() {
                    writeln!(out, "    as blktrace flags them: {}", patterns(&d.patterns))?;
                }
                if !d.latency.is_empty() {
                    writeln!(out, "    time: {}", latency_text(&d.latency))?;
                }
            }
        }
        // One process: the table above is its table.
        let alone = self.processes.len() == 1 && self.processes[0].threads.len() < 2;
        for p in self.processes.iter().filter(|p| p.calls > 0 && !alone) {
            writeln!(out)?;
            writeln!(
                out,
                "PID {} {}{}: {} in {} calls",
                p.pid,
                p.name.as_deref().unwrap_or("?"),
                if p.exited { " (ended)" } else { "" },
                short_time(p.syscall_time_s),
                count(p.calls as f64)
            )?;
            if let Some(t) = &p.title {
                if Some(t) != p.name.as_ref() {
                    writeln!(out, "  {t}")?;
                }
            }
            syscall_table(out, &p.syscalls, Some(PER_PROCESS))?;
            writeln!(out, "  {}", sched_line(&p.sched))?;
            for t in &p.threads {
                if p.threads.len() < 2 {
                    break;
                }
                writeln!(
                    out,
                    "  thread {} {}:",
                    t.tid,
                    t.name.as_deref().unwrap_or("?")
                )?;
                syscall_table(out, &t.syscalls, Some(5))?;
                writeln!(out, "    {}", sched_line(&t.sched))?;
            }
        }
        let quiet = self.processes.iter().filter(|p| p.calls == 0).count();
        if quiet > 0 {
            writeln!(out)?;
            let noun = if quiet == 1 { "process" } else { "processes" };
            writeln!(
                out,
                "{quiet} more followed {noun} made no syscall in the window"
            )?;
        }
        if !self.notes.is_empty() {
            writeln!(out)?;
            for n in &self.notes {
                writeln!(out, "note: {}", crate::words::note(n))?;
            }
        }
        Ok(())
    }

    fn table(&self) -> Option<Table> {
        let f = |v: Option<f64>| v.map(|x| format!("{x:.9}")).unwrap_or_default();
        let rows = self
            .processes
            .iter()
            .flat_map(|p| {
                p.syscalls.iter().map(move |r| {
                    vec![
                        p.pid.to_string(),
                        p.name.clone().unwrap_or_default(),
                        r.name.clone(),
                        r.calls.to_string(),
                        r.errors.to_string(),
                        format!("{:.9}", r.total_s),
                        format!("{:.9}", r.mean_s),
                        f(r.p50_s),
                        f(r.p99_s),
                        format!("{:.9}", r.max_s),
                    ]
                })
            })
            .collect();
        Some(Table {
            headers: [
                "pid", "name", "syscall", "calls", "errors", "total_s", "mean_s", "p50_s", "p99_s",
                "max_s",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        })
    }
}
