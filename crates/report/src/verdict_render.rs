//! The verdict block every report opens on: how far the run can be trusted, the figures a
//! reader came for with their spread, what needs action, and what plumb's own experiments
//! changed. One layout for the terminal, summary.txt and the HTML page's first screen.

use crate::fmt::{bytes, count, ms, short_time};
use crate::html::Html;
use plumb_analyze::lab::{Finding, Severity};
use plumb_analyze::recording_verdict::RecordingVerdict;
use plumb_analyze::verdict::{Headline, RunVerdict, Trust, Unit, WindowTrust};
use std::io::{self, Write};

/// How a line is marked: plain, a warning, critical, or plumb's own experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Plain,
    Warn,
    Crit,
    Experiment,
}

/// One line of the block.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub text: String,
    pub mark: Mark,
}

fn line(text: String, mark: Mark) -> Line {
    Line { text, mark }
}

/// The block: labelled rows of lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub rows: Vec<(&'static str, Vec<Line>)>,
}

/// Lines longer than this are cut (with "…") in the block; the full statement is below it.
const LINE_CHARS: usize = 150;

fn cut(s: &str) -> String {
    if s.chars().count() <= LINE_CHARS {
        s.to_string()
    } else {
        let t: String = s.chars().take(LINE_CHARS - 1).collect();
        format!("{}…", t.trim_end())
    }
}

/// What another process did in a window, in a few words.
fn window_detail(w: &WindowTrust) -> String {
    let mut parts = Vec::new();
    if let Some(s) = w.io_share.filter(|s| *s > 0.0) {
        parts.push(format!("{} of the device's bytes", share(s)));
    }
    if let Some(s) = w
        .cpu_share
        .filter(|s| *s >= plumb_analyze::verdict::CPU_NOTE_SHARE)
    {
        parts.push(format!("{} of the CPU time", share(s)));
    }
    if let Some(s) = w
        .steal_pct
        .filter(|s| *s >= plumb_analyze::interference::STEAL_NOTE_PCT)
    {
        parts.push(format!("steal {s:.0}%"));
    }
    if let Some(s) = w.own_share {
        parts.push(format!("plumb itself held off {} of the window", share(s)));
    }
    let who: Vec<String> = w
        .neighbours
        .iter()
        .map(|n| format!("{} (PID {})", n.comm, n.pid))
        .collect();
    if !who.is_empty() {
        parts.insert(0, who.join(", "));
    }
    if parts.is_empty() {
        w.phase.clone()
    } else {
        format!("{}: {}", w.phase, parts.join(", "))
    }
}

