//! What `plumb load` opens on: how far its window can be trusted (watched for other work where
//! the server runs on this host; elsewhere said to be not watched, never called clean), the throughput with the spread of its seconds, the
//! slowest transaction type's p99, NOPM where the workload has new orders, and what needs action
//! (failed transactions, lost clients, a broken consistency check, an open loop that fell
//! behind its schedule, an interrupted run). Codes and numbers: `plumb_report` words it.

use crate::lab::Severity;
use crate::load::LoadReport;
use crate::verdict::{window_trust, Action, Headline, RunVerdict, Unit};

/// Late starts (open loop) above this share of the transactions need action.
pub const LATE_SHARE: f64 = 0.01;

/// The value at quantile `q` of sorted values (nearest rank).
pub(crate) fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i])
}

/// Whether a run's verdict says it is not a result (a broken consistency condition, or not one
/// transaction committed): plumb load exits 1, as a failed check.
pub fn failed_check(v: &RunVerdict) -> bool {
    v.actions
        .iter()
        .any(|a| a.rule == "load-check-broken" || a.rule == "load-nothing-committed")
}

pub fn load(r: &LoadReport) -> RunVerdict {
    let mut v = RunVerdict::of_windows(vec![window_trust("timed window", r.interference.as_ref())]);
    // The seconds of the timed window (after the ramp-up).
    let (from, to) = (r.rampup_s, r.rampup_s + r.window_s);
    let mut per_s: Vec<f64> = r
        .seconds
        .iter()
        .filter(|s| (s.t_s as f64) >= from && (s.t_s as f64) < to)
        .map(|s| s.done as f64)
        .collect();
    per_s.sort_by(f64::total_cmp);
    let spread = (per_s.len() >= 3).then(|| (quantile(&per_s, 0.1), quantile(&per_s, 0.9)));
    if let Some(tps) = r.tps() {
        v.headline.push(Headline {
            code: "tps",
            of: r.workload.clone(),
            value: tps,
            low: spread.and_then(|s| s.0),
            high: spread.and_then(|s| s.1),
            unit: Unit::PerS,
        });
    }
    if let Some((_, p99)) = r
        .types
        .iter()
        .filter_map(|t| Some((t, t.latency.p99_s?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        v.headline.push(Headline {
            code: "latency_p99",
            of: r.workload.clone(),
            value: p99,
            low: None,
            high: None,
            unit: Unit::S,
        });
    }
    if let (Some(nopm), Some(_)) = (r.nopm, r.new_orders) {
        v.headline.push(Headline {
            code: "nopm",
            of: r.workload.clone(),
            value: nopm,
            low: None,
            high: None,
            unit: Unit::PerMin,
        });
    }
    let done: u64 = r.types.iter().map(|t| t.committed + t.rolled_back).sum();
    let mut act = |rule: &str, severity: Severity| {
        v.actions.push(Action {
            rule: rule.to_string(),
            severity,
            experiment: false,
            finding: None,
        })
    };
    if r.interrupted {
        act("load-interrupted", Severity::Warn);
    }
    if !r.lost_clients.is_empty() {
        act("load-lost-clients", Severity::Critical);
    }
    if r.checks.iter().any(|c| c.violations != 0) {
        act("load-check-broken", Severity::Critical);
    }
    // Nothing committed: whatever the clients timed is not a result (a server whose reads
    // find nothing, a schema emptied under a kept mark), and the run says so as a failed check.
    let committed: u64 = r.types.iter().map(|t| t.committed).sum();
    if committed == 0 && r.failures() > 0 && !r.interrupted {
        act("load-nothing-committed", Severity::Critical);
    } else if r.failures() > 0 {
        act("load-failed", Severity::Warn);
    }
    if r.rate_per_s.is_some() && r.late as f64 > LATE_SHARE * done.max(1) as f64 {
        act("load-late", Severity::Warn);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.1), Some(1.0));
        assert_eq!(quantile(&v, 0.9), Some(9.0));
        assert_eq!(quantile(&v, 1.0), Some(10.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
