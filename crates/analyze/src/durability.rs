//! `plumb io durability`: per mode, what one durable write costs and what the device received,
//! ending in plain statements for PostgreSQL and SQL Server.

use crate::io::quantile_s;
use crate::os::StorageSection;
use plumb_load::durability::ProbeResult;
use plumb_load::job::Durability;
use plumb_load::run::DirStats;
use plumb_sys::tracefs::RqCounts;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeRow {
    pub mode: Durability,
    pub block_size: u32,
    /// A completed write is on stable storage, given a device that honours FLUSH and FUA.
    pub durable: bool,
    pub writes: u64,
    pub writes_per_s: f64,
    pub mean_s: Option<f64>,
    pub p50_s: Option<f64>,
    pub p99_s: Option<f64>,
    pub max_s: Option<f64>,
    /// fdatasync/fsync calls made after the measured writes.
    pub sync_calls: u64,
    /// Requests the device received during this mode's run (warm-up included).
    pub device: Option<RqCounts>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DurabilityReport {
    pub path: PathBuf,
    pub file: PathBuf,
    pub storage: Option<StorageSection>,
    pub per_mode_s: f64,
    pub rows: Vec<ModeRow>,
    /// Why there is no block-layer evidence, when there is none.
    pub trace_unavailable: Option<String>,
    pub conclusions: Vec<String>,
}

/// Differences smaller than this are not called: repeated short probes on one machine differ
/// by several percent.
const NOISE: f64 = 0.10;

fn us(s: f64) -> String {
    format!("{:.0} µs", s * 1e6)
}

fn row_of(rows: &[ModeRow], mode: Durability, bs: u32) -> Option<&ModeRow> {
    rows.iter().find(|r| r.mode == mode && r.block_size == bs)
}

fn device_words(c: &RqCounts) -> String {
    let mut parts = vec![format!("{} writes", c.writes)];
    if c.fua_writes > 0 {
        parts.push(format!("{} of them FUA", c.fua_writes));
    }
    if c.preflush_writes > 0 {
        parts.push(format!("{} with a preflush", c.preflush_writes));
    }
    parts.push(format!("{} FLUSH requests", c.flushes));
    if c.meta_writes > 0 {
        parts.push(format!("{} metadata (journal) writes", c.meta_writes));
    }
    parts.join(", ")
}

pub fn build(
    p: &ProbeResult,
    path: PathBuf,
    storage: Option<StorageSection>,
    per_mode_s: f64,
) -> DurabilityReport {
    let rows: Vec<ModeRow> = p
        .runs
        .iter()
        .map(|m| {
            let mut w = DirStats::empty(false);
            for x in &m.run.workers {
                w.merge(&x.write);
            }
            let secs = m.run.measured_s;
            ModeRow {
                mode: m.mode,
                block_size: m.block_size,
                durable: m.mode.durable(),
                writes: w.ios,
                writes_per_s: if secs > 0.0 { w.ios as f64 / secs } else { 0.0 },
                mean_s: (w.ios > 0).then(|| w.lat_sum_ns / w.ios as f64 / 1e9),
                p50_s: quantile_s(&w.lat, 0.5),
                p99_s: quantile_s(&w.lat, 0.99),
                max_s: quantile_s(&w.lat, 1.0),
                sync_calls: m.run.workers.iter().map(|x| x.syncs).sum(),
                device: m.trace.clone(),
            }
        })
        .collect();
    let conclusions = conclude(&rows, storage.as_ref(), p.trace_unavailable.as_deref());
    DurabilityReport {
        path,
        file: p.file.clone(),
        storage,
        per_mode_s,
        rows,
        trace_unavailable: p.trace_unavailable.clone(),
        conclusions,
    }
}

/// The plain statements that end the report.
pub fn conclude(
    rows: &[ModeRow],
    storage: Option<&StorageSection>,
    trace_unavailable: Option<&str>,
) -> Vec<String> {
    let mut c = Vec::new();
    let queue = storage.and_then(|s| {
        s.disks
            .iter()
            .filter_map(|d| s.layers.iter().find(|l| &l.device.name == d))
            .find_map(|l| l.device.queue.clone().map(|q| (l.device.name.clone(), q)))
    });
    let volatile = queue
        .as_ref()
        .map(|(_, q)| q.write_cache.as_deref() != Some("write through"));
    let fua = queue.as_ref().and_then(|(_, q)| q.fua);
    if let Some((name, q)) = &queue {
        c.push(format!(
            "Device {name}: write cache {}, FUA {}. {}",
            q.write_cache.as_deref().unwrap_or("unknown"),
            match q.fua {
                Some(true) => "supported",
                Some(false) => "not supported",
                None => "unknown",
            },
            crate::os::durability_line(q)
                .map(|l| {
                    let mut c = l.chars();
                    c.next()
                        .map(|f| f.to_uppercase().chain(c).collect::<String>())
                        .unwrap_or_default()
                })
                .unwrap_or_default()
        ));
    }
    // Which modes are durable here.
    let durable: Vec<String> = crate_modes()
        .into_iter()
        .filter(|m| m.durable() || (matches!(m, Durability::Direct) && volatile == Some(false)))
        .map(|m| m.to_string())
        .collect();
    c.push(format!(
        "Durable on this device (if it honours FLUSH{}): {}. Not durable: none (page cache){}.",
        if fua == Some(true) { " and FUA" } else { "" },
        durable.join(", "),
        if volatile == Some(false) {
            ""
        } else {
            ", direct (the volatile cache holds it)"
        }
    ));

    // Block-layer evidence for the FUA path and the flush path.
    match trace_unavailable {
        Some(why) => c.push(format!("No block-layer evidence: {why}.")),
        None => {
            for (mode, label) in [
                (Durability::DirectDsync, "O_DIRECT|O_DSYNC"),
                (
                    Durability::Fdatasync {
                        every: 1,
                        direct: false,
                    },
                    "write + fdatasync()",
                ),
            ] {
                if let Some(d) = rows
                    .iter()
                    .find(|r| r.mode == mode)
                    .and_then(|r| r.device.as_ref())
                {
                    let verdict = if d.fua_writes > 0 && d.flushes == 0 {
                        "the device received FUA writes and no FLUSH: the FUA path"
                    } else if d.flushes + d.preflush_writes > 0 {
                        "each durable write cost a cache FLUSH"
                    } else {
                        "the device received neither FLUSH nor FUA"
                    };
                    c.push(format!("{label}: {} — {verdict}.", device_words(d)));
                }
            }
        }
    }

    // Fastest durable mode for an 8K commit.
    let bs = if rows.iter().any(|r| r.block_size == 8192) {
        8192
    } else {
        rows.first().map_or(8192, |r| r.block_size)
    };
    let mut durable_rows: Vec<&ModeRow> = rows
        .iter()
        .filter(|r| r.block_size == bs && r.durable && r.mean_s.is_some())
        .collect();
    durable_rows.sort_by(|a, b| {
        a.mean_s
            .partial_cmp(&b.mean_s)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    if let Some(best) = durable_rows.first() {
        let others: Vec<String> = durable_rows[1..]
            .iter()
            .map(|r| format!("{} {}", r.mode, us(r.mean_s.unwrap_or(0.0))))
            .collect();
        c.push(format!(
            "Fastest durable {} KiB write: {} at {} mean, {} p99 ({:.0} per second); then {}.",
            bs / 1024,
            best.mode,
            us(best.mean_s.unwrap_or(0.0)),
            best.p99_s.map(us).unwrap_or_else(|| "unknown".into()),
            best.writes_per_s,
            others.join(", ")
        ));
    }

    // PostgreSQL wal_sync_method: fdatasync (default on Linux) vs open_datasync.
    let fds = row_of(
        rows,
        Durability::Fdatasync {
            every: 1,
            direct: false,
        },
        bs,
    )
    .and_then(|r| r.mean_s);
    let ods = row_of(rows, Durability::Dsync, bs).and_then(|r| r.mean_s);
    let odds = row_of(rows, Durability::DirectDsync, bs).and_then(|r| r.mean_s);
    if let (Some(a), Some(b)) = (fds, ods) {
        let direct = odds.map(|d| format!("; with O_DIRECT, which PostgreSQL adds to open_datasync only under wal_level = minimal, {}", us(d))).unwrap_or_default();
        // Run-to-run noise of a few seconds' probe is several percent: claim a winner only past
        // NOISE.
        let advice = if b < a * (1.0 - NOISE) {
            "open_datasync is faster here; confirm with a longer probe and your workload before switching"
        } else if a < b * (1.0 - NOISE) {
            "keep the default fdatasync"
        } else {
            "within this probe's run-to-run noise (10%); keep the default fdatasync"
        };
        c.push(format!(
            "PostgreSQL wal_sync_method: fdatasync (the Linux default) costs {} per {} KiB commit, open_datasync {}{direct}: {advice}.",
            us(a),
            bs / 1024,
            us(b)
        ));
    }

    // SQL Server: forced flush (O_DIRECT + fdatasync) vs the FUA path (O_DIRECT|O_DSYNC).
    let lbs = if rows.iter().any(|r| r.block_size == 61440) {
        61440
    } else {
        bs
    };
    let ff = row_of(
        rows,
        Durability::Fdatasync {
            every: 1,
            direct: true,
        },
        lbs,
    )
    .and_then(|r| r.mean_s);
    let fu = row_of(rows, Durability::DirectDsync, lbs).and_then(|r| r.mean_s);
    if let (Some(a), Some(b)) = (ff, fu) {
        let tail = match fua {
            Some(false) => " This device has no FUA, so O_DSYNC still ends in a cache flush: the FUA setting cannot help here.".to_string(),
            Some(true) if b < a * (1.0 - NOISE) => " With FUA the log write skips the separate flush: trace flag 3979 with control.alternatewritethrough = 0 pays off here.".to_string(),
            Some(true) => " The FUA path is no faster here.".to_string(),
            None => String::new(),
        };
        c.push(format!(
            "SQL Server {} KiB log writes: forced flush (O_DIRECT then fdatasync, the default) {}; O_DIRECT|O_DSYNC (trace flag 3979, control.alternatewritethrough = 0) {}.{tail}",
            lbs / 1024,
            us(a),
            us(b)
        ));
    }

    // What durability costs over a plain direct write.
    if let (Some(d), Some(best)) = (
        row_of(rows, Durability::Direct, bs).and_then(|r| r.mean_s),
        durable_rows.first().and_then(|r| r.mean_s),
    ) {
        if best > d {
            c.push(format!(
                "Durability costs {:.1}x here: a plain O_DIRECT {} KiB write takes {}, the fastest durable one {}.",
                best / d,
                bs / 1024,
                us(d),
                us(best)
            ));
        }
    }
    c
}

fn crate_modes() -> Vec<Durability> {
    plumb_load::durability::modes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: &str, bs: u32, mean_us: f64, dev: Option<RqCounts>) -> ModeRow {
        let m = Durability::parse(mode).unwrap();
        ModeRow {
            mode: m,
            block_size: bs,
            durable: m.durable(),
            writes: 1000,
            writes_per_s: 1e6 / mean_us,
            mean_s: Some(mean_us / 1e6),
            p50_s: Some(mean_us / 1e6),
            p99_s: Some(mean_us * 3.0 / 1e6),
            max_s: None,
            sync_calls: 0,
            device: dev,
        }
    }

    #[test]
    fn statements_follow_the_numbers() {
        let flushy = RqCounts {
            writes: 1000,
            flushes: 1000,
            ..Default::default()
        };
        let rows = vec![
            row("fdatasync", 8192, 118.0, Some(flushy.clone())),
            row("dsync", 8192, 151.0, None),
            row("direct-dsync", 8192, 140.0, Some(flushy.clone())),
            row("direct", 8192, 39.0, None),
            row("direct-fdatasync", 61440, 200.0, None),
            row("direct-dsync", 61440, 196.0, None),
        ];
        let c = conclude(&rows, None, None);
        let all = c.join("\n");
        assert!(
            all.contains("Fastest durable 8 KiB write: fdatasync at 118 µs"),
            "{all}"
        );
        assert!(all.contains("keep the default fdatasync"), "{all}");
        assert!(
            all.contains("each durable write cost a cache FLUSH"),
            "{all}"
        );
        assert!(all.contains("Durability costs 3.0x"), "{all}");
        assert!(all.contains("SQL Server 60 KiB log writes"), "{all}");
        let c = conclude(&rows, None, Some("block-layer tracing needs root"));
        assert!(c
            .iter()
            .any(|l| l.contains("No block-layer evidence: block-layer tracing needs root")));
    }

    #[test]
    fn fua_evidence_is_named() {
        let fua = RqCounts {
            writes: 500,
            fua_writes: 500,
            ..Default::default()
        };
        let rows = vec![
            row("direct-dsync", 8192, 90.0, Some(fua)),
            row("fdatasync", 8192, 150.0, None),
        ];
        let all = conclude(&rows, None, None).join("\n");
        assert!(
            all.contains("500 of them FUA") && all.contains("the FUA path"),
            "{all}"
        );
    }
}
