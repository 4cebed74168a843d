//! `plumb repl timeline` as text (the stages, when each happened and how long each step took,
//! with median and range over the commits) and as a swimlane SVG: one lane per process, a dot
//! per stage, arrows where the commit passes from one process to another.

use crate::fmt::short_time;
use crate::html::escape;
use crate::table::write_aligned;
use crate::Render;
use plumb_analyze::ag::{AgTimeline, Replica};
use plumb_analyze::repl::{
    HadrLine, Lane, SemiSyncLine, Stage, StageSummary, TimelineReport, WatchLine,
};
use std::fmt::Write as _;
use std::io::{self, Write};

/// What a stage is, in words.
pub(crate) fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::StatementSent => "statement sent",
        Stage::StatementReceived => "statement received",
        Stage::CommitRecord => "commit record inserted",
        Stage::LocalFlushStarted => "WAL written, flush starts",
        Stage::LocalFlushDone => "WAL flushed on the primary",
        Stage::WaitForStandby => "waits for the standby",
        Stage::WalSent => "WAL sent",
        Stage::StandbyReceived => "received on the standby",
        Stage::StandbyWritten => "written on the standby",
        Stage::StandbyFlushed => "flushed on the standby",
        Stage::FlushReported => "flush position sent back",
        Stage::ReplyReceived => "reply read by the WAL sender",
        Stage::CommitReleased => "commit released",
        Stage::BackendWoken => "backend woken",
        Stage::ResultSent => "result sent to the client",
        Stage::ResultReceived => "result read by the client",
        Stage::Replayed => "replayed on the standby",
    }
}

pub(crate) fn lane_name(l: Lane) -> &'static str {
    match l {
        Lane::Client => "client",
        Lane::Backend => "primary: backend",
        Lane::WalWriter => "primary: WAL writer",
        Lane::WalSender => "primary: WAL sender",
        Lane::WalReceiver => "standby: WAL receiver",
        Lane::Startup => "standby: startup (replay)",
    }
}

fn t(ns: u64) -> String {
    short_time(ns as f64 / 1e9)
}

