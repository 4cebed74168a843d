//! One time unit in every JSON document plumb writes: durations are seconds (`_s`), whatever
//! unit the kernel or a tool gave them in (PSI's microseconds, cgroup's nanoseconds, pgbench's
//! milliseconds); timestamps stay milliseconds since the epoch (`_unix_ms`). Counts kept as
//! floats for arithmetic are written as integers when they are whole. Use these with
//! `#[serde(rename = "…_s", serialize_with = "…")]` so the Rust field keeps its own unit.

use serde::Serializer;

/// `v` to twelve significant digits: 61.358666 ms is 0.061358666 s, not 0.061358666000000004.
pub(crate) fn tidy(v: f64) -> f64 {
    if !v.is_finite() || v == 0.0 {
        return v;
    }
    format!("{v:.11e}").parse().unwrap_or(v)
}

fn seconds<S: Serializer>(v: Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) if v.is_finite() => s.serialize_f64(tidy(v)),
        _ => s.serialize_none(),
    }
}

pub fn ms_as_s<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    seconds(Some(*v / 1e3), s)
}

pub fn opt_ms_as_s<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    seconds(v.map(|v| v / 1e3), s)
}

pub(crate) fn us_as_s<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    seconds(Some(*v as f64 / 1e6), s)
}

pub(crate) fn opt_us_as_s<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    seconds(v.map(|v| v as f64 / 1e6), s)
}

pub(crate) fn opt_ns_as_s<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    seconds(v.map(|v| v as f64 / 1e9), s)
}

/// A float that is a count: an integer when whole.
pub fn whole<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

pub fn opt_whole<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) if v.is_finite() => whole(v, s),
        _ => s.serialize_none(),
    }
}

/// A figure's name and value in seconds when the name says milliseconds or microseconds
/// (`p50_ms` 1.5 is `p50_s` 0.0015); other names as they are.
pub fn in_seconds(name: &str, v: f64) -> (String, f64) {
    if let Some(base) = name.strip_suffix("_ms") {
        (format!("{base}_s"), tidy(v / 1e3))
    } else if let Some(base) = name.strip_suffix("_us") {
        (format!("{base}_s"), tidy(v / 1e6))
    } else {
        (name.to_string(), v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_become_clean_seconds() {
        let j = |v: f64| {
            let mut b = Vec::new();
            ms_as_s(&v, &mut serde_json::Serializer::new(&mut b)).unwrap();
            String::from_utf8(b).unwrap()
        };
        assert_eq!(j(61.358666), "0.061358666");
        assert_eq!(j(0.2), "0.0002");
        assert_eq!(j(f64::NAN), "null");
        assert_eq!(
            in_seconds("single.fdatasync.p50_ms", 1.5).0,
            "single.fdatasync.p50_s"
        );
        assert_eq!(
            in_seconds("queue_mean", 2.0),
            ("queue_mean".to_string(), 2.0)
        );
    }
}
