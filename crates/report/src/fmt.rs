//! Unit conversion for people: the only place bytes become GiB and seconds become minutes.

/// What a missing value prints as in a sentence: unknown is not zero.
pub const UNKNOWN: &str = "unknown";

/// What a missing value prints as in a table cell (every table but the diskspd-compatible
/// ones, which print `N/A` as diskspd does).
pub const MISSING: &str = "-";

/// IEC bytes with three significant digits: `512 B`, `1.50 KiB`, `23.5 GiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else if v >= 10.0 {
        format!("{v:.1} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// A span of seconds: `45 s`, `12 min`, `3 h 05 min`, `4 d 02 h`.
pub fn duration(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "unknown".to_string();
    }
    let t = s as u64;
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else if t < 120 {
        format!("{s:.1} s")
    } else if t < 3600 {
        format!("{} min", t / 60)
    } else if t < 86400 {
        format!("{} h {:02} min", t / 3600, (t % 3600) / 60)
    } else {
        format!("{} d {:02} h", t / 86400, (t % 86400) / 3600)
    }
}

pub(crate) fn opt_bytes(b: Option<u64>) -> String {
    b.map(bytes).unwrap_or_else(|| UNKNOWN.to_string())
}

pub fn pct(p: f64) -> String {
    if p != 0.0 && p.abs() < 0.1 {
        format!("{p:.2}%")
    } else {
        format!("{p:.1}%")
    }
}

pub(crate) fn opt_pct(p: Option<f64>) -> String {
    p.map(pct).unwrap_or_else(|| UNKNOWN.to_string())
}

pub fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string())
        .unwrap_or_else(|| UNKNOWN.to_string())
}

/// A latency in seconds: `0.42 ms`, `12.3 ms`, `1.20 s`. The one latency format: every
/// renderer's times go through here (or [`latency_ms`] when the figure is in milliseconds).
pub fn ms(s: f64) -> String {
    let m = s * 1000.0;
    if m >= 1000.0 {
        format!("{s:.2} s")
    } else if m >= 10.0 {
        format!("{m:.1} ms")
    } else {
        format!("{m:.2} ms")
    }
}

/// A time that may be far below a millisecond (a syscall's): `850 ns`, `12.3 µs`, then as
/// [`ms`].
pub(crate) fn short_time(s: f64) -> String {
    let us = s * 1e6;
    if us < 1.0 {
        format!("{:.0} ns", s * 1e9)
    } else if us < 10.0 {
        format!("{us:.2} µs")
    } else if us < 1000.0 {
        format!("{us:.1} µs")
    } else {
        ms(s)
    }
}

/// A latency in milliseconds, formatted as [`ms`].
pub(crate) fn latency_ms(m: f64) -> String {
    ms(m / 1000.0)
}

pub(crate) fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => UNKNOWN,
    }
}

/// A count with thousands separators, or two decimals when it has a fraction.
pub fn count(v: f64) -> String {
    if v.fract() != 0.0 && v.abs() < 1000.0 {
        return format!("{v:.2}");
    }
    let s = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_naturally() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(24684084 * 1024), "23.5 GiB");
        assert_eq!(bytes(256 * 1024 * 1024 * 1024), "256 GiB");
        assert_eq!(opt_bytes(None), "unknown");
    }

    #[test]
    fn durations_and_percents() {
        assert_eq!(duration(0.25), "250 ms");
        assert_eq!(duration(45.0), "45.0 s");
        assert_eq!(duration(3.0 * 3600.0 + 300.0), "3 h 05 min");
        assert_eq!(duration(2.0 * 86400.0 + 7200.0), "2 d 02 h");
        assert_eq!(pct(0.05), "0.05%");
        assert_eq!(pct(12.345), "12.3%");
        assert_eq!(pct(0.0), "0.0%");
    }
}

/// A clock reading of whole seconds: m:ss, or h:mm:ss from an hour (progress lines and time
/// axes).
pub fn clock(secs: u64) -> String {
    if secs >= 3600 {
        format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
    } else {
        format!("{}:{:02}", secs / 60, secs % 60)
    }
}

#[cfg(test)]
mod units_tests {
    #[test]
    fn bytes_read_naturally() {
        assert_eq!(super::bytes(512), "512 B");
        assert_eq!(super::bytes(1536), "1.50 KiB");
        assert_eq!(super::bytes(24684084 * 1024), "23.5 GiB");
        assert_eq!(super::bytes(256 * 1024 * 1024 * 1024), "256 GiB");
        // Kubernetes' worked example: 29196Mi allocatable, which its documentation calls 28.5Gi.
        assert_eq!(super::bytes(29196 << 20), "28.5 GiB");
    }
}
