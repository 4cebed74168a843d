//! What happened in a recording's window, first: the busiest resource (the CPUs or a disk, by
//! its mean busy share, with its peak and when), the pressure stalls (PSI: the share of time
//! some task waited for the CPU, memory or I/O), memory in swap, and the marks that matter
//! (what went wrong or away, what the recorder's command did). Codes and numbers:
//! `plumb_report` words it.

use crate::series;
use plumb_store::Recording;
use serde::Serialize;

/// A resource's busy share over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Busy {
    /// `cpu` (all CPUs: 100 - idle) or `disk:DEV` (the share of time the device had I/O in
    /// flight).
    pub resource: String,
    pub mean_pct: f64,
    pub peak_pct: f64,
    /// Seconds from the recording's start to the peak sample.
    pub peak_at_s: f64,
}

/// A pressure stall (PSI) over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stall {
    /// `cpu`, `memory` or `io`.
    pub resource: String,
    /// The share of time some task stalled, mean and peak over the samples.
    pub some_mean_pct: f64,
    pub some_peak_pct: f64,
    pub peak_at_s: f64,
    /// The peak share of time every non-idle task stalled.
    pub full_peak_pct: Option<f64>,
}

/// A mark worth reading first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyMark {
    pub at_s: f64,
    /// The recorder's kind of mark (`engine`, `process`, `command`, …:
    /// [`crate::record::mark_kind`]).
    pub kind: &'static str,
    pub name: String,
    pub detail: Option<String>,
    /// Something went wrong or away (the engine unreachable, a command that failed, a primary
    /// lost).
    pub problem: bool,
}

/// The verdict of one recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordingVerdict {
    pub run: String,
    pub duration_s: f64,
    pub samples: usize,
    /// The file was read only up to a damaged part.
    pub damaged: bool,
    /// The busiest resource first, then the others that were busy at all (mean at least 1%).
    pub busy: Vec<Busy>,
    /// Stalls with a peak of at least [`STALL_NOTE_PCT`], the worst first.
    pub stalls: Vec<Stall>,
    pub swap_used_peak_bytes: Option<f64>,
    pub swap_in_peak_bytes_per_s: Option<f64>,
    /// At most [`MARKS_SHOWN`], the problems first; `marks_total` says how many there were.
    pub marks: Vec<KeyMark>,
    pub marks_total: usize,
}

/// A pressure stall below this peak share is not worth a line.
pub const STALL_NOTE_PCT: f64 = 1.0;
/// How many marks the verdict names.
pub const MARKS_SHOWN: usize = 5;

/// The finite values' mean, peak and the peak's index.
fn stats(v: &[f64]) -> Option<(f64, f64, usize)> {
    let mut n = 0usize;
    let mut sum = 0.0;
    let mut peak: Option<(f64, usize)> = None;
    for (i, x) in v.iter().enumerate().filter(|(_, x)| x.is_finite()) {
        n += 1;
        sum += x;
        if peak.is_none_or(|(p, _)| *x > p) {
            peak = Some((*x, i));
        }
    }
    let (p, i) = peak?;
    Some((sum / n as f64, p, i))
}

fn values(rec: &Recording, cat: &[series::MetricInfo], name: &str) -> Option<Vec<f64>> {
    series::find(cat, name).map(|m| series::compute(rec, m))
}

/// Whether a mark says something went wrong or away: the engine or a primary unreachable, a
/// command that did not exit 0 (its detail is the status: `exit status: 1`, `signal: 9`).
fn is_problem(name: &str, detail: Option<&str>) -> bool {
    name.ends_with(" unreachable")
        || (name == "command exited" && detail.is_some_and(|d| d != "exit status: 0"))
}

