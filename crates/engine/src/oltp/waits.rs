//! The engine's own view beside the kernel's (`plumb load --explain`): PostgreSQL's
//! `pg_stat_activity` read every [`EVERY`] for the load's backends that are in a transaction
//! (the driver says which, and of which type: [`super::explain::InFlight`]), on a session of
//! its own, each sample counted under its transaction type by wait event, and for a lock wait,
//! who holds the lock (`pg_blocking_pids`). It reads the server, writes nothing to it, and
//! stops with the run. Other engines are not sampled (the caller says so).

use super::explain::InFlight;
use crate::{Kind, Result, Target};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the sampler reads.
pub const EVERY: Duration = Duration::from_millis(100);

/// One transaction type's samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeWaits {
    /// Samples of its backends while in one of its transactions.
    pub samples: u64,
    /// By what the engine said: `Lock:transactionid`, `LWLock:WALWrite`, `IO:DataFileRead`,
    /// `CPU` (active, no wait event), `Client:ClientRead`.
    pub events: BTreeMap<String, u64>,
    /// Who held the locks waited for (`psql (PID 4711)`), by samples.
    pub holders: BTreeMap<String, u64>,
}

/// What the sampler saw, per transaction type in the mix's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Waits {
    pub every: Duration,
    pub types: Vec<TypeWaits>,
    /// Reads that failed (a statement timeout, a dropped session): skipped, counted.
    pub failed: u64,
}

/// A running sampler; dropped, it stops (its session closes within [`EVERY`]).
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Waits>>,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

const QUERY: &str = "SELECT a.pid, coalesce(a.wait_event_type, ''), coalesce(a.wait_event, ''), \
     coalesce(a.state, ''), \
     CASE WHEN a.wait_event_type = 'Lock' THEN (SELECT string_agg(coalesce(nullif(b.application_name, ''), b.backend_type) || chr(9) || b.pid, chr(10)) \
       FROM pg_stat_activity b WHERE b.pid = ANY (pg_blocking_pids(a.pid))) END \
     FROM pg_stat_activity a WHERE a.pid = ANY ($1)";

/// Who holds a lock, from the query's `name<TAB>pid` lines: this load's own clients as one,
/// any other session by its name and PID.
fn holders(lines: &str, own: &str) -> Vec<String> {
    let mut v: Vec<String> = lines
        .lines()
        .map(|l| match l.split_once('\t') {
            Some((name, _)) if name == own => "another of this load's clients".to_string(),
            Some((name, pid)) => format!("{name} (PID {pid})"),
            None => l.to_string(),
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// One row's event: the wait event, or CPU when active and waiting for nothing.
fn event(kind: &str, event: &str, state: &str) -> Option<String> {
    match (kind, state) {
        // The transaction ended between the driver's word and the read.
        (_, "idle") => None,
        ("", "active") => Some("CPU".into()),
        ("", s) => Some(s.to_string()),
        (k, _) => Some(format!("{k}:{event}")),
    }
}

/// One read: each backend that ran the same transaction before and after it counted under that
/// transaction's type.
fn sample(
    c: &mut super::pg::Client,
    query: &postgres::Statement,
    own: &str,
    in_flight: &InFlight,
    w: &mut Waits,
) {
    let before = in_flight.now();
    if before.is_empty() {
        return;
    }
    let pids: Vec<i32> = before
        .keys()
        .filter_map(|p| i32::try_from(*p).ok())
        .collect();
    let rows = match c.query(query, &[&pids]) {
        Ok(rows) => rows,
        Err(_) => {
            w.failed += 1;
            return;
        }
    };
    let after = in_flight.now();
    for row in rows {
        let pid = row.get::<_, i32>(0) as u32;
        let (Some(&(k, n)), Some(&(_, m))) = (before.get(&pid), after.get(&pid)) else {
            continue;
        };
        let Some(e) = event(row.get(1), row.get(2), row.get(3)) else {
            continue;
        };
        let Some(tw) = w.types.get_mut(k).filter(|_| n == m) else {
            continue;
        };
        tw.samples += 1;
        *tw.events.entry(e).or_default() += 1;
        if let Some(h) = row.get::<_, Option<String>>(4) {
            for h in holders(&h, own) {
                *tw.holders.entry(h).or_default() += 1;
            }
        }
    }
}

impl Sampler {
    /// Start reading `t`'s activity (PostgreSQL; None on other engines) for the threads
    /// `in_flight` names, `types` transaction types.
    pub fn start(
        t: &Target,
        db: &str,
        in_flight: Arc<InFlight>,
        types: usize,
    ) -> Result<Option<Sampler>> {
        if t.kind()? != Kind::Postgres {
            return Ok(None);
        }
        let mut c = super::pg::connect_to(t, db, &t.shown())?;
        let own = super::pg::application_name();
        // Prepared once: each read is a bind and an execute.
        let query = c.prepare(QUERY).ok();
        // A read the server cannot answer at once is skipped, not waited for.
        let _ = c.batch_execute("SET statement_timeout = '1s'");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut w = Waits {
                every: EVERY,
                types: vec![TypeWaits::default(); types],
                failed: 0,
            };
            let mut next = Instant::now();
            while !stopped.load(Ordering::Relaxed) {
                next += EVERY;
                if let Some(q) = &query {
                    sample(&mut c, q, &own, &in_flight, &mut w);
                }
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            w
        });
        Ok(Some(Sampler {
            stop,
            thread: Some(thread),
        }))
    }

    /// Stop and say what was seen.
    pub fn stop(mut self) -> Waits {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_its_wait_event_or_cpu_and_an_ended_transaction_is_no_sample() {
        assert_eq!(
            event("Lock", "transactionid", "active").as_deref(),
            Some("Lock:transactionid")
        );
        assert_eq!(event("", "", "active").as_deref(), Some("CPU"));
        assert_eq!(
            event("Client", "ClientRead", "idle in transaction").as_deref(),
            Some("Client:ClientRead")
        );
        assert_eq!(event("Client", "ClientRead", "idle"), None);
    }

    #[test]
    fn the_loads_own_clients_hold_locks_as_one_and_others_by_name_and_pid() {
        let own = "plumb load (PID 7)";
        assert_eq!(
            holders(
                "plumb load (PID 7)\t101\nplumb load (PID 7)\t102\npsql\t4711",
                own
            ),
            vec!["another of this load's clients", "psql (PID 4711)"]
        );
    }
}
