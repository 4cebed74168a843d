//! `plumb load --explain` on a real PostgreSQL: each transaction type's time on the server taken
//! apart by the kernel, with known answers: pgbench's transaction is seven requests and one
//! durable commit; a row lock held by another session shows as the slowest transactions'
//! lock wait; processes spinning on every CPU show as waiting for a CPU; an emptied cache as
//! storage reads; the server's writes throttled as commits waiting for durable writes. Refused
//! where it cannot see (not root), naming what is missing.

use serde_json::Value;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::private::Private;
use crate::common::*;

const RUN: [&str; 10] = [
    "--workload",
    "tpcb",
    "--scale",
    "1",
    "--clients",
    "2",
    "--rampup",
    "0s",
    "--duration",
    "3s",
];

/// `plumb load --json --explain` with RUN on `server` (`--dir DIR`, or `--engine URL
/// --allow-writes`), calling `started` once the timed window begins: tpcb's figures.
fn explained(server: &[&str], extra: &[&str], started: impl FnOnce()) -> Value {
    explained_whole(server, extra, started).0
}

/// [`explained`], and the whole result.
fn explained_whole(server: &[&str], extra: &[&str], started: impl FnOnce()) -> (Value, Value) {
    let mut c = plumb()
        .args(["--json", "load", "--explain"])
        .args(server)
        .args(RUN)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(c.stderr.take().unwrap());
    let mut seen = String::new();
    let t0 = Instant::now();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains("timed window") {
            started();
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "{seen}");
    }
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let o = c.wait_with_output().unwrap();
    let stderr = seen + &rest.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let r: Value = serde_json::from_slice(&o.stdout).expect("load --json is JSON");
    let t = r["types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tpcb")
        .unwrap_or_else(|| panic!("no tpcb in {r}"))
        .clone();
    assert!(!t["explained"].is_null(), "{t:#}");
    (t, r)
}

/// A part's ms per transaction in a split (`mean` or `slowest`).
fn part(t: &Value, split: &str, key: &str) -> f64 {
    t["explained"][split]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == key)
        .and_then(|p| p["ms"].as_f64())
        .unwrap_or_else(|| panic!("no {key} in {t:#}"))
}

fn share(t: &Value, split: &str, key: &str) -> f64 {
    t["explained"][split]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == key)
        .and_then(|p| p["share"].as_f64())
        .unwrap_or(0.0)
}

/// A row lock held for 1.5 s: the slowest transactions' time is mostly `part`, the engine's
/// lock waits; both clients waited most of the 1.5 s (the second behind the first, or the
/// holder).
fn waited_for_the_lock(locked: &Value, part_: &str) {
    assert!(share(locked, "slowest", part_) >= 0.5, "{locked:#}");
    let slowest = locked["explained"]["slowest"]["transactions"]
        .as_f64()
        .unwrap();
    let waited = part(locked, "slowest", part_) * slowest;
    assert!(waited >= 1500.0, "{waited} ms\n{locked:#}");
}