fn share(s: f64) -> String {
    let p = s * 100.0;
    if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// The largest share another party took of a window, said: "98% of the device's bytes".
fn worst_share(w: &WindowTrust) -> (f64, String) {
    let mut best = (0.0, String::new());
    for (s, what) in [
        (w.io_share, "of the device's bytes"),
        (w.cpu_share, "of the CPU time"),
    ] {
        if let Some(s) = s.filter(|s| *s > best.0) {
            best = (s, format!("{} {what}", share(s)));
        }
    }
    if let Some(st) = w.steal_pct.map(|p| p / 100.0).filter(|s| *s > best.0) {
        best = (st, format!("steal {:.0}%", st * 100.0));
    }
    if let Some(o) = w.own_share.filter(|s| *s > best.0) {
        best = (
            o,
            format!("plumb itself held off {} of the window", share(o)),
        );
    }
    best
}

/// The trust line: one scannable line first ("DISTURBED: 12 of 12 phases; worst: fio (PID
/// 25764) 98% of the device's bytes"), the detail below it.
pub(crate) fn trust_lines(v: &RunVerdict, what: &str) -> Vec<Line> {
    let n = v.windows.len();
    let of =
        |t: Trust| -> Vec<&WindowTrust> { v.windows.iter().filter(|w| w.trust == t).collect() };
    // The accepted neighbours, once each, and in how many windows they worked.
    let mut accepted: Vec<(String, usize)> = Vec::new();
    for w in &v.windows {
        for a in &w.accepted {
            let name = format!("{} (PID {})", a.comm, a.pid);
            match accepted.iter_mut().find(|x| x.0 == name) {
                Some(x) => x.1 += 1,
                None => accepted.push((name, 1)),
            }
        }
    }
    let accepted_line = (!accepted.is_empty()).then(|| {
        let names: Vec<String> = accepted
            .iter()
            .map(|(name, k)| format!("{name} in {k} of {n} {what}"))
            .collect();
        line(
            format!(
                "noted: accepted: {} (--accept-neighbour: recorded, not held against a figure)",
                names.join(", ")
            ),
            Mark::Plain,
        )
    });
    let detail = |ws: &[&WindowTrust]| -> Vec<Line> {
        let mut out: Vec<Line> = ws
            .iter()
            .take(3)
            .map(|w| line(cut(&window_detail(w)), Mark::Plain))
            .collect();
        if ws.len() > 3 {
            out.push(line(
                format!(
                    "and {} more (each {} is in the table below)",
                    ws.len() - 3,
                    what.trim_end_matches('s')
                ),
                Mark::Plain,
            ));
        }
        out
    };
    let mut out = match v.trust {
        Trust::Clean if n == 1 => vec![line(
            format!(
                "clean: the {} was watched, and no other work could move a figure",
                v.windows[0].phase
            ),
            Mark::Plain,
        )],
        Trust::Clean => vec![line(
            format!(
                "clean: none of the {n} {what} watched had other work that could move a figure"
            ),
            Mark::Plain,
        )],
        Trust::Noted => {
            let noted: Vec<&WindowTrust> = of(Trust::Noted)
                .into_iter()
                .filter(|w| {
                    w.io_share.is_some_and(|s| s > 0.0)
                        || w.cpu_share
                            .is_some_and(|s| s >= plumb_analyze::verdict::CPU_NOTE_SHARE)
                        || w.steal_pct
                            .is_some_and(|s| s >= plumb_analyze::interference::STEAL_NOTE_PCT)
                })
                .collect();
            let mut out = vec![line(
                if noted.is_empty() {
                    format!("clean: no {what} disturbed (of {n})")
                } else {
                    format!(
                        "clean: no {what} disturbed; {} of {n} had other work below the share that disturbs a figure",
                        noted.len()
                    )
                },
                Mark::Plain,
            )];
            out.extend(detail(&noted));
            out
        }
        Trust::Disturbed => {
            let d = of(Trust::Disturbed);
            let worst = d
                .iter()
                .map(|w| (w, worst_share(w)))
                .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
            let worst = match worst {
                Some((w, (_, said))) => {
                    let who = w
                        .neighbours
                        .first()
                        .map(|n| format!("{} (PID {}) ", n.comm, n.pid))
                        .unwrap_or_default();
                    if said.is_empty() {
                        format!("; worst: {who}in {}", w.phase)
                    } else {
                        format!("; worst: {who}{said}")
                    }
                }
                None => String::new(),
            };
            let mut out = vec![line(
                format!("DISTURBED: {} of {n} {what}{worst}", d.len()),
                Mark::Warn,
            )];
            out.extend(detail(&d));
            // Whose the disturbance was: other work, plumb held off the CPUs, or both.
            let held_off = d.iter().filter(|w| w.own_share.is_some()).count();
            let (whose, share) = if held_off == d.len() {
                ("include time plumb itself was held off the CPUs (a CPU quota on its cgroup, or its own workers stalled)", "the share of the window it was held off")
            } else if held_off > 0 {
                ("are not the server's alone, and some include time plumb itself was held off the CPUs", "the disturbing share")
            } else {
                ("are not the server's alone", "the neighbour's share")
            };
            out.push(line(
                format!("figures from disturbed {what} {whose}; findings drawn from them are lowered to info, and comparisons from them withheld unless the difference is 4x {share}"),
                Mark::Plain,
            ));
            out
        }
        Trust::Unwatched => vec![line(
            format!("not watched: no {what} had its neighbours measured"),
            Mark::Plain,
        )],
    };
    out.extend(accepted_line);
    out
}

fn value(h: &Headline, x: f64) -> String {
    match h.unit {
        Unit::PerS | Unit::PerMin => count(x.round()),
        Unit::S => {
            if x < 0.001 {
                short_time(x)
            } else {
                ms(x)
            }
        }
        Unit::Bytes => bytes(x.max(0.0) as u64),
        Unit::BytesPerS => format!("{}/s", bytes(x.max(0.0) as u64)),
        Unit::QueueDepth => format!("{x:.0}"),
    }
}

/// A time below a second in whole microseconds with its range: `142 µs (124–164)`; longer
/// ones as [`value`].
fn micros(h: &Headline) -> String {
    if h.value >= 0.001 {
        return format!("{}{}", value(h, h.value), spread(h, ""));
    }
    let us = |x: f64| format!("{:.0}", x * 1e6);
    match (h.low, h.high) {
        (Some(l), Some(hi)) if hi > l => format!("{} µs ({}–{})", us(h.value), us(l), us(hi)),
        _ => format!("{} µs", us(h.value)),
    }
}

fn spread(h: &Headline, what: &str) -> String {
    match (h.low, h.high) {
        (Some(l), Some(hi)) if hi > l && what.is_empty() => {
            format!(" ({}–{})", value(h, l), value(h, hi))
        }
        (Some(l), Some(hi)) if hi > l => format!(" ({}–{} {what})", value(h, l), value(h, hi)),
        _ => String::new(),
    }
}

/// The headline figures, grouped: each workload's throughput and p99 on one line, the durable
/// writes on one, the knee and the sequential reads on one, the server's swap on its own.
pub fn figure_lines(v: &RunVerdict) -> Vec<Line> {
    let mut out = Vec::new();
    let h = &v.headline;
    let mut workloads: Vec<&str> = Vec::new();
    for x in h
        .iter()
        .filter(|x| x.code == "tps" || x.code == "latency_p99")
    {
        if !workloads.contains(&x.of.as_str()) {
            workloads.push(&x.of);
        }
    }
    for w in workloads {
        let mut parts = Vec::new();
        if let Some(t) = h.iter().find(|x| x.code == "tps" && x.of == w) {
            parts.push(format!(
                "{} tps{}",
                value(t, t.value),
                spread(t, "p10–p90 of its seconds")
            ));
        }
        if let Some(p) = h.iter().find(|x| x.code == "latency_p99" && x.of == w) {
            parts.push(format!("p99 {}", value(p, p.value)));
        }
        out.push(line(format!("{w}: {}", parts.join(", ")), Mark::Plain));
    }
    let durable: Vec<&Headline> = h
        .iter()
        .filter(|x| x.code == "durable_write_mean")
        .collect();
    let unclean: Vec<&Headline> = h
        .iter()
        .filter(|x| x.code == "durable_write_unclean")
        .collect();
    if !durable.is_empty() || !unclean.is_empty() {
        out.push(durable_line(&durable, &unclean));
    }
    // MariaDB's configurations: p50 / p99 of a single-row commit in each.
    let commits: Vec<String> = h
        .iter()
        .filter(|x| x.code == "commit_p50")
        .map(|p50| {
            let p99 = h
                .iter()
                .find(|x| x.code == "commit_p99" && x.of == p50.of)
                .map(|p| format!(" / {}", ms(p.value)))
                .unwrap_or_default();
            format!("{} {}{p99}", p50.of, ms(p50.value))
        })
        .collect();
    if !commits.is_empty() {
        out.push(line(
            format!("a single-row commit, p50 / p99: {}", commits.join(", ")),
            Mark::Plain,
        ));
    }
    let mut storage = Vec::new();
    if let Some(k) = h.iter().find(|x| x.code == "knee") {
        let dev = if k.of.is_empty() {
            String::new()
        } else {
            format!(" of {}", k.of)
        };
        storage.push(match (k.low, k.high) {
            (Some(l), Some(hi)) if hi > l => {
                format!("the knee{dev} between queue depth {l:.0} and {hi:.0}")
            }
            _ => format!("the knee{dev} at queue depth {:.0}", k.value),
        });
    }
    if let Some(k) = h.iter().find(|x| x.code == "no_knee") {
        let dev = if k.of.is_empty() {
            String::new()
        } else {
            format!(" of {}", k.of)
        };
        storage.push(format!(
            "no knee{dev} up to queue depth {:.0} (latency grew no faster than throughput)",
            k.value
        ));
    }
    if let Some(k) = h.iter().find(|x| x.code == "knee_withheld") {
        let dev = if k.of.is_empty() {
            String::new()
        } else {
            format!(" of {}", k.of)
        };
        storage.push(if k.value > 0.0 {
            format!(
                "no knee{dev} is stated: the sweep up to queue depth {:.0} was disturbed",
                k.value
            )
        } else {
            format!("no knee{dev} is stated: the sweep was disturbed")
        });
    }
    if let Some(s) = h.iter().find(|x| x.code == "seq_read") {
        storage.push(format!("sequential {} reads {}", s.of, value(s, s.value)));
    }
    if !storage.is_empty() {
        out.push(line(storage.join(" · "), Mark::Plain));
    }
    if let Some(s) = h.iter().find(|x| x.code == "server_swap") {
        out.push(line(
            format!(
                "the server's memory in swap (outside plumb's experiments): {}",
                value(s, s.value)
            ),
            if s.value >= 1048576.0 {
                Mark::Crit
            } else {
                Mark::Plain
            },
        ));
    }
    out
}

/// What one durable write costs per mode, like for like: the modes with a clean run with their
/// figures; those without one named apart (not compared), or, when no mode had a clean run,
/// all of them said to be so.
fn durable_line(durable: &[&Headline], unclean: &[&Headline]) -> Line {
    let all = if durable.is_empty() { unclean } else { durable };
    // "fdatasync 8K", … : the block size once, in the label, when they share it.
    let size = all[0].of.rsplit_once(' ').map(|(_, s)| s.to_string());
    let shared = size.as_ref().filter(|s| {
        durable
            .iter()
            .chain(unclean)
            .all(|x| x.of.ends_with(&format!(" {s}")))
    });
    let name = |x: &Headline| match shared {
        Some(s) => x.of.trim_end_matches(&format!(" {s}")).to_string(),
        None => x.of.clone(),
    };
    let each: Vec<String> = all
        .iter()
        .map(|x| format!("{} {}", name(x), micros(x)))
        .collect();
    let size = shared.map(|s| format!("{s} ")).unwrap_or_default();
    if durable.is_empty() {
        return line(
            format!(
                "one durable {size}write, mean (lowest–highest run), no mode with a clean run, so none is compared: {}",
                each.join(", ")
            ),
            Mark::Warn,
        );
    }
    let apart = if unclean.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = unclean.iter().map(|x| name(x)).collect();
        format!("; not compared (no clean run): {}", names.join(", "))
    };
    line(
        format!(
            "one durable {size}write, mean (lowest–highest run): {}{apart}",
            each.join(", ")
        ),
        Mark::Plain,
    )
}

