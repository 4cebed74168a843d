//! How big and how long each step of the lab is, and the lab's own flag values.

use crate::error::Result;
use std::time::Duration;

/// How much the memory-pressure program holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PressureSize {
    Bytes(u64),
    PctOfLimit(f64),
}

impl PressureSize {
    /// `SIZE` (16M or more) or `PCT%` (1% to 200% of the limit).
    pub fn parse(s: &str) -> Result<PressureSize> {
        if let Some(p) = s.trim().strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| crate::Error::Refused(format!("--pressure {s}: not a percentage")))?;
            if !(1.0..=200.0).contains(&v) {
                crate::refuse!("--pressure {s}: use 1% to 200% of the limit");
            }
            return Ok(PressureSize::PctOfLimit(v));
        }
        let b = plumb_sys::units::parse_size(s)
            .map_err(|e| crate::Error::quoting(format!("--pressure {s}: {e}"), e))?;
        if b < (16 << 20) {
            crate::refuse!("--pressure {s}: use 16M or more");
        }
        Ok(PressureSize::Bytes(b))
    }

    /// Bytes to hold under a memory limit of `limit` bytes.
    pub fn bytes(self, limit: u64) -> u64 {
        match self {
            PressureSize::Bytes(b) => b,
            PressureSize::PctOfLimit(p) => (limit as f64 * p / 100.0) as u64,
        }
    }
}

/// The workload a lab runs (`--workload`): one of plumb load's, or a file of the user's (a
/// pgbench script on PostgreSQL, a file of SQL statements on MariaDB).
#[derive(Debug, Clone, PartialEq)]
pub enum LabWorkload {
    Named(plumb_engine::oltp::Workload),
    File(std::path::PathBuf),
}

impl LabWorkload {
    /// `order-entry`, `tpcb`, `point-select`, `read-write`, or the path of a readable file.
    pub fn parse(s: &str) -> Result<LabWorkload> {
        use plumb_engine::oltp::Workload;
        if let Some(w) = Workload::parse(s).filter(|w| !w.is_loop()) {
            return Ok(LabWorkload::Named(w));
        }
        let p = std::path::Path::new(s);
        match std::fs::metadata(p) {
            Ok(m) if m.is_file() => {
                if let Err(e) = std::fs::File::open(p) {
                    crate::refuse!("--workload {s}: {e}");
                }
                Ok(LabWorkload::File(p.to_path_buf()))
            }
            Ok(_) => crate::refuse!("--workload {s}: not a file"),
            Err(e) => match Workload::suggest(s).filter(|w| !w.is_loop()) {
                Some(w) => crate::refuse!(
                    "--workload {s}: did you mean {} ({})? The lab runs order-entry, tpcb, point-select, read-write or a pgbench script file ({s}: {e})",
                    w.name(),
                    w.like()
                ),
                None => crate::refuse!(
                    "--workload {s}: not order-entry, tpcb, point-select or read-write, nor a file ({e})"
                ),
            },
        }
    }

    /// The scale the lab loads this workload at, from the plan's pgbench scale: order-entry a
    /// warehouse per ten units (about 100 MB each), read-write 100,000 rows per five.
    pub fn scale(w: plumb_engine::oltp::Workload, plan_scale: u32) -> u32 {
        use plumb_engine::oltp::Workload;
        match w {
            Workload::OrderEntry => (plan_scale / 10).max(1),
            Workload::ReadWrite => (plan_scale / 5).max(1),
            _ => plan_scale,
        }
    }
}

/// A write-throttle rate: as typed (for the report) and in bytes per second.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    pub label: String,
    pub bytes_per_s: f64,
}

/// `RATE[,RATE...]`, each 64KB/s or more, in bytes per second.
pub fn parse_rates(s: &str) -> Result<Vec<Rate>> {
    let mut v = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        match plumb_sys::units::parse_rate(item) {
            Ok(plumb_sys::units::Rate::BytesPerS(b)) if b >= 65536.0 => {
                let label = if item.to_ascii_lowercase().ends_with("/s") {
                    item.to_string()
                } else {
                    format!("{item}/s")
                };
                v.push(Rate {
                    label,
                    bytes_per_s: b,
                })
            }
            Ok(plumb_sys::units::Rate::BytesPerS(_)) => {
                crate::refuse!("--throttle-writes {item}: use 64KB/s or more")
            }
            Ok(plumb_sys::units::Rate::Iops(_)) => {
                crate::refuse!("--throttle-writes {item}: give bytes per second, e.g. 5MB/s")
            }
            Err(e) => crate::refuse!("--throttle-writes: {e}"),
        }
    }
    if v.is_empty() {
        crate::refuse!("--throttle-writes: no rate given (e.g. 5MB/s or 20MB/s,5MB/s)");
    }
    Ok(v)
}

