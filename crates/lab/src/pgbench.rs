//! pgbench, run in its own process group against the lab's database, and its results read.

use crate::error::Result;
use plumb_analyze::lab::{Latency, Pgbench};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How pgbench is run for this lab.
#[derive(Debug, Clone)]
pub struct PgbenchRun {
    pub bin: PathBuf,
    /// PGPASSWORD when the server needs one (never on the command line).
    pub env: Vec<(&'static str, String)>,
    /// The database, as a URL (no password in it).
    pub conn: String,
    /// Where pgbench runs and writes its transaction logs.
    pub work: PathBuf,
    pub clients: u32,
    pub threads: u32,
    /// `--workload FILE`: pgbench runs this script of the user's instead of its TPC-B-like
    /// transaction.
    pub script: Option<PathBuf>,
}

/// A child's output, or None when the lab was stopped while it ran.
pub(crate) fn run_child(
    cmd: &mut Command,
    cancel: &dyn Fn() -> bool,
) -> Result<Option<std::process::Output>> {
    run_child_live(cmd, cancel, &mut |_| {})
}

/// As [`run_child`], handing each new `progress:` line the child writes to stderr (pgbench -P)
/// to `live` as it comes.
pub(crate) fn run_child_live(
    cmd: &mut Command,
    cancel: &dyn Fn() -> bool,
    live: &mut dyn FnMut(&str),
) -> Result<Option<std::process::Output>> {
    use std::os::unix::process::CommandExt;
    let prog = cmd.get_program().to_string_lossy().into_owned();
    // Its own process group: the terminal's Ctrl-C reaches plumb, which stops it.
    let mut c = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| crate::Error::quoting(format!("cannot run {prog}: {e}"), e))?;
    // Drain the pipes on threads so a chatty child never blocks.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let ho = c.stdout.take().map(|s| drain(Box::new(s)));
    let latest: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let he = c.stderr.take().map(|s| {
        let latest = latest.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut v = Vec::new();
            let mut r = std::io::BufReader::new(s);
            let mut line = Vec::new();
            while r.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                if line.starts_with(b"progress:") {
                    *latest.lock().unwrap() = Some(String::from_utf8_lossy(&line).trim().into());
                }
                v.append(&mut line);
            }
            v
        })
    });
    loop {
        if let Some(l) = latest.lock().unwrap().take() {
            live(&l);
        }
        if let Some(status) = c.try_wait()? {
            return Ok(Some(std::process::Output {
                status,
                stdout: ho.and_then(|h| h.join().ok()).unwrap_or_default(),
                stderr: he.and_then(|h| h.join().ok()).unwrap_or_default(),
            }));
        }
        if cancel() {
            let _ = c.kill();
            let _ = c.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl PgbenchRun {
    /// `pgbench -i` at this scale; None when stopped.
    pub fn init(&self, scale: u32, cancel: &dyn Fn() -> bool) -> Result<Option<()>> {
        let Some(o) = run_child(
            Command::new(&self.bin)
                .args(["-i", "-q", "-s", &scale.to_string()])
                .arg(&self.conn)
                .envs(self.env.iter().cloned())
                .current_dir(&self.work),
            cancel,
        )?
        else {
            return Ok(None);
        };
        if !o.status.success() {
            crate::refuse!(
                "pgbench -i failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        Ok(Some(()))
    }

    /// pgbench for `d`, with per-transaction latencies from its transaction logs; None when
    /// stopped. Its progress each second (tps, mean latency in ms) goes to `live` as it comes.
    pub fn run(
        &self,
        d: Duration,
        cancel: &dyn Fn() -> bool,
        live: &mut dyn FnMut(f64, Option<f64>),
    ) -> Result<Option<Pgbench>> {
        let (clients, threads, work) = (self.clients, self.threads, &self.work);
        let prefix = work.join("pgbench_log");
        let Some(o) = run_child_live(
            Command::new(&self.bin)
                .args([
                    "-n",
                    "-P",
                    "1",
                    "-c",
                    &clients.to_string(),
                    "-j",
                    &threads.min(clients).to_string(),
                    "-T",
                    &d.as_secs().max(1).to_string(),
                    "-l",
                    "--log-prefix",
                ])
                .arg(&prefix)
                .args(
                    self.script
                        .iter()
                        .flat_map(|p| [std::ffi::OsStr::new("-f"), p.as_os_str()]),
                )
                .arg(&self.conn)
                .envs(self.env.iter().cloned())
                .current_dir(work),
            cancel,
            &mut |l| {
                if let Some((tps, lat)) = progress_figures(l) {
                    live(tps, lat)
                }
            },
        )?
        else {
            return Ok(None);
        };
        let stdout = String::from_utf8_lossy(&o.stdout);
        if !o.status.success() {
            crate::refuse!(
                "pgbench failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .filter(|l| !l.trim().is_empty() && !l.starts_with("progress:"))
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" / ")
            );
        }
        let mut p = parse_pgbench(&stdout).ok_or_else(|| {
            crate::Error::Refused(format!("cannot read pgbench's summary: {stdout}"))
        })?;
        p.clients = clients;
        p.threads = threads.min(clients);
        p.duration_s = d.as_secs() as f64;
        let (lat, per_second) = take_log(work)?;
        p.latency = Latency::from_us(&lat);
        (p.tps_p10, p.tps_p90) = tps_spread(&per_second);
        p.tps_seconds = whole_seconds(&per_second);
        Ok(Some(p))
    }
}

/// pgbench's progress line ("progress: 5.0 s, 4712.3 tps, lat 0.845 ms stddev 0.312, 0 failed"):
/// its transactions per second and mean latency in ms.
pub(crate) fn progress_figures(line: &str) -> Option<(f64, Option<f64>)> {
    let mut tps = None;
    let mut lat = None;
    for f in line.split(',').map(str::trim) {
        if let Some(v) = f.strip_suffix(" tps") {
            tps = v.trim().parse::<f64>().ok();
        } else if let Some(rest) = f.strip_prefix("lat ") {
            lat = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok());
        }
    }
    tps.map(|t| (t, lat))
}

/// Per-transaction latencies from pgbench's transaction logs (the third field, µs) and the
/// transactions finished in each second (the fifth field, epoch seconds); the logs are removed.
fn take_log(work: &Path) -> Result<(Vec<u64>, std::collections::BTreeMap<u64, u64>)> {
    // (second, µs within it, latency): sorted, the latencies come in the order they ended
    // across the threads' files.
    let mut timed: Vec<(u64, u64, u64)> = Vec::new();
    let mut per_second = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(work)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("pgbench_log") {
            let text = std::fs::read_to_string(e.path())?;
            for l in text.lines() {
                let f: Vec<&str> = l.split_whitespace().collect();
                let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
                if let Some(us) = num(2) {
                    timed.push((num(4).unwrap_or(0), num(5).unwrap_or(0), us));
                }
                if let Some(sec) = f.get(4).and_then(|x| x.parse::<u64>().ok()) {
                    *per_second.entry(sec).or_insert(0) += 1;
                }
            }
            let _ = std::fs::remove_file(e.path());
        }
    }
    timed.sort_unstable();
    Ok((timed.into_iter().map(|t| t.2).collect(), per_second))
}

/// The 10th and 90th percentiles of the transactions per second over the run's whole seconds
/// (the first and last, partial, left out); None with fewer than five whole seconds.
pub(crate) fn tps_spread(
    per_second: &std::collections::BTreeMap<u64, u64>,
) -> (Option<f64>, Option<f64>) {
    let mut v: Vec<u64> = per_second.values().copied().collect();
    if v.len() < 7 {
        return (None, None);
    }
    v.remove(0);
    v.pop();
    v.sort_unstable();
    let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64;
    (Some(q(0.10)), Some(q(0.90)))
}

/// The transactions of each whole second in order, without the first and last (which the run
/// may cut); a second with none counts as 0.
pub(crate) fn whole_seconds(per_second: &std::collections::BTreeMap<u64, u64>) -> Vec<f64> {
    let (Some((&first, _)), Some((&last, _))) =
        (per_second.first_key_value(), per_second.last_key_value())
    else {
        return Vec::new();
    };
    (first + 1..last)
        .map(|s| per_second.get(&s).copied().unwrap_or(0) as f64)
        .collect()
}

/// A pgbench that ran nothing (the baseline when the workload did not run).
pub fn empty(scale: u32) -> Pgbench {
    Pgbench {
        script: None,
        scale,
        clients: 0,
        threads: 0,
        duration_s: 0.0,
        init_s: 0.0,
        database_bytes: None,
        transactions: 0,
        failed: 0,
        tps: 0.0,
        tps_p10: None,
        tps_p90: None,
        tps_seconds: Vec::new(),
        latency: None,
        wal_sync_method: "fdatasync".into(),
        server_io: None,
    }
}

/// pgbench's summary lines: transactions processed, failed, tps.
pub(crate) fn parse_pgbench(s: &str) -> Option<Pgbench> {
    let after = |key: &str| -> Option<&str> {
        s.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(str::trim))
    };
    let num = |t: &str| -> Option<f64> { t.split_whitespace().next()?.parse().ok() };
    let transactions = after("number of transactions actually processed:")
        .and_then(|t| t.split('/').next())
        .and_then(num)? as u64;
    let failed = after("number of failed transactions:")
        .and_then(num)
        .unwrap_or(0.0) as u64;
    let tps = s
        .lines()
        .filter_map(|l| l.trim().strip_prefix("tps = "))
        .find(|l| !l.contains("including connections establishing"))
        .and_then(num)?;
    Some(Pgbench {
        transactions,
        failed,
        tps,
        ..empty(0)
    })
}

