//! The connections `plumb fs` reads with, and the results it keeps.
//!
//! A few connections (read-only, with the statement timeout) are shared by every file: a slow
//! query holds one of them and the other files go on with the rest. A connection the server
//! dropped is replaced once, quietly; an error is returned as text (passwords masked), never
//! as a failure of the file.
//!
//! A [`Slot`] is one result of one view or query file, taken at one moment; each open takes
//! the newest slot of its file if it is younger than the cache time, else runs the query. Opens
//! of the same file wait for one query in flight instead of sending their own.

use plumb_engine::views::{self, Table, Val, ViewReader};
use plumb_engine::{redact, Target};
use plumb_report::view_render::{self, ViewFormat};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

pub(crate) struct Pool {
    target: Target,
    timeout: Duration,
    max: usize,
    state: Mutex<PoolState>,
    cv: Condvar,
    /// Queries sent to the server (views, the user's files), for the README's figures.
    pub sent: AtomicU64,
}

struct PoolState {
    idle: Vec<Box<dyn ViewReader>>,
    open: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    pub fn new(target: Target, timeout: Duration, max: usize, first: Box<dyn ViewReader>) -> Pool {
        Pool {
            target,
            timeout,
            max: max.max(1),
            state: Mutex::new(PoolState {
                idle: vec![first],
                open: 1,
            }),
            cv: Condvar::new(),
            sent: AtomicU64::new(0),
        }
    }