/// The findings that need action, one line each (the full statement is below the block).
pub(crate) fn action_lines(v: &RunVerdict, findings: &[Finding]) -> Vec<Line> {
    if v.actions.is_empty() {
        return vec![line("none: no finding needs action".into(), Mark::Plain)];
    }
    v.actions
        .iter()
        .map(|a| {
            // Its own finding's words: several findings share a rule (one per setting).
            let statement = a
                .finding
                .and_then(|i| findings.get(i))
                .filter(|f| f.rule == a.rule)
                .or_else(|| {
                    findings
                        .iter()
                        .find(|f| f.rule == a.rule && f.severity == a.severity)
                })
                .map(crate::words::statement)
                .unwrap_or_else(|| a.rule.clone());
            let sev = match a.severity {
                Severity::Critical => "critical",
                Severity::Warn => "warn",
                Severity::Info => "info",
            };
            let tag = if a.experiment {
                "plumb's own experiment: "
            } else {
                ""
            };
            line(
                cut(&format!("[{sev}] {tag}{statement}")),
                match (a.experiment, a.severity) {
                    (true, _) => Mark::Experiment,
                    (_, Severity::Critical) => Mark::Crit,
                    _ => Mark::Warn,
                },
            )
        })
        .collect()
}

/// What each of plumb's experiments changed, tagged as plumb's own doing.
pub fn experiment_lines(v: &RunVerdict) -> Vec<Line> {
    v.experiments
        .iter()
        .map(|e| {
            let mut parts = Vec::new();
            if let (Some(a), Some(b)) = (e.tps_before, e.tps_after) {
                let change = if a > 0.0 {
                    format!(" ({:+.0}%)", (b - a) / a * 100.0)
                } else {
                    String::new()
                };
                parts.push(format!(
                    "tps {} → {}{change}",
                    count(a.round()),
                    count(b.round())
                ));
            }
            if let (Some(a), Some(b)) = (e.p99_before_s, e.p99_after_s) {
                parts.push(format!("p99 {} → {}", ms(a), ms(b)));
            }
            if let Some(s) = e.server_swap_bytes.filter(|s| *s >= 1048576.0) {
                parts.push(format!("the server's memory in swap {}", bytes(s as u64)));
            }
            if e.outcome.as_deref() == Some("pgbench-not-distinguishable") {
                parts.push("not distinguishable from the plain run".into());
            }
            // Two runs of one experiment (the throttle at two rates) are told apart by phase.
            let twice = v.experiments.iter().filter(|x| x.name == e.name).count() > 1;
            let name = if twice {
                format!("{} ({})", e.name, e.phase)
            } else {
                e.name.clone()
            };
            line(
                format!(
                    "{name} (plumb's own experiment, not your server's problem): {}",
                    if parts.is_empty() {
                        "no figures".to_string()
                    } else {
                        parts.join(", ")
                    }
                ),
                Mark::Experiment,
            )
        })
        .collect()
}

