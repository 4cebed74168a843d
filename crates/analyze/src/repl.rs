//! The timeline of one replicated commit, from the events of the processes it passes through:
//! the primary's backend (and WAL writer), its WAL sender, the standby's WAL receiver and its
//! startup process (replay). Events are syscalls (a WAL write, an fdatasync, a send, a receive)
//! and, where the server binary exports them, function probes (the commit record, the wait for
//! the standby, its release, replay of the commit); all on CLOCK_MONOTONIC.
//!
//! Each stage is the first matching event after the stage before it, so the stages are ordered
//! by construction; a stage that is not found is left out and named in `missing`, never guessed.

use plumb_engine::mariadb::SemiSync;
use plumb_engine::repl::{Lsn, Pipeline, Sender};
use plumb_sys::eventtrace::{Event, What};
use serde::Serialize;

/// The processes a commit passes through (PIDs on this host).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Roles {
    /// The client's threads (plumb's own, which runs the statement).
    pub client: Vec<u32>,
    pub backend: u32,
    pub wal_writer: Option<u32>,
    pub wal_sender: u32,
    pub wal_receiver: u32,
    pub startup: Option<u32>,
}

/// Where a stage happens (a lane of the swimlane).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    Client,
    Backend,
    WalWriter,
    WalSender,
    WalReceiver,
    Startup,
}

/// The stages, in the order a synchronously replicated commit passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The client starts writing the statement to its socket.
    StatementSent,
    /// The backend has read the statement from the client's socket.
    StatementReceived,
    /// The commit record is inserted into the WAL buffers (probe).
    CommitRecord,
    /// The WAL is written to its file and the flush (fdatasync) starts.
    LocalFlushStarted,
    /// The flush returned: the commit is durable on the primary.
    LocalFlushDone,
    /// The backend starts waiting for the standby (probe).
    WaitForStandby,
    /// The WAL sender has sent the WAL to the standby.
    WalSent,
    /// The standby's WAL receiver has read it from its socket.
    StandbyReceived,
    /// It is written to the standby's WAL file.
    StandbyWritten,
    /// The standby's flush returned: the commit is durable there.
    StandbyFlushed,
    /// The WAL receiver has sent the flush position back.
    FlushReported,
    /// The WAL sender has read the reply.
    ReplyReceived,
    /// The WAL sender releases the waiting commits (probe).
    CommitReleased,
    /// The backend has stopped waiting.
    BackendWoken,
    /// The backend has written the result to the client's socket.
    ResultSent,
    /// The client has read the result.
    ResultReceived,
    /// The standby's startup process has replayed the commit record (probe; off the commit's
    /// path: the primary does not wait for it).
    Replayed,
}

impl Stage {
    pub const ALL: [Stage; 17] = [
        Stage::StatementSent,
        Stage::StatementReceived,
        Stage::CommitRecord,
        Stage::LocalFlushStarted,
        Stage::LocalFlushDone,
        Stage::WaitForStandby,
        Stage::WalSent,
        Stage::StandbyReceived,
        Stage::StandbyWritten,
        Stage::StandbyFlushed,
        Stage::FlushReported,
        Stage::ReplyReceived,
        Stage::CommitReleased,
        Stage::BackendWoken,
        Stage::ResultSent,
        Stage::ResultReceived,
        Stage::Replayed,
    ];

    /// Which stage causes which: the backend's own line (statement to result, through its wait
    /// for the standby), the WAL's way to the standby and the answer's way back, and replay (off
    /// the commit's path). Along each chain a stage never comes before the one before it.
    pub const CHAINS: [&'static [Stage]; 3] = [
        &[
            Stage::StatementSent,
            Stage::StatementReceived,
            Stage::CommitRecord,
            Stage::LocalFlushStarted,
            Stage::LocalFlushDone,
            Stage::WaitForStandby,
            Stage::BackendWoken,
            Stage::ResultSent,
            Stage::ResultReceived,
        ],
        &[
            Stage::LocalFlushDone,
            Stage::WalSent,
            Stage::StandbyReceived,
            Stage::StandbyWritten,
            Stage::StandbyFlushed,
            Stage::FlushReported,
            Stage::ReplyReceived,
            Stage::CommitReleased,
            Stage::BackendWoken,
        ],
        &[Stage::StandbyWritten, Stage::Replayed],
    ];
}

/// The probes the timeline uses, by PostgreSQL function: (probe name, function, at return).
pub const PG_PROBES: [(&str, &str, bool); 5] = [
    ("commit_record", "XactLogCommitRecord", false),
    ("syncrep_wait", "SyncRepWaitForLSN", false),
    ("syncrep_wait_done", "SyncRepWaitForLSN", true),
    ("syncrep_release", "SyncRepReleaseWaiters", false),
    ("replayed", "xact_redo", true),
];

/// The syscalls the timeline follows.
pub const SYSCALLS: [&str; 11] = [
    "recvfrom",
    "sendto",
    "pwrite64",
    "write",
    "fdatasync",
    "fsync",
    "epoll_wait",
    "kill",
    "read",
    "sendmsg",
    "recvmsg",
];

/// How the client sends and reads on its socket (plumb's own client: any of these).
const CLIENT_SEND: [&str; 3] = ["sendto", "write", "sendmsg"];
const CLIENT_READ: [&str; 3] = ["recvfrom", "read", "recvmsg"];