/// The engine's lock waits (a share of its samples) and the kernel's (a share of the time)
/// side by side, and agreeing.
fn agree_on_lock_waits(engine: &Value) {
    let c = engine["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["wait"] == "lock waits")
        .unwrap_or_else(|| panic!("no lock waits compared: {engine:#}"));
    assert_eq!(c["agree"], true, "{engine:#}");
}

/// Processes that spin until dropped.
struct Spinners(Vec<Child>);

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn explain_takes_pgbench_s_transaction_apart_and_finds_a_held_lock_and_a_crowded_cpu() {
    let _group = common::alone();
    if !is_root() {
        skip("skipped: --explain needs root (eBPF)");
        return;
    }
    if !need_postgres() {
        return;
    }
    let tmp = server_tempdir("plumb-explain");
    let p = Private::start(&tmp.path().join("pg"), &[]);

    // Quiet: seven requests a transaction (BEGIN, three updates, a select, an insert, END),
    // each commit made durable (one fsync, or a share of another backend's), and every
    // transaction's parts adding up to its wall time.
    let pg = ["--dir", p.dir_str()];
    let out = tmp.path().join("report");
    let (quiet, quiet_run) =
        explained_whole(&pg, &["--keep", "--out", out.to_str().unwrap()], || {});
    let mean = &quiet["explained"]["mean"];
    let requests = mean["requests"].as_f64().unwrap();
    assert!((requests - 7.0).abs() < 0.01, "{quiet:#}");
    let syncs = mean["syncs"].as_f64().unwrap();
    assert!(syncs > 0.3 && syncs < 1.05, "{quiet:#}");
    assert!(part(&quiet, "mean", "durable_write") > 0.0, "{quiet:#}");
    assert!(part(&quiet, "mean", "cpu_user") > 0.0, "{quiet:#}");
    assert!(part(&quiet, "mean", "client") > 0.0, "{quiet:#}");
    assert!(
        quiet["explained"]["closed"].as_f64().unwrap() >= 0.95,
        "{quiet:#}"
    );
    let server = mean["server_ms"].as_f64().unwrap();
    let wall = mean["wall_ms"].as_f64().unwrap();
    assert!(server > 0.0 && server < wall, "{quiet:#}");
    // The recording has the parts second by second: the server's time per transaction, and
    // within it the durable writes, near the run's own figures.
    let o = run(&["export", out.join("recording.plumb").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let csv = String::from_utf8_lossy(&o.stdout).to_string();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| {
        head.iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no {name} in {head:?}"))
    };
    let (srv, durable) = (
        col("load.tpcb.server_ms"),
        col("load.tpcb.durable_write_ms"),
    );
    let seconds: Vec<(f64, f64)> = csv
        .lines()
        .skip(1)
        .filter_map(|l| {
            let v: Vec<f64> = l
                .split(',')
                .map(|v| v.parse().unwrap_or(f64::NAN))
                .collect();
            Some((*v.get(srv)?, *v.get(durable)?)).filter(|(s, _)| s.is_finite())
        })
        .collect();
    assert!(seconds.len() >= 2, "{csv}");
    assert!(
        seconds
            .iter()
            .all(|(s, d)| *s > 0.0 && (0.0..=*s).contains(d)),
        "{csv}"
    );
    let recorded = seconds.iter().map(|(s, _)| s).sum::<f64>() / seconds.len() as f64;
    assert!(
        recorded > server / 3.0 && recorded < server * 3.0,
        "{recorded} ms a second recorded against {server} ms over the run:\n{csv}"
    );
    // The report directory: the first screen names the slowest 1%'s parts, the text has the
    // table, the page a bar a split whose parts say what they are when hovered.
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("its slowest 1% spent"), "{summary}");
    assert!(
        summary.contains("where the server's time went"),
        "{summary}"
    );
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains(r#"id="explain""#), "no explain section");
    assert!(
        page.contains("<title>durable: "),
        "no durable part in the chart"
    );
    assert!(page.contains("tpcb, slowest 1%"), "no slowest 1% bar");

    // A session holds branch 1's row (the only branch at scale 1) for a second and a half once
    // the window starts: the transactions that waited for it are the slowest, and their time
    // is PostgreSQL's lock wait, a sleep on its latch.
    let mut holder: Option<Child> = None;
    let locked = explained(&pg, &["--keep"], || {
        holder = Some(
            Command::new(env!("CARGO_BIN_EXE_plumb"))
                .args(["engine", "psql", "--dir", p.dir_str(), "--", "-d", "plumb_load", "-c"])
                .arg("BEGIN; SELECT 1 FROM pgbench_branches WHERE bid = 1 FOR UPDATE; SELECT pg_sleep(1.5); COMMIT;")
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
    });
    assert!(holder.unwrap().wait().unwrap().success());
    waited_for_the_lock(&locked, "latch");
    // PostgreSQL's own view agrees: its sessions waited on a lock, which psql held.
    let engine = &locked["explained"]["engine"];
    assert!(
        engine["source"]
            .as_str()
            .unwrap()
            .starts_with("pg_stat_activity"),
        "{engine:#}"
    );
    let lock_share: f64 = engine["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"].as_str().unwrap().starts_with("Lock:"))
        .map(|e| e["share"].as_f64().unwrap())
        .sum();
    assert!(lock_share >= 0.2, "{engine:#}");
    // The lock's table named: `Lock:transactionid on pgbench_branches`.
    assert!(
        engine["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"]
                .as_str()
                .unwrap()
                .ends_with(" on pgbench_branches")),
        "{engine:#}"
    );
    assert!(
        engine["holders"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["name"].as_str().unwrap().starts_with("psql (PID ")),
        "{engine:#}"
    );
    agree_on_lock_waits(engine);

    // Processes spinning on every CPU: the server waits for a CPU far longer.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners = Spinners(
        // Two a CPU: every tenth of the window crowded alike (one a CPU left some tenths
        // nearly quiet, and the comparison of the tenths' medians not distinguishable).
        (0..2 * cpus)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let (crowded, crowded_run) = explained_whole(&pg, &["--drop-kept"], || {});
    drop(spinners);
    let (q, c) = (
        part(&quiet, "mean", "run_queue"),
        part(&crowded, "mean", "run_queue"),
    );
    assert!(
        c > 3.0 * q && c > 0.2,
        "run queue {q} ms quiet, {c} ms crowded\n{crowded:#}"
    );

    // plumb compare says which part grew, testing one run a side over its tenths.
    let save = |name: &str, v: &Value| {
        let f = tmp.path().join(name);
        std::fs::write(&f, v.to_string()).unwrap();
        f.to_str().unwrap().to_string()
    };
    let (a, b) = (
        save("quiet.json", &quiet_run),
        save("crowded.json", &crowded_run),
    );
    let o = run(&["compare", "--json", &a, "--", &b]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = r["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "tpcb server run_queue (ms per transaction)")
        .unwrap_or_else(|| panic!("{r:#}"));
    assert_eq!(f["verdict"], "worse", "{f:#}");
}

/// `plumb load --json --explain` with `args`: the whole result (exit 0 asserted).
fn load_explained(args: &[&str]) -> Value {
    let o = plumb()
        .args(["--json", "load", "--explain"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("load --json is JSON")
}

/// A small order-entry run (1 warehouse, 2 clients, 3 s) with --explain on `server` (`--dir
/// DIR`, or `--engine URL --allow-writes`), `keep` (`--keep`, `--drop-kept`): the whole result.
fn order_entry(server: &[&str], keep: &str) -> Value {
    let mut args = server.to_vec();
    args.extend([
        "--warehouses",
        "1",
        "--clients",
        "2",
        "--rampup",
        "0s",
        "--duration",
        "3s",
        keep,
    ]);
    load_explained(&args)
}

/// A type's mean figure `key` (`read_bios`) or part (`storage_read`) in a whole result.
fn mean_of(r: &Value, ty: &str, key: &str) -> f64 {
    let t = r["types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {r}"));
    let m = &t["explained"]["mean"];
    m[key].as_f64().unwrap_or_else(|| part(t, "mean", key))
}

/// The instance's caches emptied (the server stopped, so its shared buffers are gone, and the
/// host's page cache dropped): order-status and stock-level, which read rows scattered over
/// their tables, wait on reads from storage, where right after the load (every page cached)
/// they do not.
#[test]
fn explain_shows_the_readers_waiting_on_storage_when_the_cache_is_cold() {
    let _group = common::alone();
    if !is_root() {
        skip("skipped: --explain needs root (eBPF)");
        return;
    }
    if !need_postgres() {
        return;
    }
    let tmp = server_tempdir("plumb-explain-cold");
    let p = Private::start(&tmp.path().join("pg"), &[]);
    let server = ["--dir", p.dir_str()];
    let warm = order_entry(&server, "--keep");
    let o = run(&["engine", "stop", "--dir", p.dir_str()]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
    // The load starts the instance again itself, with empty caches.
    let cold = order_entry(&server, "--drop-kept");
    // Order-status (a customer's last order and its lines) and stock-level (the stock of the
    // district's recent items) read rows the cold server has to fetch from the disk.
    for ty in ["order-status", "stock-level"] {
        let (w, c) = (
            mean_of(&warm, ty, "storage_read"),
            mean_of(&cold, ty, "storage_read"),
        );
        let bios = mean_of(&cold, ty, "read_bios");
        assert!(
            c > 0.0 && c > 2.0 * w && bios > 0.05,
            "{ty}: storage reads {w} ms warm, {c} ms cold, {bios} block reads a transaction cold"
        );
    }
}

/// The parts a type's mean spends waiting for durable writes (its own fsyncs, and another
/// server process's it waited for) as a share of its server time, and its FLUSHes a
/// transaction.
fn durable_share(run: &Value, ty: &str) -> (f64, f64) {
    let t = run["types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {run}"));
    let m = &t["explained"]["mean"];
    let durable = part(t, "mean", "durable_write") + part(t, "mean", "others_durable");
    (
        durable / m["server_ms"].as_f64().unwrap(),
        m["flushes"].as_f64().unwrap(),
    )
}

/// Known answer: the server's writes throttled through its cgroup (`plumb lab
/// --throttle-writes`, which reruns the order-entry workload with the limit on): new-order's
/// and payment's waits for durable writes grow from a small share of their server time to a
/// large one, with as many FLUSHes a transaction as before (each commit still flushes once).
#[test]
fn explain_under_a_write_throttle_finds_the_commits_waiting_for_durable_writes() {
    let _group = common::alone();
    if !is_root() {
        skip("skipped: --explain and the write throttle need root (eBPF, a cgroup)");
        return;
    }
    if !need_postgres() {
        return;
    }
    // On the disk (the throttle is the disk's), not /tmp.
    let tmp = crate::common::lab::scratch();
    let out = tmp.path().join("report");
    let o = plumb()
        .args(["--json", "lab", "--quick", "--explain", "--dir"])
        .arg(tmp.path())
        .arg("--out")
        .arg(&out)
        .args(["--workload", "order-entry", "--throttle-writes", "10MB/s"])
        .args(["--skip", "storage,loops", "--duration", "5s"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let base = &r["workloads"][0];
    let t = r["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "write throttle")
        .unwrap_or_else(|| panic!("no write throttle: {:#}", r["experiments"]));
    let throttled = &t["explained"];
    for ty in ["new-order", "payment"] {
        let ((b, bf), (w, wf)) = (durable_share(base, ty), durable_share(throttled, ty));
        assert!(
            w >= 0.25 && w >= 2.0 * b,
            "{ty}: durable share {b:.2} → {w:.2} under the throttle: {:#}",
            throttled["types"]
        );
        assert!(
            (wf - bf).abs() < 0.5,
            "{ty}: FLUSH a transaction {bf:.2} → {wf:.2}"
        );
    }
    let text = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        text.contains(
            "Where the server's time went (--explain): order-entry, writes throttled to 10MB/s"
        ),
        "{text}"
    );
}

/// The same on MariaDB (one thread a connection, found in PROCESSLIST): seven requests a
/// transaction (START TRANSACTION, the five statements, COMMIT), and a row lock held by
/// another session as the slowest transactions' wait on a futex (InnoDB's lock waits sleep on a
/// condition variable), which InnoDB's own view calls a row lock wait, naming the holder.
#[test]
fn explain_takes_mariadb_s_transactions_apart_and_finds_a_held_lock() {
    let _group = common::alone();
    if let Some(why) = common::lab::no_mariadb() {
        skip(format!("skipped: {why}"));
        return;
    }
    let m = match common::maria::Maria::start() {
        Ok(m) => m,
        Err(why) => {
            skip(format!("skipped: {why}"));
            return;
        }
    };
    let url = m.url("mysql");
    let server = ["--engine", url.as_str(), "--allow-writes"];
    let quiet = explained(&server, &["--keep"], || {});
    let mean = &quiet["explained"]["mean"];
    let requests = mean["requests"].as_f64().unwrap();
    assert!((requests - 7.0).abs() < 0.01, "{quiet:#}");
    assert!(part(&quiet, "mean", "cpu_user") > 0.0, "{quiet:#}");
    assert!(part(&quiet, "mean", "client") > 0.0, "{quiet:#}");
    assert!(
        quiet["explained"]["closed"].as_f64().unwrap() >= 0.95,
        "{quiet:#}"
    );
    // MariaDB's own view: its process list and InnoDB's transactions, read beside the clocks.
    assert!(
        quiet["explained"]["engine"]["source"]
            .as_str()
            .unwrap()
            .contains("INNODB_TRX"),
        "{quiet:#}"
    );
    let mut holder: Option<std::process::Child> = None;
    let locked = explained(&server, &["--drop-kept"], || {
        holder = Some(
            Command::new("mariadb")
                .arg(format!("--socket={}", m.sock().display()))
                .args(["-uroot", "plumb_load", "-e"])
                .arg("START TRANSACTION; SELECT 1 FROM pgbench_branches WHERE bid = 1 FOR UPDATE; DO SLEEP(1.5); COMMIT;")
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
    });
    assert!(holder.unwrap().wait().unwrap().success());
    waited_for_the_lock(&locked, "futex");
    // InnoDB's own view agrees: its transactions waited on a row lock, which the mariadb
    // client's session held (by its account and connection ID).
    let engine = &locked["explained"]["engine"];
    let lock_share: f64 = engine["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "Lock:InnoDB row lock on pgbench_branches")
        .map(|e| e["share"].as_f64().unwrap())
        .sum();
    assert!(lock_share >= 0.2, "{engine:#}");
    assert!(
        engine["holders"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["name"]
                .as_str()
                .unwrap()
                .starts_with("root@localhost (connection ")),
        "{engine:#}"
    );
    agree_on_lock_waits(engine);
}

/// Known answers on MariaDB's order-entry: processes spinning on every CPU make new-order wait
/// for a CPU far longer; with the server restarted (an empty buffer pool, no dump reloaded, its
/// files read with O_DIRECT) and the host's page cache dropped, order-status (a random
/// customer's last order) waits on reads from storage, where warm it does not. (Stock-level reads
/// the stock of the items the district's last orders named: rows new-order has just read into
/// the buffer pool, so on MariaDB it reads from the disk hardly at all, cold or warm.)
#[test]
fn explain_on_mariadb_finds_a_crowded_cpu_and_a_cold_cache() {
    let _group = common::alone();
    if let Some(why) = common::lab::no_mariadb() {
        skip(format!("skipped: {why}"));
        return;
    }
    // A buffer pool the warehouse fits in: warm, nothing is read from the disk.
    let mut m = match common::maria::Maria::start_with(&["--innodb-buffer-pool-size=256M"]) {
        Ok(m) => m,
        Err(why) => {
            skip(format!("skipped: {why}"));
            return;
        }
    };
    let url = m.url("mysql");
    let server = ["--engine", url.as_str(), "--allow-writes"];
    let run_with = |keep: &str| order_entry(&server, keep);
    let warm = run_with("--keep");
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners = Spinners(
        (0..2 * cpus)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let crowded = run_with("--keep");
    drop(spinners);
    let (q, c) = (
        mean_of(&warm, "new-order", "run_queue"),
        mean_of(&crowded, "new-order", "run_queue"),
    );
    assert!(
        c > 3.0 * q && c > 0.2,
        "new-order's run queue {q} ms quiet, {c} ms crowded"
    );
    m.stop();
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
    m.launch().unwrap();
    let cold = run_with("--drop-kept");
    let ty = "order-status";
    let (w, c) = (
        mean_of(&warm, ty, "storage_read"),
        mean_of(&cold, ty, "storage_read"),
    );
    let bios = mean_of(&cold, ty, "read_bios");
    assert!(
        c > 0.0 && c > 2.0 * w && bios > 0.05,
        "{ty}: storage reads {w} ms warm, {c} ms cold, {bios} block reads a transaction cold"
    );
}

/// Without root (as nobody, when the test runs as root) `--explain` is refused before anything
/// starts, naming what is missing, with exit code 2.
#[test]
fn explain_is_refused_where_it_cannot_see() {
    let _group = common::beside();
    use std::os::unix::process::CommandExt;
    let mut c = plumb();
    c.args(["load", "--explain", "--dir", "/nonexistent/plumb-explain"]);
    if is_root() {
        c.uid(65534).gid(65534);
    }
    let o = match c.output() {
        Ok(o) => o,
        Err(e) => {
            skip(format!("skipped: cannot run plumb as nobody here: {e}"));
            return;
        }
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--explain: needs root"), "{err}");
    assert!(!std::path::Path::new("/nonexistent/plumb-explain").exists());
}