impl Render for TimelineReport {
    const KIND: &'static str = "repl_timeline";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let n = self.runs.len();
        writeln!(out, "timeline of a replicated commit: {}", self.sql)?;
        writeln!(
            out,
            "primary PostgreSQL {} → standby {} (PostgreSQL {}, {}); {n} commit{} traced",
            self.primary_version,
            self.application_name,
            self.standby_version,
            if self.sync_state.is_empty() {
                "?"
            } else {
                &self.sync_state
            },
            if n == 1 { "" } else { "s" }
        )?;
        if let Some(c) = &self.client_latency_ns {
            if n > 1 {
                writeln!(
                    out,
                    "client latency {} median ({} – {})",
                    t(c.median),
                    t(c.min),
                    t(c.max)
                )?;
            } else {
                writeln!(out, "client latency {}", t(c.median))?;
            }
        }
        writeln!(out)?;
        let start = self.summary.first().map(|s| s.stage);
        let first = |s: &StageSummary| Some(s.stage) == start;
        let rows: Vec<Vec<String>> = self
            .summary
            .iter()
            .map(|s: &StageSummary| {
                let mut r = vec![
                    stage_name(s.stage).to_string(),
                    lane_name(s.lane).to_string(),
                    t(s.t_ns.median),
                    if first(s) {
                        String::new()
                    } else {
                        format!("+{}", t(s.step_ns.median))
                    },
                ];
                if n > 1 {
                    r.push(if first(s) {
                        String::new()
                    } else {
                        format!("{} – {}", t(s.step_ns.min), t(s.step_ns.max))
                    });
                }
                let mut note = Vec::new();
                if s.found < n {
                    note.push(format!("seen in {} of {n}", s.found));
                }
                if s.stage == Stage::Replayed {
                    note.push("off the commit's path; step from the standby's flush".into());
                } else if !s.on_commit_path {
                    note.push("off the commit's path".into());
                }
                r.push(note.join("; "));
                r
            })
            .collect();
        let headers: Vec<&str> = if n > 1 {
            vec!["stage", "where", "at", "step", "step range", ""]
        } else {
            vec!["stage", "where", "at", "step", ""]
        };
        write_aligned(out, &headers, &rows)?;
        writeln!(out)?;
        let mut paths: Vec<u64> = self.runs.iter().filter_map(|r| r.path_ns).collect();
        paths.sort_unstable();
        let path_ns = paths.get(paths.len() / 2).copied();
        if let (Some(p), Some(c), Some(u)) = (path_ns, &self.client_latency_ns, self.unexplained) {
            writeln!(
                out,
                "the stages on the commit's path add up to {} of the client's {} ({:.0}%); the rest is the client library's own time",
                t(p),
                t(c.median),
                (1.0 - u) * 100.0
            )?;
        }
        if let Some(big) = self
            .summary
            .iter()
            .filter(|s| s.on_commit_path && Some(s.stage) != self.summary.first().map(|f| f.stage))
            .max_by_key(|s| s.step_ns.median)
        {
            writeln!(
                out,
                "the longest step: {} ({}, {})",
                stage_name(big.stage),
                lane_name(big.lane),
                t(big.step_ns.median)
            )?;
        }
        if !self.probed.is_empty() {
            writeln!(out, "functions probed: {}", self.probed.join(", "))?;
        }
        if !self.not_probed.is_empty() {
            writeln!(
                out,
                "not probed (the server binary does not export them, or --no-probes): {}",
                self.not_probed.join(", ")
            )?;
        }
        let missing: Vec<Stage> = Stage::ALL
            .into_iter()
            .filter(|s| !self.summary.iter().any(|x| x.stage == *s))
            .filter(|s| self.runs.iter().any(|r| r.missing.contains(s)))
            .collect();
        if !missing.is_empty() {
            let names: Vec<&str> = missing.iter().map(|s| stage_name(*s)).collect();
            writeln!(out, "not seen: {}", names.join(", "))?;
        }
        let lost: u64 = self.runs.iter().map(|r| r.lost_events).sum();
        if lost > 0 {
            writeln!(
                out,
                "the kernel dropped {lost} events: stages may be missing or late"
            )?;
        }
        Ok(())
    }
}

/// A time axis from 0 to `end` at `y` between `x0` and `x1`: about five round steps (1, 2 or 5
/// times a power of ten, at least `min_step`), each a tick and its label.
fn time_axis(
    s: &mut String,
    (x0, x1, y): (f64, f64, f64),
    end: f64,
    min_step: f64,
    x: &dyn Fn(f64) -> f64,
    label: &dyn Fn(f64) -> String,
) {
    let _ = writeln!(
        s,
        r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#333"/>"##
    );
    let raw = end / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|st| *st >= raw)
        .unwrap_or(raw)
        .max(min_step);
    let ticks = ((end + 1e-9) / step).floor() as u64;
    for i in 0..=ticks {
        let v = step * i as f64;
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{y}" x2="{0:.1}" y2="{1}" stroke="#333"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3}</text>"##,
            x(v),
            y + 5.0,
            y + 18.0,
            escape(&label(v))
        );
    }
}

