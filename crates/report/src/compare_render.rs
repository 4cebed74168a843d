//! `plumb compare`: each figure's centres, the change and the verdict, with the rule that gave it.

use crate::{Render, Table};
use plumb_analyze::compare::{CompareReport, HistoryReport, Verdict};
use std::io::{self, Write};

fn num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The change with its interval; "-" where there is none (a baseline of 0).
fn change(c: &plumb_analyze::compare::Comparison) -> String {
    if c.baseline.median == 0.0 && c.change_pct.is_infinite() {
        return if c.change_pct > 0.0 {
            "up from 0".into()
        } else {
            "down from 0".into()
        };
    }
    if c.change_pct.is_finite() && c.change_low_pct.is_finite() && c.change_high_pct.is_finite() {
        format!(
            "{:+.1}% ({:+.1}% to {:+.1}%)",
            c.change_pct, c.change_low_pct, c.change_high_pct
        )
    } else {
        "-".into()
    }
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::Same => "~",
        Verdict::TooFew => "too few",
        Verdict::Withheld => "withheld",
        Verdict::NotComparable => "not comparable",
    }
}

/// The `~` that reads as absurd without its reason: a change whose interval lies wholly beyond
/// the floor, not significant by the test (few samples, or Holm's correction over many
/// figures). One line each, in words.
pub(crate) fn why_not_distinguishable(r: &CompareReport) -> Vec<String> {
    r.figures
        .iter()
        .filter(|f| f.comparison.verdict == Verdict::Same)
        .filter(|f| {
            let c = &f.comparison;
            c.change_low_pct > c.floor_pct || c.change_high_pct < -c.floor_pct
        })
        .map(|f| {
            let c = &f.comparison;
            let needed = if r.tested_together > 1 {
                format!(
                    "p {} is not below what Holm's correction over the {} figures tested asks of it (at most {:.4} for the smallest p)",
                    p_text(c.p),
                    r.tested_together,
                    r.alpha / r.tested_together as f64
                )
            } else {
                format!("p {} is not below {}", p_text(c.p), r.alpha)
            };
            format!(
                "{}: ~ although the change's interval ({:+.0}% to {:+.0}%) lies beyond ±{:.0}%: {needed}, over {} and {} samples; more runs, or a longer one, can tell",
                f.name,
                c.change_low_pct,
                c.change_high_pct,
                c.floor_pct,
                c.baseline.n,
                c.candidate.n
            )
        })
        .collect()
}