/// The lab's block.
pub(crate) fn lab_block(v: &RunVerdict, findings: &[Finding]) -> Block {
    let mut rows = vec![
        ("trust", trust_lines(v, "phases")),
        ("figures", figure_lines(v)),
        ("needs action", action_lines(v, findings)),
    ];
    let e = experiment_lines(v);
    if !e.is_empty() {
        rows.push(("experiments", e));
    }
    Block { rows }
}

/// The block as text: `Verdict`, then each row's label beside its lines.
pub fn text(b: &Block, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Verdict")?;
    for (label, lines) in &b.rows {
        for (i, l) in lines.iter().enumerate() {
            let mark = match l.mark {
                Mark::Crit => "!! ",
                Mark::Warn => "!  ",
                Mark::Experiment => "*  ",
                Mark::Plain => "   ",
            };
            let label = if i == 0 { *label } else { "" };
            writeln!(out, "  {label:<13}{mark}{}", l.text)?;
        }
    }
    if b.rows
        .iter()
        .any(|(_, l)| l.iter().any(|l| l.mark == Mark::Experiment))
    {
        writeln!(out, "  (* plumb's own experiment on its private instance)")?;
    }
    writeln!(out)
}

/// The block as the page's first screen.
pub fn html(b: &Block, h: &mut Html) {
    h.with("section", &[("id", "verdict"), ("class", "verdict")], |h| {
        h.el("h2", &[], "Verdict");
        h.with("table", &[], |h| {
            for (label, lines) in &b.rows {
                // The findings are cut to one line each (their statements are below); the
                // figures wrap.
                let cut = *label == "needs action";
                h.with("tr", &[], |h| {
                    h.el("th", &[], label);
                    h.with("td", &[], |h| {
                        for l in lines {
                            let class = match (l.mark, cut) {
                                (Mark::Crit, true) => "line cut crit",
                                (Mark::Warn, true) => "line cut warn",
                                (Mark::Experiment, true) => "line cut exp",
                                (_, true) => "line cut",
                                (Mark::Crit, false) => "line crit",
                                (Mark::Warn, false) => "line warn",
                                (Mark::Experiment, false) => "line exp",
                                (Mark::Plain, false) => "line",
                            };
                            h.el("div", &[("class", class), ("title", &l.text)], &l.text);
                        }
                    });
                });
            }
        });
    });
}

