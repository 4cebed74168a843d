//! Every PostgreSQL version plumb claims, run live: Debian's 15, and 16, 17 and 18 from
//! `scripts/setup --test`. For each version (the test names carry it: `pg17::delta`), plumb's
//! private instance on that build, its snapshot holding the views that version has, and
//! `plumb delta`, `plumb record`, `plumb mem`, `plumb lab` and `plumb load` on it, each saying
//! which version brings a view the server lacks.
//!
//! The cases run beside the other tests (common::beside): each on an instance of its own, and
//! what they check does not depend on the host being quiet.

use crate::common;
use crate::common::{is_root, plumb, skip};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A private instance on PostgreSQL `major`'s build (stopped and removed when dropped, then its
/// directory); None (after the skip's reason) when this host cannot run it.
struct Instance {
    bin: PathBuf,
    pg: common::Private,
    _tmp: tempfile::TempDir,
}

impl Instance {
    fn start(major: u32) -> Option<Instance> {
        if !is_root() {
            skip("skipped: the private instance is tested as root (the server runs as postgres)");
            return None;
        }
        let bin = common::pg_build(major)?;
        eprintln!("PostgreSQL {major}: {}", bin.display());
        let tmp = common::server_tempdir(&format!("plumb-pg{major}-"));
        let pg = common::Private::start(
            &tmp.path().join("pg"),
            &["--bin-dir", bin.to_str().expect("a UTF-8 build directory")],
        );
        Some(Instance { bin, pg, _tmp: tmp })
    }

