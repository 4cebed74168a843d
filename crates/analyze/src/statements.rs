//! The statements a recording followed (`stmt.ID.…`), between two points of it: what each did
//! in between (calls, time, rows, blocks), heaviest first — pg_profile's "top statements" for
//! any stretch of a recording.

use plumb_store::{Recording, MISSING};

/// One statement's work between two points.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StatementRow {
    /// The engine's id for it (queryid, digest, query_hash).
    pub id: String,
    /// Its normalized text (no literal values), as recorded.
    pub text: String,
    pub calls: f64,
    pub time_ms: f64,
    /// Time per call.
    pub mean_ms: Option<f64>,
    /// Share of the time of every statement followed.
    pub time_share_pct: f64,
    pub rows: f64,
    pub blocks_read: Option<f64>,
    pub blocks_hit: Option<f64>,
    /// Blocks found in the cache, of all it asked for.
    pub hit_pct: Option<f64>,
}

/// The table between two points.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StatementTable {
    /// Seconds from the recording's start.
    pub from_s: f64,
    pub to_s: f64,
    /// Statements followed in the recording (the table holds the `top` heaviest).
    pub followed: usize,
    pub rows: Vec<StatementRow>,
}

/// A field's value at the first sample at or after `from_ms` that has it, and at the last at
/// or before `to_ms`; their difference, when the counter did not go back (a reset).
fn delta(rec: &Recording, name: &str, from_ms: u64, to_ms: u64) -> Option<f64> {
    let i = rec.metrics.iter().position(|m| m.name == name)?;
    let col = rec.columns.get(i)?;
    let pts = rec
        .times_ms
        .iter()
        .zip(col)
        .filter(|(t, v)| **t >= from_ms && **t <= to_ms && **v != MISSING);
    let mut first = None;
    let mut last = None;
    for (_, v) in pts {
        first.get_or_insert(*v);
        last = Some(*v);
    }
    let (a, b) = (first?, last?);
    (b >= a).then(|| (b - a) as f64)
}

/// The `top` statements by time between `from_s` and `to_s` (seconds from the start; None:
/// the recording's ends). Empty when the recording followed none.
pub fn table(
    rec: &Recording,
    from_s: Option<f64>,
    to_s: Option<f64>,
    top: usize,
) -> StatementTable {
    let end_ms = rec.times_ms.last().copied().unwrap_or(0);
    let from_ms = from_s.map_or(0, |s| (s * 1000.0).round().max(0.0) as u64);
    let to_ms = to_s.map_or(end_ms, |s| (s * 1000.0).round().max(0.0) as u64);
    let mut ids: Vec<&str> = rec
        .metrics
        .iter()
        .filter_map(|m| m.name.strip_prefix("stmt.")?.strip_suffix(".calls"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut rows: Vec<StatementRow> = ids
        .iter()
        .filter_map(|id| {
            let d = |f: &str| delta(rec, &format!("stmt.{id}.{f}"), from_ms, to_ms);
            let calls = d("calls")?;
            let time_ms = d("time_us")? / 1000.0;
            let (read, hit) = (d("blks_read"), d("blks_hit"));
            Some(StatementRow {
                id: id.to_string(),
                text: rec
                    .object_label(&format!("stmt.{id}"))
                    .unwrap_or("")
                    .to_string(),
                calls,
                time_ms,
                mean_ms: (calls > 0.0).then(|| time_ms / calls),
                time_share_pct: 0.0,
                rows: d("rows").unwrap_or(0.0),
                blocks_read: read,
                blocks_hit: hit,
                hit_pct: match (read, hit) {
                    (Some(r), Some(h)) if r + h > 0.0 => Some(100.0 * h / (r + h)),
                    _ => None,
                },
            })
        })
        .filter(|r| r.calls > 0.0 || r.time_ms > 0.0)
        .collect();
    let total: f64 = rows.iter().map(|r| r.time_ms).sum();
    for r in &mut rows {
        r.time_share_pct = if total > 0.0 {
            100.0 * r.time_ms / total
        } else {
            0.0
        };
    }
    rows.sort_by(|a, b| {
        b.time_ms
            .total_cmp(&a.time_ms)
            .then_with(|| a.id.cmp(&b.id))
    });
    rows.truncate(top);
    StatementTable {
        from_s: from_ms as f64 / 1000.0,
        to_s: to_ms.min(end_ms) as f64 / 1000.0,
        followed: ids.len(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_store::{Header, Kind, Writer};

    #[test]
    fn the_work_between_two_points_heaviest_first() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.plumb");
        let h = Header {
            format_version: 1,
            plumb_version: "t".into(),
            started_unix_ms: 0,
            interval_ms: 1000,
            slow_interval_ms: None,
            hostname: None,
            kernel: None,
            cpus: Some(1),
            clock_ticks_per_s: Some(100),
            page_size_bytes: Some(4096),
            command_line: String::new(),
            labels: Default::default(),
        };
        let mut w = Writer::create(&p, &h).unwrap();
        w.label_object("stmt.11", "SELECT a FROM t WHERE id = $1");
        w.label_object("stmt.22", "UPDATE t SET b = $1");
        // (t, calls, time_us, read, hit) for 11; 22 has no blocks and joins at t = 1 s.
        for (t, c, us, r, h) in [
            (0u64, 10u64, 1000u64, 5u64, 95u64),
            (1000, 20, 3000, 5, 195),
            (2000, 40, 7000, 10, 390),
        ] {
            let mut v = vec![
                ("stmt.11.calls", Kind::Counter, c),
                ("stmt.11.time_us", Kind::Counter, us),
                ("stmt.11.rows", Kind::Counter, c),
                ("stmt.11.blks_read", Kind::Counter, r),
                ("stmt.11.blks_hit", Kind::Counter, h),
            ];
            if t > 0 {
                v.push(("stmt.22.calls", Kind::Counter, t / 1000));
                v.push(("stmt.22.time_us", Kind::Counter, t * 20));
            }
            w.sample(t, &v).unwrap();
        }
        drop(w);
        let rec = plumb_store::read(&p).unwrap();
        let all = table(&rec, None, None, 10);
        assert_eq!(all.followed, 2);
        let a = &all.rows[0];
        assert_eq!(a.id, "22", "{all:?}");
        // 22: 20 ms from 1 s to 2 s in 1 call.
        assert_eq!((a.calls, a.time_ms, a.mean_ms), (1.0, 20.0, Some(20.0)));
        assert_eq!(a.text, "UPDATE t SET b = $1");
        assert_eq!((a.blocks_read, a.hit_pct), (None, None));
        let b = &all.rows[1];
        assert_eq!((b.calls, b.time_ms), (30.0, 6.0));
        assert_eq!((b.blocks_read, b.blocks_hit), (Some(5.0), Some(295.0)));
        assert!((b.hit_pct.unwrap() - 100.0 * 295.0 / 300.0).abs() < 1e-9);
        assert!((a.time_share_pct + b.time_share_pct - 100.0).abs() < 1e-9);
        // The first second only: 22 had not joined; 11 did 10 calls in 2 ms.
        let first = table(&rec, Some(0.0), Some(1.0), 10);
        assert_eq!(first.rows.len(), 1);
        assert_eq!((first.rows[0].calls, first.rows[0].time_ms), (10.0, 2.0));
        // The top 1.
        assert_eq!(table(&rec, None, None, 1).rows.len(), 1);
    }
}