/// The CSS the block needs on a page: each finding on one line, cut with "…" (the whole
/// statement is in its title and in the findings below the block).
pub const STYLE: &str = ".verdict table{width:100%;margin:8px 0 12px}.verdict th{width:7.5em;vertical-align:top}\
.verdict .line{padding:1px 0}.verdict .cut{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:740px}\
.verdict .exp{background:#e7effc}.verdict h2{margin:12px 0 0}";

fn clock(s: f64) -> String {
    crate::svg::fmt_clock(s)
}

fn resource_name(r: &str) -> String {
    match r.strip_prefix("disk:") {
        Some(dev) => format!("disk {dev}"),
        None if r == "cpu" => "the CPUs".into(),
        None => r.into(),
    }
}

/// A recording's block (`plumb report`): the window, the busiest resource, pressure stalls,
/// swap and the marks that matter; each line names its run when there are several.
pub(crate) fn recording_block(vs: &[RecordingVerdict]) -> Block {
    let many = vs.len() > 1;
    let who = |v: &RecordingVerdict| {
        if many {
            format!("{}: ", v.run)
        } else {
            String::new()
        }
    };
    let (mut window, mut busiest, mut pressure, mut swap, mut marks) =
        (vec![], vec![], vec![], vec![], vec![]);
    for v in vs {
        let w = who(v);
        window.push(line(
            format!(
                "{w}{} long, {} samples{}",
                clock(v.duration_s),
                count(v.samples as f64),
                if v.damaged {
                    " (the file was read up to a damaged part: what follows it is lost)"
                } else {
                    ""
                }
            ),
            if v.damaged { Mark::Warn } else { Mark::Plain },
        ));
        let busy: Vec<String> = v
            .busy
            .iter()
            .map(|b| {
                format!(
                    "{}: {:.0}% busy on average, {:.0}% at peak ({})",
                    resource_name(&b.resource),
                    b.mean_pct,
                    b.peak_pct,
                    clock(b.peak_at_s)
                )
            })
            .collect();
        busiest.push(line(
            if busy.is_empty() {
                format!("{w}no CPU or disk figures in the recording")
            } else {
                format!("{w}{}", busy.join(" · "))
            },
            Mark::Plain,
        ));
        if v.stalls.is_empty() {
            pressure.push(line(
                format!(
                    "{w}no task stalled for the CPU, memory or I/O more than {:.0}% of any sample",
                    plumb_analyze::recording_verdict::STALL_NOTE_PCT
                ),
                Mark::Plain,
            ));
        }
        for s in &v.stalls {
            let full = s
                .full_peak_pct
                .filter(|f| *f >= 1.0)
                .map(|f| format!("; every task {f:.0}% at peak"))
                .unwrap_or_default();
            pressure.push(line(
                format!(
                    "{w}{}: some task stalled {:.0}% of the time on average, {:.0}% at peak ({}){full}",
                    s.resource,
                    s.some_mean_pct,
                    s.some_peak_pct,
                    clock(s.peak_at_s)
                ),
                if s.some_peak_pct >= 10.0 {
                    Mark::Warn
                } else {
                    Mark::Plain
                },
            ));
        }
        if let Some(u) = v.swap_used_peak_bytes.filter(|u| *u >= 1048576.0) {
            let swap_in = v
                .swap_in_peak_bytes_per_s
                .filter(|s| *s > 0.0)
                .map(|s| format!(", read back at up to {}/s", bytes(s as u64)))
                .unwrap_or_default();
            swap.push(line(
                format!("{w}{} of memory in swap at peak{swap_in}", bytes(u as u64)),
                Mark::Warn,
            ));
        }
        for m in &v.marks {
            let detail = m
                .detail
                .as_ref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            marks.push(line(
                cut(&format!("{w}{} {}{detail}", clock(m.at_s), m.name)),
                if m.problem { Mark::Crit } else { Mark::Plain },
            ));
        }
        if v.marks_total > v.marks.len() {
            marks.push(line(
                format!(
                    "{w}and {} more, listed under the charts",
                    v.marks_total - v.marks.len()
                ),
                Mark::Plain,
            ));
        }
    }
    let mut rows = vec![
        ("window", window),
        ("busiest", busiest),
        ("pressure", pressure),
    ];
    if !swap.is_empty() {
        rows.push(("swap", swap));
    }
    if !marks.is_empty() {
        rows.push(("marks", marks));
    }
    Block { rows }
}