/// The swimlane: lanes top to bottom in the commit's order, x the time since the statement
/// arrived (medians over the commits), a dot per stage labelled with its name and time, and an
/// arrow from each stage on the commit's path to the next.
pub fn swimlane_svg(r: &TimelineReport) -> String {
    let lanes: Vec<Lane> = {
        let mut v: Vec<Lane> = r.summary.iter().map(|s| s.lane).collect();
        v.sort();
        v.dedup();
        v
    };
    let (left, right, top, lane_h) = (190.0, 120.0, 70.0, 92.0);
    let width = 1100.0;
    let height = top + lane_h * lanes.len() as f64 + 60.0;
    let end = r
        .summary
        .iter()
        .map(|s| s.t_ns.median)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x = |ns: u64| left + (width - left - right) * ns as f64 / end;
    let y = |l: Lane| {
        top + lane_h * lanes.iter().position(|x| *x == l).unwrap_or(0) as f64 + lane_h / 2.0
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#fff"/>
<defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>
<text x="16" y="24" font-size="15" font-weight="bold">{}</text>
<text x="16" y="44" fill="#444">{}</text>
"##,
        escape(&format!("One replicated commit, stage by stage: {}", r.sql)),
        escape(&format!(
            "PostgreSQL {} primary, standby {} ({}); {} commit{}, median times since the statement arrived",
            r.primary_version,
            r.application_name,
            r.sync_state,
            r.runs.len(),
            if r.runs.len() == 1 { "" } else { "s" }
        ))
    );
    for (i, l) in lanes.iter().enumerate() {
        let y0 = top + lane_h * i as f64;
        let fill = if i % 2 == 0 { "#f4f6f8" } else { "#ffffff" };
        let _ = writeln!(
            s,
            r##"<rect x="0" y="{y0}" width="{width}" height="{lane_h}" fill="{fill}"/><text x="16" y="{}" font-weight="bold">{}</text><line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="#bbb"/>"##,
            y0 + lane_h / 2.0 + 4.0,
            escape(lane_name(*l)),
            y0 + lane_h / 2.0,
            width - right,
            y0 + lane_h / 2.0
        );
    }
    // Arrows from each stage to the one it causes: the backend's own line (its wait for the
    // standby dashed), the WAL's way to the standby and the answer's way back, and replay.
    let chains = Stage::CHAINS
        .iter()
        .zip(["#555", "#555", "#999"])
        .map(|(c, color)| (*c, color));
    let find = |st: Stage| r.summary.iter().find(|x| x.stage == st);
    for (chain, color) in chains {
        let present: Vec<&StageSummary> = chain.iter().filter_map(|st| find(*st)).collect();
        for w in present.windows(2) {
            let (a, b) = (w[0], w[1]);
            let dashed = color == "#999"
                || (a.stage == Stage::WaitForStandby && b.stage == Stage::BackendWoken);
            let _ = writeln!(
                s,
                r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="1.3"{} marker-end="url(#arr)"/>"##,
                x(a.t_ns.median),
                y(a.lane),
                x(b.t_ns.median),
                y(b.lane),
                if dashed {
                    r#" stroke-dasharray="4 3""#
                } else {
                    ""
                }
            );
        }
    }
    // Dots and labels: labels alternate above and below the lane so neighbours do not collide.
    let mut per_lane: std::collections::BTreeMap<Lane, usize> = Default::default();
    for st in &r.summary {
        let k = per_lane.entry(st.lane).or_default();
        let above = *k % 2 == 0;
        *k += 1;
        let (cx, cy) = (x(st.t_ns.median), y(st.lane));
        let color = if st.on_commit_path { "#1f5fa8" } else { "#999" };
        let ly = if above { cy - 12.0 } else { cy + 20.0 };
        let step = if Some(st.stage) == r.summary.first().map(|f| f.stage) {
            String::new()
        } else {
            format!(" (+{})", t(st.step_ns.median))
        };
        let _ = writeln!(
            s,
            r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{color}"><title>{}</title></circle><text x="{cx:.1}" y="{ly:.1}" text-anchor="middle" fill="#222">{}</text><text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#666" font-size="11">{}</text>"##,
            escape(&format!(
                "{}: {}{}",
                stage_name(st.stage),
                t(st.t_ns.median),
                step
            )),
            escape(stage_name(st.stage)),
            if above { ly - 13.0 } else { ly + 13.0 },
            escape(&format!("{}{}", t(st.t_ns.median), step))
        );
    }
    // The time axis.
    time_axis(
        &mut s,
        (left, width - right, height - 30.0),
        end,
        1.0,
        &|ns| x(ns as u64),
        &|ns| t(ns as u64),
    );
    s.push_str("</svg>\n");
    s
}

