//! A window of a recording as a run for `plumb compare` (`rec.plumb@10m-15m`): the figures
//! whose direction is plain (commits a second up is better; waits, stalls, steal, swapping
//! and the run queue down are), each a value a second inside the window.

use super::{Figure, Run};
use plumb_store::Recording;
use std::collections::BTreeMap;

/// Which recorded series are compared, with the name shown and whether higher is better.
/// `*` stands for any object (a disk).
const FIGURES: &[(&str, &str, bool)] = &[
    ("engine.db.commits_per_s", "commits a second", true),
    ("engine.db.rollbacks_per_s", "rollbacks a second", false),
    ("cpu.all.idle_pct", "CPU idle (%)", true),
    ("cpu.all.iowait_pct", "CPU iowait (%)", false),
    ("cpu.all.steal_pct", "CPU steal (%)", false),
    ("sched.runnable_count", "runnable tasks", false),
    ("psi.cpu.some_pct", "CPU pressure, some (%)", false),
    ("psi.io.some_pct", "I/O pressure, some (%)", false),
    ("psi.io.full_pct", "I/O pressure, full (%)", false),
    ("psi.memory.some_pct", "memory pressure, some (%)", false),
    ("mem.available_bytes", "memory available (bytes)", true),
    ("mem.swap_in_bytes_per_s", "swap-in (bytes/s)", false),
    ("mem.major_faults_per_s", "major faults a second", false),
    ("disk.*.read_await_ms", "read await (ms)", false),
    ("disk.*.write_await_ms", "write await (ms)", false),
    ("disk.*.flush_await_ms", "flush await (ms)", false),
    ("disk.*.util_pct", "busy (%)", false),
];

/// `name` against a pattern with `*` for one dotted part: the part it stood for.
fn matches<'a>(pattern: &str, name: &'a str) -> Option<Option<&'a str>> {
    let (p, n): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), name.split('.').collect());
    if p.len() != n.len() {
        return None;
    }
    let mut star = None;
    for (a, b) in p.iter().zip(&n) {
        if *a == "*" {
            star = Some(*b);
        } else if a != b {
            return None;
        }
    }
    Some(star)
}

/// The window from `from_s` to `to_s` (seconds from the recording's start) of `rec`, named
/// `label`. Only samples whose whole interval lies inside count.
pub fn recording_run(label: &str, rec: &Recording, from_s: f64, to_s: f64) -> Run {
    let cat = crate::series::catalog(rec);
    let t = crate::series::times_s(rec);
    let inside: Vec<bool> = (0..t.len())
        .map(|i| i > 0 && t[i - 1] >= from_s - 0.1 && t[i] <= to_s + 0.1)
        .collect();
    let mut figures = Vec::new();
    for (pattern, shown, higher) in FIGURES {
        for m in &cat {
            let Some(object) = matches(pattern, &m.name) else {
                continue;
            };
            let v: Vec<f64> = crate::series::compute(rec, m)
                .into_iter()
                .zip(&inside)
                .filter(|(x, ok)| **ok && x.is_finite())
                .map(|(x, _)| x)
                .collect();
            if v.is_empty() {
                continue;
            }
            let name = match object {
                Some(o) => format!("{o} {shown}"),
                None => shown.to_string(),
            };
            let mut f = Figure::new(name, *higher, v.iter().sum::<f64>() / v.len() as f64);
            f.per_second = v;
            f.timed = true;
            figures.push(f);
        }
    }
    let mut context = BTreeMap::new();
    if let Some(h) = &rec.header.hostname {
        context.insert("host".into(), h.clone());
    }
    context.insert(
        "sampled every".into(),
        format!("{} ms", rec.header.interval_ms),
    );
    Run {
        file: label.to_string(),
        what: "a recording's window".into(),
        figures,
        context,
        windows: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_match_one_part_for_a_star() {
        assert_eq!(
            super::matches("disk.*.util_pct", "disk.vda.util_pct"),
            Some(Some("vda"))
        );
        assert_eq!(
            super::matches("disk.*.util_pct", "disk.vda.read_iops"),
            None
        );
        assert_eq!(
            super::matches("cpu.all.idle_pct", "cpu.all.idle_pct"),
            Some(None)
        );
        assert_eq!(
            super::matches("cpu.all.idle_pct", "cpu.cpu0.idle_pct"),
            None
        );
    }
}