/// `plumb report`'s result: where the page went, and each recording's verdict.
#[derive(Debug, serde::Serialize)]
pub struct RecordReport {
    pub index: std::path::PathBuf,
    pub verdict: RecordVerdicts,
}

/// The verdict of each recording the page shows, in order.
#[derive(Debug, serde::Serialize)]
pub struct RecordVerdicts {
    pub runs: Vec<RecordingVerdict>,
}

impl crate::Render for RecordReport {
    const KIND: &'static str = "report";
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        text(&recording_block(&self.verdict.runs), out)?;
        writeln!(out, "{}", self.index.display())
    }
}

/// A result with its verdict: its JSON is the result's fields and a top-level `verdict`; its
/// text opens on the block, then the result's own.
pub struct Verdicted<'a, T, V = RunVerdict> {
    pub report: &'a T,
    pub verdict: V,
    pub block: Block,
}

#[derive(serde::Serialize)]
struct Flat<'a, T: serde::Serialize, V: serde::Serialize> {
    #[serde(flatten)]
    report: &'a T,
    verdict: &'a V,
}

impl<T: serde::Serialize, V: serde::Serialize> serde::Serialize for Verdicted<'_, T, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Flat {
            report: self.report,
            verdict: &self.verdict,
        }
        .serialize(s)
    }
}