fn p_text(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// The rule, said with every table.
pub fn rule(r: &CompareReport) -> String {
    let over = if r.per_second {
        format!(
            "over the samples inside the one run a side (its seconds, repetitions, or a latency percentile's tenths, with intervals bootstrapped from the run's histogram) and the change's 95% interval lies wholly beyond ±{:.0}% for rates, ±{:.0}% for latency p50 and ±{:.0}% for p99 and beyond (one run a side cannot show the run-to-run spread: identical quick labs back to back on one quiet host moved tps by 20% and a p99 up to 3.6 times; --min-change {} where larger)",
            r.one_run_floor_pct, r.one_run_latency_floor_pct, r.one_run_tail_floor_pct, r.min_change_pct
        )
    } else if r.within_runs {
        format!(
            "over the seconds inside the runs (fewer than 4 runs a side: the test over all their seconds, the interval from drawing whole runs, then their seconds, so runs that disagree widen it) and the change's 95% interval lies wholly beyond ±{}% (--min-change; ±{:.0}% for a side of one run); figures without seconds over the runs",
            r.min_change_pct, r.one_run_floor_pct
        )
    } else {
        format!(
            "over the runs and the change's 95% interval lies wholly beyond ±{}% (--min-change)",
            r.min_change_pct
        )
    };
    let level = if r.tested_together > 1 {
        format!(
            "{} (Holm-corrected over the {} figures tested: the smallest p below {:.4})",
            r.alpha,
            r.tested_together,
            r.alpha / r.tested_together as f64
        )
    } else {
        r.alpha.to_string()
    };
    format!(
        "a figure changed when the Mann-Whitney U test gives p < {level} {over}; ~: not distinguishable; too few: with so few samples p can never fall below {} (4 a side at least); withheld: a run's window for the figure was disturbed (neighbours' bytes at 10% of the device's or more, CPU taken by others on a busy host, or steal), unless the change is at least {}x the neighbour's share; not comparable: throughput of runs whose loop or rate differ (closed loop against --rate, or two rates)",
        r.alpha,
        plumb_analyze::interference::EFFECT_OVER_SHARE
    )
}

/// One figure's cells: name, both centres with their intervals, the change, p, the verdict.
fn cells(f: &plumb_analyze::compare::FigureComparison) -> Vec<String> {
    let c = &f.comparison;
    let centre = |x: &plumb_analyze::compare::Centre| {
        format!("{} ({}–{})", num(x.median), num(x.low), num(x.high))
    };
    vec![
        f.name.clone(),
        centre(&c.baseline),
        centre(&c.candidate),
        change(c),
        if c.p < 0.001 {
            "<0.001".into()
        } else {
            format!("{:.3}", c.p)
        },
        verdict(c.verdict).to_string(),
    ]
}

/// What differed, a line each: `kernel: 6.1 → 6.18`.
fn differed_lines(r: &CompareReport) -> Vec<String> {
    r.differed
        .iter()
        .map(|d| {
            format!(
                "{}: {} → {}",
                d.what,
                d.baseline.join(" | "),
                d.candidate.join(" | ")
            )
        })
        .collect()
}

/// The disturbed windows under the table, one line per set of windows with the figures they
/// withheld (dozens of figures share the same two windows): `withheld pgbench tps, pgbench
/// latency p50 (ms): labB, pgbench: fio (PID 4242) (38% …)`.
fn disturbed_lines(r: &CompareReport) -> Vec<String> {
    let mut groups: Vec<(String, bool, Vec<&str>)> = Vec::new();
    for f in r.figures.iter().filter(|f| !f.disturbed.is_empty()) {
        let why: Vec<String> = f.disturbed.iter().map(disturbed).collect();
        let why = why.join("; ");
        let withheld = f.comparison.verdict == Verdict::Withheld;
        match groups.iter_mut().find(|g| g.0 == why && g.1 == withheld) {
            Some(g) => g.2.push(&f.name),
            None => groups.push((why, withheld, vec![&f.name])),
        }
    }
    groups
        .into_iter()
        .map(|(why, withheld, names)| {
            let word = if withheld {
                "withheld"
            } else {
                "judged although disturbed (the change is at least 4x the share)"
            };
            let names = if names.len() > 6 {
                format!(
                    "{} and {} more figures",
                    names[..5].join(", "),
                    names.len() - 5
                )
            } else {
                names.join(", ")
            };
            format!("{word} {names}: {why}")
        })
        .collect()
}

/// A disturbed window in words: the run, the window, the neighbour and its share.
fn disturbed(d: &plumb_analyze::compare::Disturbed) -> String {
    let mut s = format!("{}, {}", d.file, d.window.phase);
    if let Some(n) = &d.window.neighbour {
        s += &format!(": {n}");
    }
    if let Some(x) = d.window.io_share {
        s += &format!(" ({:.0}% of the device's bytes were others')", x * 100.0);
    }
    s
}

impl Render for CompareReport {
    const KIND: &'static str = "compare";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "{}: {} baseline run(s) against {} candidate run(s)",
            self.what,
            self.baseline.len(),
            self.candidate.len()
        )?;
        writeln!(out, "verdict: {}", verdict_line(&self.verdict))?;
        if !self.differed.is_empty() {
            writeln!(out, "what differed:")?;
            for line in differed_lines(self) {
                writeln!(out, "  {line}")?;
            }
        }
        writeln!(out, "rule: {}", rule(self))?;
        let rows: Vec<Vec<String>> = self.figures.iter().map(cells).collect();
        crate::table::write_aligned(
            out,
            &[
                "figure",
                "baseline (95% CI)",
                "candidate (95% CI)",
                "change (95% CI)",
                "p",
                "verdict",
            ],
            &rows,
        )?;
        for line in disturbed_lines(self) {
            writeln!(out, "{line}")?;
        }
        for line in why_not_distinguishable(self) {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }

    fn table(&self) -> Option<Table> {
        let headers = [
            "figure",
            "higher_is_better",
            "baseline_median",
            "baseline_low",
            "baseline_high",
            "baseline_n",
            "candidate_median",
            "candidate_low",
            "candidate_high",
            "candidate_n",
            "change_pct",
            "change_low_pct",
            "change_high_pct",
            "p",
            "verdict",
        ]
        .map(String::from)
        .to_vec();
        let rows = self
            .figures
            .iter()
            .map(|f| {
                let c = &f.comparison;
                vec![
                    f.name.clone(),
                    f.higher_is_better.to_string(),
                    c.baseline.median.to_string(),
                    c.baseline.low.to_string(),
                    c.baseline.high.to_string(),
                    c.baseline.n.to_string(),
                    c.candidate.median.to_string(),
                    c.candidate.low.to_string(),
                    c.candidate.high.to_string(),
                    c.candidate.n.to_string(),
                    c.change_pct.to_string(),
                    c.change_low_pct.to_string(),
                    c.change_high_pct.to_string(),
                    c.p.to_string(),
                    verdict(c.verdict).into(),
                ]
            })
            .collect();
        Some(Table { headers, rows })
    }
}