    fn psql(&self, sql: &str) -> String {
        self.pg.psql(sql)
    }
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The instance runs the build asked for, keeps it across a stop and start, and its snapshot
/// has the views its version has.
fn snapshot(major: u32) {
    let Some(pg) = Instance::start(major) else {
        return;
    };
    let num: u32 = pg.psql("SHOW server_version_num").parse().unwrap();
    assert_eq!(
        num / 10000,
        major,
        "the server that runs is the one asked for"
    );
    // Stopped and started again without naming the build: the one it was made with.
    let st = |args: &[&str]| {
        let o = plumb()
            .args(args)
            .arg("--dir")
            .arg(&pg.pg.dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        text(&o)
    };
    st(&["engine", "stop"]);
    let out = st(&["engine", "start"]);
    assert!(
        out.contains(&format!("PostgreSQL {major}.")) && out.contains(&*pg.bin.to_string_lossy()),
        "{out}"
    );
    let url = serde_json::from_str::<Value>(&st(&["engine", "status", "--json"])).unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    let mut obs = plumb_engine::observer(&plumb_engine::Target::new(&url)).unwrap();
    let s = obs.snapshot().unwrap();
    assert!(s.version.starts_with(&format!("{major}.")), "{}", s.version);
    let io = s.objects.get("io");
    let says_16 = s
        .unavailable
        .iter()
        .any(|u| u.contains("pg_stat_io: arrives in PostgreSQL 16"));
    let says_17 = s
        .unavailable
        .iter()
        .any(|u| u.contains("pg_stat_checkpointer: arrives in PostgreSQL 17"));
    if major >= 16 {
        let io = io.unwrap_or_else(|| panic!("PostgreSQL {major}: no pg_stat_io rows"));
        assert!(
            io.keys().any(|k| k.starts_with("client backend/relation/")),
            "PostgreSQL {major}: {:?}",
            io.keys().collect::<Vec<_>>()
        );
        assert!(!says_16);
    } else {
        assert!(io.is_none() && says_16, "{:?}", s.unavailable);
    }
    assert_eq!(says_17, major < 17, "{:?}", s.unavailable);
    for k in [
        "checkpointer.checkpoints_timed",
        "checkpointer.buffers_written",
        "bgwriter.buffers_alloc",
        "db.xact_commit",
        "db.blks_read",
        "wal.bytes",
        "wal.syncs",
    ] {
        assert!(s.counters.contains_key(k), "PostgreSQL {major}: no {k}");
    }
    if major >= 18 {
        assert!(s.counters.contains_key("checkpointer.checkpoints_done"));
    }
}

/// `plumb delta --both` around inserts and a CHECKPOINT: pg_stat_io's client backend rows
/// (16+), the checkpoint from pg_stat_checkpointer (17+) or pg_stat_bgwriter, and on older
/// servers which version brings each view.
fn delta(major: u32) {
    let Some(pg) = Instance::start(major) else {
        return;
    };
    pg.psql("CREATE TABLE t AS SELECT g, md5(g::text) AS m FROM generate_series(1, 100000) g");
    let o = plumb()
        .args(["delta", "--both", "--dir"])
        .arg(&pg.pg.dir)
        .args([
            "--sql",
            "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 50000) g; CHECKPOINT",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The verdict first, then the header naming the server.
    assert!(out.starts_with("Verdict\n  trust"), "{out}");
    assert!(
        out.contains(&format!("\nplumb delta · PostgreSQL {major}.")),
        "{out}"
    );
    // The group, the figure, and the lines up to the next group.
    let group = |title: &str| -> String {
        let Some(at) = out.find(title) else {
            panic!("PostgreSQL {major}: no {title:?} in\n{out}")
        };
        out[at..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if major >= 16 {
        let io = group("I/O by backend type, object and context (pg_stat_io)");
        let client = io
            .split("\n  client backend/relation/normal\n")
            .nth(1)
            .unwrap_or_else(|| panic!("PostgreSQL {major}: no client backend rows in\n{io}"));
        assert!(client.contains("    extends "), "{io}");
        assert!(io.contains("checkpointer/relation/normal"), "{io}");
        assert!(!out.contains("pg_stat_io: arrives"), "{out}");
    } else {
        assert!(
            out.contains("pg_stat_io: arrives in PostgreSQL 16"),
            "{out}"
        );
    }
    let (title, says) = if major >= 17 {
        ("checkpoints (pg_stat_checkpointer)", false)
    } else {
        ("checkpoints (pg_stat_bgwriter)", true)
    };
    let ck = group(title);
    assert!(
        ck.contains("checkpoints_requested") && ck.contains("buffers_written"),
        "{ck}"
    );
    assert_eq!(
        out.contains("pg_stat_checkpointer: arrives in PostgreSQL 17"),
        says,
        "{out}"
    );
    let wal = if major >= 18 {
        group("WAL (pg_stat_wal; writes, syncs and their times from pg_stat_io's wal rows")
    } else {
        group("WAL (pg_stat_wal)")
    };
    assert!(wal.contains("  syncs "), "{wal}");
}

/// The largest value of a recorded metric, through `plumb export --json`.
fn peak(rec: &Path, metric: &str) -> Option<f64> {
    let o = plumb()
        .args(["--json", "export"])
        .arg(rec)
        .args(["--metric", metric])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["values"][metric].as_f64())
        .reduce(f64::max)
}

/// `plumb record` of the server while rows are inserted: commits on every version, the
/// client backends' pg_stat_io figures from 16, WAL syncs on every version (18: from
/// pg_stat_io).
fn record(major: u32) {
    let Some(pg) = Instance::start(major) else {
        return;
    };
    pg.psql("CREATE TABLE r (g int, m text)");
    let rec = pg._tmp.path().join("r.plumb");
    let mut child = plumb()
        .args([
            "record",
            "--interval",
            "500ms",
            "--duration",
            "4s",
            "--engine",
        ])
        .arg(pg.pg.url())
        .arg("--out")
        .arg(&rec)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(3) {
        pg.psql("INSERT INTO r SELECT g, md5(g::text) FROM generate_series(1, 20000) g");
    }
    assert!(child.wait().unwrap().success());
    let commits = peak(&rec, "engine.db.commits_per_s").unwrap_or(0.0);
    assert!(
        commits > 1.0,
        "PostgreSQL {major}: commits per second {commits}"
    );
    let syncs = peak(&rec, "engine.wal.syncs_per_s").unwrap_or(0.0);
    assert!(
        syncs > 0.0,
        "PostgreSQL {major}: WAL syncs per second {syncs}"
    );
    let extended = peak(&rec, "engine.io_client.extend_bytes_per_s");
    if major >= 16 {
        let e = extended.unwrap_or(0.0);
        assert!(
            e > 100_000.0,
            "PostgreSQL {major}: the client backends' extends, bytes per second: {e}"
        );
    } else {
        assert_eq!(extended, None, "PostgreSQL {major} has no pg_stat_io");
    }
}

/// `plumb mem` finds the server as a PostgreSQL and reads its shared_buffers on every build.
fn mem(major: u32) {
    let Some(pg) = Instance::start(major) else {
        return;
    };
    let pid = std::fs::read_to_string(pg.pg.dir.join("data/postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_string();
    let o = plumb()
        .args(["mem", "--pid", &pid, "--interval", "200ms", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let e = j["engines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["main_pid"].as_u64().map(|p| p.to_string()) == Some(pid.clone()))
        .unwrap_or_else(|| panic!("PostgreSQL {major}: not among {:#}", j["engines"]));
    assert_eq!(e["engine"], "postgres");
    assert_eq!(e["settings"]["shared_buffers_bytes"], 128 << 20, "{e:#}");
}

/// `plumb lab --quick --bin-dir` on this build: the report names the version, pgbench's
/// server I/O has pg_stat_io's client backend rows (16+), the loops count WAL syncs (18: from
/// pg_stat_io), and the lab leaves nothing behind.
fn lab(major: u32) {
    if !is_root() {
        return skip("skipped: the lab on every version runs as root");
    }
    let Some(bin) = common::pg_build(major) else {
        return;
    };
    let work = common::server_tempdir(&format!("plumb-lab{major}-"));
    let out = work.path().join("out");
    // pgbench for 3 s: thousands of transactions, enough for pg_stat_io's rows. The storage
    // probes do not depend on the server's version: left out (`--skip storage`), and the
    // report says so.
    let o = plumb()
        .args([
            "lab",
            "--quick",
            "--duration",
            "3s",
            "--skip",
            "storage",
            "--bin-dir",
        ])
        .arg(&bin)
        .arg("--dir")
        .arg(work.path())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let left: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != "out")
        .collect();
    assert!(left.is_empty(), "the lab left {left:?}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert!(
        r["engine_version"]
            .as_str()
            .unwrap()
            .starts_with(&format!("PostgreSQL {major}.")),
        "{}",
        r["engine_version"]
    );
    assert!(r["durability"].is_null() && r["sweep"].is_null(), "{r:#}");
    let skipped = r["skipped"].to_string();
    assert!(
        skipped.contains("durability: not run (--skip storage)")
            && skipped.contains("queue-depth sweep: not run (--skip storage)"),
        "{skipped}"
    );
    let sio = &r["pgbench"]["server_io"];
    assert_eq!(sio["pg_major"], major);
    let client = sio["io"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["backend_type"] == "client backend" && row["object"] == "relation")
        .cloned();
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    if major >= 16 {
        let c = client.unwrap_or_else(|| panic!("no client backend relation row: {sio:#}"));
        assert!(c["hits"].as_u64().unwrap() > 1000, "{c:#}");
        assert!(!summary.contains("pg_stat_io arrives"), "{summary}");
    } else {
        assert!(client.is_none());
        assert!(
            summary.contains("pg_stat_io arrives in PostgreSQL 16"),
            "{summary}"
        );
    }
    let single = r["loops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["scenario"] == "single" && l["wal_sync_method"] == "fdatasync")
        .cloned()
        .unwrap_or_else(|| panic!("no single-row fdatasync loop: {:#}", r["loops"]));
    assert!(
        single["wal_syncs"].as_f64().unwrap_or(0.0) >= 100.0,
        "PostgreSQL {major}: a WAL sync per commit: {single:#}"
    );
}

/// `plumb load --bin-dir` on this build: the order-entry schema loads, its PL/pgSQL procedures
/// run, TPC-C's conditions hold after the run, NOPM counts new orders, and the private instance
/// it started is gone after.
fn load(major: u32) {
    if !is_root() {
        return skip("skipped: the load on every version runs as root");
    }
    let Some(bin) = common::pg_build(major) else {
        return;
    };
    let work = common::server_tempdir(&format!("plumb-io{major}-"));
    let o = plumb()
        .args(["--json", "load", "--bin-dir"])
        .arg(&bin)
        .arg("--dir")
        .arg(work.path().join("pg"))
        .args([
            "--clients",
            "2",
            "--rampup",
            "1s",
            "--duration",
            "4s",
            "--check",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        r["version"]
            .as_str()
            .unwrap_or("")
            .starts_with(&format!("{major}.")),
        "{}",
        r["version"]
    );
    let checks = r["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 4, "{r:#}");
    assert!(checks.iter().all(|c| c["violations"] == 0), "{checks:?}");
    assert!(r["nopm"].as_f64().unwrap_or(0.0) > 0.0, "{r:#}");
    for t in r["types"].as_array().unwrap() {
        assert!(
            t["committed"].as_u64().unwrap() > 0,
            "PostgreSQL {major}: {t}"
        );
    }
    assert!(
        !work.path().join("pg").exists(),
        "the private instance it made is still there"
    );
}

/// Each case, once per version; the test's name says which version. Each case runs on an
/// instance of its own, beside the others (six at a time): the labs among them judge their
/// windows disturbed, and what they check (pg_stat_io's rows, a WAL sync per commit, the parts
/// left out) does not depend on it.
macro_rules! on_version {
    ($m:ident, $v:expr, [$($case:ident),*]) => {
        mod $m {
            use crate::common;
            $(
                #[test]
                fn $case() {
                    let _group = common::beside();
                    super::$case($v);
                }
            )*
        }
    };
}

// 15's lab is tests/together/lab.rs's (the quick lab end to end, and more).
on_version!(pg15, 15, [snapshot, delta, record, mem]);
on_version!(pg16, 16, [snapshot, delta, record, mem, lab, load]);
on_version!(pg17, 17, [snapshot, delta, record, mem, lab, load]);
on_version!(pg18, 18, [snapshot, delta, record, mem, lab, load]);