impl<T: crate::Render, V: serde::Serialize> crate::Render for Verdicted<'_, T, V> {
    const KIND: &'static str = T::KIND;

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        text(&self.block, out)?;
        self.report.text(out)
    }

    fn table(&self) -> Option<crate::Table> {
        self.report.table()
    }
}

/// The block of a result whose verdict is trust, figures and needs action (`plumb io sweep`,
/// `plumb io durability`): the figures as the lab words them, the actions by their notes.
pub(crate) fn result_block(v: &RunVerdict, what: &str, notes: &[plumb_analyze::Note]) -> Block {
    let mut figures = figure_lines(v);
    if let Some(h) = v.headline.iter().find(|h| h.code == "iops") {
        figures.push(line(
            format!(
                "best level {}: {} IOPS{}",
                h.of,
                count(h.value.round()),
                match (h.low, h.high) {
                    (Some(l), Some(hi)) if hi > l =>
                        format!(" ({}–{}, its runs)", count(l.round()), count(hi.round())),
                    _ => String::new(),
                }
            ),
            Mark::Plain,
        ));
    }
    if figures.is_empty() {
        figures.push(line("no figure".into(), Mark::Plain));
    }
    let actions: Vec<Line> = notes
        .iter()
        .filter(|n| n.level == plumb_analyze::Level::Warn)
        .map(|n| {
            line(
                cut(&format!("[warn] {}", crate::words::note(n))),
                Mark::Warn,
            )
        })
        .collect();
    Block {
        rows: vec![
            ("trust", trust_lines(v, what)),
            ("figures", figures),
            (
                "needs action",
                if actions.is_empty() {
                    vec![line("none".into(), Mark::Plain)]
                } else {
                    actions
                },
            ),
        ],
    }
}

/// `plumb io sweep`'s result with its verdict.
pub fn sweep_output(
    r: &plumb_analyze::sweep::SweepReport,
) -> Verdicted<'_, plumb_analyze::sweep::SweepReport> {
    let verdict = plumb_analyze::verdict::sweep(r);
    let block = result_block(&verdict, "runs", &r.notes);
    Verdicted {
        report: r,
        verdict,
        block,
    }
}

/// `plumb io durability`'s result (one directory) with its verdict.
pub fn durability_output(
    r: &plumb_analyze::durability_probe::DurabilityReport,
) -> Verdicted<'_, plumb_analyze::durability_probe::DurabilityReport> {
    let verdict = plumb_analyze::verdict::durability(r);
    let block = result_block(&verdict, "runs", &r.conclusions);
    Verdicted {
        report: r,
        verdict,
        block,
    }
}

