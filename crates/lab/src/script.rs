//! `--workload FILE` on an engine pgbench does not speak: a file of SQL statements, run by each
//! client as one transaction (BEGIN, the statements in order, COMMIT; ROLLBACK after an error)
//! on plumb's driver, against pgbench's tables at the lab's scale.
//!
//! The format: statements end with `;` at the end of a line; blank lines and lines starting
//! with `--` are skipped; `:scale` is replaced by the lab's scale. At most 1 MiB and 1,000
//! statements.

use crate::error::Result;
use crate::Interrupted;
use plumb_analyze::load::{self as figures, LoadReport};
use plumb_engine::oltp::driver::{self as driver, ErrorClass, Failure, Outcome};
use plumb_engine::{Session, Target};
use plumb_sys::rng::Rng;
use std::path::Path;
use std::time::Duration;

const MAX_BYTES: u64 = 1 << 20;
const MAX_STATEMENTS: usize = 1000;

/// The statements of a workload file, `:scale` replaced.
pub fn read(path: &Path, scale: u32) -> Result<Vec<String>> {
    // At most MAX_BYTES, from a file or a pipe (never a device: /dev/zero).
    let text = plumb_sys::read_text_bounded(path, MAX_BYTES).map_err(|e| {
        crate::Error::Refused(format!(
            "--workload {}: {e} (a workload file holds at most 1 MiB of SQL)",
            path.display()
        ))
    })?;
    parse(&text, scale)
        .map_err(|why| crate::Error::Refused(format!("--workload {}: {why}", path.display())))
}

/// Split `text` into statements (see the module's doc).
pub fn parse(text: &str, scale: u32) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("--") {
            continue;
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(line.trim_end());
        if let Some(stmt) = cur.trim().strip_suffix(';') {
            let stmt = stmt.trim();
            if !stmt.is_empty() {
                out.push(stmt.replace(":scale", &scale.to_string()));
            }
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        return Err(format!(
            "the last statement does not end with ';' ({})",
            cur.lines().next().unwrap_or("")
        ));
    }
    if out.is_empty() {
        return Err("no statements (each ends with ';' at the end of a line)".into());
    }
    if out.len() > MAX_STATEMENTS {
        return Err(format!(
            "{} statements; at most {MAX_STATEMENTS}",
            out.len()
        ));
    }
    Ok(out)
}

/// One client: its session and the statements it runs as one transaction.
struct ScriptClient {
    session: Box<dyn Session>,
    statements: std::sync::Arc<Vec<String>>,
}

impl driver::Client for ScriptClient {
    fn run(&mut self, _kind: usize, _rng: &mut Rng) -> std::result::Result<Outcome, Failure> {
        let body = (|| -> plumb_engine::Result<()> {
            self.session.execute("BEGIN")?;
            for s in self.statements.iter() {
                self.session.execute(s)?;
            }
            self.session.execute("COMMIT")?;
            Ok(())
        })();
        match body {
            Ok(()) => Ok(Outcome::Committed),
            Err(e) => {
                let _ = self.session.execute("ROLLBACK");
                Err(Failure {
                    class: ErrorClass::Other,
                    code: "statement".into(),
                    message: e.to_string(),
                })
            }
        }
    }

    fn canceller(&self) -> Option<Box<dyn Fn() + Send + Sync>> {
        self.session.canceller()
    }
}

/// What a script run is given.
pub struct ScriptRun<'a> {
    /// The database's server, its URL naming the database.
    pub target: &'a Target,
    pub statements: Vec<String>,
    pub clients: u32,
    pub duration: Duration,
    pub rate: Option<f64>,
}

/// Run the statements on `clients` sessions for `duration`; the figures as `plumb load`'s.
pub fn run(
    s: ScriptRun<'_>,
    each_second: &mut dyn FnMut(&driver::Second),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<LoadReport> {
    let statements = std::sync::Arc::new(s.statements);
    let mut clients: Vec<Box<dyn driver::Client>> = Vec::new();
    for _ in 0..s.clients {
        if cancel() {
            return Err(Interrupted.into());
        }
        clients.push(Box::new(ScriptClient {
            session: plumb_engine::session(s.target)?,
            statements: statements.clone(),
        }));
    }
    let plan = driver::Plan {
        mix: vec![("script", 1)],
        rampup: Duration::ZERO,
        duration: s.duration,
        rate: s.rate,
        max_tries: 1,
        seed: 1,
        in_order: false,
        threads: None,
        explain: None,
    };
    let m = driver::run(
        &plan,
        clients,
        &mut |e| {
            if let driver::Event::Second(x) = e {
                each_second(&x)
            }
        },
        cancel,
    );
    if m.interrupted {
        return Err(Interrupted.into());
    }
    if m.lost.len() == s.clients as usize {
        crate::refuse!(
            "every client lost its connection ({}); the server went away",
            m.lost.last().map(String::as_str).unwrap_or("")
        );
    }
    let (types, seconds, lag) = figures::figures(&m);
    Ok(LoadReport {
        workload: "script".into(),
        engine: String::new(),
        version: String::new(),
        target: s.target.shown(),
        database: String::new(),
        loaded: true,
        kept: false,
        load_s: None,
        scale: 0,
        scale_unit: "pgbench scale".into(),
        clients: s.clients,
        rampup_s: 0.0,
        duration_s: s.duration.as_secs_f64(),
        window_s: m.window.as_secs_f64(),
        rate_per_s: s.rate,
        max_tries: 1,
        nopm: None,
        new_orders: None,
        tpm: None,
        tpm_source: String::new(),
        types,
        lag,
        late: m.late,
        lost_clients: m.lost.clone(),
        checks: Vec::new(),
        seconds,
        interrupted: false,
        recording: None,
        interference: None,
    })
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn statements_end_at_a_semicolon_at_the_end_of_a_line() {
        let text = "-- a comment\n\nUPDATE pgbench_accounts SET abalance = abalance + 1\n  WHERE aid = 1 + :scale;\nSELECT 1; \n";
        assert_eq!(
            parse(text, 5).unwrap(),
            vec![
                "UPDATE pgbench_accounts SET abalance = abalance + 1\n  WHERE aid = 1 + 5",
                "SELECT 1"
            ]
        );
        assert!(parse("SELECT 1", 1)
            .unwrap_err()
            .contains("does not end with ';'"));
        assert!(parse("-- only\n\n", 1)
            .unwrap_err()
            .contains("no statements"));
        assert!(parse(&"SELECT 1;\n".repeat(1001), 1)
            .unwrap_err()
            .contains("at most 1000"));
    }
}
