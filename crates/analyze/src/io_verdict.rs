//! What `plumb io run` opens on: how far the run can be trusted (its window graded as `plumb
//! compare` grades it, from the neighbours plumb watched), the totals first as diskspd puts
//! them (IOPS with the 10th and 90th percentile of its seconds, throughput, p99 latency per
//! direction) and what needs action (a disturbed run). Codes and numbers: `plumb_report` words
//! it.

use crate::io::IoReport;
use crate::lab::Severity;
use crate::load_verdict::quantile;
use crate::verdict::{window_trust, Action, Headline, RunVerdict, Trust, Unit};

pub fn io(r: &IoReport) -> RunVerdict {
    let mut v = RunVerdict::of_windows(vec![window_trust("the run", r.interference.as_ref())]);
    let total = r.tables.total.iter().find(|x| x.thread.is_none());
    // Whole seconds only: the last one may be cut short.
    let mut per_s: Vec<f64> = r
        .series
        .iter()
        .filter(|s| (s.second as f64) < r.measured_s.floor())
        .map(|s| (s.read_ios + s.write_ios) as f64)
        .collect();
    per_s.sort_by(f64::total_cmp);
    let spread = (per_s.len() >= 3).then(|| (quantile(&per_s, 0.1), quantile(&per_s, 0.9)));
    if let Some(t) = total {
        v.headline.push(Headline {
            code: "iops",
            of: "total".into(),
            value: t.iops,
            low: spread.and_then(|s| s.0),
            high: spread.and_then(|s| s.1),
            unit: Unit::PerS,
        });
        v.headline.push(Headline {
            code: "throughput",
            of: "total".into(),
            value: t.bytes_per_s,
            low: None,
            high: None,
            unit: Unit::BytesPerS,
        });
    }
    let p99 = r.percentiles.iter().find(|p| p.label == "99th");
    for (of, value) in [
        ("read", p99.and_then(|p| p.read_s)),
        ("write", p99.and_then(|p| p.write_s)),
    ] {
        if let Some(value) = value {
            v.headline.push(Headline {
                code: "latency_p99",
                of: of.into(),
                value,
                low: None,
                high: None,
                unit: Unit::S,
            });
        }
    }
    if v.trust == Trust::Disturbed {
        v.actions.push(Action {
            rule: "io-disturbed".into(),
            severity: Severity::Warn,
            experiment: false,
            finding: None,
        });
    }
    v
}
