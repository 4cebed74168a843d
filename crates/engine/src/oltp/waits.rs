//! The engine's own view beside the kernel's (`plumb load --explain`): PostgreSQL's
//! `pg_stat_activity` read every [`EVERY`] for the load's backends that are in a transaction
//! (the driver says which, and of which type: [`super::explain::InFlight`]), on a session of
//! its own, each sample counted under its transaction type by wait event, and for a lock wait,
//! who holds the lock (`pg_blocking_pids`); MariaDB's `information_schema.PROCESSLIST` with
//! `INNODB_TRX` (a transaction in `LOCK WAIT`) and `INNODB_LOCK_WAITS` (who blocks it), the
//! same way. It reads the server, writes nothing to it, switches no instrument on, and stops
//! with the run. SQL Server is not sampled (the caller says so).

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
    /// What was read, and how often: "pg_stat_activity every 100 ms".
    pub source: String,
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
       FROM pg_stat_activity b WHERE b.pid = ANY (pg_blocking_pids(a.pid))) END, \
     CASE WHEN a.wait_event_type = 'Lock' THEN (SELECT string_agg(DISTINCT l.relation::regclass::text, ', ') \
       FROM pg_locks l WHERE l.pid = a.pid AND l.relation IS NOT NULL \
       AND (l.locktype = 'tuple' OR NOT l.granted)) END \
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

/// A lock wait's event with the table it is on (`Lock:transactionid on pgbench_branches`),
/// where the engine said which.
fn on_table(event: Option<String>, table: Option<&str>) -> Option<String> {
    match (event, table.map(str::trim).filter(|t| !t.is_empty())) {
        (Some(e), Some(t)) if e.starts_with("Lock:") => Some(format!("{e} on {t}")),
        (e, _) => e,
    }
}

/// MariaDB's `` `db`.`table` `` as the table's name.
fn maria_table(t: &str) -> String {
    let name = t.rsplit("`.`").next().unwrap_or(t);
    name.trim_matches('`').to_string()
}

/// One row of a read: the server thread, its event (None: not in a transaction), who held the
/// lock it waited for.
type Row = (u32, Option<String>, Vec<String>);

/// The session a sampler reads on.
enum Reader {
    Pg {
        c: super::pg::Client,
        query: Option<postgres::Statement>,
        own: String,
    },
    Maria {
        c: super::maria::Client,
    },
}

impl Reader {
    /// The rows for the server threads `tids` (None: the read failed).
    fn read(&mut self, tids: &[u32]) -> Option<Vec<Row>> {
        match self {
            Reader::Pg { c, query, own } => {
                let pids: Vec<i32> = tids.iter().filter_map(|p| i32::try_from(*p).ok()).collect();
                let rows = c.query(query.as_ref()?, &[&pids]).ok()?;
                Some(
                    rows.iter()
                        .map(|row| {
                            let h = row.get::<_, Option<String>>(4);
                            let table = row.get::<_, Option<String>>(5);
                            (
                                row.get::<_, i32>(0) as u32,
                                on_table(
                                    event(row.get(1), row.get(2), row.get(3)),
                                    table.as_deref(),
                                ),
                                h.map(|h| holders(&h, own)).unwrap_or_default(),
                            )
                        })
                        .collect(),
                )
            }
            Reader::Maria { c } => {
                use mysql::prelude::Queryable;
                let list: Vec<String> = tids.iter().map(u32::to_string).collect();
                let sql = MARIA_QUERY.replace("{tids}", &list.join(","));
                let rows: Vec<mysql::Row> = c.query(sql).ok()?;
                // A row of unexpected shape is skipped, never a panic.
                type Shape = (u64, String, String, String, Option<String>, Option<String>);
                Some(
                    rows.into_iter()
                        .filter_map(|r| mysql::from_row_opt::<Shape>(r).ok())
                        .map(|(tid, trx, command, state, h, table)| {
                            let table = table.map(|t| {
                                t.split(',').map(maria_table).collect::<Vec<_>>().join(", ")
                            });
                            (
                                tid as u32,
                                on_table(maria_event(&trx, &command, &state), table.as_deref()),
                                h.map(|h| maria_holders(&h, tids)).unwrap_or_default(),
                            )
                        })
                        .collect(),
                )
            }
        }
    }
}

