//! `plumb trace` end to end: exact counts of a known program, agreement with `strace -c -f`,
//! a private PostgreSQL's fdatasync calls per commit under each wal_sync_method, and the ways a
//! trace ends (Ctrl-C, kill -9 of plumb, a PID that exits, a PID that never was, no root).

use crate::common;
use crate::common::{is_root, no_postgres, pg_bin, plumb, skip};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn needs_root(what: &str) -> bool {
    if !is_root() {
        skip(format!("skipped: {what} needs root (eBPF and tracefs)"));
        return false;
    }
    true
}

fn json(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Run a plumb to the end: its output and its PID, whose trace instance (`plumb-PID`) the
/// test looks for (other tests' plumbs have their own, at the same moment).
fn output_and_pid(c: &mut Command) -> (std::process::Output, u32) {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

/// No trace instance of plumb `pid` is left.
fn none_left_by(pid: u32) {
    let mine = format!("plumb-{pid}");
    assert!(
        !instances().contains(&mine),
        "{mine} left: {:?}",
        instances()
    );
}

/// Calls of one syscall in a row list.
fn calls(rows: &Value, name: &str) -> u64 {
    rows.as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] == name)
        .map(|r| r["calls"].as_u64().unwrap())
        .sum()
}

/// plumb's tracefs instances, when tracefs is mounted.
fn instances() -> Vec<String> {
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("plumb-"))
                .collect()
        })
        .unwrap_or_default()
}

const COUNTED: &str = "import ctypes, sys\n\
    libc = ctypes.CDLL(None, use_errno=True)\n\
    for _ in range(1000): libc.getppid()\n\
    for _ in range(300): libc.sched_yield()\n\
    for _ in range(77): libc.umask(0o022)\n\
    sys.exit(3)\n";

#[test]
fn a_commands_syscalls_are_counted_exactly_and_its_status_passed_on() {
    let _group = common::beside();
    if !needs_root("tracing") {
        return;
    }
    let (o, pid) =
        output_and_pid(plumb().args(["trace", "--json", "--", "/usr/bin/python3", "-c", COUNTED]));
    assert_eq!(o.status.code(), Some(3), "the command's status: {o:?}");
    let r = json(&o);
    assert_eq!(r["kind"], "trace");
    assert_eq!(r["ended"], "command exited");
    assert_eq!(calls(&r["syscalls"], "getppid"), 1000);
    assert_eq!(calls(&r["syscalls"], "sched_yield"), 300);
    assert_eq!(calls(&r["syscalls"], "umask"), 77);
    // What plumb's maps held in the kernel, said (the plain hashes taking memory as they fill
    // is plumb-sys's test; this host's figure is in docs/trace.md). Kernels before 6.4 do not
    // account a map's memory as used: nothing said there.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let version: Vec<u32> = release
        .split(|c: char| !c.is_ascii_digit())
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    let accounted = version >= vec![6, 4];
    if accounted {
        let maps = r["maps_bytes"].as_u64().expect("maps_bytes");
        assert!(maps > 1 << 20 && maps < 1 << 30, "maps held {maps} bytes");
    }
    // Traced from its exec: one execve, the program's own.
    assert_eq!(calls(&r["syscalls"], "execve"), 1);
    let p = &r["processes"][0];
    assert_eq!(p["name"], "python3");
    assert_eq!(p["exited"], true);
    assert!(p["sched"]["minor_faults"].as_u64().unwrap() > 100, "{p}");
    let getppid = r["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "getppid")
        .unwrap();
    assert!(getppid["p50_s"].as_f64().unwrap() > 0.0);
    // A thousand calls in a millisecond or two: timed in part (the first 2 a jiffy on a CPU,
    // then 1 in 8), the time estimated from them; p99 once 100 were timed.
    let timed = getppid["timed"].as_u64().unwrap();
    assert!(timed > 8 && timed < 1000, "{getppid}");
    if timed >= 100 {
        assert!(getppid["p99_s"].as_f64().unwrap() >= getppid["p50_s"].as_f64().unwrap());
    }
    // The 300 sched_yield and 77 umask calls: all counted, and timed at least in part.
    for name in ["sched_yield", "umask"] {
        let row = r["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .unwrap();
        assert!(row["timed"].as_u64().unwrap() > 0, "{row}");
    }
    // Nothing left enabled: no instance of this run.
    none_left_by(pid);
    // Text: the table and its columns.
    let o = plumb()
        .args(["trace", "--", "/usr/bin/python3", "-c", COUNTED])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("% time") && t.contains("getppid"), "{t}");
    assert!(!accounted || t.contains("B of kernel memory"), "{t}");
    assert!(
        t.contains("are estimates") && t.contains("--time-every-call"),
        "the sampled times said: {t}"
    );
    // --time-every-call: every call timed, nothing estimated.
    let o = plumb()
        .args([
            "trace",
            "--time-every-call",
            "--json",
            "--",
            "/usr/bin/python3",
            "-c",
            COUNTED,
        ])
        .output()
        .unwrap();
    let r = json(&o);
    for row in r["syscalls"].as_array().unwrap() {
        if row["name"] != "exit_group" {
            assert_eq!(row["timed"], row["calls"], "{row}");
        }
    }
    assert!(
        t.lines()
            .any(|l| l.trim_start().starts_with("getppid") && l.contains("1,000")),
        "{t}"
    );
}

/// `strace -c -f`'s table: calls by syscall.
fn strace_counts(path: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 5 || f[0].parse::<f64>().is_err() || f.last() == Some(&"total") {
                return None;
            }
            Some((f.last()?.to_string(), f[3].parse().ok()?))
        })
        .collect()
}