/// How big and how long each step is.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub shared_buffers: &'static str,
    pub durability_per_mode: Duration,
    pub durability_warmup: Duration,
    pub sweep_qds: Vec<u32>,
    pub sweep_run: Duration,
    pub sweep_warmup: Duration,
    /// Runs a durability mode or a sweep level may take in all: its two clean runs, then more
    /// while they disagree by over 10% (or one was disturbed), up to this many.
    pub max_runs: u32,
    pub probe_file: u64,
    pub seq_run: Duration,
    pub scale: u32,
    pub pgbench: Duration,
    pub bulk_iterations: u32,
    pub single_iterations: u32,
    /// pgbench runs of the experiments.
    pub experiment: Duration,
}

/// Disk space per pgbench scale unit (tables and indexes).
const PER_SCALE: u64 = 16 << 20;

impl Plan {
    pub fn quick() -> Plan {
        Plan {
            shared_buffers: "128MB",
            // A quarter second of 8 KiB durable writes is over 1,000 writes on an SSD.
            durability_per_mode: Duration::from_millis(250),
            durability_warmup: Duration::from_millis(100),
            sweep_qds: vec![1, 4, 16, 32],
            sweep_run: Duration::from_millis(500),
            sweep_warmup: Duration::from_millis(200),
            max_runs: 3,
            probe_file: 256 << 20,
            seq_run: Duration::from_secs(1),
            scale: 5,
            pgbench: Duration::from_secs(10),
            bulk_iterations: 5,
            single_iterations: 40,
            experiment: Duration::from_secs(10),
        }
    }

    pub fn full() -> Plan {
        Plan {
            shared_buffers: "256MB",
            durability_per_mode: Duration::from_millis(750),
            durability_warmup: Duration::from_millis(200),
            sweep_qds: vec![1, 2, 4, 8, 16, 32, 64],
            sweep_run: Duration::from_millis(1500),
            sweep_warmup: Duration::from_millis(500),
            max_runs: 3,
            probe_file: 1 << 30,
            seq_run: Duration::from_secs(3),
            scale: 30,
            pgbench: Duration::from_secs(40),
            bulk_iterations: 10,
            single_iterations: 250,
            experiment: Duration::from_secs(20),
        }
    }

    /// The workload runs this long (2 s or more: it needs time to settle), and each
    /// experiment's run of it as long: a changed run is compared with a baseline of its length.
    pub(crate) fn with_duration(mut self, d: Duration) -> Result<Plan> {
        if d < Duration::from_secs(2) {
            crate::refuse!("--duration: use 2s or more (pgbench needs time to settle)");
        }
        self.pgbench = d;
        self.experiment = d;
        Ok(self)
    }

    /// Disk space the lab needs at most: the probe file, pgbench's tables and indexes, the
    /// loops' table and WAL up to max_wal_size.
    pub(crate) fn space_needed(&self) -> u64 {
        self.probe_file + self.scale as u64 * PER_SCALE + (1 << 30)
    }

    /// pgbench shrunk to `free` bytes, down to scale 1; below that, the space the lab needs.
    pub fn fit(mut self, free: u64) -> std::result::Result<Plan, u64> {
        let base = self.space_needed() - self.scale as u64 * PER_SCALE;
        if free < self.space_needed() {
            let fit = free.saturating_sub(base) / PER_SCALE / 2;
            if fit < 1 {
                return Err(base + 2 * PER_SCALE);
            }
            self.scale = self.scale.min(fit as u32);
        }
        Ok(self)
    }

    /// shared_buffers in bytes.
    pub fn shared_buffers_bytes(&self) -> u64 {
        plumb_sys::units::parse_size(self.shared_buffers).unwrap_or(128 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_fits_the_free_space_or_says_what_it_needs() {
        let p = Plan::full();
        assert_eq!(p.clone().fit(u64::MAX).unwrap().scale, 30);
        // Room for the fixed part and ten scale units' worth (half of it used: WAL grows too).
        let base = p.space_needed() - 30 * PER_SCALE;
        assert_eq!(p.clone().fit(base + 10 * PER_SCALE).unwrap().scale, 5);
        let need = p.clone().fit(base).unwrap_err();
        assert_eq!(need, base + 32 * (1 << 20));
        assert!(Plan::quick().with_duration(Duration::from_secs(1)).is_err());
        // The experiments rerun the workload as long as the lab's own run.
        let p = Plan::full().with_duration(Duration::from_secs(5)).unwrap();
        assert_eq!(
            (p.pgbench, p.experiment),
            (Duration::from_secs(5), Duration::from_secs(5))
        );
    }

    #[test]
    fn pressure_and_rates() {
        assert_eq!(
            PressureSize::parse("50%").unwrap(),
            PressureSize::PctOfLimit(50.0)
        );
        assert_eq!(PressureSize::parse("50%").unwrap().bytes(1000), 500);
        assert!(PressureSize::parse("300%").is_err());
        assert!(PressureSize::parse("1M").is_err());
        assert_eq!(
            PressureSize::parse("64M").unwrap(),
            PressureSize::Bytes(64 << 20)
        );
        let r = parse_rates("5MB/s, 20MB").unwrap();
        assert_eq!(r[0].label, "5MB/s");
        assert_eq!(r[1].label, "20MB/s");
        assert!(parse_rates("1KB/s").is_err());
        assert!(parse_rates("100iops").is_err());
        assert!(parse_rates(",").is_err());
    }
}
