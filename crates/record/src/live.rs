//! The latest value of every raw metric, for `/metrics` (`plumb record --serve`): updated by
//! the recorder at every sample, read by the HTTP server's threads.

use plumb_store::Kind;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug)]
struct Entry {
    value: u64,
    /// Read only in the samples that read the slow metrics: kept between them.
    slow: bool,
    seen: u64,
}

#[derive(Debug, Default)]
struct State {
    values: HashMap<String, Entry>,
    samples: u64,
}

/// The latest values. A metric that a sample no longer has (a process exited, a device
/// removed) is dropped; a slow one is kept until the next sample that reads the slow ones.
#[derive(Debug, Default)]
pub struct Live {
    state: Mutex<State>,
}

impl Live {
    /// One sample's values; `full` when it read the slow metrics too.
    pub fn update(&self, rows: &[(&str, Kind, u64)], full: bool) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.samples += 1;
        let n = s.samples;
        for (name, _, v) in rows {
            match s.values.get_mut(*name) {
                Some(e) => {
                    e.value = *v;
                    e.seen = n;
                }
                None => {
                    s.values.insert(
                        name.to_string(),
                        Entry {
                            value: *v,
                            slow: plumb_sys::rawsample::is_slow(name),
                            seen: n,
                        },
                    );
                }
            }
        }
        s.values.retain(|_, e| e.seen == n || (!full && e.slow));
    }

    /// The values now, and how many samples have been taken.
    pub fn snapshot(&self) -> (Vec<(String, u64)>, u64) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let v = s.values.iter().map(|(k, e)| (k.clone(), e.value)).collect();
        (v, s.samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_metrics_leave_slow_ones_wait_for_the_next_full_sample() {
        let l = Live::default();
        l.update(
            &[
                ("disk.vda.reads", Kind::Counter, 1),
                ("proc.9.cpu_ticks", Kind::Counter, 5),
                ("engine.db.xact_commit", Kind::Counter, 10),
            ],
            true,
        );
        // A fast sample: the engine is not read, the process has exited.
        l.update(&[("disk.vda.reads", Kind::Counter, 2)], false);
        let (mut v, n) = l.snapshot();
        v.sort();
        assert_eq!(n, 2);
        assert_eq!(
            v,
            [
                ("disk.vda.reads".to_string(), 2),
                ("engine.db.xact_commit".to_string(), 10)
            ]
        );
        // A full sample without the engine (it went away): its figures go.
        l.update(&[("disk.vda.reads", Kind::Counter, 3)], true);
        assert_eq!(l.snapshot().0, [("disk.vda.reads".to_string(), 3)]);
    }
}