/// `plumb io durability DIR DIR…`'s result with its verdict.
pub fn comparison_output(
    c: &plumb_analyze::durability_probe::Comparison,
) -> Verdicted<'_, plumb_analyze::durability_probe::Comparison> {
    let verdict = plumb_analyze::verdict::durability_comparison(c);
    let mut notes = c.comparison.clone();
    notes.extend(c.probes.iter().flat_map(|p| p.conclusions.iter().cloned()));
    let block = result_block(&verdict, "runs", &notes);
    Verdicted {
        report: c,
        verdict,
        block,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_analyze::lab::Finding;
    use plumb_analyze::said::WithFacts;
    use plumb_analyze::verdict::{Trust, WindowTrust};

    fn commit(p99_s: f64, configuration: &str) -> Finding {
        Finding::new(Severity::Warn, "commit-latency")
            .secs("p99_s", p99_s)
            .text("configuration", configuration)
            .secs("threshold_s", 0.002)
            .text("cause", "flush")
    }

    fn window(phase: &str, trust: Trust, io: f64, who: &str, pid: u32) -> WindowTrust {
        WindowTrust {
            phase: phase.into(),
            trust,
            io_share: Some(io),
            cpu_share: Some(0.01),
            steal_pct: Some(0.0),
            own_share: None,
            neighbours: vec![plumb_analyze::verdict::Named {
                pid,
                comm: who.into(),
            }],
            accepted: vec![],
        }
    }

    /// One scannable line first: how many windows, the worst neighbour by PID and its share;
    /// the detail below it. An accepted neighbour is said "noted: accepted".
    #[test]
    fn the_trust_line_is_one_line_with_the_worst_neighbour_and_the_detail_below() {
        let v = RunVerdict::of_windows(vec![
            window("durability probe", Trust::Disturbed, 0.40, "fio", 25764),
            window("storage sweep", Trust::Disturbed, 0.98, "fio", 25764),
            window("pgbench", Trust::Clean, 0.0, "fio", 25764),
        ]);
        let l = trust_lines(&v, "phases");
        assert_eq!(
            l[0].text,
            "DISTURBED: 2 of 3 phases; worst: fio (PID 25764) 98% of the device's bytes"
        );
        assert_eq!(l[0].mark, Mark::Warn);
        assert!(
            l[1].text.starts_with("durability probe: fio (PID 25764)"),
            "{l:?}"
        );
        let mut w = window("pgbench", Trust::Noted, 0.0, "fio", 1);
        w.neighbours.clear();
        w.accepted = vec![plumb_analyze::verdict::Named {
            pid: 812,
            comm: "backup-agent".into(),
        }];
        let v = RunVerdict::of_windows(vec![w]);
        let l: Vec<String> = trust_lines(&v, "phases")
            .into_iter()
            .map(|l| l.text)
            .collect();
        assert!(l[0].starts_with("clean: no phases disturbed"), "{l:?}");
        assert!(
            l.iter()
                .any(|x| x.starts_with("noted: accepted: backup-agent (PID 812) in 1 of 1 phases")),
            "{l:?}"
        );
    }

    /// plumb held off the CPUs by its own cgroup's quota: the worst is said as that, not as a
    /// neighbour, and the figures' caveat says whose the time was.
    #[test]
    fn a_window_plumb_was_held_off_in_says_so_not_a_neighbour() {
        let mut w = window("io run", Trust::Disturbed, 0.0, "fio", 1);
        w.neighbours.clear();
        w.own_share = Some(0.94);
        let l: Vec<String> = trust_lines(&RunVerdict::of_windows(vec![w.clone()]), "windows")
            .into_iter()
            .map(|l| l.text)
            .collect();
        assert_eq!(
            l[0], "DISTURBED: 1 of 1 windows; worst: plumb itself held off 94% of the window",
            "{l:?}"
        );
        let caveat = l.last().unwrap();
        assert!(
            caveat.starts_with(
                "figures from disturbed windows include time plumb itself was held off the CPUs"
            ) && caveat.ends_with("4x the share of the window it was held off"),
            "{l:?}"
        );
        // Beside a neighbour's window, both are said.
        let other = window("sweep", Trust::Disturbed, 0.5, "fio", 7);
        let l: Vec<String> = trust_lines(&RunVerdict::of_windows(vec![w, other]), "windows")
            .into_iter()
            .map(|l| l.text)
            .collect();
        assert!(
            l.last().unwrap().contains(
                "not the server's alone, and some include time plumb itself was held off"
            ),
            "{l:?}"
        );
    }

    /// Three findings of one rule (one per wal_sync_method): each is said once, in its own
    /// words (the block repeated the first one's three times).
    #[test]
    fn each_action_is_said_in_its_own_findings_words() {
        let findings = vec![
            commit(0.00295, "fdatasync"),
            commit(0.00296, "open_datasync"),
            commit(0.00401, "fsync"),
        ];
        let mut v = RunVerdict::of_windows(vec![]);
        v.actions = findings
            .iter()
            .enumerate()
            .map(|(i, f)| plumb_analyze::verdict::Action {
                rule: f.rule.clone(),
                severity: f.severity,
                experiment: false,
                finding: Some(i),
            })
            .collect();
        let lines: Vec<String> = action_lines(&v, &findings)
            .into_iter()
            .map(|l| l.text)
            .collect();
        assert_eq!(lines.len(), 3);
        for (l, (p99, config)) in lines.iter().zip([
            ("2.95 ms", "fdatasync"),
            ("2.96 ms", "open_datasync"),
            ("4.01 ms", "fsync"),
        ]) {
            assert!(
                l.contains(&format!("p99 is {p99} with wal_sync_method={config} ")),
                "{l}"
            );
        }
    }
}
