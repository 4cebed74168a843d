//! SQL Server Availability Group replication, one commit at a time: the Extended Events session
//! that sees a log block's way from the primary's log flush to the secondary's harden and back
//! (the events Microsoft added in SQL Server 2014 SP2 and 2016, KB3173156), the query that reads
//! its event files back, and the parser for what that query returns.
//!
//! **Not tested against a live server**: no SQL Server runs on plumb's test machines. The script
//! is written from the documentation of CREATE EVENT SESSION and the events' list; the parser
//! is tested on event XML shaped as `sys.fn_xe_file_target_read_file` documents it
//! (`<event name=… package=… timestamp=…><data name=…><value>…</value></data>…</event>`).

use serde::Serialize;
use std::collections::BTreeMap;

/// Where an event fires in a synchronous commit, as the seed's walk-through orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Primary,
    Secondary,
    /// Fires on both (log_flush_start/complete, ucs_connection_send_msg).
    Both,
}

/// The session's events: (package, name, where it fires, what it marks).
pub const EVENTS: &[(&str, &str, Side, &str)] = &[
    (
        "sqlserver",
        "hadr_log_block_group_commit",
        Side::Primary,
        "log block group commit processing",
    ),
    (
        "sqlserver",
        "log_block_pushed_to_logpool",
        Side::Both,
        "log block copied to the log pool",
    ),
    (
        "sqlserver",
        "log_flush_start",
        Side::Both,
        "asynchronous log write starts",
    ),
    (
        "sqlserver",
        "hadr_log_block_compression",
        Side::Primary,
        "log block compressed",
    ),
    (
        "sqlserver",
        "hadr_capture_log_block",
        Side::Primary,
        "log block captured for the secondary",
    ),
    (
        "sqlserver",
        "hadr_capture_filestream_wait",
        Side::Primary,
        "waiting for FILESTREAM data",
    ),
    (
        "ucs",
        "ucs_connection_send_msg",
        Side::Both,
        "message sent on the UCS connection",
    ),
    (
        "sqlserver",
        "hadr_log_block_send_complete",
        Side::Primary,
        "log block message sent",
    ),
    (
        "sqlserver",
        "log_flush_complete",
        Side::Both,
        "log write complete",
    ),
    (
        "sqlserver",
        "hadr_transport_receive_log_block_message",
        Side::Secondary,
        "log block message received",
    ),
    (
        "sqlserver",
        "hadr_log_block_decompression",
        Side::Secondary,
        "log block decompressed",
    ),
    (
        "sqlserver",
        "hadr_apply_log_block",
        Side::Secondary,
        "log block appended to the log",
    ),
    (
        "sqlserver",
        "hadr_send_harden_lsn_message",
        Side::Secondary,
        "hardened LSN message crafted",
    ),
    (
        "sqlserver",
        "hadr_lsn_send_complete",
        Side::Secondary,
        "hardened LSN message sent",
    ),
    (
        "sqlserver",
        "hadr_receive_harden_lsn_message",
        Side::Primary,
        "hardened LSN received from the secondary",
    ),
    (
        "sqlserver",
        "hadr_db_commit_mgr_harden",
        Side::Primary,
        "commit harden result: the commit may complete",
    ),
];

/// What an event marks, if it is one of the session's.
pub fn what(name: &str) -> Option<&'static str> {
    EVENTS.iter().find(|e| e.1 == name).map(|e| e.3)
}

/// The Extended Events session to create on both replicas (the same script on each).
pub fn session_script(name: &str) -> String {
    let events: Vec<String> = EVENTS
        .iter()
        .map(|(pkg, ev, _, _)| format!("ADD EVENT {pkg}.{ev}"))
        .collect();
    format!(
        "-- plumb: the path of one commit through a synchronous Availability Group.\n\
         -- Run on the primary and on the secondary; then START, one INSERT on the primary, STOP.\n\
         CREATE EVENT SESSION [{name}] ON SERVER\n{}\n\
         ADD TARGET package0.event_file (SET filename = N'{name}.xel', max_file_size = 64, max_rollover_files = 2)\n\
         WITH (MAX_DISPATCH_LATENCY = 1 SECONDS, EVENT_RETENTION_MODE = NO_EVENT_LOSS, TRACK_CAUSALITY = ON);\n\
         GO\n\
         ALTER EVENT SESSION [{name}] ON SERVER STATE = START;\n\
         GO\n\
         -- … one INSERT on the primary …\n\
         -- ALTER EVENT SESSION [{name}] ON SERVER STATE = STOP;\n\
         -- Read back on each replica (plumb repl xe-timeline does this):\n\
         -- {}\n\
         -- DROP EVENT SESSION [{name}] ON SERVER;\n",
        events.join(",\n"),
        read_query(name)
    )
}

/// The query that reads a session's event files back, one event per row.
pub fn read_query(name: &str) -> String {
    format!(
        "SELECT object_name, CAST(event_data AS nvarchar(max)) AS event_data FROM sys.fn_xe_file_target_read_file(N'{name}*.xel', NULL, NULL, NULL)"
    )
}