/// One stage of one commit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct At {
    pub stage: Stage,
    pub lane: Lane,
    /// Since the client sent the statement (since the backend received it, when the client's
    /// send was not seen), nanoseconds.
    pub t_ns: u64,
    /// Since the stage before it on the commit's path (for `Replayed`: since `StandbyFlushed`,
    /// or the stage before it that was found).
    pub step_ns: u64,
    /// On the path the client waits for (with a synchronous standby every stage but replay;
    /// with an asynchronous one the standby's stages are not).
    pub on_commit_path: bool,
}

/// The timeline of one commit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    pub stages: Vec<At>,
    /// Stages not found in the events.
    pub missing: Vec<Stage>,
    /// The client's own measure: from before it sent the statement to after it read the result.
    pub client_latency_ns: u64,
    /// From the first stage to the last on the commit's path (the client's send to its read of
    /// the result, when both were seen): the sum of the steps on the path.
    pub path_ns: Option<u64>,
    /// Events the kernel dropped in this window (0 when none).
    pub lost_events: u64,
    /// The commit waited for the standby (synchronous replication).
    pub synchronous: bool,
}

fn exit_of<'a>(e: &'a Event, call: &[&str]) -> Option<i64> {
    match &e.what {
        What::Exit { call: c, ret } if call.contains(&c.as_str()) => Some(*ret),
        _ => None,
    }
}

fn enter_of(e: &Event, call: &[&str]) -> bool {
    matches!(&e.what, What::Enter { call: c, .. } if call.contains(&c.as_str()))
}

fn probe(e: &Event, name: &str) -> bool {
    matches!(&e.what, What::Probe { name: n } if n == name)
}

/// Whether a call `c` of `e` returned more than 0.
fn pos(e: &Event, c: &[&str]) -> bool {
    exit_of(e, c).is_some_and(|r| r > 0)
}

/// The first event at or after a time of a process that a test accepts.
type Find<'a> = dyn Fn(u32, u64, &dyn Fn(&Event) -> bool) -> Option<u64> + 'a;

/// The standby's stages from `flushed_at` on (`next` finds each: within the client's wait
/// when synchronous, any time after otherwise), replay beside them; where the chain ended, and
/// the standby's flush.
fn standby_stages(
    roles: &Roles,
    flushed_at: u64,
    next: &Find,
    first_any: &Find,
    found: &mut Vec<(Stage, Lane, u64)>,
) -> (u64, Option<u64>) {
    let syncs = ["fdatasync", "fsync"];
    let (ws, wr) = (roles.wal_sender, roles.wal_receiver);
    let mut s_at = flushed_at;
    let mut standby_flushed = None;
    let chain: [(Stage, Lane, u32, &dyn Fn(&Event) -> bool); 6] = [
        (Stage::WalSent, Lane::WalSender, ws, &|e| {
            pos(e, &["sendto"])
        }),
        (Stage::StandbyReceived, Lane::WalReceiver, wr, &|e| {
            pos(e, &["recvfrom"])
        }),
        (Stage::StandbyWritten, Lane::WalReceiver, wr, &|e| {
            pos(e, &["pwrite64"])
        }),
        (Stage::StandbyFlushed, Lane::WalReceiver, wr, &|e| {
            exit_of(e, &syncs).is_some()
        }),
        (Stage::FlushReported, Lane::WalReceiver, wr, &|e| {
            pos(e, &["sendto"])
        }),
        (Stage::ReplyReceived, Lane::WalSender, ws, &|e| {
            pos(e, &["recvfrom"])
        }),
    ];
    for (stage, lane, pid, f) in chain {
        let Some(t) = next(pid, s_at, f) else { break };
        found.push((stage, lane, t));
        if stage == Stage::StandbyFlushed {
            standby_flushed = Some(t);
        }
        if stage == Stage::StandbyWritten {
            // Replay reads what was written; it can start before the flush.
            if let Some(su) = roles.startup {
                if let Some(r) = first_any(su, t, &|e| probe(e, "replayed")) {
                    found.push((Stage::Replayed, Lane::Startup, r));
                }
            }
        }
        s_at = t;
    }
    (s_at, standby_flushed)
}

