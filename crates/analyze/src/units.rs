//! Human-readable units, shared by the notes analysis writes and by the renderers.

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

pub use plumb_sys::date::civil;

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_naturally() {
        assert_eq!(super::bytes(512), "512 B");
        assert_eq!(super::bytes(1536), "1.50 KiB");
        assert_eq!(super::bytes(24684084 * 1024), "23.5 GiB");
        assert_eq!(super::bytes(256 * 1024 * 1024 * 1024), "256 GiB");
    }
}
