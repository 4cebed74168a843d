//! Engine counters and gauges for recordings: an observer's snapshot, kept to the fields the
//! recording's `engine` rules know (commits, block reads, WAL bytes…; sessions by state and wait,
//! cache memory, replication lag…), named `engine.SET.FIELD`.
//!
//! A session that fails is dropped and, when the sampler knows the server's address, opened
//! again on a thread of its own (a server that does not answer must not hold up the host's
//! samples), 1 s after the failure and then with a doubling wait of at most 5 s, so a
//! restarted server is read again within seconds of answering.

use plumb_engine::{Observer, Target};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

/// How long one engine sample (its statements with it) may take: a server that answers
/// nothing, or without end, costs the recording this, then the session is left behind and a
/// new one opened as after an error; it never holds a recording past its `--duration` longer.
pub const SAMPLE_WAIT: Duration = Duration::from_secs(10);

/// The first wait before reconnecting, and the longest.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_RETRY: Duration = Duration::from_secs(5);

type Connecting = Receiver<plumb_engine::Result<Box<dyn Observer>>>;

pub struct EngineSampler {
    obs: Option<Box<dyn Observer>>,
    /// Where to connect again after a failure (None: the sampler was given a session only).
    target: Option<Target>,
    /// A connection being opened, and when to try the next one.
    connecting: Option<Connecting>,
    retry_at: Option<Instant>,
    backoff: Duration,
    fields: Vec<&'static str>,
    /// Leave one sample out after the observer changed: its counters may be another
    /// database's, and a rate across the switch would be a spike that never happened.
    skip: bool,
    /// Why the last snapshot failed (the engine went away), once.
    pub failed: Option<String>,
    /// The statements followed (None: statements are not read).
    statements: Option<plumb_engine::statements::Tracker>,
    /// Labels for statements followed from this sample on: (`stmt.ID`, normalized text).
    new_labels: Vec<(String, String)>,
    /// Why the server gives no statements, until the caller takes it (to mark it once).
    pub statements_unavailable: Option<String>,
    statements_said: bool,
}

/// At most this many statements followed for every one asked to join at a reading
/// (`plumb record --statements 10` follows up to 50).
pub const STATEMENTS_CAP_FACTOR: usize = 5;

impl EngineSampler {
    pub fn new(obs: Option<Box<dyn Observer>>) -> EngineSampler {
        EngineSampler {
            obs,
            target: None,
            connecting: None,
            retry_at: None,
            backoff: FIRST_RETRY,
            fields: plumb_analyze::series::engine_fields(),
            skip: false,
            failed: None,
            statements: None,
            new_labels: Vec::new(),
            statements_unavailable: None,
            statements_said: false,
        }
    }

    /// Also read per-statement figures: the `top` heaviest since the last reading join those
    /// followed, up to `cap` (0: none).
    pub(crate) fn with_statements(mut self, top: usize, cap: usize) -> EngineSampler {
        self.statements =
            (top > 0 && cap > 0).then(|| plumb_engine::statements::Tracker::new(top, cap));
        self
    }