/// Build the timeline. `events` in any order; `client` = (sent, received) on the same clock;
/// `synchronous`: the standby is synchronous (the backend waits for it).
pub fn timeline(
    events: &[Event],
    roles: &Roles,
    client: (u64, u64),
    synchronous: bool,
    lost_events: u64,
) -> Timeline {
    let mut ev: Vec<&Event> = events.iter().collect();
    ev.sort_by_key(|e| e.t_ns);
    let (sent, received) = client;
    let mut found: Vec<(Stage, Lane, u64)> = Vec::new();
    // The first event at or after `from` of process `pid` that `f` accepts.
    let first = |pid: u32, from: u64, f: &dyn Fn(&Event) -> bool| -> Option<u64> {
        ev.iter()
            .find(|e| e.tid == pid && e.t_ns >= from && e.t_ns <= received && f(e))
            .map(|e| e.t_ns)
    };
    let first_any = |pid: u32, from: u64, f: &dyn Fn(&Event) -> bool| -> Option<u64> {
        ev.iter()
            .find(|e| e.tid == pid && e.t_ns >= from && f(e))
            .map(|e| e.t_ns)
    };
    let b = roles.backend;
    let Some(received_at) = first(b, sent, &|e| {
        exit_of(e, &["recvfrom"]).is_some_and(|r| r > 0)
    }) else {
        return Timeline {
            stages: Vec::new(),
            missing: Stage::ALL.to_vec(),
            client_latency_ns: received.saturating_sub(sent),
            path_ns: None,
            lost_events,
            synchronous,
        };
    };
    let is_client = |e: &Event| roles.client.contains(&e.tid);
    let client_sent = ev
        .iter()
        .find(|e| {
            is_client(e) && e.t_ns >= sent && e.t_ns <= received_at && enter_of(e, &CLIENT_SEND)
        })
        .map(|e| e.t_ns);
    found.push((Stage::StatementReceived, Lane::Backend, received_at));
    if let Some(t) = client_sent {
        found.push((Stage::StatementSent, Lane::Client, t));
    }
    let t0 = client_sent.unwrap_or(received_at);
    let mut at = received_at;
    if let Some(t) = first(b, at, &|e| probe(e, "commit_record")) {
        found.push((Stage::CommitRecord, Lane::Backend, t));
        at = t;
    }
    // The flush: the backend's own, else the WAL writer's (it may have flushed the commit first).
    let syncs = ["fdatasync", "fsync"];
    let mut flusher = (b, Lane::Backend);
    let mut flush = first(b, at, &|e| enter_of(e, &syncs));
    if flush.is_none() {
        if let Some(w) = roles.wal_writer {
            flush = first(w, at, &|e| enter_of(e, &syncs));
            flusher = (w, Lane::WalWriter);
        }
    }
    if let Some(t) = flush {
        found.push((Stage::LocalFlushStarted, flusher.1, t));
        if let Some(d) = first(flusher.0, t, &|e| exit_of(e, &syncs).is_some()) {
            found.push((Stage::LocalFlushDone, flusher.1, d));
            at = d;
        }
    }
    let flushed_at = at;
    if let Some(t) = first(b, flushed_at, &|e| probe(e, "syncrep_wait")) {
        found.push((Stage::WaitForStandby, Lane::Backend, t));
    }
    // The standby's side (on the commit's path when synchronous; after the result otherwise).
    let (mut s_at, standby_flushed) = standby_stages(
        roles,
        flushed_at,
        &|pid, from, f| {
            if synchronous {
                first(pid, from, f)
            } else {
                first_any(pid, from, f)
            }
        },
        &first_any,
        &mut found,
    );
    let (ws, mut b_at) = (roles.wal_sender, flushed_at);
    if synchronous {
        if let Some(t) = first(ws, s_at, &|e| probe(e, "syncrep_release")) {
            found.push((Stage::CommitReleased, Lane::WalSender, t));
            s_at = t;
        }
        let woken = first(b, s_at, &|e| probe(e, "syncrep_wait_done")).or_else(|| {
            first(b, s_at, &|e| {
                exit_of(e, &["epoll_wait"]).is_some_and(|r| r > 0)
            })
        });
        if let Some(t) = woken {
            found.push((Stage::BackendWoken, Lane::Backend, t));
            b_at = t;
        }
    }
    if let Some(t) = first(b, b_at, &|e| pos(e, &["sendto"])) {
        found.push((Stage::ResultSent, Lane::Backend, t));
        let read = ev
            .iter()
            .find(|e| {
                is_client(e)
                    && e.t_ns >= t
                    && e.t_ns <= received
                    && exit_of(e, &CLIENT_READ).is_some_and(|r| r > 0)
            })
            .map(|e| e.t_ns);
        if let Some(r) = read {
            found.push((Stage::ResultReceived, Lane::Client, r));
        }
    }
    let result_at = found
        .iter()
        .filter(|f| matches!(f.0, Stage::ResultSent | Stage::ResultReceived))
        .map(|f| f.2)
        .max();
    let (stages, missing) = ordered(found, t0, synchronous, result_at, standby_flushed);
    Timeline {
        stages,
        missing,
        client_latency_ns: received.saturating_sub(sent),
        path_ns: result_at.map(|r| r - t0),
        lost_events,
        synchronous,
    }
}

/// The stages found in order, each with its step from the one before it on the commit's path
/// (replay's from the standby's flush), and the stages not found that the path should have.
fn ordered(
    mut found: Vec<(Stage, Lane, u64)>,
    t0: u64,
    synchronous: bool,
    result_at: Option<u64>,
    standby_flushed: Option<u64>,
) -> (Vec<At>, Vec<Stage>) {
    found.sort_by_key(|f| (f.2, f.0));
    let on_path = |s: Stage, t: u64| -> bool {
        s != Stage::Replayed
            && (synchronous || result_at.is_none_or(|r| t <= r) && !standby_side(s))
    };
    let mut stages = Vec::new();
    let mut prev_path = t0;
    for (stage, lane, t) in &found {
        let path = on_path(*stage, *t);
        let base = if *stage == Stage::Replayed {
            standby_flushed.filter(|f| f <= t).unwrap_or(prev_path)
        } else {
            prev_path
        };
        stages.push(At {
            stage: *stage,
            lane: *lane,
            t_ns: t - t0,
            step_ns: t.saturating_sub(base),
            on_commit_path: path,
        });
        if path {
            prev_path = *t;
        }
    }
    let missing: Vec<Stage> = Stage::ALL
        .into_iter()
        .filter(|s| !found.iter().any(|f| f.0 == *s))
        .filter(|s| {
            synchronous
                || !matches!(
                    s,
                    Stage::WaitForStandby | Stage::CommitReleased | Stage::BackendWoken
                )
        })
        .collect();
    (stages, missing)
}