/// Widths of the live view's columns (the standby column grows to its longest name).
const WATCH_COLS: [(&str, usize); 10] = [
    ("time", 7),
    ("state", 9),
    ("sync", 5),
    ("not sent", 10),
    ("not flushed (peak)", 22),
    ("not replayed", 12),
    ("flush lag", 13),
    ("replay lag", 10),
    ("WAL/s", 11),
    ("waiting (peak, longest)", 23),
];

/// The live view's header: printed once, above the lines.
pub(crate) fn watch_header(name_width: usize, out: &mut dyn Write) -> io::Result<()> {
    let mut line = format!(
        "{:>w$}  {:<nw$}",
        WATCH_COLS[0].0,
        "standby",
        w = WATCH_COLS[0].1,
        nw = name_width
    );
    for (h, w) in &WATCH_COLS[1..3] {
        line.push_str(&format!("  {h:<w$}"));
    }
    for (h, w) in &WATCH_COLS[3..] {
        line.push_str(&format!("  {h:>w$}"));
    }
    writeln!(out, "{}", line.trim_end())
}

/// The width the standby column needs for these names.
pub(crate) fn watch_name_width<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names.map(|n| n.chars().count()).max().unwrap_or(0).max(22)
}

fn opt_or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| crate::fmt::MISSING.to_string())
}

/// A live-view line's text with the standby column this wide.
pub(crate) fn watch_text(l: &WatchLine, name_width: usize, out: &mut dyn Write) -> io::Result<()> {
    let this = l;
    let time = format!("{:.1}s", this.t_ms as f64 / 1000.0);
    let wal = opt_or_dash(
        this.wal_bytes_per_s
            .map(|b| format!("{}/s", crate::fmt::bytes(b.round() as u64))),
    );
    let waiting = match this.longest_wait_ms {
        Some(w) if this.commits_waiting_peak > 0 => format!(
            "{} ({}, {})",
            this.commits_waiting,
            this.commits_waiting_peak,
            crate::fmt::latency_ms(w)
        ),
        _ => format!("{} ({})", this.commits_waiting, this.commits_waiting_peak),
    };
    for n in &this.new {
        writeln!(
            out,
            "{time:>7}  standby {n} is streaming from this primary now"
        )?;
    }
    for n in &this.gone {
        writeln!(
            out,
            "{time:>7}  standby {n} is no longer streaming (its WAL sender is gone)"
        )?;
    }
    if this.standbys.is_empty() {
        let mut line = format!("{time:>7}  {:<name_width$}", "(no standby streaming)");
        line.push_str(&format!(
            "  {:<9}  {:<5}  {:>10}  {:>22}  {:>12}  {:>13}  {:>10}  {:>11}  {:>23}",
            "", "", "", "", "", "", "", wal, waiting
        ));
        return writeln!(out, "{}", line.trim_end());
    }
    let b = |v: Option<u64>| opt_or_dash(v.map(crate::fmt::bytes));
    let lag = |v: Option<f64>| opt_or_dash(v.map(crate::fmt::latency_ms));
    for s in &this.standbys {
        let flushed = format!(
            "{} ({})",
            b(s.flushed_behind_bytes),
            b(s.flushed_behind_peak_bytes)
        );
        writeln!(
                out,
                "{time:>7}  {:<name_width$}  {:<9}  {:<5}  {:>10}  {:>22}  {:>12}  {:>13}  {:>10}  {:>11}  {:>23}",
                s.name,
                s.state,
                s.sync_state,
                b(s.sent_behind_bytes),
                flushed,
                b(s.replayed_behind_bytes),
                // A silent standby's lags are its last reply's: say how long it has been silent.
                match s.silent_ms {
                    Some(ms) => format!("silent {}", crate::fmt::latency_ms(ms)),
                    None => lag(s.flush_lag_ms),
                },
                lag(s.replay_lag_ms),
                wal,
                waiting,
            )?;
    }
    Ok(())
}

