//! `plumb delta` against a real MariaDB that this test starts (apt-get install mariadb-server;
//! `scripts/setup --test` installs it): performance_schema on, a 64 MiB buffer pool (the 10 MiB table fits).

use crate::common;
use crate::common::maria::{free_port, Maria};
use crate::common::{is_root, plumb, skip};

use serde_json::Value;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn delta(m: &Maria, extra: &[&str]) -> Value {
    let url = m.url("lab");
    let mut args = vec!["delta", "--engine", &url, "--json"];
    args.extend_from_slice(extra);
    let o: Output = plumb().args(&args).output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "plumb {args:?}\nstdout: {out}\nstderr: {err}"
    );
    serde_json::from_str(&out).expect("JSON")
}

fn median(r: &Value, group: &str, object: Option<&str>, metric: &str) -> Option<f64> {
    r["rows"].as_array()?.iter().find_map(|x| {
        let ok = x["group"] == group
            && x["metric"] == metric
            && object.is_none_or(|o| x["object"].as_str().is_some_and(|s| s.contains(o)));
        if ok {
            x["stats"][0]["median"].as_f64()
        } else {
            None
        }
    })
}

#[test]
fn delta_against_mariadb() {
    let _group = common::beside();
    let mut m = match Maria::start() {
        Ok(m) => m,
        Err(why) => {
            skip(format!("skipped: {why}"));
            return;
        }
    };
    m.sql("CREATE DATABASE lab; CREATE TABLE lab.t (id INT PRIMARY KEY, pad CHAR(200) NOT NULL) ENGINE=InnoDB; USE lab; INSERT INTO lab.t SELECT seq, REPEAT('x', 200) FROM seq_1_to_40000")
        .expect("create the table");

    // Cold: a fresh server (empty buffer pool) and, as root, no page cache. The scan reads the
    // table's file; the warm run that follows does not.
    m.stop();
    if is_root() {
        std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
    }
    m.launch().unwrap();
    let q = "SELECT count(*) FROM lab.t FORCE INDEX (PRIMARY) WHERE pad <> ''";
    let cold = delta(&m, &["--sql", q]);
    // Pages come in one by one or by read-ahead.
    let reads = median(&cold, "innodb", None, "buffer_pool_reads")
        .expect("buffer pool reads when cold")
        + median(&cold, "innodb", None, "buffer_pool_read_ahead").unwrap_or(0.0);
    assert!(reads > 100.0, "{reads}");
    assert!(median(&cold, "innodb", None, "data_read_bytes").unwrap() > 4.0 * 1048576.0);
    let file_bytes =
        median(&cold, "file", Some("lab/t.ibd"), "read_bytes").expect("file I/O on t.ibd");
    assert!(file_bytes > 4.0 * 1048576.0, "{file_bytes}");
    assert!(median(&cold, "file", Some("lab/t.ibd"), "read_stall_ms").unwrap_or(0.0) > 0.0);
    assert_eq!(cold["engine"]["engine"], "MariaDB");
    let warm = delta(&m, &["--sql", q, "--warm"]);
    assert_eq!(
        median(&warm, "innodb", None, "buffer_pool_reads"),
        None,
        "no buffer pool reads when warm"
    );
    assert_eq!(
        median(&warm, "file", Some("lab/t.ibd"), "read_bytes"),
        None,
        "no file reads when warm"
    );
    assert!(
        median(&warm, "status", None, "handler_read_next").unwrap_or(0.0)
            + median(&warm, "status", None, "handler_read_rnd_next").unwrap_or(0.0)
            >= 40000.0,
        "{}",
        warm["rows"]
    );

    // A sort larger than the sort buffer: merge passes through temporary files.
    let sort = delta(&m, &["--sql", "SET SESSION sort_buffer_size = 32768; SELECT id FROM lab.t ORDER BY pad DESC, id DESC LIMIT 1 OFFSET 39000"]);
    assert!(
        median(&sort, "status", None, "sort_merge_passes").unwrap_or(0.0) > 0.0,
        "{}",
        sort["rows"]
    );
    assert!(median(&sort, "status", None, "created_tmp_files").unwrap_or(0.0) > 0.0);

    // Waits and latches from performance_schema.
    assert!(
        cold["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["group"] == "wait"
                && r["object"].as_str().unwrap().starts_with("io/file/innodb")),
        "no file waits"
    );

    // plumb mem --engine: the server's own figure for what its buffer pool holds, beside the
    // kernel's view of the process.
    let pid = m.pid().unwrap();
    let o = plumb()
        .args([
            "--json",
            "mem",
            "--no-engines",
            "--interval",
            "100ms",
            "--pid",
            &pid.to_string(),
            "--engine",
            &m.url("lab"),
        ])
        .output()
        .unwrap();
    let mem: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    let e = mem["engines"]
        .as_array()
        .and_then(|v| v.first())
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        e["belief_source"]
            .as_str()
            .unwrap_or("")
            .contains("Innodb_buffer_pool_bytes_data"),
        "{e} / {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(e["believed_cache_bytes"].as_u64().unwrap() > 1 << 20, "{e}");

    // The server killed mid-run: a clear error, exit 2.
    let url = m.url("lab");
    let child = plumb()
        .args(["delta", "--engine", &url, "--sql", "SELECT SLEEP(30)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: killing the server this test started.
    unsafe { libc::kill(m.pid().unwrap() as i32, libc::SIGKILL) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("went away") || err.contains("connection") || err.contains("Connection"),
        "{err}"
    );
    let _ = m.child.take().map(|mut c| c.wait());
}

/// `plumb record --engine` on MariaDB keeps the engine's gauges (buffer pool, threads) with
/// the kernel's view of the server, and the report draws the engine's memory.
#[test]
fn record_keeps_mariadbs_buffer_pool_and_threads() {
    let _group = common::beside();
    let m = match Maria::start() {
        Ok(m) => m,
        Err(why) => {
            skip(format!("skipped: {why}"));
            return;
        }
    };
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("m.plumb");
    let pid = m.pid().unwrap().to_string();
    let url = m.url("mysql");
    let o = plumb()
        .args([
            "record",
            "--duration",
            "2s",
            "--interval",
            "500ms",
            "--pid",
            &pid,
        ])
        .args(["--engine", &url, "--out", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list = plumb()
        .args(["export", f.to_str().unwrap(), "--list"])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for name in [
        "engine.innodb.buffer_pool_data_bytes",
        "engine.innodb.buffer_pool_free_pages_count",
        "engine.status.threads_connected_count",
        "engine.innodb.row_lock_waiting_count",
        &format!("tree.{pid}.pss_bytes"),
    ] {
        assert!(list.contains(name), "{name} not in:\n{list}");
    }
    let rec = plumb_store::read(&f).unwrap();
    let cat = plumb_analyze::series::catalog(&rec);
    let data = plumb_analyze::series::find(&cat, "engine.innodb.buffer_pool_data_bytes").unwrap();
    let v = plumb_analyze::series::compute(&rec, data);
    assert!(v.iter().any(|x| *x > 0.0), "buffer pool data bytes: {v:?}");
    let out = d.path().join("report");
    let r = plumb()
        .args([
            "report",
            f.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(r.status.success());
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("Database: memory as the engine sees it"));
    assert!(html.contains("buffer pool: data"));
    assert!(html.contains("kernel: PSS of PID"));
}

/// Semi-synchronous replication between two servers this test starts: `plumb repl watch`
/// sees each commit acknowledged, then, with the replica frozen, a commit wait out the timeout
/// and the primary switch semi-sync off.
#[test]
fn semisync_replication_watched_live() {
    let _group = common::beside();
    let port = free_port();
    let primary = match Maria::start_with(&[
        "--server-id=1",
        "--log-bin=mysql-bin",
        "--binlog-format=ROW",
        "--rpl-semi-sync-master-enabled=ON",
        "--rpl-semi-sync-master-timeout=1500",
        &format!("--port={port}"),
    ]) {
        Ok(m) => m,
        Err(why) => {
            skip(format!("skipped: {why}"));
            return;
        }
    };
    let replica = Maria::start_with(&[
        "--server-id=2",
        "--relay-log=relay-bin",
        "--rpl-semi-sync-slave-enabled=ON",
    ])
    .expect("a second MariaDB server");
    primary
        .sql("CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY 'replpw'; GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'; CREATE DATABASE lab; CREATE TABLE lab.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
        .expect("replication user and table");
    replica
        .sql(&format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', MASTER_PASSWORD='replpw', MASTER_USE_GTID=no, MASTER_LOG_FILE='mysql-bin.000001', MASTER_LOG_POS=4; START SLAVE"
        ))
        .expect("start the replica");
    let t0 = Instant::now();
    loop {
        let clients = primary
            .sql("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'")
            .unwrap_or_default();
        if clients.trim().ends_with('1') {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the replica never connected semi-synchronously: {clients} / {}",
            replica.sql("SHOW SLAVE STATUS\\G").unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Single-row commits in one session for the whole watch.
    let mut load = Command::new("mariadb")
        .arg(format!("--socket={}", primary.sock().display()))
        .args(["-uroot", "lab"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = load.stdin.take().unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        for _ in 0..100_000 {
            if stdin.write_all(b"INSERT INTO t (v) VALUES (1);\n").is_err() {
                return;
            }
        }
    });
    let watch = plumb()
        .args(["repl", "watch", "--primary", &primary.url("lab")])
        .args(["--duration", "6s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The replica frozen from 2.5 s: the next commit waits the 1.5 s timeout, then the
    // primary goes on without it.
    std::thread::sleep(Duration::from_millis(2500));
    let rpid = replica.pid().unwrap() as i32;
    // SAFETY: the replica this test started.
    unsafe { libc::kill(rpid, libc::SIGSTOP) };
    let o = watch.wait_with_output().unwrap();
    unsafe { libc::kill(rpid, libc::SIGCONT) };
    let _ = load.kill();
    let _ = load.wait();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 5, "{lines:?}");
    assert!(lines.iter().all(|l| l["kind"] == "repl_watch_semisync"));
    // Acknowledged commits while the replica ran, with their wait.
    let early = &lines[1];
    assert_eq!(early["active"], true, "{early}");
    assert_eq!(early["clients"], 1, "{early}");
    assert!(
        early["acknowledged_per_s"].as_f64().unwrap() > 10.0,
        "{early}"
    );
    assert!(early["commit_wait_ms"].as_f64().unwrap() > 0.0, "{early}");
    assert!(
        early["binlog_bytes_per_s"].as_f64().unwrap() > 0.0,
        "{early}"
    );
    // Then the switch, said once, and the primary committing without acknowledgements.
    let off: Vec<&Value> = lines.iter().filter(|l| l["switched_off"] == true).collect();
    assert_eq!(off.len(), 1, "{lines:?}");
    let last = lines.last().unwrap();
    assert_eq!(last["active"], false, "{last}");
    assert!(
        last["unacknowledged_per_s"].as_f64().unwrap() > 10.0,
        "{last}"
    );
    // A server whose semi-sync is off is named and refused.
    let plain = Maria::start().expect("a third MariaDB server");
    let o = plumb()
        .args([
            "repl",
            "watch",
            "--primary",
            &plain.url("mysql"),
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rpl_semi_sync_master_enabled = OFF"), "{err}");
}

/// A recording through a MariaDB restart: the session is opened again, the gap marked, the new
/// server's processes followed, and no sample lost.
#[test]
fn record_follows_mariadb_through_a_restart() {
    let _group = common::beside();
    let mut m = match Maria::start() {
        Ok(m) => m,
        Err(why) => {
            skip(format!("skipped: {why}"));
            return;
        }
    };
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("restart.plumb");
    let old = m.pid().unwrap();
    let rec = plumb()
        .args(["record", "--duration", "24s", "--interval", "1s", "--pid"])
        .arg(old.to_string())
        .args(["--engine", &m.url("mysql"), "--out", f.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    m.stop();
    std::thread::sleep(Duration::from_secs(4));
    m.launch().unwrap();
    let new = m.pid().unwrap();
    let out = rec.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = plumb_store::read(&f).unwrap();
    let names: Vec<&str> = r.marks.iter().map(|m| m.name.as_str()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n);
    assert!(at("engine unreachable") < at("engine back"), "{names:?}");
    assert!(at("engine unreachable").is_some(), "{names:?}");
    assert!(
        at(&format!("engine server now PID {new}")).is_some(),
        "{names:?}"
    );
    let mut up: Vec<u64> = r
        .column("engine.up")
        .unwrap()
        .iter()
        .copied()
        .filter(|v| *v != plumb_store::MISSING)
        .collect();
    up.dedup();
    assert_eq!(up, vec![1, 0, 1]);
    assert!(r
        .metrics
        .iter()
        .any(|x| x.name.starts_with(&format!("tree.{new}."))));
    let gap = r.times_ms.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(gap < 1600, "a sample went missing: {gap} ms between two");
}

/// MariaDB's statement digests (performance_schema) in a recording: the server's normalized
/// texts, calls and time, tabled between two points; plumb's own queries left out.
#[test]
fn record_follows_mariadbs_statement_digests() {
    let _group = common::beside();
    let m = match Maria::start() {
        Ok(m) => m,
        Err(why) => {
            skip(format!("skipped: {why}"));
            return;
        }
    };
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("digests.plumb");
    let rec = plumb()
        .args(["record", "--duration", "6s", "--interval", "500ms"])
        .args(["--engine", &m.url("mysql"), "--out", f.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        m.sql("SELECT SLEEP(0.05), 'hunter2-in-a-select'; SELECT COUNT(*) FROM mysql.user WHERE user = 'hunter2-user'")
            .unwrap();
    }
    assert!(rec.wait_with_output().unwrap().status.success());
    let bytes = std::fs::read(&f).unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains("hunter2"));
    let o = plumb()
        .args(["--json", "report", f.to_str().unwrap(), "--statements"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = t["rows"].as_array().unwrap();
    let sleep = rows
        .iter()
        .find(|r| r["text"].as_str().unwrap().contains("SLEEP"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(sleep["text"].as_str().unwrap().contains('?'), "{sleep}");
    assert!(sleep["calls"].as_f64().unwrap() >= 5.0, "{sleep}");
    let mean = sleep["mean_ms"].as_f64().unwrap();
    assert!((45.0..250.0).contains(&mean), "{sleep}");
    // No blocks per statement in MariaDB's digests: said as absent, not as zero.
    assert!(sleep["blocks_read"].is_null(), "{sleep}");
    assert!(
        !rows.iter().any(|r| r["text"]
            .as_str()
            .unwrap()
            .contains("events_statements_summary_by_digest")),
        "{t}"
    );
}