fn standby_side(s: Stage) -> bool {
    matches!(
        s,
        Stage::WalSent
            | Stage::StandbyReceived
            | Stage::StandbyWritten
            | Stage::StandbyFlushed
            | Stage::FlushReported
            | Stage::ReplyReceived
            | Stage::Replayed
    )
}

/// A stage over several commits: its time since the statement arrived and its step, median
/// and range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageSummary {
    pub stage: Stage,
    pub lane: Lane,
    /// Commits in which it was found.
    pub found: usize,
    pub t_ns: Spread,
    pub step_ns: Spread,
    pub on_commit_path: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: u64,
    pub min: u64,
    pub max: u64,
}

fn spread(mut v: Vec<u64>) -> Option<Spread> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    };
    Some(Spread {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// Each stage's median and range over the commits, in the order of their median times; and
/// the client's latency the same way.
pub fn summarize(runs: &[Timeline]) -> (Vec<StageSummary>, Option<Spread>) {
    let mut out = Vec::new();
    for s in Stage::ALL {
        let ats: Vec<&At> = runs
            .iter()
            .filter_map(|r| r.stages.iter().find(|a| a.stage == s))
            .collect();
        let (Some(t), Some(step)) = (
            spread(ats.iter().map(|a| a.t_ns).collect()),
            spread(ats.iter().map(|a| a.step_ns).collect()),
        ) else {
            continue;
        };
        out.push(StageSummary {
            stage: s,
            lane: ats[0].lane,
            found: ats.len(),
            t_ns: t,
            step_ns: step,
            on_commit_path: ats.iter().filter(|a| a.on_commit_path).count() * 2 > ats.len(),
        });
    }
    out.sort_by_key(|s| (s.t_ns.median, s.stage));
    (
        out,
        spread(runs.iter().map(|r| r.client_latency_ns).collect()),
    )
}

/// `plumb repl timeline`: the commits traced and what they passed through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineReport {
    /// The statement run on the primary (as given).
    pub sql: String,
    pub processes: Roles,
    /// The standby's name on the primary, and its sync state there.
    pub application_name: String,
    pub sync_state: String,
    pub primary_version: u32,
    pub standby_version: u32,
    /// Functions probed (the server binary exports them), and those it does not export.
    pub probed: Vec<String>,
    pub not_probed: Vec<String>,
    pub runs: Vec<Timeline>,
    pub summary: Vec<StageSummary>,
    pub client_latency_ns: Option<Spread>,
    /// How far the stages on the commit's path fall short of the client's latency (median
    /// over the commits: the client's own socket time and scheduling), in parts of it.
    pub unexplained: Option<f64>,
}

impl TimelineReport {
    pub fn new(base: TimelineReport) -> TimelineReport {
        let (summary, client) = summarize(&base.runs);
        let mut fr: Vec<f64> = base
            .runs
            .iter()
            .filter_map(|r| {
                let s = r.path_ns? as f64;
                let c = r.client_latency_ns as f64;
                (c > 0.0).then(|| (c - s) / c)
            })
            .collect();
        fr.sort_by(|a, b| a.total_cmp(b));
        let unexplained = (!fr.is_empty()).then(|| fr[fr.len() / 2]);
        TimelineReport {
            summary,
            client_latency_ns: client,
            unexplained,
            ..base
        }
    }
}

/// A standby that owes a report of WAL sent to it and has not replied for this long is silent:
/// an active standby replies within milliseconds of each write.
pub const SILENT_AFTER_S: f64 = 1.0;

/// One standby in a watch line: where it is, as the primary sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StandbyNow {
    pub name: String,
    /// startup, catchup, streaming, backup, stopping.
    pub state: String,
    /// async, potential, sync, quorum.
    pub sync_state: String,
    pub sent_behind_bytes: Option<u64>,
    pub flushed_behind_bytes: Option<u64>,
    pub replayed_behind_bytes: Option<u64>,
    /// The most any reading since the last line had not flushed (a synchronous commit's wait).
    pub flushed_behind_peak_bytes: Option<u64>,
    pub write_lag_ms: Option<f64>,
    pub flush_lag_ms: Option<f64>,
    pub replay_lag_ms: Option<f64>,
    /// WAL sent to it per second since the last line.
    pub sent_bytes_per_s: Option<f64>,
    /// How long it has not replied while owing a report of WAL sent to it (a second or more:
    /// its lags above are its last reply's, not now's).
    pub silent_ms: Option<f64>,
}

/// `plumb repl watch`: one line of the live view, from the readings since the last one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WatchLine {
    /// Milliseconds since the watch started.
    pub t_ms: u64,
    /// The primary's WAL written per second since the last line.
    pub wal_bytes_per_s: Option<f64>,
    /// Commits waiting for a synchronous standby at the last reading, and the most any
    /// reading since the last line saw.
    pub commits_waiting: u64,
    pub commits_waiting_peak: u64,
    /// The longest any waiting commit had been running its statement, over the readings.
    pub longest_wait_ms: Option<f64>,
    pub readings: usize,
    pub standbys: Vec<StandbyNow>,
    /// Standbys that were streaming at the last line and are gone now.
    pub gone: Vec<String>,
    /// Standbys that appeared since the last line.
    pub new: Vec<String>,
}