impl Render for WatchLine {
    const KIND: &'static str = "repl_watch";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let w = watch_name_width(self.standbys.iter().map(|s| s.name.as_str()));
        watch_text(self, w, out)
    }
}

/// The MariaDB live view's header.
pub(crate) fn semisync_header(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{:>7}  {:<9}  {:>8}  {:>16}  {:>18}  {:>12}  {:>14}  {:>12}",
        "time",
        "semi-sync",
        "replicas",
        "acknowledged/s",
        "not acknowledged/s",
        "commit wait",
        "waiting (peak)",
        "binlog/s"
    )
}

/// One line of the MariaDB live view.
pub(crate) fn semisync_text(l: &SemiSyncLine, out: &mut dyn Write) -> io::Result<()> {
    let time = format!("{:.1}s", l.t_ms as f64 / 1000.0);
    let state = match (l.enabled, l.active) {
        (false, _) => "disabled",
        (true, true) => "on",
        (true, false) => "OFF",
    };
    let per_s = |v: Option<f64>| opt_or_dash(v.map(|v| format!("{v:.0}")));
    if l.switched_off {
        writeln!(
            out,
            "{time:>7}  semi-sync switched off: a commit waited {} without a replica's acknowledgement; the primary commits without waiting until a replica catches up",
            l.timeout_ms
                .map(|t| crate::fmt::latency_ms(t as f64))
                .unwrap_or_else(|| "the timeout".into())
        )?;
    }
    if l.switched_on {
        writeln!(
            out,
            "{time:>7}  semi-sync back on: a replica acknowledges again"
        )?;
    }
    writeln!(
        out,
        "{time:>7}  {state:<9}  {:>8}  {:>16}  {:>18}  {:>12}  {:>14}  {:>12}",
        l.clients,
        per_s(l.acknowledged_per_s),
        per_s(l.unacknowledged_per_s),
        opt_or_dash(l.commit_wait_ms.map(crate::fmt::latency_ms)),
        format!("{} ({})", l.commits_waiting, l.commits_waiting_peak),
        opt_or_dash(
            l.binlog_bytes_per_s
                .map(|b| format!("{}/s", crate::fmt::bytes(b.round() as u64)))
        ),
    )
}

impl Render for SemiSyncLine {
    const KIND: &'static str = "repl_watch_semisync";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        semisync_text(self, out)
    }
}

/// Microseconds with their sign: `+1.20 ms`, `-850 µs`.
fn signed(us: f64) -> String {
    format!(
        "{}{}",
        if us < 0.0 { "-" } else { "+" },
        short_time(us.abs() / 1e6)
    )
}

/// `plumb repl xe-timeline`: one commit through an Availability Group.
pub(crate) fn ag_text(t: &AgTimeline, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "one commit through a SQL Server Availability Group: {} events, {} from the first to the last",
        t.steps.len(),
        short_time(t.span_us / 1e6)
    )?;
    if t.secondary_shift_us != 0.0 {
        writeln!(
            out,
            "the secondary's events are shifted by {}{}: its clock disagrees with the primary's by at least that much (a log block cannot arrive before the primary sent it, nor the hardened LSN before the secondary sent it)",
            if t.secondary_shift_us > 0.0 { "+" } else { "-" },
            short_time(t.secondary_shift_us.abs() / 1e6)
        )?;
    } else if let Some((lo, hi)) = t.offset_window_us {
        writeln!(
            out,
            "the secondary's clock is off the primary's by between {} and {} (what the two crossings allow); the order across replicas is only as good as that",
            signed(lo),
            signed(hi)
        )?;
    }
    writeln!(out)?;
    let rows: Vec<Vec<String>> = t
        .steps
        .iter()
        .map(|s| {
            vec![
                match s.what {
                    Some(w) => format!("{} ({w})", s.event),
                    None => s.event.clone(),
                },
                match s.replica {
                    Replica::Primary => "primary".into(),
                    Replica::Secondary => "secondary".into(),
                },
                short_time(s.t_us / 1e6),
                short_time(s.gap_us / 1e6),
                s.took_us
                    .map(|u| short_time(u / 1e6))
                    .unwrap_or_else(|| crate::fmt::MISSING.into()),
                match (&s.duration, s.duration_field) {
                    (Some(v), Some(f)) => format!("{f} {v}"),
                    _ => crate::fmt::MISSING.into(),
                },
            ]
        })
        .collect();
    write_aligned(
        out,
        &[
            "event (what it marks)",
            "replica",
            "at",
            "after the last",
            "took",
            "the event's own field",
        ],
        &rows,
    )?;
    writeln!(
        out,
        "\ntook: from the event that starts it on the same replica's clock (a log write from log_flush_start). The event's own field is as the event reports it: Microsoft documents neither processing_time's unit nor duration's."
    )?;
    if !t.missing.is_empty() {
        writeln!(out, "not seen: {}", t.missing.join(", "))?;
    }
    Ok(())
}