    /// Labels for the statements followed from this sample on (`stmt.ID` → normalized text).
    pub(crate) fn take_labels(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.new_labels)
    }

    /// Reconnect to `t` when the session fails (a restart, a failover).
    pub(crate) fn reconnecting(mut self, t: Target) -> EngineSampler {
        self.target = Some(t);
        self
    }

    /// Whether the engine answers: None when there is no engine to read.
    pub fn up(&self) -> Option<bool> {
        (self.obs.is_some() || self.target.is_some())
            .then(|| self.obs.is_some() && self.failed.is_none())
    }

    /// The session again, if a reconnection finished; starts one when it is time.
    fn reconnect(&mut self) {
        let Some(t) = &self.target else { return };
        if let Some(rx) = &self.connecting {
            match rx.try_recv() {
                Ok(Ok(obs)) => {
                    self.connecting = None;
                    self.obs = Some(obs);
                    self.backoff = FIRST_RETRY;
                    self.retry_at = None;
                }
                Ok(Err(e)) => {
                    self.connecting = None;
                    self.failed = Some(e.to_string());
                    self.retry_at = Some(Instant::now() + self.backoff);
                    self.backoff = (self.backoff * 2).min(LAST_RETRY);
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.connecting = None,
            }
            return;
        }
        if self.retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let t = t.clone();
        let spawned = std::thread::Builder::new()
            .name("plumb-engine-connect".into())
            .spawn(move || {
                let _ = tx.send(plumb_engine::observer(&t));
            });
        match spawned {
            Ok(_) => self.connecting = Some(rx),
            Err(_) => self.retry_at = Some(Instant::now() + self.backoff),
        }
    }

    /// The server process serving plumb's own connection, when the engine runs here.
    pub fn own_pid(&self) -> Option<u32> {
        self.obs.as_ref().and_then(|o| o.own_pid())
    }

    /// The engine's main process when it runs on this host (a new one after a restart).
    pub fn local_server_pid(&self) -> Option<u32> {
        self.obs.as_ref().and_then(|o| o.local_server_pid())
    }

    /// Read from another session (another database) from the next sample on.
    pub fn replace(&mut self, obs: Box<dyn Observer>) {
        self.obs = Some(obs);
        self.skip = true;
    }

    /// The counters and gauges now (`true` for a gauge); nothing when there is no engine, it
    /// failed, or right after a switch.
    pub fn take(&mut self) -> Vec<(String, bool, u64)> {
        if self.obs.is_none() {
            self.reconnect();
        }
        if self.obs.is_none() {
            return Vec::new();
        }
        if self.skip {
            self.skip = false;
            return Vec::new();
        }
        // The session goes to a thread of its own for the sample and comes back with it,
        // unless the server holds it past SAMPLE_WAIT.
        let mut obs = self.obs.take().expect("checked above");
        let want_statements = self.statements.is_some();
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("plumb-engine-sample".into())
            .spawn(move || {
                let snap = obs.snapshot_for_recording();
                let st = (want_statements && snap.is_ok()).then(|| obs.statements());
                let _ = tx.send((obs, snap, st));
            });
        if spawned.is_err() {
            return Vec::new();
        }
        let (obs, snap, statements) = match rx.recv_timeout(SAMPLE_WAIT) {
            Ok(r) => r,
            Err(_) => {
                return self.fail(plumb_engine::Error::Gone(format!(
                    "the server did not answer the engine's sample within {} s",
                    SAMPLE_WAIT.as_secs()
                )))
            }
        };
        self.obs = Some(obs);
        match snap {
            Ok(s) => {
                self.failed = None;
                let fields = &self.fields;
                let keep = |k: &String, v: &f64| {
                    v.is_finite()
                        && *v >= 0.0
                        && k.split_once('.').is_some_and(|(_, f)| fields.contains(&f))
                };
                let counters = s
                    .counters
                    .iter()
                    .filter(|(k, v)| keep(k, v))
                    .map(|(k, v)| (format!("engine.{k}"), false, v.round() as u64));
                let gauges = s
                    .gauges
                    .iter()
                    .filter(|(k, v)| keep(k, v))
                    .map(|(k, v)| (format!("engine.{k}"), true, v.round() as u64));
                let mut out: Vec<(String, bool, u64)> = counters.chain(gauges).collect();
                match self.read_statements(statements) {
                    Ok(s) => out.extend(s),
                    Err(e) => return self.fail(e),
                }
                out
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: plumb_engine::Error) -> Vec<(String, bool, u64)> {
        self.failed = Some(e.to_string());
        if self.target.is_some() {
            // A new session from the next try on: this one may be dead for good, and closing
            // it may wait on the server: that happens on a thread of its own.
            if let Some(old) = self.obs.take() {
                let _ = std::thread::Builder::new()
                    .name("plumb-engine-close".into())
                    .spawn(move || drop(old));
            }
            self.retry_at = Some(Instant::now() + FIRST_RETRY);
            self.backoff = FIRST_RETRY * 2;
        }
        Vec::new()
    }

    /// The followed statements' counters (`stmt.ID.calls`, `.time_us`, `.rows`, `.blks_read`,
    /// `.blks_hit`), where the server keeps them.
    fn read_statements(
        &mut self,
        read: Option<plumb_engine::Result<plumb_engine::Statements>>,
    ) -> plumb_engine::Result<Vec<(String, bool, u64)>> {
        let (Some(tracker), Some(read)) = (self.statements.as_mut(), read) else {
            return Ok(Vec::new());
        };
        let all = match read? {
            plumb_engine::Statements::Read(all) => all,
            plumb_engine::Statements::Unavailable(why) => {
                if !self.statements_said {
                    self.statements_said = true;
                    self.statements_unavailable = Some(why);
                }
                return Ok(Vec::new());
            }
        };
        let (kept, new) = tracker.update(&all);
        let object = |id: &str| format!("stmt.{}", id.replace('.', "_"));
        self.new_labels
            .extend(new.into_iter().map(|(id, text)| (object(&id), text)));
        let mut out = Vec::new();
        for s in kept {
            let o = object(&s.id);
            let mut put = |field: &str, v: Option<f64>| {
                if let Some(v) = v.filter(|v| v.is_finite() && *v >= 0.0) {
                    out.push((format!("{o}.{field}"), false, v.round() as u64));
                }
            };
            put("calls", Some(s.calls));
            put("time_us", Some(s.time_us));
            put("rows", Some(s.rows));
            put("blks_read", s.blks_read);
            put("blks_hit", s.blks_hit);
        }
        Ok(out)
    }
}