/// The readings of one line (at least one), and the last reading of the line before (for
/// rates), each with its time in milliseconds.
pub fn watch_line(
    prev: Option<&(u64, Pipeline)>,
    readings: &[(u64, Pipeline)],
) -> Option<WatchLine> {
    let (t_ms, last) = readings.last()?;
    let dt_s = prev.map(|(t0, _)| (*t_ms as f64 - *t0 as f64) / 1000.0);
    let rate = |a: Option<u64>, b: Option<u64>| match (a, b, dt_s) {
        (Some(a), Some(b), Some(dt)) if dt > 0.0 && b >= a => Some((b - a) as f64 / dt),
        _ => None,
    };
    let pos = |p: &Pipeline| p.current.as_ref().map(|c| c.bytes);
    let sender = |p: &Pipeline, name: &str| {
        p.senders
            .iter()
            .find(|s| s.application_name == name)
            .cloned()
    };
    let behind = |s: &Sender, f: fn(&Sender) -> &Option<Lsn>| {
        Some(
            s.current
                .as_ref()?
                .bytes
                .saturating_sub(f(s).as_ref()?.bytes),
        )
    };
    let names = |p: &Pipeline| -> Vec<String> {
        p.senders
            .iter()
            .map(|s| s.application_name.clone())
            .collect()
    };
    let before: Vec<String> = prev.map(|(_, p)| names(p)).unwrap_or_default();
    let now = names(last);
    let standbys = last
        .senders
        .iter()
        .map(|s| {
            let peak = readings
                .iter()
                .filter_map(|(_, p)| sender(p, &s.application_name))
                .filter_map(|x| behind(&x, |x| &x.flushed))
                .max();
            let sent_before = prev
                .and_then(|(_, p)| sender(p, &s.application_name))
                .and_then(|x| x.sent.map(|l| l.bytes));
            StandbyNow {
                name: s.application_name.clone(),
                state: s.state.clone(),
                sync_state: s.sync_state.clone(),
                sent_behind_bytes: behind(s, |x| &x.sent),
                flushed_behind_bytes: behind(s, |x| &x.flushed),
                replayed_behind_bytes: behind(s, |x| &x.replayed),
                flushed_behind_peak_bytes: peak,
                write_lag_ms: s.write_lag_s.map(|x| x * 1000.0),
                flush_lag_ms: s.flush_lag_s.map(|x| x * 1000.0),
                replay_lag_ms: s.replay_lag_s.map(|x| x * 1000.0),
                sent_bytes_per_s: rate(sent_before, s.sent.as_ref().map(|l| l.bytes)),
                silent_ms: s
                    .reply_age_s
                    .filter(|a| {
                        *a >= SILENT_AFTER_S && behind(s, |x| &x.flushed).is_some_and(|b| b > 0)
                    })
                    .map(|a| a * 1000.0),
            }
        })
        .collect();
    Some(WatchLine {
        t_ms: *t_ms,
        wal_bytes_per_s: rate(prev.and_then(|(_, p)| pos(p)), pos(last)),
        commits_waiting: last.commits_waiting,
        commits_waiting_peak: readings
            .iter()
            .map(|(_, p)| p.commits_waiting)
            .max()
            .unwrap_or(0),
        longest_wait_ms: readings
            .iter()
            .filter_map(|(_, p)| p.longest_wait_s)
            .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))))
            .map(|w| w * 1000.0),
        readings: readings.len(),
        standbys,
        gone: before
            .iter()
            .filter(|n| !now.contains(n))
            .cloned()
            .collect(),
        new: if prev.is_some() {
            now.iter()
                .filter(|n| !before.contains(n))
                .cloned()
                .collect()
        } else {
            Vec::new()
        },
    })
}

/// `plumb repl watch` on a SQL Server Availability Group's primary: its replicas' databases now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HadrLine {
    pub t_ms: u64,
    pub replicas: Vec<plumb_engine::mssql::HadrReplica>,
    /// State changes since the last line ("sql2/sales: SYNCHRONIZED → NOT SYNCHRONIZING").
    pub changes: Vec<String>,
}

/// The last reading, and what changed state since the reading before the line.
pub fn hadr_line(
    prev: Option<&(u64, Vec<plumb_engine::mssql::HadrReplica>)>,
    readings: &[(u64, Vec<plumb_engine::mssql::HadrReplica>)],
) -> Option<HadrLine> {
    let (t_ms, last) = readings.last()?;
    let mut changes = Vec::new();
    let mut before = prev.map(|p| p.1.clone());
    for (_, now) in readings {
        if let Some(b) = &before {
            for r in now {
                let old = b
                    .iter()
                    .find(|x| x.server == r.server && x.database == r.database);
                match old {
                    Some(o) if o.state != r.state => changes.push(format!(
                        "{}/{}: {} → {}",
                        r.server, r.database, o.state, r.state
                    )),
                    None => changes.push(format!(
                        "{}/{}: appeared ({})",
                        r.server, r.database, r.state
                    )),
                    _ => {}
                }
            }
            for o in b {
                if !now
                    .iter()
                    .any(|x| x.server == o.server && x.database == o.database)
                {
                    changes.push(format!("{}/{}: gone", o.server, o.database));
                }
            }
        }
        before = Some(now.clone());
    }
    Some(HadrLine {
        t_ms: *t_ms,
        replicas: last.clone(),
        changes,
    })
}