/// Under the title: how the secondary's clock was set against the primary's, if it was.
fn ag_subtitle(t: &AgTimeline) -> String {
    if t.secondary_shift_us != 0.0 {
        format!(
            "the secondary's events shifted by {}{} to keep each message after its send",
            if t.secondary_shift_us > 0.0 { "+" } else { "-" },
            short_time(t.secondary_shift_us.abs() / 1e6)
        )
    } else if let Some((lo, hi)) = t.offset_window_us {
        format!(
        "the clocks agree to within {} .. {}: the order across replicas is only as good as that",
        signed(lo),
        signed(hi)
    )
    } else {
        String::new()
    }
}

/// The messages between the replicas, each (from, to, sent, received, what): the log block
/// out, the hardened LSN back; a time is None where its event was not captured.
#[allow(clippy::type_complexity)]
fn ag_messages(t: &AgTimeline) -> [(Replica, Replica, Option<f64>, Option<f64>, &'static str); 2] {
    let at = |side: Replica, name: &str, after: f64| {
        t.steps
            .iter()
            .filter(|st| st.replica == side && st.event == name && st.t_us >= after)
            .map(|st| st.t_us)
            .next()
    };
    let block_out = at(Replica::Primary, "ucs_connection_send_msg", 0.0)
        .or_else(|| at(Replica::Primary, "hadr_capture_log_block", 0.0));
    let block_in = at(
        Replica::Secondary,
        "hadr_transport_receive_log_block_message",
        0.0,
    );
    let crafted = at(Replica::Secondary, "hadr_send_harden_lsn_message", 0.0);
    let lsn_out =
        crafted.and_then(|c| at(Replica::Secondary, "ucs_connection_send_msg", c).or(Some(c)));
    let lsn_in = at(Replica::Primary, "hadr_receive_harden_lsn_message", 0.0);
    [
        (
            Replica::Primary,
            Replica::Secondary,
            block_out,
            block_in,
            "log block",
        ),
        (
            Replica::Secondary,
            Replica::Primary,
            lsn_out,
            lsn_in,
            "hardened LSN",
        ),
    ]
}

/// `plumb repl xe-timeline --svg`: the commit's events on two lanes (primary, secondary) on one
/// time axis, each labelled with what it marks, and an arrow for each message between the
/// replicas (the log block out, the hardened LSN back).
pub fn ag_svg(t: &AgTimeline) -> String {
    // One label row per event, so that events a few microseconds apart stay readable.
    let per_lane = |r: Replica| t.steps.iter().filter(|st| st.replica == r).count();
    let rows = per_lane(Replica::Primary).max(per_lane(Replica::Secondary)) as f64;
    let (left, right, top, row_h) = (120.0, 60.0, 64.0, 15.0);
    let lane_h = 2.0 * (rows * row_h + 24.0);
    let width = 1200.0;
    let height = top + lane_h * 2.0 + 60.0;
    let end = t.span_us.max(1.0);
    let x = |us: f64| left + (width - left - right) * us / end;
    let y = |r: Replica| match r {
        Replica::Primary => top + lane_h / 2.0,
        Replica::Secondary => top + lane_h * 1.5,
    };
    let mut s = String::new();
    let sub = ag_subtitle(t);
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="#fff"/>
<defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>
<text x="16" y="24" font-size="15" font-weight="bold">{}</text>
<text x="16" y="44" fill="#444">{}</text>
"##,
        escape(&format!(
            "One commit through a SQL Server Availability Group: {} events, {}",
            t.steps.len(),
            short_time(t.span_us / 1e6)
        )),
        escape(&sub)
    );
    for (i, (r, name)) in [
        (Replica::Primary, "primary"),
        (Replica::Secondary, "secondary"),
    ]
    .into_iter()
    .enumerate()
    {
        let y0 = top + lane_h * i as f64;
        let fill = if i == 0 { "#f4f6f8" } else { "#ffffff" };
        let _ = writeln!(
            s,
            r##"<rect x="0" y="{y0}" width="{width}" height="{lane_h}" fill="{fill}"/><text x="16" y="{:.1}" font-weight="bold" font-size="13">{name}</text><line x1="{left}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#bbb"/>"##,
            y(r) + 4.0,
            y(r),
            width - right,
            y(r)
        );
    }
    // The messages between the replicas.
    for (from, to, a, b, what) in ag_messages(t) {
        if let (Some(a), Some(b)) = (a, b) {
            let _ = writeln!(
                s,
                r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#1f5fa8" stroke-width="1.5" marker-end="url(#arr)"><title>{what}: {}</title></line>"##,
                x(a),
                y(from),
                x(b),
                y(to),
                escape(&short_time((b - a) / 1e6))
            );
        }
    }
    // Dots, each with its label on a row of its own: the primary's above its line (the first
    // event farthest), the secondary's below (the first nearest), a leader line to each.
    let mut n = [0usize; 2];
    for st in &t.steps {
        let i = (st.replica == Replica::Secondary) as usize;
        let k = n[i];
        n[i] += 1;
        let (cx, cy) = (x(st.t_us), y(st.replica));
        let ly = if i == 0 {
            cy - 16.0 - row_h * (per_lane(Replica::Primary) - 1 - k) as f64
        } else {
            cy + 24.0 + row_h * k as f64
        };
        let (anchor, tx) = if cx > width * 0.6 {
            ("end", cx - 4.0)
        } else {
            ("start", cx + 4.0)
        };
        let _ = writeln!(
            s,
            r##"<line x1="{cx:.1}" y1="{cy:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#d0d0d0"/><circle cx="{cx:.1}" cy="{cy:.1}" r="4.5" fill="#1f5fa8"><title>{}</title></circle><text x="{tx:.1}" y="{ly:.1}" text-anchor="{anchor}" fill="#222">{} <tspan fill="#666">{}</tspan></text>"##,
            ly - 4.0,
            escape(&format!(
                "{}: {} ({})",
                st.event,
                short_time(st.t_us / 1e6),
                st.what.unwrap_or("")
            )),
            escape(&st.event),
            escape(&short_time(st.t_us / 1e6))
        );
    }
    // The time axis, in round steps.
    time_axis(
        &mut s,
        (left, width - right, height - 30.0),
        end,
        0.0,
        &|us| x(us),
        &|us| short_time(us / 1e6),
    );
    s.push_str("</svg>\n");
    s
}

