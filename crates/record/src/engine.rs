//! Engine counters for recordings: an observer's snapshot, kept to the counters the recording's
//! `engine` rules turn into rates (commits, block reads, WAL bytes, ...), named
//! `engine.SET.FIELD`.

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

    /// The counters now; nothing when there is no engine, it failed, or right after a switch.
    pub fn take(&mut self) -> Vec<(String, u64)> {
        let Some(obs) = self.obs.as_mut() else {
            return Vec::new();
        };
        if self.skip {
            self.skip = false;
            return Vec::new();
        }
        match obs.snapshot() {
            Ok(s) => {
                self.failed = None;
                s.counters
                    .iter()
                    .filter(|(k, v)| {
                        v.is_finite()
                            && **v >= 0.0
                            && k.split_once('.')
                                .is_some_and(|(_, f)| self.fields.contains(&f))
                    })
                    .map(|(k, v)| (format!("engine.{k}"), v.round() as u64))
                    .collect()
            }
            Err(e) => {
                self.failed = Some(e.to_string());
                Vec::new()
            }
        }
    }
}