pub fn recording(rec: &Recording, run: &str) -> RecordingVerdict {
    let cat = series::catalog(rec);
    let t = series::times_s(rec);
    let at = |i: usize| t.get(i).copied().unwrap_or(0.0);
    let mut busy = Vec::new();
    if let Some((mean, peak, i)) = values(rec, &cat, "cpu.all.idle_pct")
        .map(|v| v.iter().map(|x| 100.0 - x).collect::<Vec<_>>())
        .as_deref()
        .and_then(stats)
    {
        busy.push(Busy {
            resource: "cpu".into(),
            mean_pct: mean,
            peak_pct: peak,
            peak_at_s: at(i),
        });
    }
    for m in cat
        .iter()
        .filter(|m| m.name.starts_with("disk.") && m.name.ends_with(".util_pct"))
    {
        let dev = &m.name["disk.".len()..m.name.len() - ".util_pct".len()];
        if let Some((mean, peak, i)) = stats(&series::compute(rec, m)) {
            busy.push(Busy {
                resource: format!("disk:{dev}"),
                mean_pct: mean,
                peak_pct: peak.min(100.0),
                peak_at_s: at(i),
            });
        }
    }
    busy.sort_by(|a, b| b.mean_pct.total_cmp(&a.mean_pct));
    // The busiest always; the others only when they were busy at all.
    let mut kept: Vec<Busy> = busy.iter().take(1).cloned().collect();
    kept.extend(busy.into_iter().skip(1).filter(|b| b.mean_pct >= 1.0));
    let mut stalls = Vec::new();
    for r in ["cpu", "memory", "io"] {
        let Some((mean, peak, i)) = values(rec, &cat, &format!("psi.{r}.some_pct"))
            .as_deref()
            .and_then(stats)
        else {
            continue;
        };
        if peak < STALL_NOTE_PCT {
            continue;
        }
        stalls.push(Stall {
            resource: r.into(),
            some_mean_pct: mean,
            some_peak_pct: peak,
            peak_at_s: at(i),
            full_peak_pct: values(rec, &cat, &format!("psi.{r}.full_pct"))
                .as_deref()
                .and_then(stats)
                .map(|s| s.1),
        });
    }
    stalls.sort_by(|a, b| b.some_peak_pct.total_cmp(&a.some_peak_pct));
    let peak = |name: &str| {
        values(rec, &cat, name)
            .as_deref()
            .and_then(stats)
            .map(|s| s.1)
    };
    let mut marks: Vec<KeyMark> = rec
        .marks
        .iter()
        .map(|m| KeyMark {
            at_s: m.t_ms as f64 / 1000.0,
            kind: crate::record::mark_kind(&m.name),
            name: m.name.clone(),
            detail: m.detail.clone(),
            problem: is_problem(&m.name, m.detail.as_deref()),
        })
        .collect();
    let marks_total = marks.len();
    // Problems first, then in time order; the recorder's removal of old files last of all.
    marks.sort_by(|a, b| {
        (!a.problem, a.kind == "recording")
            .cmp(&(!b.problem, b.kind == "recording"))
            .then(a.at_s.total_cmp(&b.at_s))
    });
    marks.truncate(MARKS_SHOWN);
    RecordingVerdict {
        run: run.to_string(),
        duration_s: t.last().copied().unwrap_or(0.0),
        samples: rec.times_ms.len(),
        damaged: rec.damage.is_some(),
        busy: kept,
        stalls,
        swap_used_peak_bytes: peak("mem.swap_used_bytes"),
        swap_in_peak_bytes_per_s: peak("mem.swap_in_bytes_per_s"),
        marks,
        marks_total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_and_problems() {
        let (mean, peak, i) = stats(&[f64::NAN, 10.0, 30.0, 20.0]).unwrap();
        assert_eq!((mean, peak, i), (20.0, 30.0, 2));
        assert!(stats(&[f64::NAN]).is_none());
        assert!(is_problem("engine unreachable", None));
        assert!(is_problem("primary unreachable", Some("timeout")));
        assert!(is_problem("command exited", Some("exit status: 1")));
        assert!(is_problem("command exited", Some("signal: 9 (SIGKILL)")));
        assert!(!is_problem("command exited", Some("exit status: 0")));
        assert!(!is_problem("engine back", None));
        assert!(!is_problem("checkpoint start", None));
    }
}