impl Render for AgTimeline {
    const KIND: &'static str = "repl_ag_timeline";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        ag_text(self, out)
    }
}

/// The Availability Group live view's header.
pub(crate) fn hadr_header(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{:>7}  {:<28}  {:<12}  {:<17}  {:>10}  {:>12}  {:>10}  {:>12}  {:>9}",
        "time",
        "replica/database",
        "mode",
        "state",
        "send queue",
        "send rate",
        "redo queue",
        "redo rate",
        "lag"
    )
}

/// One line of the Availability Group live view: a row per secondary database.
pub(crate) fn hadr_text(l: &HadrLine, out: &mut dyn Write) -> io::Result<()> {
    let time = format!("{:.1}s", l.t_ms as f64 / 1000.0);
    for c in &l.changes {
        writeln!(out, "{time:>7}  {c}")?;
    }
    let b = |v: Option<f64>| opt_or_dash(v.map(|v| crate::fmt::bytes(v.max(0.0) as u64)));
    let r = |v: Option<f64>| {
        opt_or_dash(v.map(|v| format!("{}/s", crate::fmt::bytes(v.max(0.0) as u64))))
    };
    for x in l.replicas.iter().filter(|x| !x.is_primary) {
        writeln!(
            out,
            "{time:>7}  {:<28}  {:<12}  {:<17}  {:>10}  {:>12}  {:>10}  {:>12}  {:>9}",
            format!("{}/{}", x.server, x.database),
            x.mode.split('_').next().unwrap_or(""),
            x.state,
            b(x.send_queue_bytes),
            r(x.send_rate_bytes_per_s),
            b(x.redo_queue_bytes),
            r(x.redo_rate_bytes_per_s),
            opt_or_dash(x.secondary_lag_s.map(|s| crate::fmt::ms(s))),
        )?;
    }
    Ok(())
}

