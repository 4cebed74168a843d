//! Engine counters and gauges for recordings: an observer's snapshot, kept to the fields the
//! recording's `engine` rules know (commits, block reads, WAL bytes…; sessions by state and wait,
//! cache memory, replication lag…), named `engine.SET.FIELD`.

use plumb_engine::Observer;

pub struct EngineSampler {
    obs: Option<Box<dyn Observer>>,
    fields: Vec<&'static str>,
    /// Leave one sample out after the observer changed: its counters may be another
    /// database's, and a rate across the switch would be a spike that never happened.
    skip: bool,
    /// Why the last snapshot failed (the engine went away), once.
    pub failed: Option<String>,
}

impl EngineSampler {
    pub fn new(obs: Option<Box<dyn Observer>>) -> EngineSampler {
        EngineSampler {
            obs,
            fields: plumb_analyze::series::engine_fields(),
            skip: false,
            failed: None,
        }
    }

    /// The server process serving plumb's own connection, when the engine runs here.
    pub fn own_pid(&self) -> Option<u32> {
        self.obs.as_ref().and_then(|o| o.own_pid())
    }

    /// Read from another session (another database) from the next sample on.
    pub fn replace(&mut self, obs: Box<dyn Observer>) {
        self.obs = Some(obs);
        self.skip = true;
    }

    /// The counters and gauges now (`true` for a gauge); nothing when there is no engine, it
    /// failed, or right after a switch.
    pub fn take(&mut self) -> Vec<(String, bool, u64)> {
        let Some(obs) = self.obs.as_mut() else {
            return Vec::new();
        };
        if self.skip {
            self.skip = false;
            return Vec::new();
        }
        match obs.snapshot_for_recording() {
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
                counters.chain(gauges).collect()
            }
            Err(e) => {
                self.failed = Some(e.to_string());
                Vec::new()
            }
        }
    }
}