impl Render for HistoryReport {
    const KIND: &'static str = "compare-history";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "{}: {} runs, {} figures with 4 runs or more",
            self.what,
            self.runs.len(),
            self.figures_checked
        )?;
        writeln!(
            out,
            "rule: a change point splits a figure's runs where the energy distance between the two sides is largest (E-divisive means), kept when {} permutations of those runs give such a split by chance under {} of the time and the medians either side differ beyond ±{}% (--min-change); each side is then searched again",
            self.permutations, self.alpha, self.min_change_pct
        )?;
        if self.changes.is_empty() {
            return writeln!(out, "no figure moved");
        }
        let rows: Vec<Vec<String>> = self
            .changes
            .iter()
            .map(|c| {
                vec![
                    c.figure.clone(),
                    c.run.clone(),
                    num(c.before),
                    num(c.after),
                    format!("{:+.1}%", c.change_pct),
                    format!("{:.3}", c.p),
                    if c.better { "better" } else { "worse" }.into(),
                ]
            })
            .collect();
        crate::table::write_aligned(
            out,
            &[
                "figure", "from run", "before", "after", "change", "p", "verdict",
            ],
            &rows,
        )
    }

    fn table(&self) -> Option<Table> {
        let headers = [
            "figure",
            "run",
            "before",
            "after",
            "change_pct",
            "p",
            "better",
        ]
        .map(String::from)
        .to_vec();
        let rows = self
            .changes
            .iter()
            .map(|c| {
                vec![
                    c.figure.clone(),
                    c.run.clone(),
                    c.before.to_string(),
                    c.after.to_string(),
                    c.change_pct.to_string(),
                    c.p.to_string(),
                    c.better.to_string(),
                ]
            })
            .collect();
        Some(Table { headers, rows })
    }
}

/// One figure's seconds, every run of both sides overlaid on time since the run's start:
/// baseline runs solid blue, candidate runs dashed red.
fn timeline_chart(t: &plumb_analyze::compare::Timeline) -> String {
    use crate::svg::{Chart, Fmt, Point, Series, PALETTE};
    let series = |runs: &[(String, Vec<f64>)], side: &str, color: &'static str, dashed| {
        runs.iter()
            .map(|(file, v)| Series {
                name: format!("{side}: {file}"),
                color,
                dashed,
                line: true,
                points: v
                    .iter()
                    .enumerate()
                    .map(|(i, y)| Point {
                        // The first whole second of the run is second 1.
                        x: (i + 1) as f64,
                        y: *y,
                        y_lo: None,
                        y_hi: None,
                        label: None,
                    })
                    .collect(),
            })
            .collect::<Vec<_>>()
    };
    let mut all = series(&t.baseline, "baseline", PALETTE[0], false);
    all.extend(series(&t.candidate, "candidate", PALETTE[1], true));
    crate::svg::render(&Chart {
        title: t.figure.clone(),
        subtitle: "each run second by second, on time since its start".into(),
        x_label: "second of the run".into(),
        y_label: t.figure.clone(),
        x_log: false,
        y_log: false,
        series: all,
        marks: vec![],
        x_fmt: |v| format!("{v:.0}"),
        y_fmt: |v| Fmt::Count.apply(v),
    })
}