impl Render for HadrLine {
    const KIND: &'static str = "repl_watch_hadr";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        hadr_text(self, out)
    }
}

/// Prints `plumb repl watch`'s lines: a header before the first, the standbys' names in a
/// column as wide as the first line's need; or one JSON object per line.
pub struct WatchPrinter {
    json: bool,
    first: bool,
    width: Option<usize>,
}

impl WatchPrinter {
    pub fn new(json: bool) -> WatchPrinter {
        WatchPrinter {
            json,
            first: true,
            width: None,
        }
    }

    pub fn print(
        &mut self,
        line: &plumb_analyze::repl::ReplLine,
        out: &mut dyn Write,
    ) -> Result<(), crate::Error> {
        use crate::write_json_line;
        use plumb_analyze::repl::ReplLine;
        let first = std::mem::replace(&mut self.first, false);
        match line {
            ReplLine::Pipeline(l) if self.json => write_json_line(l, "repl_watch", out)?,
            ReplLine::SemiSync(l) if self.json => write_json_line(l, "repl_watch_semisync", out)?,
            ReplLine::Hadr(l) if self.json => write_json_line(l, "repl_watch_hadr", out)?,
            ReplLine::Pipeline(l) => {
                let w = *self.width.get_or_insert_with(|| {
                    watch_name_width(l.standbys.iter().map(|s| s.name.as_str()))
                });
                if first {
                    watch_header(w, out)?;
                }
                watch_text(l, w, out)?;
            }
            ReplLine::SemiSync(l) => {
                if first {
                    semisync_header(out)?;
                }
                semisync_text(l, out)?;
            }
            ReplLine::Hadr(l) => {
                if first {
                    hadr_header(out)?;
                }
                hadr_text(l, out)?;
            }
        }
        out.flush()?;
        Ok(())
    }
}

/// "watching the replication of PRIMARY every 1s, recording to FILE for 2m; Ctrl-C to stop".
pub fn watching(
    primary: &str,
    interval: std::time::Duration,
    out: Option<&std::path::Path>,
    duration: Option<std::time::Duration>,
) -> String {
    use plumb_sys::units::format_duration;
    format!(
        "watching the replication of {primary} every {}{}{}; Ctrl-C to stop",
        format_duration(interval),
        out.map(|o| format!(", recording to {}", o.display()))
            .unwrap_or_default(),
        duration
            .map(|d| format!(" for {}", format_duration(d)))
            .unwrap_or_default()
    )
}