    fn take(&self) -> Result<Box<dyn ViewReader>, String> {
        let mut g = lock(&self.state);
        loop {
            if let Some(r) = g.idle.pop() {
                return Ok(r);
            }
            if g.open < self.max {
                g.open += 1;
                drop(g);
                return views::reader(&self.target, self.timeout).map_err(|e| {
                    self.lost();
                    redact(&e.to_string())
                });
            }
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give(&self, r: Box<dyn ViewReader>) {
        lock(&self.state).idle.push(r);
        self.cv.notify_one();
    }

    fn lost(&self) {
        let mut g = lock(&self.state);
        g.open = g.open.saturating_sub(1);
        drop(g);
        self.cv.notify_one();
    }

    /// Run `f` on a connection; a connection the server dropped is replaced and `f` tried once
    /// more on the new one.
    pub fn run<T>(
        &self,
        f: impl Fn(&mut dyn ViewReader) -> plumb_engine::Result<T>,
    ) -> Result<T, String> {
        for attempt in 0..2 {
            let mut r = self.take()?;
            self.sent.fetch_add(1, Ordering::Relaxed);
            match f(r.as_mut()) {
                Ok(v) => {
                    self.give(r);
                    return Ok(v);
                }
                Err(plumb_engine::Error::Gone(_)) if attempt == 0 => {
                    drop(r);
                    self.lost();
                    // What took this one (a restart, a terminated session) likely took the
                    // idle ones too: the next try connects anew.
                    let idle = std::mem::take(&mut lock(&self.state).idle);
                    for _ in idle {
                        self.lost();
                    }
                }
                Err(e) => {
                    if matches!(e, plumb_engine::Error::Gone(_)) {
                        drop(r);
                        self.lost();
                    } else {
                        self.give(r);
                    }
                    // The server's own words for a query it refused; the whole story for
                    // a connection.
                    let text = match &e {
                        plumb_engine::Error::Query { message, .. } => message.clone(),
                        other => other.to_string(),
                    };
                    return Err(redact(&text));
                }
            }
        }
        Err("the database dropped the connection twice".into())
    }
}

/// Results larger than this give their memory back to the system when they are dropped.
const TRIM_ABOVE: usize = 8 << 20;

/// Give freed heap memory back to the system (glibc keeps it otherwise: a dropped 1 GB result
/// left the process at 4 GB).
fn trim() {
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// One result of one file's query.
pub(crate) struct Slot {
    pub sql: String,
    pub at: Instant,
    pub wall: SystemTime,
    pub result: Result<Table, String>,
    rendered: [OnceLock<Arc<Vec<u8>>>; 3],
}

impl Slot {
    pub fn new(sql: String, result: Result<Table, String>) -> Slot {
        Slot {
            sql,
            at: Instant::now(),
            wall: SystemTime::now(),
            result,
            rendered: Default::default(),
        }
    }

    /// About how many bytes this result holds (its values and what was rendered of it).
    pub fn weight(&self) -> usize {
        let values = match &self.result {
            Ok(t) => t
                .rows
                .iter()
                .flatten()
                .map(|v| match v {
                    Val::Num(s) | Val::Text(s) | Val::Json(s) => s.len() + 32,
                    _ => 32,
                })
                .sum(),
            Err(m) => m.len(),
        };
        values
            + self
                .rendered
                .iter()
                .filter_map(|r| r.get())
                .map(|b| b.len())
                .sum::<usize>()
    }

    /// The content of this result in a form (rendered once per form).
    pub fn bytes(&self, form: ViewFormat, text_column: Option<&str>) -> Arc<Vec<u8>> {
        let i = ViewFormat::ALL.iter().position(|f| *f == form).unwrap_or(0);
        self.rendered[i]
            .get_or_init(|| {
                Arc::new(match &self.result {
                    Ok(t) => view_render::render(t, form, text_column),
                    Err(m) => view_render::error(m, form),
                })
            })
            .clone()
    }
}

/// What a slot belongs to: a view (by its index) or a query file (by its name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    View(usize),
    Query(String),
}

type Cell = Arc<Mutex<Option<Arc<Slot>>>>;

/// The newest result of each file.
#[derive(Default)]
pub(crate) struct Results {
    cells: Mutex<HashMap<Key, Cell>>,
    /// The newest slot of each key, also while a new one is being queried (a stat reads it).
    newest: Mutex<HashMap<Key, Arc<Slot>>>,
}

impl Results {
    fn cell(&self, key: &Key) -> Cell {
        lock(&self.cells).entry(key.clone()).or_default().clone()
    }

    /// The result of `sql` for `key`: the newest one if it is at most `max_age` old (and of the
    /// same SQL), else a new one from `run`. Callers for the same key wait for each other, so a
    /// burst of opens sends one query when a cache time allows it.
    pub fn get(
        &self,
        key: &Key,
        sql: &str,
        max_age: Duration,
        run: impl FnOnce() -> Result<Table, String>,
    ) -> Arc<Slot> {
        let cell = self.cell(key);
        let mut g = lock(&cell);
        if let Some(s) = g.as_ref() {
            if s.sql == sql && s.at.elapsed() <= max_age {
                return s.clone();
            }
        }
        let slot = Arc::new(Slot::new(sql.to_string(), run()));
        let old = g.replace(slot.clone());
        lock(&self.newest).insert(key.clone(), slot.clone());
        // A large result replaced gives its memory back (once no open file holds it).
        if old.is_some_and(|o| Arc::strong_count(&o) == 1 && o.weight() > TRIM_ABOVE) {
            trim();
        }
        slot
    }

    /// Forget the results of query files that are no longer in the directory, so their
    /// memory goes back to the system.
    pub(crate) fn keep_queries(&self, names: &[String]) {
        let gone = |k: &Key| matches!(k, Key::Query(n) if !names.contains(n));
        let mut big = false;
        lock(&self.newest).retain(|k, s| {
            let keep = !gone(k);
            big |= !keep && s.weight() > TRIM_ABOVE;
            keep
        });
        lock(&self.cells).retain(|k, _| !gone(k));
        if big {
            trim();
        }
    }

    /// The newest result for `key` whatever its age, without waiting for one in flight.
    pub fn newest(&self, key: &Key) -> Option<Arc<Slot>> {
        lock(&self.newest).get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(n: &str) -> Result<Table, String> {
        Ok(Table {
            columns: vec!["n".into()],
            rows: vec![vec![Val::Num(n.into())]],
            cut: false,
        })
    }

    #[test]
    fn a_result_is_reused_only_within_the_cache_time_and_for_the_same_sql() {
        let r = Results::default();
        let k = Key::View(0);
        let a = r.get(&k, "q", Duration::ZERO, || one("1"));
        let b = r.get(&k, "q", Duration::from_secs(60), || one("2"));
        assert!(
            Arc::ptr_eq(&a, &b),
            "within the cache time: the same result"
        );
        let c = r.get(&k, "q", Duration::ZERO, || one("3"));
        assert!(!Arc::ptr_eq(&a, &c), "no cache: a new result");
        let d = r.get(&k, "changed", Duration::from_secs(60), || one("4"));
        assert_eq!(
            &d.bytes(ViewFormat::Tsv, None)[..],
            b"n\n4\n",
            "new SQL: run again"
        );
        let e = r.get(
            &k,
            "changed",
            Duration::from_secs(60),
            || Err("boom".into()),
        );
        assert!(Arc::ptr_eq(&d, &e));
        assert_eq!(
            &r.newest(&k).unwrap().bytes(ViewFormat::Json, None)[..],
            b"{\"n\":4}\n"
        );
    }
}