/// The comparison as a page: what differed, the rule, the table (worse and better marked), the
/// withheld figures with their neighbours, and each timed figure's runs overlaid.
/// The comparison's verdict in one line: "WORSE: pgbench tps, pgbench p99 (2 figures); 18 not
/// distinguishable, 3 too few to tell".
pub(crate) fn verdict_line(v: &plumb_analyze::compare::CompareVerdict) -> String {
    let named =
        |word: &str, n: &[String]| format!("{word}: {} ({} figure(s))", n.join(", "), n.len());
    let mut parts = Vec::new();
    match v.outcome {
        "worse" => parts.push(named("WORSE", &v.worse)),
        "better" => parts.push(named("better", &v.better)),
        "mixed" => {
            parts.push(named("WORSE", &v.worse));
            parts.push(named("better", &v.better));
        }
        "not_distinguishable" => parts.push("nothing moved beyond the rule".to_string()),
        "withheld" => parts.push("withheld: every figure's windows were disturbed".to_string()),
        "not_comparable" => parts.push(format!(
            "not comparable: {}: the sides' loops or rates differ",
            v.not_comparable.join(", ")
        )),
        _ => parts.push("too few samples to tell anything".to_string()),
    }
    if v.not_distinguishable > 0 && v.outcome != "not_distinguishable" {
        parts.push(format!("{} not distinguishable", v.not_distinguishable));
    } else if v.outcome == "not_distinguishable" {
        parts.push(format!(
            "{} figure(s) not distinguishable",
            v.not_distinguishable
        ));
    }
    if v.too_few > 0 {
        parts.push(format!("{} too few to tell", v.too_few));
    }
    if !v.withheld.is_empty() && v.outcome != "withheld" {
        parts.push(format!("{} withheld (disturbed)", v.withheld.len()));
    }
    if !v.not_comparable.is_empty() && v.outcome != "not_comparable" {
        parts.push(format!(
            "not comparable: {} (the sides' loops or rates differ)",
            v.not_comparable.join(", ")
        ));
    }
    parts.join("; ")
}

pub fn page(r: &CompareReport) -> String {
    use crate::html::Html;
    let mut h = Html::new();
    h.el("h1", &[], &format!("plumb compare: {}", r.what));
    h.with("section", &[("id", "verdict"), ("class", "verdict")], |h| {
        let class = match r.verdict.outcome {
            "worse" | "mixed" => "line warn",
            _ => "line",
        };
        h.with("table", &[], |h| {
            h.with("tr", &[], |h| {
                h.el("th", &[], "verdict")
                    .el("td", &[("class", class)], &verdict_line(&r.verdict));
            });
        });
    });
    h.el(
        "p",
        &[("class", "sub")],
        &format!(
            "baseline: {} — candidate: {}",
            r.baseline.join(", "),
            r.candidate.join(", ")
        ),
    );
    if !r.differed.is_empty() {
        h.el("h2", &[], "What differed");
        let items = differed_lines(r);
        h.list(&items);
    }
    h.el("h2", &[], "Figures");
    h.el("p", &[("class", "sub")], &format!("rule: {}", rule(r)));
    h.with("table", &[("id", "figures")], |h| {
        h.with("tr", &[], |h| {
            for c in [
                "figure",
                "baseline (95% CI)",
                "candidate (95% CI)",
                "change (95% CI)",
                "p",
                "verdict",
            ] {
                h.el("th", &[], c);
            }
        });
        for f in &r.figures {
            let c = &f.comparison;
            let class = match c.verdict {
                Verdict::Worse => "crit",
                Verdict::Withheld | Verdict::NotComparable => "warn",
                _ => "",
            };
            h.with("tr", &[("class", class)], |h| {
                for (i, cell) in cells(f).iter().enumerate() {
                    let numeric = (1..=4).contains(&i);
                    h.el("td", if numeric { &[("class", "n")] } else { &[] }, cell);
                }
            });
        }
    });
    let withheld = disturbed_lines(r);
    if !withheld.is_empty() {
        h.el("h2", &[], "Disturbed windows");
        h.list(&withheld);
    }
    let why = why_not_distinguishable(r);
    if !why.is_empty() {
        h.el("h2", &[], "Why ~ beyond the floor");
        h.list(&why);
    }
    if !r.timelines.is_empty() {
        h.el("h2", &[], "Second by second");
        for t in &r.timelines {
            h.with("div", &[("class", "chart")], |h| {
                h.raw(&timeline_chart(t));
            });
        }
    }
    crate::record_render::page(&format!("plumb compare: {}", r.what), &h.finish())
}
