//! One commit through a synchronous SQL Server Availability Group, from the Extended Events of
//! the primary and the secondary merged on one time line: what the seed did in a spreadsheet.
//!
//! The two replicas are two hosts with two clocks. Cause orders some events across them: the
//! secondary receives a log block after the primary sent it, and the primary receives the
//! hardened LSN after the secondary sent it. When the timestamps say otherwise, the clocks
//! disagree by at least that much: the secondary's events are shifted by the smallest amount
//! that restores the order, and the report says so. (With both orders intact the clocks may
//! still disagree by up to the window the two round trips leave; that window is reported.)

use plumb_engine::mssql_xe::{what, XeEvent};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Replica {
    Primary,
    Secondary,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgStep {
    /// Microseconds from the first event.
    pub t_us: f64,
    pub replica: Replica,
    pub event: String,
    /// What it marks (None for an event not in plumb's session).
    pub what: Option<&'static str>,
    /// Microseconds since the step before.
    pub gap_us: f64,
    /// The event's own duration field, when it has one (`processing_time` or `duration`), as
    /// the event reports it: Microsoft documents neither field's unit.
    pub duration: Option<String>,
    /// Which field that is.
    pub duration_field: Option<&'static str>,
    /// Microseconds since the event that starts what this one ends, on the same replica's
    /// clock (a log write: log_flush_start to log_flush_complete).
    pub took_us: Option<f64>,
    pub log_block_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgTimeline {
    pub steps: Vec<AgStep>,
    /// From the first event to the last (µs).
    pub span_us: f64,
    /// The secondary's events were shifted by this (µs; positive: later) to keep cause before
    /// effect; 0 when the timestamps were already in order.
    pub secondary_shift_us: f64,
    /// The clock offsets (µs, added to the secondary's) that keep both crossings in order:
    /// how well the two clocks are known to agree.
    pub offset_window_us: Option<(f64, f64)>,
    /// Events of the session that did not fire (per replica).
    pub missing: Vec<String>,
}

/// Nanoseconds of the first event named `name`, in time order.
fn first(evs: &[XeEvent], names: &[&str]) -> Option<i64> {
    evs.iter()
        .filter(|e| names.contains(&e.name.as_str()))
        .map(|e| e.timestamp_ns)
        .min()
}

/// Nanoseconds of the first `name` at or after `from`.
fn first_from(evs: &[XeEvent], name: &str, from: i64) -> Option<i64> {
    evs.iter()
        .filter(|e| e.name == name && e.timestamp_ns >= from)
        .map(|e| e.timestamp_ns)
        .min()
}

/// What starts the span an event ends, on the same replica.
const SPANS: &[(&str, &str)] = &[("log_flush_complete", "log_flush_start")];

fn last(evs: &[XeEvent], names: &[&str]) -> Option<i64> {
    evs.iter()
        .filter(|e| names.contains(&e.name.as_str()))
        .map(|e| e.timestamp_ns)
        .max()
}

/// Merge the two replicas' events of one commit.
pub fn ag_timeline(primary: &[XeEvent], secondary: &[XeEvent]) -> AgTimeline {
    // The crossings: a message arrives after it was sent. The primary sends the log block with
    // ucs_connection_send_msg after capturing it (hadr_log_block_send_complete marks the end
    // of the send call, which may come after the secondary already has the block); the
    // secondary sends the hardened LSN with ucs_connection_send_msg after crafting the
    // message. Where a send event is missing, the capture or the crafting bounds it instead.
    let captured = first(primary, &["hadr_capture_log_block"]);
    let sent = captured.map(|c| first_from(primary, "ucs_connection_send_msg", c).unwrap_or(c));
    let received = first(secondary, &["hadr_transport_receive_log_block_message"]);
    let crafted = last(secondary, &["hadr_send_harden_lsn_message"]);
    let acked = crafted.map(|c| first_from(secondary, "ucs_connection_send_msg", c).unwrap_or(c));
    let ack_received = last(primary, &["hadr_receive_harden_lsn_message"]);
    // off ≥ sent − received, and off ≤ ack_received − acked (nanoseconds, in integers: an
    // f64 of nanoseconds since 1970 has no room left for microseconds).
    let lo = sent.zip(received).map(|(s, r)| s - r);
    let hi = ack_received.zip(acked).map(|(r, s)| r - s);
    let shift_ns: i64 = match (lo, hi) {
        (Some(lo), _) if lo > 0 => lo,
        (_, Some(hi)) if hi < 0 => hi,
        _ => 0,
    };
    let mut all: Vec<(i64, Replica, &XeEvent)> = primary
        .iter()
        .map(|e| (e.timestamp_ns, Replica::Primary, e))
        .chain(
            secondary
                .iter()
                .map(|e| (e.timestamp_ns + shift_ns, Replica::Secondary, e)),
        )
        .collect();
    all.sort_by_key(|a| a.0);
    let t0 = all.first().map(|a| a.0).unwrap_or(0);
    let mut prev = t0;
    let steps: Vec<AgStep> = all
        .iter()
        .map(|(t, side, e)| {
            let gap = (t - prev) as f64 / 1000.0;
            prev = *t;
            let took_us = SPANS
                .iter()
                .find(|(end, _)| *end == e.name)
                .and_then(|(_, start)| {
                    all.iter()
                        .filter(|(ts, sd, x)| sd == side && x.name == *start && ts <= t)
                        .map(|(ts, _, _)| *ts)
                        .max()
                })
                .map(|start| (t - start) as f64 / 1000.0);
            let field = ["processing_time", "duration"]
                .into_iter()
                .find(|f| e.fields.contains_key(*f));
            AgStep {
                took_us,
                duration_field: field,
                t_us: (t - t0) as f64 / 1000.0,
                replica: *side,
                event: e.name.clone(),
                what: what(&e.name),
                gap_us: gap,
                duration: e
                    .fields
                    .get("processing_time")
                    .or_else(|| e.fields.get("duration"))
                    .cloned(),
                log_block_id: e.fields.get("log_block_id").cloned(),
            }
        })
        .collect();
    let span_us = all
        .last()
        .map(|a| (a.0 - t0) as f64 / 1000.0)
        .unwrap_or(0.0);
    use plumb_engine::mssql_xe::{Side, EVENTS};
    let mut missing = Vec::new();
    for (_, name, side, _) in EVENTS {
        let on = |evs: &[XeEvent]| evs.iter().any(|e| e.name == *name);
        if matches!(side, Side::Primary | Side::Both) && !on(primary) {
            missing.push(format!("primary: {name}"));
        }
        if matches!(side, Side::Secondary | Side::Both) && !on(secondary) {
            missing.push(format!("secondary: {name}"));
        }
    }
    AgTimeline {
        steps,
        span_us,
        secondary_shift_us: shift_ns as f64 / 1000.0,
        offset_window_us: lo
            .zip(hi)
            .map(|(l, h)| (l as f64 / 1000.0, h as f64 / 1000.0)),
        missing,
    }
}

#[cfg(test)]
mod tests {
    use plumb_engine::mssql_xe::{parse_events, parse_timestamp};

    #[test]
    fn event_timestamps_to_the_hundred_nanoseconds() {
        // 2016-07-12T20:10:46Z is 1468354246 s after the epoch.
        assert_eq!(
            parse_timestamp("2016-07-12T20:10:46.1234567Z"),
            Some(1_468_354_246_123_456_700)
        );
        assert_eq!(
            parse_timestamp("2016-07-12T22:10:46.5+02:00"),
            Some(1_468_354_246_500_000_000)
        );
        for bad in [
            "yesterday",
            "2016-13-01T00:00:00Z",
            "2016-07-12T20:10",
            "2016-07-12T20:10:46.x1Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
        let e = parse_events("<event name=\"log_flush_start\" package=\"sqlserver\" timestamp=\"2016-07-12T20:10:46.1234567Z\"><data name=\"log_block_id\"><type name=\"uint64\" package=\"package0\"/><value>42</value></data></event>").unwrap();
        assert_eq!(e[0].fields["log_block_id"], "42");
        assert!(parse_events("<event").is_err());
    }
}
