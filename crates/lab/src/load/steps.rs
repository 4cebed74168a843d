//! A load run's phases as the lab's progress events: four steps (loading, keys and procedures,
//! ramp-up, the timed window), each with what is left of the plan. The load's length is an
//! estimate until the first jobs are done, then worked out from them.

use super::plan::{LoadConfig, LoadEvent};
use crate::{Event, Events};
use std::time::{Duration, Instant};

/// Seconds a load job (the items, or one warehouse: rows, keys and all) took on the 2-core
/// test machine (one warehouse 9.8 s, four 20.5 s): the estimate before the first is done.
const LOAD_S_PER_WAREHOUSE: f64 = 4.5;

/// The keys, procedures and statistics: a guess (they take a second or two).
const BUILDING: Duration = Duration::from_secs(2);

/// The steps of a run.
const STEPS: u32 = 4;

/// Where the run stands: since it began, the load's estimate, the ramp-up and the window.
pub(super) struct Steps {
    t0: Instant,
    load: Duration,
    rampup: Duration,
    window: Duration,
    /// What a load job is.
    jobs: &'static str,
    /// The workload's name, for its live figure.
    name: &'static str,
}

impl Steps {
    pub(super) fn new(c: &LoadConfig) -> Steps {
        Steps {
            t0: Instant::now(),
            load: Duration::from_secs_f64(LOAD_S_PER_WAREHOUSE * c.workload.jobs(c.scale) as f64),
            rampup: c.rampup,
            window: c.duration,
            jobs: c.workload.jobs_words(),
            name: c.workload.name(),
        }
    }

    /// The run's event `e` as the lab's event, to `events`.
    pub(super) fn event(&mut self, e: &LoadEvent<'_>, events: &mut dyn Events) {
        let now = self.t0.elapsed();
        let run = self.rampup + self.window;
        let mut step = |n: u32, what: &str, left_in_step: Duration, left_after: Duration| {
            events.event(Event::Step {
                n,
                of: STEPS,
                what,
                done: now,
                planned: left_in_step,
                total: now + left_in_step + left_after,
            })
        };
        match e {
            LoadEvent::Note(n) => events.event(Event::Note(n)),
            LoadEvent::Loading {
                done,
                total,
                elapsed,
            } => {
                if *done > 0 {
                    self.load = elapsed.mul_f64(f64::from(*total) / f64::from(*done));
                }
                step(
                    1,
                    &format!("loading: {done} of {total} ({})", self.jobs),
                    self.load.saturating_sub(*elapsed),
                    BUILDING + run,
                );
            }
            LoadEvent::Building => step(2, "building keys and procedures", BUILDING, run),
            LoadEvent::Driving => step(3, "ramp-up", self.rampup, self.window),
            LoadEvent::WindowStart => step(4, "timed window", self.window, Duration::ZERO),
            LoadEvent::WindowEnd => {}
            LoadEvent::Second(s) => events.event(Event::Live {
                what: self.name,
                tps: s.done.iter().sum::<u64>() as f64,
                latency: s.p95_us.map(|u| ("p95", u as f64 / 1000.0)),
            }),
        }
    }

    /// The run is done.
    pub(super) fn finished(&self, events: &mut dyn Events) {
        events.event(Event::Finished { of: STEPS });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_engine::oltp::driver::Second;

    fn config() -> LoadConfig {
        LoadConfig {
            target: None,
            allow_writes: false,
            dir: "/nonexistent".into(),
            set: Vec::new(),
            build: None,
            database: "plumb_load".into(),
            workload: plumb_engine::oltp::Workload::OrderEntry,
            scale: 3,
            clients: 4,
            rampup: Duration::from_secs(5),
            duration: Duration::from_secs(60),
            rate: None,
            max_tries: 1,
            threads: None,
            keep: false,
            drop_kept: false,
            check: false,
            seed: 1,
            record: None,
            command_line: String::new(),
            accept: Vec::new(),
            explain: false,
        }
    }

    /// What the steps said, as (n, what, planned, total) and the live lines as text.
    fn told(events: &[LoadEvent<'_>]) -> Vec<String> {
        let mut s = Steps::new(&config());
        let mut out = Vec::new();
        for e in events {
            s.event(e, &mut |e: Event<'_>| {
                out.push(match e {
                    Event::Step {
                        n,
                        of,
                        what,
                        planned,
                        total,
                        ..
                    } => format!(
                        "{n}/{of} {what} {}s left of {}s",
                        planned.as_secs(),
                        total.as_secs()
                    ),
                    Event::Live { what, tps, latency } => format!("{what} {tps} {latency:?}"),
                    Event::Note(n) => format!("note {n}"),
                    Event::Finished { of } => format!("finished {of}"),
                    other => format!("{other:?}"),
                })
            });
        }
        s.finished(&mut |e: Event<'_>| {
            if let Event::Finished { of } = e {
                out.push(format!("finished {of}"))
            }
        });
        out
    }

    #[test]
    fn the_load_estimate_follows_the_jobs_done_and_each_phase_is_one_of_four_steps() {
        let second = Second {
            t: 1,
            done: vec![10, 5],
            failed: vec![0, 0],
            p95_us: Some(2500),
            p95_by_type_us: vec![None, None],
            explained: Vec::new(),
        };
        let out = told(&[
            LoadEvent::Note("reusing".into()),
            // Four jobs (the items and three warehouses) planned at 4.5 s each: 18 s.
            LoadEvent::Loading {
                done: 0,
                total: 4,
                elapsed: Duration::ZERO,
            },
            // One of four done after 10 s: the load is 40 s, 30 s left of it.
            LoadEvent::Loading {
                done: 1,
                total: 4,
                elapsed: Duration::from_secs(10),
            },
            LoadEvent::Building,
            LoadEvent::Driving,
            LoadEvent::WindowStart,
            LoadEvent::Second(&second),
            LoadEvent::WindowEnd,
        ]);
        assert_eq!(out[0], "note reusing");
        assert!(
            out[1].starts_with("1/4 loading: 0 of 4 (the items and each warehouse) 18s left"),
            "{out:?}"
        );
        assert!(
            out[2].starts_with("1/4 loading: 1 of 4 (the items and each warehouse) 30s left"),
            "{out:?}"
        );
        assert!(
            out[3].starts_with("2/4 building keys and procedures 2s left"),
            "{out:?}"
        );
        assert!(out[4].starts_with("3/4 ramp-up 5s left"), "{out:?}");
        assert!(out[5].starts_with("4/4 timed window 60s left"), "{out:?}");
        assert_eq!(out[6], "order-entry 15 Some((\"p95\", 2.5))");
        assert_eq!(out[7], "finished 4");
        assert_eq!(out.len(), 8, "the window's end is no step: {out:?}");
    }
}
