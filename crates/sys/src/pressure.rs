//! Pressure stall information: /proc/pressure/{cpu,memory,io} and cgroup `*.pressure` files.

use crate::{parse_err, Result, Root};
use serde::Serialize;
use std::path::Path;

/// One `some` or `full` line. Averages are percentages of wall time; `total` is cumulative.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PsiLine {
    pub avg10_pct: f64,
    pub avg60_pct: f64,
    pub avg300_pct: f64,
    /// Cumulative stall time (written in seconds, as `total_s`).
    #[serde(rename = "total_s", serialize_with = "crate::json::us_as_s")]
    pub total_us: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Psi {
    pub some: Option<PsiLine>,
    /// `None` where the kernel has no `full` line (cpu before 5.13).
    pub full: Option<PsiLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostPressure {
    pub cpu: Option<Psi>,
    pub memory: Option<Psi>,
    pub io: Option<Psi>,
}

/// Read host PSI. `Ok(None)` when /proc/pressure is absent (kernel without PSI, or `psi=0`).
pub fn read_host(root: &Root) -> Result<Option<HostPressure>> {
    let mut any = false;
    let mut one = |name: &str| -> Result<Option<Psi>> {
        let abs = format!("/proc/pressure/{name}");
        match root.read(&abs) {
            Ok(t) => {
                any = true;
                parse(&root.path(&abs), &t).map(Some)
            }
            // With psi=0 on the command line the files exist but reading them fails with
            // EOPNOTSUPP; treat that like absence.
            Err(e) if e.is_not_found() => Ok(None),
            Err(crate::Error::Io { source, .. })
                if source.raw_os_error() == Some(libc::EOPNOTSUPP) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    };
    let hp = HostPressure {
        cpu: one("cpu")?,
        memory: one("memory")?,
        io: one("io")?,
    };
    Ok(any.then_some(hp))
}

pub fn parse(path: &Path, text: &str) -> Result<Psi> {
    let mut psi = Psi {
        some: None,
        full: None,
    };
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let Some(kind) = it.next() else { continue };
        let mut l = PsiLine {
            avg10_pct: f64::NAN,
            avg60_pct: f64::NAN,
            avg300_pct: f64::NAN,
            total_us: 0,
        };
        let mut seen = 0;
        for kv in it {
            let bad = || parse_err(path, i + 1, "`avg10=F avg60=F avg300=F total=N`", line);
            let (k, v) = kv.split_once('=').ok_or_else(bad)?;
            match k {
                "avg10" => l.avg10_pct = v.parse().map_err(|_| bad())?,
                "avg60" => l.avg60_pct = v.parse().map_err(|_| bad())?,
                "avg300" => l.avg300_pct = v.parse().map_err(|_| bad())?,
                "total" => l.total_us = v.parse().map_err(|_| bad())?,
                _ => continue,
            }
            seen += 1;
        }
        if seen != 4 {
            return Err(parse_err(
                path,
                i + 1,
                "`avg10=F avg60=F avg300=F total=N`",
                line,
            ));
        }
        match kind {
            "some" => psi.some = Some(l),
            "full" => psi.full = Some(l),
            _ => return Err(parse_err(path, i + 1, "a `some` or `full` line", line)),
        }
    }
    if psi.some.is_none() {
        return Err(parse_err(
            path,
            1,
            "a `some` line",
            text.lines().next().unwrap_or(""),
        ));
    }
    Ok(psi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::put;

    #[test]
    fn parses_some_and_full() {
        let p = parse(
            Path::new("/proc/pressure/memory"),
            "some avg10=0.69 avg60=0.80 avg300=0.23 total=896415\nfull avg10=0.57 avg60=0.71 avg300=0.20 total=802317\n",
        )
        .unwrap();
        assert_eq!(p.some.as_ref().unwrap().total_us, 896415);
        assert!((p.full.as_ref().unwrap().avg60_pct - 0.71).abs() < 1e-9);
    }

    #[test]
    fn truncated_line_is_an_error_naming_the_line() {
        let e = parse(
            Path::new("/proc/pressure/io"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg6",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("/proc/pressure/io:2:"), "{e}");
    }

    #[test]
    fn missing_proc_pressure_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_host(&Root::new(d.path())).unwrap(), None);
        put(
            d.path(),
            "proc/pressure/cpu",
            "some avg10=1.00 avg60=2.00 avg300=3.00 total=10\n",
        );
        let h = read_host(&Root::new(d.path())).unwrap().unwrap();
        assert!(h.cpu.unwrap().full.is_none());
        assert!(h.memory.is_none());
    }
}