/// Bytes of the files under a directory (the database's size on disk).
pub(crate) fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => dir_bytes(&e.path()),
                    _ => e.metadata().map(|m| m.len()).unwrap_or(0),
                })
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pgbench_summary_is_read() {
        let out = "pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 5
query mode: simple
number of clients: 4
number of threads: 2
maximum number of tries: 1
duration: 10 s
number of transactions actually processed: 34210
number of failed transactions: 3 (0.009%)
latency average = 1.168 ms
initial connection time = 6.123 ms
tps = 3421.005816 (without initial connection time)
";
        let p = super::parse_pgbench(out).unwrap();
        assert_eq!((p.transactions, p.failed), (34210, 3));
        assert!((p.tps - 3421.005816).abs() < 1e-9);
        // PostgreSQL 13 and older print two tps lines; the one without connections counts.
        let old = "number of transactions actually processed: 100/100
tps = 90.1 (including connections establishing)
tps = 95.5 (excluding connections establishing)
";
        let p = super::parse_pgbench(old).unwrap();
        assert_eq!(p.transactions, 100);
        assert_eq!(p.tps, 95.5);
        assert!(super::parse_pgbench("pgbench: error: connection refused").is_none());
    }

    #[test]
    fn per_second_spread_leaves_out_the_partial_edges() {
        // Ten seconds: a partial first and last, one slow second among eight.
        let m: std::collections::BTreeMap<u64, u64> = [
            (100, 50),
            (101, 1000),
            (102, 1010),
            (103, 990),
            (104, 300),
            (105, 1005),
            (106, 995),
            (107, 1002),
            (108, 998),
            (109, 40),
        ]
        .into_iter()
        .collect();
        let (p10, p90) = super::tps_spread(&m);
        assert_eq!((p10, p90), (Some(300.0), Some(1010.0)));
        let short: std::collections::BTreeMap<u64, u64> = (0..5).map(|i| (i, 10)).collect();
        assert_eq!(super::tps_spread(&short), (None, None));
    }

    #[test]
    fn a_stopped_child_is_killed_and_reported() {
        let t = std::time::Instant::now();
        assert_eq!(
            super::progress_figures(
                "progress: 5.0 s, 4712.3 tps, lat 0.845 ms stddev 0.312, 0 failed"
            ),
            Some((4712.3, Some(0.845)))
        );
        assert_eq!(super::progress_figures("starting vacuum...end."), None);
        let r = super::run_child(std::process::Command::new("sleep").arg("30"), &|| true).unwrap();
        assert!(r.is_none());
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        let o = super::run_child(std::process::Command::new("echo").arg("hi"), &|| false)
            .unwrap()
            .unwrap();
        assert_eq!(o.stdout, b"hi\n");
    }
}