/// MariaDB: each of the load's connections (by its thread), its transaction's state, what it
/// does, and the sessions whose transactions block it (`user@host<TAB>connection<TAB>thread`
/// lines). `{tids}`: the threads, as numbers.
const MARIA_QUERY: &str = "SELECT p.TID, coalesce(t.trx_state, ''), coalesce(p.COMMAND, ''), \
     coalesce(p.STATE, ''), \
     (SELECT group_concat(concat(coalesce(bp.USER, ''), '@', coalesce(bp.HOST, ''), char(9), \
        b.trx_mysql_thread_id, char(9), coalesce(bp.TID, 0)) SEPARATOR '\n') \
       FROM information_schema.INNODB_LOCK_WAITS w \
       JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id \
       LEFT JOIN information_schema.PROCESSLIST bp ON bp.ID = b.trx_mysql_thread_id \
       WHERE w.requesting_trx_id = t.trx_id), \
     (SELECT group_concat(DISTINCT l.lock_table) FROM information_schema.INNODB_LOCKS l \
       WHERE l.lock_trx_id = t.trx_id) \
     FROM information_schema.PROCESSLIST p \
     LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID \
     WHERE p.TID IN ({tids})";

/// What MariaDB's performance_schema could add, in words: its waits are not read (plumb
/// switches no instrument on), and whether they are on.
fn performance_schema_waits(c: &mut super::maria::Client) -> &'static str {
    use mysql::prelude::Queryable;
    let on: Option<i64> = c.query_first("SELECT @@performance_schema").ok().flatten();
    if on != Some(1) {
        return "performance_schema is off (plumb switches nothing on)";
    }
    let current: Option<String> = c
        .query_first(
            "SELECT ENABLED FROM performance_schema.setup_consumers \
             WHERE NAME = 'events_waits_current'",
        )
        .ok()
        .flatten();
    match current.as_deref() {
        Some("YES") => "performance_schema's waits are on, not read yet",
        _ => "performance_schema's current waits are off (plumb switches nothing on)",
    }
}

/// A MariaDB row's event: InnoDB's lock wait, the client's turn (a connection asleep inside
/// its transaction), or the state the server names (`Updating`, `Sending data`, `Commit`).
/// None: not in a transaction (it ended between the driver's word and the read).
fn maria_event(trx: &str, command: &str, state: &str) -> Option<String> {
    match (trx, command, state) {
        ("", _, _) => None,
        ("LOCK WAIT", _, _) => Some("Lock:InnoDB row lock".into()),
        (_, "Sleep", _) => Some("Client:Sleep".into()),
        (_, _, "") => Some("CPU".into()),
        (_, _, s) => Some(format!("State:{s}")),
    }
}

