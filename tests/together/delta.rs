//! `plumb engine` and `plumb delta` end to end against a real PostgreSQL that plumb starts
//! itself: cold against warm, a sort that spills, a server killed mid-run, Ctrl-C, bad input.

use serde_json::Value;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::common;
use crate::common::*;

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The median of a figure in one mode's column.
fn median(
    report: &Value,
    group: &str,
    object: Option<&str>,
    metric: &str,
    mode: usize,
) -> Option<f64> {
    report["rows"].as_array()?.iter().find_map(|r| {
        let ok = r["group"] == group
            && r["metric"] == metric
            && object.is_none_or(|o| r["object"].as_str().is_some_and(|x| x.contains(o)));
        if ok {
            r["stats"][mode]["median"].as_f64()
        } else {
            None
        }
    })
}

fn delta_json(dir: &str, extra: &[&str]) -> Value {
    let mut args = vec!["delta", "--dir", dir, "--json"];
    args.extend_from_slice(extra);
    let o = run(&args);
    let (out, err) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "plumb {args:?}\nstdout: {out}\nstderr: {err}"
    );
    serde_json::from_str(&out).expect("delta --json is JSON")
}

#[test]
fn delta_against_a_private_postgres() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("plumb-delta")
        .tempdir_in("/tmp")
        .unwrap();
    let d = tmp.path().join("pg");
    let dir = d.to_str().unwrap();

    // Start, and a second start finds the running one.
    let o = run(&[
        "engine",
        "start",
        "--dir",
        dir,
        "--shared-buffers",
        "16MB",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let first: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pid = first["instance"]["pid"].as_u64().unwrap();
    let o = run(&["engine", "start", "--dir", dir]);
    let (out, _) = text(&o);
    assert!(
        out.contains("already running") && out.contains(&format!("PID {pid}")),
        "{out}"
    );
    assert_eq!(
        run(&["engine", "status", "--dir", dir]).status.code(),
        Some(0)
    );

    // A table three times shared_buffers.
    let o = run(&[
        "engine",
        "psql",
        "--dir",
        dir,
        "--",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        "CREATE TABLE t AS SELECT g, repeat('x', 80) AS pad FROM generate_series(1, 400000) g",
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));

    // Cold against warm: the cold run reads the table from the disk, the warm one from caches.
    if is_root() {
        // A neighbour's file, cached: the private instance's cold runs evict the instance's own
        // files and leave it cached (they used to drop the whole host's page cache).
        let neighbour = tmp.path().join("neighbour-cached.dat");
        std::fs::write(&neighbour, vec![3u8; 4 << 20]).unwrap();
        let _ = std::fs::read(&neighbour).unwrap();
        let resident = |p: &std::path::Path| -> u64 {
            let o = std::process::Command::new("fincore")
                .args(["--bytes", "--noheadings", "--output", "RES"])
                .arg(p)
                .output()
                .expect("fincore (util-linux)");
            String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
        };
        assert_eq!(resident(&neighbour), 4 << 20);
        let r = delta_json(
            dir,
            &["--sql", "SELECT count(*) FROM t", "--both", "--repeat", "2"],
        );
        assert_eq!(
            resident(&neighbour),
            4 << 20,
            "a cold run on the private instance evicted a neighbour's file"
        );
        assert_eq!(r["modes"][0]["mode"], "cold");
        assert_eq!(r["modes"][1]["mode"], "warm");
        // Every run was watched for other work on the host.
        for m in r["modes"].as_array().unwrap() {
            for run in m["runs"].as_array().unwrap() {
                assert!(run["interference"]["verdict"].is_string(), "{run:#}");
            }
        }
        // The verdict first: the four runs graded, each mode's elapsed time with its range,
        // and, two runs a side, too few for the rule to tell the modes apart (not "same").
        let v = &r["verdict"];
        assert!(
            ["clean", "noted", "disturbed"].contains(&v["trust"].as_str().unwrap()),
            "{v:#}"
        );
        assert_eq!(v["windows"].as_array().unwrap().len(), 4, "{v:#}");
        assert_eq!(v["windows"][0]["phase"], "cold run 1");
        for mode in ["cold", "warm"] {
            let e = v["headline"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["code"] == "elapsed" && h["of"] == mode)
                .unwrap_or_else(|| panic!("{mode}'s elapsed time: {v:#}"));
            assert!(e["low"].as_f64().unwrap() <= e["value"].as_f64().unwrap());
        }
        assert!(v["compared"].as_u64().unwrap() > 0, "{v:#}");
        assert_eq!(v["too_few"], v["compared"], "{v:#}");
        assert_eq!(v["changes"].as_array().unwrap().len(), 0, "{v:#}");
        common::assert_valid("verdict.schema.json", &r);
        let table = 40.0 * 1048576.0;
        let cold_disk = median(&r, "disk", None, "read_bytes", 0).expect("cold disk reads");
        let warm_disk = median(&r, "disk", None, "read_bytes", 1).unwrap_or(0.0);
        assert!(cold_disk > table * 0.8, "cold disk read {cold_disk}");
        // The disk figure is the device's: another process reading it during a warm run (the
        // tests beside this one start PostgreSQL, whose binaries the cold run's cache drop
        // evicted) shows there, and the run says it was disturbed. Only clean warm runs count.
        let warm_clean = r["modes"][1]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|run| run["interference"]["verdict"] == "clean");
        if warm_clean {
            assert!(
                warm_disk < cold_disk * 0.1,
                "warm disk read {warm_disk} vs cold {cold_disk}"
            );
        } else {
            eprintln!("warm runs disturbed by other work: disk read {warm_disk} not compared");
        }
        let cold_be = median(&r, "backend", None, "storage_read_bytes", 0).unwrap_or(0.0)
            + median(&r, "server", None, "storage_read_bytes", 0).unwrap_or(0.0);
        assert!(
            cold_be > table * 0.8,
            "the server's processes read {cold_be} bytes from storage when cold"
        );
        assert!(median(&r, "server", None, "storage_read_bytes", 1).unwrap_or(0.0) < cold_be * 0.1);
        // The engine counted block reads in both: the warm ones came from the page cache.
        let cold_blks =
            median(&r, "table", Some("public.t"), "heap_blks_read", 0).expect("per-table reads");
        assert!(cold_blks * 8192.0 > table * 0.8, "{cold_blks}");
        assert!(median(&r, "db", None, "blk_read_time_ms", 0).unwrap() > 0.0);
        let notes = r["notes"].to_string();
        assert!(notes.contains("page cache served the rest"), "{notes}");
        let prep = r["modes"][0]["preparation"].to_string();
        assert!(
            prep.contains("evicted the private instance's own files (")
                && !prep.contains("drop_caches"),
            "{prep}"
        );

        // The same server by URL is one plumb did not start: --cold leaves the host's page
        // cache alone (a file of a neighbour's stays cached) unless --drop-host-cache is given.
        let st: Value =
            serde_json::from_slice(&run(&["engine", "status", "--dir", dir, "--json"]).stdout)
                .unwrap();
        let url = st["url"].as_str().expect("status has the URL").to_string();
        let probe = tmp.path().join("neighbour.dat");
        std::fs::write(&probe, vec![7u8; 8 << 20]).unwrap();
        let cached = || -> u64 {
            let _ = std::fs::read(&probe).unwrap();
            let o = std::process::Command::new("fincore")
                .args(["--bytes", "--noheadings", "--output", "RES"])
                .arg(&probe)
                .output()
                .expect("fincore (util-linux)");
            String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
        };
        let resident_after = |extra: &[&str]| -> (Value, u64) {
            assert_eq!(cached(), 8 << 20, "the probe is cached before the run");
            let mut args = vec![
                "delta", "--engine", &url, "--json", "--sql", "SELECT 1", "--cold",
            ];
            args.extend_from_slice(extra);
            let o = run(&args);
            assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
            let res = std::process::Command::new("fincore")
                .args(["--bytes", "--noheadings", "--output", "RES"])
                .arg(&probe)
                .output()
                .unwrap();
            let res = String::from_utf8_lossy(&res.stdout).trim().parse().unwrap();
            (serde_json::from_slice(&o.stdout).unwrap(), res)
        };
        let (r, res) = resident_after(&[]);
        let prep = r["modes"][0]["preparation"].to_string();
        assert!(
            prep.contains("NOT dropped") && prep.contains("--drop-host-cache"),
            "{prep}"
        );
        assert_eq!(res, 8 << 20, "the neighbour's file stayed cached");
        let (r, res) = resident_after(&["--drop-host-cache"]);
        assert!(r["modes"][0]["preparation"]
            .to_string()
            .contains("drop_caches"));
        assert!(
            res < 8 << 20,
            "dropped on request: {res} bytes still cached"
        );
        let o = run(&[
            "delta",
            "--engine",
            &url,
            "--sql",
            "SELECT 1",
            "--drop-host-cache",
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(text(&o).1.contains("--cold"), "{:?}", text(&o));
    } else {
        skip("cold run skipped: dropping the page cache needs root");
    }

    // A sort larger than work_mem spills to temporary files.
    let r = delta_json(
        dir,
        &[
            "--sql",
            "SET work_mem = '1MB'; SELECT g FROM t ORDER BY md5(g::text) OFFSET 400000",
        ],
    );
    let temp = median(&r, "db", None, "temp_bytes", 0).expect("temp_bytes");
    assert!(temp > 4.0 * 1048576.0, "temp bytes {temp}");
    assert!(r["notes"].to_string().contains("spilled"));
    // The same sort in enough memory does not.
    let r = delta_json(
        dir,
        &[
            "--sql",
            "SET work_mem = '256MB'; SELECT g FROM t ORDER BY md5(g::text) OFFSET 400000",
        ],
    );
    assert_eq!(
        median(&r, "db", None, "temp_bytes", 0),
        None,
        "no spill row when nothing spilled"
    );

    // plumb compare reads delta results: the sort in memory against the one that spills,
    // eight repetitions a side (fewer cannot clear the test once every figure is tested
    // together), every figure kept (--all: the temporary bytes are 0, not missing, in memory).
    let sort = |mem: &str| {
        let r = delta_json(
            dir,
            &[
                "--sql",
                &format!(
                    "SET work_mem = '{mem}'; SELECT g FROM t ORDER BY md5(g::text) OFFSET 400000"
                ),
                "--warm",
                "--repeat",
                "8",
                "--all",
            ],
        );
        let f = tmp.path().join(format!("sort-{mem}.json"));
        std::fs::write(&f, r.to_string()).unwrap();
        f.to_str().unwrap().to_string()
    };
    let (in_memory, spill) = (sort("256MB"), sort("1MB"));
    let o = run(&[
        "compare",
        "--json",
        "--fail-on",
        "worse",
        &in_memory,
        "--",
        &spill,
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "the spill is worse: {out}\n{err}");
    let c: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(c["what"], "plumb delta");
    assert!(
        c["differed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["what"] == "workload"),
        "the two statements are named as what differed: {c}"
    );
    let temp = c["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "warm: db temp_bytes (bytes)")
        .unwrap_or_else(|| panic!("the temporary bytes compared: {c}"));
    assert_eq!(temp["verdict"], "worse", "{temp}");
    // In words: from nothing to something.
    let o = run(&["compare", &in_memory, "--", &spill]);
    let (out, _) = text(&o);
    let line = out
        .lines()
        .find(|l| l.starts_with("  ") && l.contains("warm: db temp_bytes"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("up from 0") && line.contains("worse"),
        "{line}"
    );

    // The text report: side by side, grouped, with the notes.
    let o = run(&[
        "delta",
        "--dir",
        dir,
        "--sql",
        "SELECT count(*) FROM t",
        "--warm",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        out.contains("database (pg_stat_database)")
            && out.contains("warm")
            && out.contains("tup_returned"),
        "{out}"
    );
    // It opens on its verdict: the run's trust, then what the workload cost.
    assert!(out.starts_with("Verdict\n  trust"), "{out}");
    let figures = out
        .lines()
        .find(|l| l.starts_with("  figures"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        figures.contains("warm: ") && figures.contains(" elapsed"),
        "{figures}"
    );

    // CSV as documented: a row per figure and mode, the mode a value; DuckDB types it.
    let o = run(&[
        "delta",
        "--dir",
        dir,
        "--sql",
        "SELECT count(*) FROM t",
        "--warm",
        "--repeat",
        "2",
        "--format",
        "csv",
    ]);
    let (csv, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        csv.starts_with("group,object,metric,unit,mode,median,min,max,runs\n"),
        "{csv}"
    );
    assert!(csv.lines().skip(1).all(|l| l.contains(",warm,")), "{csv}");
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-test/bin/python");
    if venv.exists() {
        let f = tmp.path().join("delta.csv");
        std::fs::write(&f, &csv).unwrap();
        let o = std::process::Command::new(&venv)
            .args([
                "-c",
                "import sys, duckdb\n\
                 r = duckdb.connect().execute(f\"SELECT typeof(median), typeof(runs), count(*) FROM read_csv('{sys.argv[1]}') GROUP BY ALL\").fetchall()\n\
                 assert len(r) == 1 and r[0][0] == 'DOUBLE' and r[0][1] == 'BIGINT', r\n\
                 print(r[0][2])",
            ])
            .arg(&f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let n: usize = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        assert_eq!(n, csv.lines().count() - 1);
    } else {
        skip(
            "skipped loading delta's CSV in DuckDB: no .venv-test (scripts/setup --test makes it)",
        );
    }

    // A command as the workload gets the connection in its environment.
    let o = run(&[
        "delta",
        "--dir",
        dir,
        "--",
        "psql",
        "-qAt",
        "-c",
        "SELECT count(*) FROM t",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(out.contains("400000"), "psql printed the count: {out}");
    assert!(out.contains("command: psql"), "{out}");

    // A statement that fails: its error, exit 2.
    let o = run(&[
        "delta",
        "--dir",
        dir,
        "--sql",
        "SELECT * FROM no_such_table",
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("no_such_table"), "{err}");

    // The server goes away mid-run: a clear error, exit 2, nothing left running.
    let child = plumb()
        .args(["delta", "--dir", dir, "--sql", "SELECT pg_sleep(30)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let st: Value =
        serde_json::from_slice(&run(&["engine", "status", "--dir", dir, "--json"]).stdout).unwrap();
    let pm = st["instance"]["pid"].as_u64().unwrap() as i32;
    // SAFETY: killing the postmaster plumb started for this test.
    unsafe { libc::kill(pm, libc::SIGKILL) };
    let o = child.wait_with_output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("went away") || err.contains("connection"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        processes_in(&d).is_empty(),
        "left behind: {:?}",
        processes_in(&d)
    );
    assert_eq!(
        run(&["engine", "status", "--dir", dir]).status.code(),
        Some(1)
    );

    // Start again (the data survives), then stop --remove deletes only what plumb made.
    let o = run(&["engine", "start", "--dir", dir]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let o = run(&["engine", "stop", "--dir", dir, "--remove"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(!d.exists());
    assert!(processes_in(&d).is_empty());
}

#[test]
fn delta_starts_and_stops_the_private_instance_and_ctrl_c_cleans_up() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("plumb-delta-own")
        .tempdir_in("/tmp")
        .unwrap();
    let d = tmp.path().join("pg");
    let dir = d.to_str().unwrap();
    // Not running before: delta starts it for the run and stops it after.
    let o = run(&[
        "delta",
        "--dir",
        dir,
        "--sql",
        "SELECT 1",
        "--set",
        "shared_buffers=16MB",
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(
        run(&["engine", "status", "--dir", dir]).status.code(),
        Some(1)
    );
    assert!(processes_in(&d).is_empty());

    // Ctrl-C in the middle of a statement: cancelled, exit 130, the instance it started stopped.
    let child = plumb()
        .args(["delta", "--dir", dir, "--sql", "SELECT pg_sleep(30)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the statement to be running (its backend's title says SELECT).
    let t0 = std::time::Instant::now();
    while processes_in(&d).iter().all(|p| !p.contains("SELECT"))
        && t0.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        processes_in(&d).iter().any(|p| p.contains("SELECT")),
        "the statement never ran"
    );
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{:?}", text(&o));
    assert!(
        t0.elapsed() < Duration::from_secs(25),
        "the statement was cancelled, not waited out"
    );
    assert!(
        processes_in(&d).is_empty(),
        "left behind: {:?}",
        processes_in(&d)
    );
}

#[test]
fn bad_targets_are_named_and_exit_2() {
    let _group = common::beside();
    let o = run(&["delta", "--engine", "oracle://x@y/z", "--sql", "SELECT 1"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("oracle://x@y/z") && err.contains("not a database URL"),
        "{err}"
    );

    // Nothing listens there: the URL is named, the password is not.
    let o = run(&[
        "delta",
        "--engine",
        "postgres://app:s3cret@127.0.0.1:1/db",
        "--sql",
        "SELECT 1",
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("postgres://app:***@127.0.0.1:1/db"), "{err}");
    assert!(!err.contains("s3cret"), "the password was printed: {err}");
    // And says what to check.
    assert!(
        err.contains(
            "is the server running, on that host and port? PostgreSQL's default port is 5432"
        ),
        "{err}"
    );

    // A password file others can read is refused.
    let tmp = tempfile::tempdir().unwrap();
    let pw = tmp.path().join("pw");
    std::fs::write(&pw, "s3cret\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run(&[
        "delta",
        "--engine",
        "postgres://app@127.0.0.1:1/db",
        "--password-file",
        pw.to_str().unwrap(),
        "--sql",
        "SELECT 1",
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("readable by others"), "{err}");

    // No workload, two workloads, an empty statement, a missing file.
    assert_eq!(run(&["delta"]).status.code(), Some(2));
    assert_eq!(
        run(&["delta", "--sql", "SELECT 1", "--file", "x.sql"])
            .status
            .code(),
        Some(2)
    );
    let o = run(&["delta", "--sql", "  "]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["delta", "--file", "/nonexistent/q.sql"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("/nonexistent/q.sql"), "{err}");
    assert_eq!(
        run(&["delta", "--sql", "SELECT 1", "--cold", "--warm"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run(&["delta", "--sql", "SELECT 1", "--repeat", "0"])
            .status
            .code(),
        Some(2)
    );

    // stop --remove refuses a directory plumb did not make.
    let foreign = tmp.path().join("mine");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("precious.txt"), "keep").unwrap();
    let o = run(&[
        "engine",
        "stop",
        "--dir",
        foreign.to_str().unwrap(),
        "--remove",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(foreign.join("precious.txt").exists());
}