/// `plumb repl watch` on a MariaDB primary: one line of semi-synchronous replication.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SemiSyncLine {
    pub t_ms: u64,
    /// Configured (rpl_semi_sync_master_enabled), and waiting for acknowledgements now.
    pub enabled: bool,
    pub active: bool,
    pub clients: u64,
    pub commits_waiting: u64,
    pub commits_waiting_peak: u64,
    /// Per second since the last line.
    pub acknowledged_per_s: Option<f64>,
    pub unacknowledged_per_s: Option<f64>,
    /// The mean wait of the commits that waited since the last line.
    pub commit_wait_ms: Option<f64>,
    /// Binary log written per second (within one binlog file; none across a rotation).
    pub binlog_bytes_per_s: Option<f64>,
    pub timeout_ms: Option<u64>,
    /// Semi-sync switched off (a commit waited the timeout without an acknowledgement: the
    /// primary goes on without its replica) or back on since the last line.
    pub switched_off: bool,
    pub switched_on: bool,
    pub readings: usize,
}

/// The readings of one line and the last reading before them.
pub fn semisync_line(
    prev: Option<&(u64, SemiSync)>,
    readings: &[(u64, SemiSync)],
) -> Option<SemiSyncLine> {
    let (t_ms, last) = readings.last()?;
    let dt_s = prev.map(|(t0, _)| (*t_ms as f64 - *t0 as f64) / 1000.0);
    let rate = |f: fn(&SemiSync) -> u64| match (prev, dt_s) {
        (Some((_, p)), Some(dt)) if dt > 0.0 && f(last) >= f(p) => {
            Some((f(last) - f(p)) as f64 / dt)
        }
        _ => None,
    };
    let wait = prev.and_then(|(_, p)| {
        let waits = last.tx_waits.checked_sub(p.tx_waits)?;
        let us = last.tx_wait_us.checked_sub(p.tx_wait_us)?;
        (waits > 0).then(|| us as f64 / waits as f64 / 1000.0)
    });
    // Every reading, the one before the line's first included: a switch between any two.
    let mut states: Vec<bool> = prev.map(|(_, p)| p.active).into_iter().collect();
    states.extend(readings.iter().map(|(_, r)| r.active));
    Some(SemiSyncLine {
        t_ms: *t_ms,
        enabled: last.enabled,
        active: last.active,
        clients: last.clients,
        commits_waiting: last.waiting,
        commits_waiting_peak: readings.iter().map(|(_, r)| r.waiting).max().unwrap_or(0),
        acknowledged_per_s: rate(|r| r.yes_tx),
        unacknowledged_per_s: rate(|r| r.no_tx),
        commit_wait_ms: wait,
        binlog_bytes_per_s: match (prev, dt_s, last.binlog_position) {
            (Some((_, p)), Some(dt), Some(b)) if dt > 0.0 => p
                .binlog_position
                .filter(|a| a >> 32 == b >> 32 && b >= *a)
                .map(|a| (b - a) as f64 / dt),
            _ => None,
        },
        timeout_ms: last.timeout_ms,
        switched_off: states.windows(2).any(|w| w[0] && !w[1]),
        switched_on: states.windows(2).any(|w| !w[0] && w[1]),
        readings: readings.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_sys::eventtrace::parse_events;

    /// One INSERT on a primary with a synchronous standby, as traced on this project's VM
    /// (PostgreSQL 15; backend 32514, WAL sender 32463, WAL receiver 32462, startup 32461).
    const TRACE: &str = "\
plumb-32513 [000] ..... 36155.068810: sys_sendto(fd: 3, buff: 0x55d0a6428fe0, len: 0x1f, flags: 0x4000, addr: 0, addr_len: 0)
plumb-32513 [000] ..... 36155.068830: sys_sendto -> 0x1f
postgres-32514 [001] ..... 36155.068876: sys_recvfrom -> 0x1f
postgres-32514 [001] ..... 36155.069289: sys_pwrite64(fd: 9, buf: 0x7f8e1197fc00, count: 0x2000, pos: 0)
postgres-32514 [001] ..... 36155.069322: sys_pwrite64 -> 0x2000
postgres-32514 [001] DBZff 36155.069382: commit_record: (0x5564cfbc9fe0)
postgres-32514 [001] ..... 36155.069397: sys_pwrite64(fd: 0xb, buf: 0x7f8e11180000, count: 0x4000, pos: 0x14000)
postgres-32514 [001] ..... 36155.069423: sys_pwrite64 -> 0x4000
postgres-32514 [001] ..... 36155.069424: sys_fdatasync(fd: 0xb)
postgres-32514 [001] ..... 36155.069827: sys_fdatasync -> 0x0
postgres-32514 [001] ..... 36155.069835: sys_kill(pid: 0x7ecf, sig: 0x17)
postgres-32463 [001] ..... 36155.069857: sys_epoll_wait -> 0x1
postgres-32463 [001] ..... 36155.069874: sys_recvfrom -> 0xfffffffffffffff5
postgres-32463 [001] ..... 36155.069909: sys_sendto -> 0x9e
postgres-32514 [001] DBZff 36155.069924: syncrep_wait: (0x5564cfe073d0)
postgres-32462 [000] ..... 36155.069973: sys_recvfrom -> 0x9e
postgres-32462 [000] ..... 36155.069994: sys_pwrite64 -> 0x80
postgres-32462 [000] ..... 36155.070006: sys_sendto -> 0x27
postgres-32462 [000] ..... 36155.070007: sys_fdatasync(fd: 5)
postgres-32463 [000] ..... 36155.070051: sys_recvfrom -> 0x26
postgres-32463 [000] DBZff 36155.070057: syncrep_release: (0x5564cfe07b50)
postgres-32462 [000] ..... 36155.070330: sys_fdatasync -> 0x0
postgres-32462 [000] ..... 36155.070336: sys_sendto -> 0x27
postgres-32463 [000] ..... 36155.070340: sys_recvfrom -> 0x26
postgres-32461 [001] DBZff 36155.070421: replayed: (0x55f5de22e261 <- 0x55f5de218be0)
postgres-32463 [000] DBZff 36155.070430: syncrep_release: (0x5564cfe07b50)
postgres-32514 [001] ..... 36155.070441: sys_epoll_wait -> 0x1
postgres-32514 [001] DBZff 36155.070448: syncrep_wait_done: (0x5564cfbcaa09 <- 0x5564cfe073d0)
postgres-32514 [001] ..... 36155.070471: sys_sendto -> 0x16
plumb-32513 [000] ..... 36155.070490: sys_recvfrom -> 0x16
";

    fn roles() -> Roles {
        Roles {
            client: vec![32513],
            backend: 32514,
            wal_writer: None,
            wal_sender: 32463,
            wal_receiver: 32462,
            startup: Some(32461),
        }
    }

    #[test]
    fn a_synchronous_commit_passes_every_stage_in_order() {
        let ev = parse_events(TRACE);
        let sent = 36_155_068_800_000;
        let got = 36_155_070_520_000;
        let t = timeline(&ev, &roles(), (sent, got), true, 0);
        assert!(t.missing.is_empty(), "{:?}", t.missing);
        let at = |s: Stage| t.stages.iter().find(|a| a.stage == s).unwrap();
        // Each stage after the one that causes it (the WAL sender may send before the backend
        // starts waiting: both follow the local flush).
        for chain in Stage::CHAINS {
            for w in chain.windows(2) {
                assert!(
                    at(w[0]).t_ns <= at(w[1]).t_ns,
                    "{:?} before {:?}",
                    w[0],
                    w[1]
                );
            }
        }
        assert!(
            t.stages.windows(2).all(|w| w[0].t_ns <= w[1].t_ns),
            "listed in time order"
        );
        // The write reply (before the flush) is not taken for the flush reply.
        assert_eq!(at(Stage::FlushReported).t_ns, 70_336_000 - 68_810_000);
        assert_eq!(at(Stage::ReplyReceived).t_ns, 70_340_000 - 68_810_000);
        assert_eq!(at(Stage::CommitReleased).t_ns, 70_430_000 - 68_810_000);
        assert_eq!(at(Stage::LocalFlushDone).step_ns, 403_000);
        assert_eq!(at(Stage::StandbyFlushed).step_ns, 70_330_000 - 69_994_000);
        assert!(!at(Stage::Replayed).on_commit_path);
        // The steps on the path add up to the server's time.
        let sum: u64 = t
            .stages
            .iter()
            .filter(|a| a.on_commit_path)
            .map(|a| a.step_ns)
            .sum();
        assert_eq!(Some(sum), t.path_ns);
        // From the client's send to its read of the result.
        assert_eq!(t.path_ns, Some(70_490_000 - 68_810_000));
        assert_eq!(at(Stage::StatementReceived).t_ns, 68_876_000 - 68_810_000);
        assert_eq!(t.client_latency_ns, got - sent);
    }

    #[test]
    fn without_probes_the_syscalls_still_give_the_path() {
        let no_probes: String = TRACE
            .lines()
            .filter(|l| l.contains(" sys_"))
            .map(|l| format!("{l}\n"))
            .collect();
        let ev = parse_events(&no_probes);
        let t = timeline(
            &ev,
            &roles(),
            (36_155_068_800_000, 36_155_070_520_000),
            true,
            0,
        );
        for s in [
            Stage::CommitRecord,
            Stage::WaitForStandby,
            Stage::CommitReleased,
            Stage::Replayed,
        ] {
            assert!(t.missing.contains(&s), "{s:?}");
        }
        let at = |s: Stage| t.stages.iter().find(|a| a.stage == s).unwrap();
        // Woken: the backend's epoll_wait return after the reply.
        assert_eq!(at(Stage::BackendWoken).t_ns, 70_441_000 - 68_810_000);
        assert_eq!(t.path_ns, Some(70_490_000 - 68_810_000));
    }

    #[test]
    fn nothing_traced_is_all_missing_and_summaries_take_medians() {
        let t = timeline(&[], &roles(), (10, 20), true, 3);
        assert!(t.stages.is_empty());
        assert_eq!(t.missing.len(), Stage::ALL.len());
        assert_eq!(t.lost_events, 3);
        let ev = parse_events(TRACE);
        let a = timeline(
            &ev,
            &roles(),
            (36_155_068_800_000, 36_155_070_520_000),
            true,
            0,
        );
        let mut b = a.clone();
        for s in &mut b.stages {
            s.t_ns *= 3;
            s.step_ns *= 3;
        }
        b.client_latency_ns *= 3;
        let (sum, client) = summarize(&[a.clone(), b.clone(), a.clone()]);
        let flush = sum
            .iter()
            .find(|s| s.stage == Stage::LocalFlushDone)
            .unwrap();
        assert_eq!(flush.found, 3);
        assert_eq!(flush.step_ns.median, 403_000);
        assert_eq!(flush.step_ns.max, 3 * 403_000);
        assert_eq!(client.unwrap().median, a.client_latency_ns);
    }

    fn reading(current: u64, waiting: u64, standbys: &[(&str, u64, u64)]) -> Pipeline {
        let lsn = |b: u64| {
            Some(Lsn {
                bytes: b,
                text: String::new(),
            })
        };
        Pipeline {
            current: lsn(current),
            commits_waiting: waiting,
            longest_wait_s: (waiting > 0).then_some(0.25 * waiting as f64),
            senders: standbys
                .iter()
                .map(|(n, sent, flushed)| Sender {
                    pid: 1,
                    application_name: n.to_string(),
                    state: "streaming".into(),
                    sync_state: "sync".into(),
                    sent: lsn(*sent),
                    written: lsn(*flushed),
                    flushed: lsn(*flushed),
                    replayed: lsn(*flushed),
                    current: lsn(current),
                    write_lag_s: Some(0.001),
                    flush_lag_s: Some(0.002),
                    replay_lag_s: None,
                    reply_age_s: Some(0.5),
                })
                .collect(),
        }
    }

    #[test]
    fn a_watch_line_has_rates_peaks_and_standbys_that_came_and_went() {
        let prev = (
            0,
            reading(1_000, 0, &[("a", 1_000, 1_000), ("b", 1_000, 1_000)]),
        );
        let readings = vec![
            (500, reading(3_000, 4, &[("a", 3_000, 1_500), ("c", 0, 0)])),
            (
                1_000,
                reading(5_000, 1, &[("a", 5_000, 4_800), ("c", 100, 100)]),
            ),
        ];
        let l = watch_line(Some(&prev), &readings).unwrap();
        assert_eq!(l.t_ms, 1_000);
        assert_eq!(l.wal_bytes_per_s, Some(4_000.0));
        assert_eq!((l.commits_waiting, l.commits_waiting_peak), (1, 4));
        assert_eq!(l.longest_wait_ms, Some(1000.0));
        let a = &l.standbys[0];
        assert_eq!(a.name, "a");
        assert_eq!(a.flushed_behind_bytes, Some(200));
        // The worst reading of the line: 1,500 bytes not flushed at 500 ms.
        assert_eq!(a.flushed_behind_peak_bytes, Some(1_500));
        assert_eq!(a.sent_bytes_per_s, Some(4_000.0));
        assert_eq!(a.flush_lag_ms, Some(2.0));
        assert_eq!(a.replay_lag_ms, None);
        // It replied half a second ago: not silent.
        assert_eq!(a.silent_ms, None);
        // c is new: no rate yet.
        assert_eq!(l.standbys[1].sent_bytes_per_s, None);
        assert_eq!(l.gone, vec!["b".to_string()]);
        assert_eq!(l.new, vec!["c".to_string()]);
        // A standby owing WAL that has not replied for 2 s is silent: its lags are old.
        let mut frozen = readings[1].clone();
        frozen.1.senders[0].reply_age_s = Some(2.0);
        let l = watch_line(Some(&prev), &[frozen]).unwrap();
        assert_eq!(l.standbys[0].silent_ms, Some(2000.0));
        // The first line has no rates and announces nothing.
        let first = watch_line(None, &readings[..1]).unwrap();
        assert_eq!(first.wal_bytes_per_s, None);
        assert!(first.new.is_empty() && first.gone.is_empty());
    }

    #[test]
    fn a_semisync_line_says_when_the_primary_stopped_waiting() {
        let r = |active: bool, yes: u64, no: u64, wait_us: u64, waits: u64| SemiSync {
            enabled: true,
            active,
            clients: active as u64,
            waiting: 0,
            yes_tx: yes,
            no_tx: no,
            tx_wait_us: wait_us,
            tx_waits: waits,
            timeout_ms: Some(1500),
            wait_point: Some("AFTER_SYNC".into()),
            binlog_position: None,
        };
        let prev = (0, r(true, 100, 0, 50_000, 100));
        let now = [
            (500, r(true, 150, 0, 80_000, 150)),
            (1_000, r(false, 150, 1, 1_580_000, 151)),
        ];
        let l = semisync_line(Some(&prev), &now).unwrap();
        assert_eq!(l.acknowledged_per_s, Some(50.0));
        assert_eq!(l.unacknowledged_per_s, Some(1.0));
        // 51 waits took 1.53 s: one of them the 1.5 s timeout.
        assert!((l.commit_wait_ms.unwrap() - 1530.0 / 51.0).abs() < 1e-9);
        assert!(l.switched_off && !l.switched_on && !l.active);
    }
}

/// One line of `plumb repl watch`, whichever engine the primary is.
#[derive(Debug)]
pub enum ReplLine {
    /// A PostgreSQL primary's WAL senders.
    Pipeline(WatchLine),
    /// A MariaDB primary's semi-synchronous replication.
    SemiSync(SemiSyncLine),
    /// A SQL Server Availability Group's replicas.
    Hadr(HadrLine),
}