/// Who blocks a MariaDB transaction, from the query's lines: this load's own connections (one
/// of `own`'s threads) as one, any other session as its account and connection ID.
fn maria_holders(lines: &str, own: &[u32]) -> Vec<String> {
    let mut v: Vec<String> = lines
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            match f.as_slice() {
                [_, _, tid] if tid.parse::<u32>().is_ok_and(|t| own.contains(&t)) => {
                    "another of this load's clients".to_string()
                }
                [account, id, _] => format!("{account} (connection {id})"),
                _ => l.to_string(),
            }
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// One read: each server thread that ran the same transaction before and after it counted
/// under that transaction's type.
fn sample(r: &mut Reader, in_flight: &InFlight, w: &mut Waits) {
    let before = in_flight.now();
    if before.is_empty() {
        return;
    }
    let tids: Vec<u32> = before.keys().copied().collect();
    let t0 = Instant::now();
    let Some(rows) = r.read(&tids) else {
        w.failed += 1;
        return;
    };
    let after = in_flight.now();
    let read_ns = t0.elapsed().as_nanos() as u64;
    for (tid, e, hs) in rows {
        let (Some(&(k, n)), Some(&(_, m))) = (before.get(&tid), after.get(&tid)) else {
            continue;
        };
        let Some(e) = e else {
            continue;
        };
        let Some(tw) = w.types.get_mut(k).filter(|_| n == m) else {
            continue;
        };
        tw.samples += 1;
        in_flight.sampled(tid, n, &e, read_ns);
        *tw.events.entry(e).or_default() += 1;
        for h in hs {
            *tw.holders.entry(h).or_default() += 1;
        }
    }
}

impl Sampler {
    /// Start reading `t`'s activity (PostgreSQL and MariaDB; None on SQL Server) for the
    /// threads `in_flight` names, `types` transaction types.
    pub fn start(
        t: &Target,
        db: &str,
        in_flight: Arc<InFlight>,
        types: usize,
    ) -> Result<Option<Sampler>> {
        let ms = EVERY.as_millis();
        let (mut reader, source) = match t.kind()? {
            Kind::Postgres => {
                let mut c = super::pg::connect_to(t, db, &t.shown())?;
                // Prepared once: each read is a bind and an execute.
                let query = c.prepare(QUERY).ok();
                // A read the server cannot answer at once is skipped, not waited for.
                let _ = c.batch_execute("SET statement_timeout = '1s'");
                let own = super::pg::application_name();
                (
                    Reader::Pg { c, query, own },
                    format!("pg_stat_activity every {ms} ms"),
                )
            }
            Kind::Mariadb => {
                use mysql::prelude::Queryable;
                let mut c = super::maria::connect_to(t, db, &t.shown())?;
                // As above: a read that cannot run at once is skipped.
                let _ = c.query_drop("SET SESSION max_statement_time = 1");
                let ps = performance_schema_waits(&mut c);
                (
                    Reader::Maria { c },
                    format!("PROCESSLIST, INNODB_TRX and INNODB_LOCK_WAITS every {ms} ms; {ps}"),
                )
            }
            _ => return Ok(None),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut w = Waits {
                source,
                every: EVERY,
                types: vec![TypeWaits::default(); types],
                failed: 0,
            };
            let mut next = Instant::now();
            while !stopped.load(Ordering::Relaxed) {
                next += EVERY;
                sample(&mut reader, &in_flight, &mut w);
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
    fn a_mariadb_row_is_a_lock_wait_the_clients_turn_or_the_servers_state() {
        assert_eq!(
            maria_event("LOCK WAIT", "Query", "Updating").as_deref(),
            Some("Lock:InnoDB row lock")
        );
        assert_eq!(
            maria_event("RUNNING", "Sleep", "").as_deref(),
            Some("Client:Sleep")
        );
        assert_eq!(maria_event("RUNNING", "Query", "").as_deref(), Some("CPU"));
        assert_eq!(
            maria_event("RUNNING", "Query", "Sending data").as_deref(),
            Some("State:Sending data")
        );
        // No transaction: it ended between the driver's word and the read.
        assert_eq!(maria_event("", "Query", "Updating"), None);
    }

    #[test]
    fn a_lock_wait_names_its_table() {
        assert_eq!(
            on_table(Some("Lock:transactionid".into()), Some("pgbench_branches")).as_deref(),
            Some("Lock:transactionid on pgbench_branches")
        );
        // Only lock waits; no table said, the event alone.
        assert_eq!(
            on_table(Some("CPU".into()), Some("pgbench_branches")).as_deref(),
            Some("CPU")
        );
        assert_eq!(
            on_table(Some("Lock:tuple".into()), None).as_deref(),
            Some("Lock:tuple")
        );
        assert_eq!(maria_table("`plumb_load`.`district`"), "district");
        assert_eq!(maria_table("district"), "district");
    }

    #[test]
    fn mariadbs_blockers_are_the_loads_own_clients_as_one_and_others_by_account_and_id() {
        assert_eq!(
            maria_holders(
                "plumb@localhost\t12\t4001\nplumb@localhost\t13\t4002\nroot@localhost\t9\t3999",
                &[4001, 4002]
            ),
            vec![
                "another of this load's clients",
                "root@localhost (connection 9)"
            ]
        );
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
