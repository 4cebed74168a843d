//! Parsing the sizes, durations and rates users type: `8K`, `60K`, `2G`, `15s`, `500ms`,
//! `200MB/s`, `5000iops`. Sizes use binary multiples (K = 1024), as diskspd and fio do for block
//! sizes; rates in MB/s are decimal megabytes (10^6 bytes) per second, as both tools print them.

use std::time::Duration;

/// A size, duration or rate plumb cannot read, quoting it and saying what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

/// `4096`, `8K`, `8k`, `64KiB`, `3Gi`, `1M`, `2G`, `1T`: all binary (K = 1024), as diskspd, fio
/// and Kubernetes' Ki/Mi/Gi are. (Kubernetes' decimal M and G are parsed by the k8s commands.)
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    let bad = || {
        UnitError(format!(
            "{s:?} is not a size (use a number with an optional K, M, G or T suffix, e.g. 8K or 2G)"
        ))
    };
    let lower = t.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(digits_end);
    if num.is_empty() {
        return Err(bad());
    }
    let mult: u64 = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" | "ki" => 1 << 10,
        "m" | "mb" | "mib" | "mi" => 1 << 20,
        "g" | "gb" | "gib" | "gi" => 1 << 30,
        "t" | "tb" | "tib" | "ti" => 1 << 40,
        _ => return Err(bad()),
    };
    if num.contains('.') {
        let v: f64 = num.parse().map_err(|_| bad())?;
        let b = v * mult as f64;
        if !b.is_finite() || b < 0.0 || b > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(b.round() as u64)
    } else {
        let v: u64 = num.parse().map_err(|_| bad())?;
        v.checked_mul(mult).ok_or_else(bad)
    }
}

/// `15`, `15s`, `500ms`, `2m`, `1h`, `7d`, `250us`. A bare number is seconds.
/// The longest duration any flag takes: a year (anything longer is a typo, and the run clock
/// counts nanoseconds in 64 bits).
pub const MAX_DURATION_S: f64 = 365.0 * 86400.0;

pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim().to_ascii_lowercase();
    let bad = || {
        UnitError(format!(
            "{s:?} is not a duration (e.g. 15s, 500ms, 2m, 1m30s, 1h, 7d)"
        ))
    };
    if t.is_empty() {
        return Err(bad());
    }
    // One or more NUMBER UNIT parts, largest unit first (`1h30m`, `1m30s`, `2.5s`); a bare
    // number is seconds.
    let mut rest = t.as_str();
    let mut secs = 0.0;
    let mut last_scale = f64::INFINITY;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(end);
        let v: f64 = num.parse().map_err(|_| bad())?;
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let scale = match unit {
            "" if rest.len() == t.len() && next.is_empty() => 1.0,
            "s" | "sec" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return Err(bad()),
        };
        // 1m30s, not 30s1m or 1m1m.
        if scale >= last_scale {
            return Err(bad());
        }
        last_scale = scale;
        secs += v * scale;
        rest = next;
    }
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad());
    }
    if secs > MAX_DURATION_S {
        return Err(UnitError(format!(
            "{s:?} is longer than plumb runs anything (365 days at most)"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration as people write it: `1m30s`, `500ms`, `2h`, `1.5s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return if d.is_zero() {
            "0s".into()
        } else {
            format!("{}us", d.as_micros())
        };
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms % 1000 != 0 && ms < 60_000 {
        return format!("{}s", d.as_secs_f64());
    }
    let total = d.as_secs();
    let (h, m, sec) = (total / 3600, total / 60 % 60, total % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if sec > 0 || out.is_empty() {
        out.push_str(&format!("{sec}s"));
    }
    out
}

/// A throughput limit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    BytesPerS(f64),
    Iops(f64),
}

/// `200MB/s`, `1.5GB/s`, `800M` (MB/s), `5000iops`, `5000IOPS`.
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    let t = s.trim().to_ascii_lowercase();
    let bad = || UnitError(format!("{s:?} is not a rate (e.g. 200MB/s or 5000iops)"));
    if let Some(n) = t.strip_suffix("iops") {
        let v: f64 = n.trim().parse().map_err(|_| bad())?;
        return if v > 0.0 && v.is_finite() {
            Ok(Rate::Iops(v))
        } else {
            Err(bad())
        };
    }
    let t = t.strip_suffix("/s").unwrap_or(&t);
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let mult = match unit.trim() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1048576.0,
        "gib" => 1073741824.0,
        _ => return Err(bad()),
    };
    let b = v * mult;
    if b > 0.0 && b.is_finite() {
        Ok(Rate::BytesPerS(b))
    } else {
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8K"), Ok(8192));
        assert_eq!(parse_size("60k"), Ok(61440));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("1.5M"), Ok(1572864));
        assert_eq!(parse_size("4667840Ki"), Ok(4667840 * 1024));
        assert_eq!(parse_size("3Gi"), Ok(3 << 30));
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("8Q").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86400)));
        assert_eq!(parse_duration("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert!(parse_duration("soon").is_err());
        // Compound, largest unit first.
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h2m3s"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse_duration("1s500ms"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("30s1m").is_err());
        assert!(parse_duration("1m1m").is_err());
        assert!(parse_duration("1m30").is_err(), "a bare number only alone");
        assert!(parse_duration("").is_err());
        // Printed as people write them.
        for (d, want) in [
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(7200), "2h"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(15), "15s"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(format_duration(d), want);
            assert_eq!(parse_duration(want), Ok(d), "{want} round-trips");
        }
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("200MB/s"), Ok(Rate::BytesPerS(200e6)));
        assert_eq!(parse_rate("800M"), Ok(Rate::BytesPerS(800e6)));
        assert_eq!(parse_rate("5000iops"), Ok(Rate::Iops(5000.0)));
        assert_eq!(parse_rate("64MiB/s"), Ok(Rate::BytesPerS(67108864.0)));
        assert!(parse_rate("0iops").is_err());
        assert!(parse_rate("fast").is_err());
    }
}
