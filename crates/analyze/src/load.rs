//! `plumb load`: what a database workload run measured, as numbers (the driver's histograms
//! summarised, NOPM from the schema beside the engine's own transaction count, the consistency
//! checks).

use hdrhistogram::Histogram;
use plumb_engine::oltp::driver::{Measured, TypeStats};
use serde::Serialize;
use std::collections::BTreeMap;

/// Latency percentiles in seconds, each only where the count supports it (p99.9 needs 1,000
/// values, p99 100, p95 20): fewer, and the figure would be the maximum in disguise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub min_s: Option<f64>,
    pub mean_s: Option<f64>,
    pub p50_s: Option<f64>,
    pub p95_s: Option<f64>,
    pub p99_s: Option<f64>,
    pub p99_9_s: Option<f64>,
    pub max_s: Option<f64>,
    /// Every latency, in 2%-wide buckets (`[µs, count]`), for `plumb compare`'s bootstrap.
    #[serde(
        default,
        skip_serializing_if = "crate::histogram::LatencyHistogram::is_empty"
    )]
    pub histogram_us: crate::histogram::LatencyHistogram,
    /// The p50 and p99 (µs; p99 where the tenth has 100 values) of each tenth of the timed
    /// window, in order: `plumb compare`'s samples inside one run. Empty when a tenth had none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenths_us: Vec<(u64, Option<u64>)>,
}

impl Percentiles {
    /// With the percentiles of each tenth of the window (all ten, or none).
    pub(crate) fn with_tenths(mut self, tenths: &[Histogram<u64>]) -> Percentiles {
        if tenths.len() == 10 && tenths.iter().all(|h| !h.is_empty()) {
            self.tenths_us = tenths
                .iter()
                .map(|h| {
                    (
                        h.value_at_quantile(0.5),
                        (h.len() >= 100).then(|| h.value_at_quantile(0.99)),
                    )
                })
                .collect();
        }
        self
    }

    /// From a histogram of microseconds.
    pub(crate) fn of_us(h: &Histogram<u64>) -> Percentiles {
        let n = h.len();
        let at = |q: f64| {
            (n > 0 && n >= crate::io::samples_needed(q)).then(|| {
                let v = if q <= 0.0 {
                    h.min()
                } else if q >= 1.0 {
                    h.max()
                } else {
                    h.value_at_quantile(q)
                };
                v as f64 / 1e6
            })
        };
        Percentiles {
            count: n,
            min_s: at(0.0),
            mean_s: (n > 0).then(|| h.mean() / 1e6),
            p50_s: at(0.5),
            p95_s: at(0.95),
            p99_s: at(0.99),
            p99_9_s: at(0.999),
            max_s: at(1.0),
            histogram_us: crate::histogram::LatencyHistogram::from_hdr_us(h),
            tenths_us: Vec::new(),
        }
    }
}

/// One transaction type over the timed window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TxFigures {
    pub name: String,
    pub committed: u64,
    /// Rolled back on purpose (new-order's unused item), not an error.
    pub rolled_back: u64,
    /// Failed after the last try, by class (deadlock, serialization, lock-timeout,
    /// lost-connection, other).
    pub failed: BTreeMap<String, u64>,
    /// The engine's codes of those failures (SQLSTATE, error number).
    pub codes: BTreeMap<String, u64>,
    pub retries: u64,
    /// From the intended start (open loop) or the start (closed loop).
    pub latency: Percentiles,
    /// From the start (open loop only): the server's part.
    pub service: Option<Percentiles>,
    /// Where its time went on the server (`--explain`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explained: Option<crate::explain::TypeSplit>,
}

impl TxFigures {
    pub fn of(t: &TypeStats) -> TxFigures {
        TxFigures {
            name: t.name.to_string(),
            committed: t.committed,
            rolled_back: t.rolled_back,
            failed: t
                .errors
                .iter()
                .map(|(k, v)| (k.code().to_string(), *v))
                .collect(),
            codes: t.codes.clone(),
            retries: t.retries,
            latency: Percentiles::of_us(&t.latency).with_tenths(&t.tenths),
            service: t.service.as_ref().map(Percentiles::of_us),
            explained: t.explained.as_ref().map(crate::explain::TypeSplit::of),
        }
    }

    pub fn failures(&self) -> u64 {
        self.failed.values().sum()
    }
}

/// One consistency condition and how many rows broke it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub condition: String,
    pub violations: i64,
}

/// One second of the run: transactions ended and failed (all types), the second's p95.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecondRow {
    pub t_s: u32,
    pub done: u64,
    pub failed: u64,
    pub p95_s: Option<f64>,
}