/// One event as the event file holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XeEvent {
    pub name: String,
    pub package: String,
    /// Nanoseconds since the Unix epoch (UTC), from the event's `timestamp`.
    pub timestamp_ns: i64,
    /// `data` and `action` values by name (the text of their `value`).
    pub fields: BTreeMap<String, String>,
}

/// `2016-07-12T20:10:46.1234567Z` (or `+00:00`, or no zone: UTC) as nanoseconds since the epoch.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    // The zone: Z, +hh:mm or -hh:mm after the seconds.
    let (clock, offset_s) = match time.find(['Z', '+', '-']) {
        Some(i) => {
            let zone = &time[i..];
            let off = if zone == "Z" {
                0
            } else {
                let sign = if zone.starts_with('-') { -1 } else { 1 };
                let (h, mi) = zone[1..].split_once(':')?;
                sign * (h.parse::<i64>().ok()? * 3600 + mi.parse::<i64>().ok()? * 60)
            };
            (&time[..i], off)
        }
        None => (time, 0),
    };
    let mut c = clock.split(':');
    let (h, mi): (i64, i64) = (c.next()?.parse().ok()?, c.next()?.parse().ok()?);
    let sec = c.next()?;
    let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let whole: i64 = whole.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || h > 23 || mi > 59 || whole > 60 {
        return None;
    }
    let digits: String = frac.chars().take(9).collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let ns: i64 = format!("{digits:0<9}").parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let (yy, mm) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + whole - offset_s) * 1_000_000_000) + ns)
}

/// The events in a file of event_data XML (as sqlcmd prints the read-back query's rows);
/// a file without any is an error naming it.
pub fn read_events_file(p: &std::path::Path) -> crate::Result<Vec<XeEvent>> {
    let shown = p.display();
    // An event file from sqlcmd: large, never endless (a device is refused).
    let text = plumb_sys::read_text_bounded(p, 1 << 30)
        .map_err(|e| crate::Error::Setup(format!("{shown}: {e}")))?;
    let evs = parse_events(&text).map_err(|e| crate::Error::Refused(format!("{shown}: {e}")))?;
    if evs.is_empty() {
        return Err(crate::Error::Refused(format!("{shown}: no <event> in it")));
    }
    Ok(evs)
}

/// The events of the session `session` on the replica at `t`: its event files read back
/// (`read_query`) and parsed. None found is an error saying what to check.
pub fn read_events(t: &crate::Target, session: &str) -> crate::Result<Vec<XeEvent>> {
    let shown = t.shown();
    let on = |e: crate::Error| crate::Error::Query {
        what: shown.clone(),
        message: e.to_string(),
        source: Some(Box::new(e)),
    };
    if t.kind()? != crate::Kind::Sqlserver {
        return Err(crate::Error::Setup(format!(
            "{shown}: an Availability Group's events are SQL Server's (mssql://…)"
        )));
    }
    let mut c = crate::mssql::MssqlConn::connect(t)?;
    let rs = c
        .query("the session's event files", &read_query(session))
        .map_err(on)?;
    let col = rs
        .columns
        .iter()
        .position(|c| c.eq_ignore_ascii_case("event_data"))
        .ok_or_else(|| {
            crate::Error::Setup(format!(
                "{shown}: the read-back query returned no event_data"
            ))
        })?;
    let mut evs = Vec::new();
    for r in &rs.rows {
        if let Some(x) = r.get(col) {
            evs.extend(
                parse_events(&x.text())
                    .map_err(|e| crate::Error::Refused(format!("{shown}: {e}")))?,
            );
        }
    }
    if evs.is_empty() {
        return Err(crate::Error::Setup(format!(
            "{shown}: the session {session} has no events (was it started, and one commit made on the primary?)"
        )));
    }
    Ok(evs)
}

/// Every `<event>` in `xml` (one event, or several one after another, as files of read-back
/// rows hold them).
pub fn parse_events(xml: &str) -> Result<Vec<XeEvent>, String> {
    let wrapped = format!("<events>{xml}</events>");
    let doc = roxmltree::Document::parse(&wrapped).map_err(|e| format!("not event XML: {e}"))?;
    let mut out = Vec::new();
    for ev in doc
        .root_element()
        .children()
        .filter(|n| n.has_tag_name("event"))
    {
        let name = ev.attribute("name").ok_or("an event without a name")?;
        let ts = ev
            .attribute("timestamp")
            .ok_or_else(|| format!("event {name} without a timestamp"))?;
        let timestamp_ns = parse_timestamp(ts)
            .ok_or_else(|| format!("event {name}: timestamp {ts} unreadable"))?;
        let mut fields = BTreeMap::new();
        for f in ev
            .children()
            .filter(|n| n.has_tag_name("data") || n.has_tag_name("action"))
        {
            let Some(fname) = f.attribute("name") else {
                continue;
            };
            let value = f
                .children()
                .find(|n| n.has_tag_name("value"))
                .and_then(|v| v.text())
                .unwrap_or("")
                .trim()
                .to_string();
            fields.insert(fname.to_string(), value);
        }
        out.push(XeEvent {
            name: name.to_string(),
            package: ev.attribute("package").unwrap_or("").to_string(),
            timestamp_ns,
            fields,
        });
    }
    Ok(out)
}