#[test]
fn counts_agree_with_strace() {
    let _group = common::beside();
    if !needs_root("tracing") {
        return;
    }
    if Command::new("strace").arg("-V").output().is_err() {
        skip("skipped: strace is not installed (scripts/setup --test installs it)");
        return;
    }
    let script = "i=0; while [ $i -lt 100 ]; do cat /etc/hostname >/dev/null; ls / >/dev/null; i=$((i+1)); done";
    let tmp = tempfile::tempdir().unwrap();
    let st = tmp.path().join("strace.txt");
    let s = Command::new("strace")
        .args(["-c", "-f", "-o"])
        .arg(&st)
        .args(["sh", "-c", script])
        .output()
        .unwrap();
    assert!(s.status.success(), "{s:?}");
    let theirs = strace_counts(&st);
    assert!(theirs.len() > 20, "{theirs:?}");
    let o = plumb()
        .args(["trace", "--no-block", "--json", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let ours = json(&o);
    // strace leaves out the calls that never return; plumb counts them on entry.
    let mut total = (0u64, 0u64);
    for (name, &n) in &theirs {
        let m = calls(&ours["syscalls"], name);
        total.0 += n;
        total.1 += m;
        if n >= 50 {
            let off = (m as f64 - n as f64).abs() / n as f64;
            assert!(off <= 0.02, "{name}: strace {n}, plumb {m}");
        }
    }
    let off = (total.1 as f64 - total.0 as f64).abs() / total.0 as f64;
    assert!(
        off <= 0.02,
        "all calls: strace {}, plumb {}",
        total.0,
        total.1
    );
}

#[test]
fn a_pid_that_never_was_is_refused_and_one_that_exits_ends_the_window() {
    let _group = common::beside();
    let o = plumb()
        .args(["trace", "--pid", "3999999", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("3999999"), "{e}");
    let o = plumb().args(["trace"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pid"));
    if !needs_root("tracing") {
        return;
    }
    // ls starts 3 s on, after plumb's trace is in place: loading the tracer takes a few tenths
    // of a second alone and over a second beside the other tests of this binary (with 1 s, ls
    // once ran and ended before the trace began, and no process was seen).
    let mut sleeper = Command::new("sh")
        .args(["-c", "sleep 3; ls / >/dev/null"])
        .spawn()
        .unwrap();
    let t = Instant::now();
    let o = plumb()
        .args([
            "trace",
            "--json",
            "--duration",
            "30s",
            "--pid",
            &sleeper.id().to_string(),
        ])
        .output()
        .unwrap();
    let _ = sleeper.wait();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    let r = json(&o);
    assert_eq!(r["ended"], "processes ended");
    // The shell and the sleep it was waiting for (started before plumb) and ls (after).
    let names: Vec<&str> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"ls"), "{names:?}");
    assert!(r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["exited"] == true));
}

#[test]
fn ctrl_c_ends_the_window_with_what_was_gathered() {
    let _group = common::beside();
    if !needs_root("tracing") {
        return;
    }
    let mut target = Command::new("sh")
        .args(["-c", "while :; do sleep 0.05; done"])
        .spawn()
        .unwrap();
    let mut p = plumb()
        .args(["trace", "--json", "--pid", &target.id().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(p.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("Ctrl-C"), "{line}");
    let me = format!("plumb-{}", p.id());
    std::thread::sleep(Duration::from_millis(1500));
    assert!(instances().contains(&me), "{:?}", instances());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(p.id() as i32, libc::SIGINT) };
    let o = p.wait_with_output().unwrap();
    let _ = target.kill();
    let _ = target.wait();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let r = json(&o);
    assert_eq!(r["ended"], "interrupted");
    // About 30 sleeps a second, each a fork, an exec and a wait.
    assert!(calls(&r["syscalls"], "wait4") >= 10, "{}", r["syscalls"]);
    assert!(
        calls(&r["syscalls"], "clock_nanosleep") >= 10,
        "{}",
        r["syscalls"]
    );
    assert!(!instances().contains(&me), "{:?}", instances());
}

/// Alone: any plumb started beside it would remove the dead run's instance (and say so) first.
#[test]
fn after_kill_9_the_next_run_removes_what_the_dead_one_left_and_says_so() {
    let _group = common::alone();
    if !needs_root("tracing") {
        return;
    }
    let mut p = plumb()
        .args(["trace", "--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(p.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("tracing PID"), "{line}");
    let sleep_pid: i32 = line
        .split("PID ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    let dead = format!("plumb-{}", p.id());
    // SAFETY: signalling our own child and the command it started.
    unsafe { libc::kill(p.id() as i32, libc::SIGKILL) };
    let _ = p.wait();
    unsafe { libc::kill(sleep_pid, libc::SIGKILL) };
    assert!(
        instances().contains(&dead),
        "the killed run's instance is there: {:?}",
        instances()
    );
    let o = plumb()
        .args(["trace", "--json", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let r = json(&o);
    // Every plumb command first removes what a killed plumb left and says so on stderr; a
    // trace that still meets a dead instance says so in its notes.
    let said =
        r["notes"].as_array().unwrap().iter().any(|n| {
            n["code"] == "trace-removed-stale" && n["text"].as_str().unwrap().contains(&dead)
        }) || String::from_utf8_lossy(&o.stderr).contains(&format!(
            "removed what a plumb that was killed (PID {}) left: the trace instance",
            p.id()
        ));
    assert!(
        said,
        "{}
{}",
        r["notes"],
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(instances().is_empty(), "{:?}", instances());
}

#[test]
fn without_root_it_says_what_it_needs() {
    let _group = common::beside();
    if !needs_root("switching to an unprivileged user") {
        return;
    }
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_plumb"))
        .args(["trace", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("root") && e.contains("CAP_BPF"), "{e}");
}

/// A private PostgreSQL with one wal_sync_method, pgbench against it under `plumb trace
/// --pid postmaster`: (fdatasync calls, fsync calls, committed transactions).
/// A PostgreSQL client program (PLUMB_PG_BIN, else the first server build installed).
fn commits_and_syncs(method: &str) -> (u64, u64, u64, Value) {
    let tmp = tempfile::Builder::new()
        .prefix("plumb-trace")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = tmp.path().join("pg");
    let dir = dir.to_str().unwrap();
    let pg = common::Private::start(
        Path::new(dir),
        &[
            "--shared-buffers",
            "32MB",
            "--set",
            &format!("wal_sync_method={method}"),
        ],
    );
    let e = pg.started.clone();
    let pid = e["instance"]["pid"].as_u64().unwrap().to_string();
    let port = e["instance"]["port"].as_u64().unwrap().to_string();
    let sock = format!("{dir}/sock");
    let pgbench = pg_bin("pgbench");
    let conn = ["-h", &sock, "-p", &port, "-U", "plumb", "postgres"];
    let i = Command::new(&pgbench)
        .args(["-i", "-q", "-s", "1"])
        .args(conn)
        .output()
        .unwrap();
    assert!(i.status.success(), "{i:?}");
    let mut tr = plumb()
        .args(["trace", "--json", "--no-block", "--pid", &pid])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(tr.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let b = Command::new(&pgbench)
        .args(["-n", "-c", "2", "-t", "300"])
        .args(conn)
        .output()
        .unwrap();
    assert!(b.status.success(), "{b:?}");
    let out = String::from_utf8_lossy(&b.stdout);
    let commits: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(tr.id() as i32, libc::SIGINT) };
    let o = tr.wait_with_output().unwrap();
    let stop = pg.remove();
    assert_eq!(stop.status.code(), Some(0), "{stop:?}");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let r = json(&o);
    (
        calls(&r["syscalls"], "fdatasync"),
        calls(&r["syscalls"], "fsync"),
        commits,
        r,
    )
}

#[test]
fn a_commit_costs_an_fdatasync_under_fdatasync_and_none_under_open_datasync() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    if !needs_root("tracing") {
        return;
    }
    let (fdatasync, _, commits, r) = commits_and_syncs("fdatasync");
    assert_eq!(commits, 600);
    assert!(
        fdatasync >= commits,
        "fdatasync {fdatasync} < commits {commits}"
    );
    // The backends (children of the postmaster, started after plumb attached) did the work.
    assert!(
        r["processes"].as_array().unwrap().len() >= 4,
        "{}",
        r["processes"]
    );
    let (fdatasync, _, commits, r) = commits_and_syncs("open_datasync");
    assert_eq!(commits, 600);
    assert!(
        fdatasync * 20 <= commits,
        "open_datasync: {fdatasync} fdatasync calls for {commits} commits"
    );
    // The WAL writes carry the wait instead.
    assert!(
        calls(&r["syscalls"], "pwrite64") >= commits,
        "{}",
        r["syscalls"]
    );
}

#[test]
fn delta_traces_the_server_over_each_run() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    if !needs_root("tracing") {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("plumb-trace-delta")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = tmp.path().join("pg");
    let dir = dir.to_str().unwrap();
    let pg = common::Private::start(Path::new(dir), &["--set", "wal_sync_method=fdatasync"]);
    let o = plumb()
        .args([
            "engine",
            "psql",
            "--dir",
            dir,
            "--",
            "-q",
            "-c",
            "CREATE TABLE t (i int)",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let (o, pid) = output_and_pid(plumb().args([
        "delta",
        "--dir",
        dir,
        "--trace",
        "--json",
        "--repeat",
        "2",
        "--sql",
        "INSERT INTO t SELECT g FROM generate_series(1, 5000) g",
    ]));
    let stop = pg.remove();
    assert_eq!(stop.status.code(), Some(0), "{stop:?}");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let r = json(&o);
    let runs = r["modes"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        // One commit under fdatasync: the WAL is synced once, by the backend.
        let t = &run["trace"];
        assert!(calls(&t["syscalls"], "fdatasync") >= 1, "{}", t["syscalls"]);
        assert!(calls(&t["syscalls"], "pwrite64") >= 1, "{}", t["syscalls"]);
        assert!(run["values"]["syscall[fdatasync].calls"].as_f64().unwrap() >= 1.0);
        assert!(run["values"]["kernel.minor_faults"].as_f64().is_some());
    }
    // The figures are rows of the report, beside the engine's.
    let rows = r["rows"].as_array().unwrap();
    assert!(rows
        .iter()
        .any(|x| x["group"] == "syscall" && x["object"] == "fdatasync" && x["metric"] == "calls"));
    none_left_by(pid);
    // Without root: refused up front.
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_plumb"))
        .args(["delta", "--trace", "--sql", "SELECT 1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--trace needs root"));
}

/// The total of a counter over a recording, from its derived rate (Σ rate × Δt).
fn total_of(rec: &plumb_store::Recording, metric: &str) -> f64 {
    let cat = plumb_analyze::series::catalog(rec);
    let m = plumb_analyze::series::find(&cat, metric)
        .unwrap_or_else(|| panic!("{metric} not recorded"));
    plumb_analyze::series::total_over_time(rec, m)
}

/// Alone: it counts every block request's FLUSH and checks that no event was lost, which
/// another test's servers beside it would change.
#[test]
fn record_trace_keeps_the_servers_fdatasyncs_and_flushes_per_process() {
    let _group = common::alone();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    if !needs_root("tracing") {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("plumb-trace-record")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = tmp.path().join("pg");
    let dir = dir.to_str().unwrap();
    let pg = common::Private::start(Path::new(dir), &["--set", "wal_sync_method=fdatasync"]);
    let e = pg.started.clone();
    let pid = e["instance"]["pid"].as_u64().unwrap().to_string();
    let port = e["instance"]["port"].as_u64().unwrap().to_string();
    let url = e["url"].as_str().unwrap().to_string();
    let sock = format!("{dir}/sock");
    let conn = ["-h", &sock, "-p", &port, "-U", "plumb", "postgres"];
    let pgbench = pg_bin("pgbench");
    let i = Command::new(&pgbench)
        .args(["-i", "-q", "-s", "1"])
        .args(conn)
        .output()
        .unwrap();
    assert!(i.status.success(), "{i:?}");
    let file = tmp.path().join("r.plumb");
    // Three seconds: the backends live through several samples, so their titles are read.
    let o = plumb()
        .args(["record", "--trace", "--interval", "500ms", "--pid", &pid])
        .args(["--engine", &url, "--out", file.to_str().unwrap(), "--"])
        .arg(&pgbench)
        .args(["-n", "-c", "2", "-T", "3"])
        .args(conn)
        .output()
        .unwrap();
    let report = tmp.path().join("report");
    let rep = plumb()
        .args(["report", file.to_str().unwrap(), "--out"])
        .arg(&report)
        .output()
        .unwrap();
    let stop = pg.remove();
    assert_eq!(stop.status.code(), Some(0), "{stop:?}");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(rep.status.code(), Some(0), "{rep:?}");
    let rec = plumb_store::read(&file).unwrap();
    // Every commit syncs the WAL once (group commit may merge a few), by the backends: the
    // recording's fdatasync counts add up to the commits, and so do the engine's.
    let commits = total_of(&rec, "engine.db.commits_per_s");
    let syncs = total_of(&rec, "trace.all.fdatasyncs_per_s");
    assert!(commits >= 600.0, "commits {commits}");
    assert!(
        syncs >= 0.8 * 600.0 && syncs <= commits * 1.2 + 50.0,
        "fdatasyncs {syncs} for {commits} commits"
    );
    // Per process, named by its title; pgbench (the command) is traced too.
    let objs: Vec<String> = rec
        .metrics
        .iter()
        .filter_map(|m| m.name.strip_suffix(".fdatasyncs"))
        .filter_map(|o| o.strip_prefix("trace."))
        .filter(|o| o.parse::<u32>().is_ok())
        .map(str::to_string)
        .collect();
    let backends: Vec<&String> = objs
        .iter()
        .filter(|o| {
            rec.object_label(&format!("trace.{o}"))
                .is_some_and(|l| l.contains("postgres: plumb postgres"))
        })
        .collect();
    let labels: Vec<_> = objs
        .iter()
        .map(|o| (o, rec.object_label(&format!("trace.{o}"))))
        .collect();
    // pgbench's two clients (and the connection it reads the scale with, when it lived long
    // enough for its title to be read; gone first, it is named "postgres" from the kernel's
    // record); plumb's own connection to the engine is left out, so never more than three.
    assert!((2..=3).contains(&backends.len()), "{labels:?}");
    assert!(
        labels.iter().all(|(_, l)| l.is_some()),
        "every process named: {labels:?}"
    );
    let per_backend: f64 = backends
        .iter()
        .map(|o| total_of(&rec, &format!("trace.{o}.fdatasyncs_per_s")))
        .sum();
    assert!(
        per_backend >= 0.8 * syncs,
        "{per_backend} of {syncs} by the backends"
    );
    // The block requests: a durable WAL write is FLUSH (or FUA) on this disk.
    let flushes =
        total_of(&rec, "trace.all.flushes_per_s") + total_of(&rec, "trace.all.fua_writes_per_s");
    assert!(
        flushes >= 0.5 * syncs,
        "{flushes} FLUSH/FUA for {syncs} fdatasyncs"
    );
    let lost = rec.column("trace.all.lost").unwrap();
    assert_eq!(lost.last(), Some(&0), "nothing lost");
    // The report charts them.
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("Kernel: durable writes by process"));
    assert!(html.contains("fsync+fdatasync/s") && html.contains("FLUSH+FUA/s"));
    assert!(instances().is_empty(), "{:?}", instances());
    // Without a process to trace, or without root: refused, nothing written.
    let none = tmp.path().join("none.plumb");
    let o = plumb()
        .args(["record", "--trace", "--duration", "1s", "--out"])
        .arg(&none)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--trace: say what to trace"));
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_plumb"))
        .args(["record", "--trace", "--duration", "1s", "--out"])
        .arg(&none)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--trace needs root"));
    assert!(!none.exists());
}