/// What `plumb load` did and measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadReport {
    /// `order-entry` (TPC-C-like), `tpcb` (pgbench's TPC-B-like transaction), `point-select`.
    pub workload: String,
    pub engine: String,
    pub version: String,
    /// Where it ran (a URL without its password, or plumb's private instance).
    pub target: String,
    pub database: String,
    /// Whether the schema was loaded by this run (false: a kept one was reused).
    pub loaded: bool,
    /// Whether the database stays after the run (--keep).
    pub kept: bool,
    pub load_s: Option<f64>,
    /// Warehouses (order-entry), or pgbench's scale (100,000 accounts a unit), or read-write's
    /// (100,000 rows a unit).
    pub scale: u32,
    /// What the scale counts: "warehouses", "pgbench scale", "rows" or "no scale".
    pub scale_unit: String,
    pub clients: u32,
    pub rampup_s: f64,
    pub duration_s: f64,
    /// The timed window as it ran (shorter when interrupted or every client was lost).
    pub window_s: f64,
    /// Open loop: the target rate over all clients (transactions a second).
    pub rate_per_s: Option<f64>,
    pub max_tries: u32,
    /// New orders a minute, from the schema: the change in sum(d_next_o_id) over the window
    /// (order-entry only).
    pub nopm: Option<f64>,
    pub new_orders: Option<i64>,
    /// Transactions a minute as the engine counts them (its own counters, every statement's
    /// transaction in the load's database).
    pub tpm: Option<f64>,
    pub tpm_source: String,
    pub types: Vec<TxFigures>,
    /// Open loop: how late transactions started against their schedule.
    pub lag: Option<Percentiles>,
    /// Open loop: transactions that started more than a millisecond late.
    pub late: u64,
    /// Clients that stopped on a lost connection, with the last message.
    pub lost_clients: Vec<String>,
    /// --check: TPC-C's consistency conditions 1-4 after the run.
    pub checks: Vec<Check>,
    pub seconds: Vec<SecondRow>,
    pub interrupted: bool,
    /// `--record`: the recording's file (`plumb report FILE` charts it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recording: Option<String>,
    /// The timed window watched for other work (the server on this host: its processes are
    /// the load's own); None where the server runs elsewhere.
    pub interference: Option<crate::interference::Interference>,
}

impl LoadReport {
    /// Committed transactions a second over the window, all types.
    pub fn tps(&self) -> Option<f64> {
        let done: u64 = self.types.iter().map(|t| t.committed + t.rolled_back).sum();
        (self.window_s > 0.0).then(|| done as f64 / self.window_s)
    }

    pub fn failures(&self) -> u64 {
        self.types.iter().map(TxFigures::failures).sum()
    }
}

/// The per-type figures and the series of a driver run.
pub fn figures(m: &Measured) -> (Vec<TxFigures>, Vec<SecondRow>, Option<Percentiles>) {
    let types = m.types.iter().map(TxFigures::of).collect();
    let seconds = m
        .seconds
        .iter()
        .map(|s| SecondRow {
            t_s: s.t,
            done: s.done.iter().sum(),
            failed: s.failed.iter().sum(),
            p95_s: s.p95_us.map(|u| u as f64 / 1e6),
        })
        .collect();
    (types, seconds, m.lag.as_ref().map(Percentiles::of_us))
}

/// Per minute, from a change over a window of `window_s` seconds.
pub fn per_minute(change: i64, window_s: f64) -> Option<f64> {
    (window_s > 0.0 && change >= 0).then(|| change as f64 * 60.0 / window_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tenth_of_the_window_keeps_its_p50_and_its_p99_where_it_has_100_values() {
        let tenth = |base: u64, n: u64| {
            let mut h = Histogram::<u64>::new(3).unwrap();
            for v in 0..n {
                h.record(base + v).unwrap();
            }
            h
        };
        let all = tenth(1000, 2000);
        let t: Vec<Histogram<u64>> = (0..10).map(|i| tenth(1000 * (i + 1), 200)).collect();
        let p = Percentiles::of_us(&all).with_tenths(&t);
        assert_eq!(p.tenths_us.len(), 10);
        // In order: the fifth tenth's values are 5,000-5,199 µs.
        let (p50, p99) = p.tenths_us[4];
        assert!((5090..=5110).contains(&p50), "{p50}");
        assert!(p99.is_some_and(|x| (5190..=5200).contains(&x)), "{p99:?}");
        // Under 100 values a tenth has no p99; an empty tenth leaves none at all.
        let few: Vec<Histogram<u64>> = (0..10).map(|i| tenth(1000 * (i + 1), 50)).collect();
        assert!(Percentiles::of_us(&all).with_tenths(&few).tenths_us[0]
            .1
            .is_none());
        let mut gap = t.clone();
        gap[9] = Histogram::<u64>::new(3).unwrap();
        assert!(Percentiles::of_us(&all)
            .with_tenths(&gap)
            .tenths_us
            .is_empty());
        assert!(Percentiles::of_us(&all)
            .with_tenths(&[])
            .tenths_us
            .is_empty());
    }

    #[test]
    fn percentiles_need_their_counts() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=50u64 {
            h.record(v * 1000).unwrap();
        }
        let p = Percentiles::of_us(&h);
        assert_eq!(p.count, 50);
        assert!(p.p95_s.is_some() && p.p99_s.is_none() && p.p99_9_s.is_none());
        assert!((p.max_s.unwrap() - 0.05).abs() < 1e-4);
        let empty = Percentiles::of_us(&Histogram::<u64>::new(3).unwrap());
        assert_eq!(empty.count, 0);
        assert!(empty.p50_s.is_none() && empty.max_s.is_none());
    }

    #[test]
    fn a_minute_rate_from_a_window() {
        assert_eq!(per_minute(150, 30.0), Some(300.0));
        assert_eq!(per_minute(5, 0.0), None);
        assert_eq!(per_minute(-1, 10.0), None);
    }
}
