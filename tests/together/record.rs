//! `plumb record` / `report` / `export` / `plot` / `mark` end to end: real recordings, kill -9,
//! damaged files, and the report rendered in headless Chromium when it is installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;
use crate::common::{no_postgres, pg_bin, plumb, run, skip, stderr};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Record `secs` seconds at 250 ms while a command writes to disk.
fn make_recording(dir: &Path) -> PathBuf {
    let f = dir.join("r.plumb");
    let data = dir.join("junk.dat");
    let o = run(&[
        "record",
        "--interval",
        "250ms",
        "--out",
        s(&f),
        "--name",
        "test run",
        "--",
        "sh",
        "-c",
        &format!(
            "sleep 0.6; dd if=/dev/urandom of={} bs=1M count=32 conv=fsync 2>/dev/null; sleep 0.6",
            data.display()
        ),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("samples in"), "{}", stderr(&o));
    f
}

#[test]
fn record_export_and_marks() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = make_recording(d.path());
    let o = run(&["mark", s(&f), "after the fact", "--detail", "a note"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["export", s(&f)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = String::from_utf8(o.stdout).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&head[..3], &["t_s", "unix_ms", "time"]);
    for m in [
        "cpu.all.user_pct",
        "mem.available_bytes",
        "sched.runnable_count",
    ] {
        assert!(head.contains(&m), "{m} missing from {head:?}");
    }
    let rows: Vec<&str> = lines.collect();
    assert!(rows.len() >= 5, "{} rows", rows.len());
    // Rates need two samples: the first row has no CPU share, later rows do.
    let col = head.iter().position(|h| *h == "cpu.all.idle_pct").unwrap();
    let v: f64 = rows[2].split(',').nth(col).unwrap().parse().unwrap();
    assert!((0.0..=100.0).contains(&v));
    // The same to a file with --out; a failed export leaves no file and keeps an old one.
    let out = d.path().join("e.csv");
    let o = run(&["export", s(&f), "--out", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), csv);
    let o = run(&["export", s(&f), "--metric", "no.such.", "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        csv,
        "the old file stays"
    );
    let gone = d.path().join("no-such-dir/e.csv");
    let o = run(&["export", s(&f), "--out", s(&gone)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--out"), "{}", stderr(&o));
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".plumb-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The command's writes reached some disk.
    let o = run(&["export", s(&f), "--metric", "disk.", "--list"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("write_bytes_per_s"));
    // JSON Lines with marks.
    let o = run(&["export", s(&f), "--json", "--metric", "mem."]);
    let t = String::from_utf8(o.stdout).unwrap();
    let marks: Vec<serde_json::Value> = t
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|j| j["kind"] == "mark")
        .collect();
    let names: Vec<&str> = marks.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert!(
        names.contains(&"command started")
            && names.contains(&"command exited")
            && names.contains(&"after the fact"),
        "{names:?}"
    );
}

#[test]
fn report_and_plot_are_self_contained_svg() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = make_recording(d.path());
    let out = d.path().join("rep");
    let o = run(&["report", s(&f), s(&f), "--out", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("CPU by state") && html.contains("Memory"),
        "charts"
    );
    assert!(
        !html.contains("http://")
            || html.matches("http://").count()
                == html.matches("http://www.w3.org/2000/svg").count(),
        "no network references"
    );
    assert!(!html.contains("<script src") && !html.contains("<link "));
    assert!(html.contains("command started"), "marks are drawn");
    assert!(!html.contains("NaN"), "no NaN in the SVG");
    // A second report into the same directory does not overwrite the first.
    let o = run(&["report", s(&f), "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    let svg = d.path().join("p.svg");
    let o = run(&[
        "plot",
        s(&f),
        "--metric",
        "cpu.all.user_pct",
        "--metric",
        "cpu.all.system_pct",
        "--out",
        s(&svg),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let o = run(&[
        "plot",
        s(&f),
        "--metric",
        "cpu.all.bogus_pct",
        "--out",
        s(&d.path().join("q.svg")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cpu.all.bogus_pct"));
}

#[test]
fn kill_9_leaves_a_readable_recording() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("k.plumb");
    let mut child = plumb()
        .args(["record", "--interval", "200ms", "--out", s(&f)])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let o = run(&["export", s(&f), "--metric", "mem.available_bytes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = String::from_utf8(o.stdout).unwrap().lines().count() - 1;
    assert!(rows >= 5, "{rows} samples survived");
}

#[test]
fn damaged_files_report_what_is_readable() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = make_recording(d.path());
    let full = std::fs::read(&f).unwrap();
    // Truncated in the middle of the last record.
    let t = d.path().join("trunc.plumb");
    std::fs::write(&t, &full[..full.len() - 5]).unwrap();
    let o = run(&["report", s(&t), "--out", s(&d.path().join("rt"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("read up to offset") && e.contains("cut short"),
        "{e}"
    );
    // A flipped bit near the end.
    let b = d.path().join("flip.plumb");
    let mut bad = full.clone();
    let at = full.len() - 40;
    bad[at] ^= 0x04;
    std::fs::write(&b, &bad).unwrap();
    let o = run(&["export", s(&b), "--metric", "mem.available_bytes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("offset"), "{}", stderr(&o));
    assert!(String::from_utf8(o.stdout).unwrap().lines().count() > 3);
    // Not a recording at all: exit 2 naming the file.
    let n = d.path().join("notes.txt");
    std::fs::write(&n, "hello").unwrap();
    let o = run(&["report", s(&n), "--out", s(&d.path().join("rn"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("notes.txt") && stderr(&o).contains("not a plumb recording"));
}

#[test]
fn bad_record_input_exits_2() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("x.plumb");
    std::fs::write(&f, "keep me").unwrap();
    let o = run(&["record", "--out", s(&f), "--duration", "1s"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "keep me",
        "never overwritten"
    );
    for (args, needle) in [
        (
            vec!["record", "--interval", "1ms", "--duration", "1s"],
            "--interval",
        ),
        (
            vec!["record", "--pid", "999999999", "--duration", "1s"],
            "--pid 999999999",
        ),
        (vec!["record", "--duration", "soon"], "--duration"),
        (
            vec!["record", "--pid", "1", "--no-children", "--trace"],
            "--no-children",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// The report as a user sees it: rendered by headless Chromium (installed by scripts/setup
/// --test). The page must load with its charts laid out: the screenshot is a real image.
#[test]
fn report_renders_in_chromium() {
    let _group = common::beside();
    let Some(chrome) = common::chromium() else {
        skip("skipped: no chromium installed (scripts/setup --test installs it)");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let f = make_recording(d.path());
    let out = d.path().join("rep");
    assert!(run(&["report", s(&f), "--out", s(&out)]).status.success());
    let png = d.path().join("shot.png");
    let profile = d.path().join("profile");
    let url = format!("file://{}", out.join("index.html").display());
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ];
    let o = Command::new(chrome)
        .args(base)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=930,2400")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        png.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let img = std::fs::read(&png).unwrap();
    assert_eq!(&img[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        img.len() > 40_000,
        "a blank page would be tiny: {} bytes",
        img.len()
    );
    // The DOM Chromium built has the charts drawn by the page's script in it.
    let o = Command::new(chrome)
        .args(base)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(
        dom.matches("class=\"uplot").count() >= 2,
        "{} charts in the DOM",
        dom.matches("class=\"uplot").count()
    );
    assert!(
        dom.contains("time (") && dom.contains("CPU by state"),
        "a wall-clock axis"
    );
}

#[test]
fn engine_counters_are_recorded_and_a_bad_engine_url_leaves_no_file() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("e.plumb");
    // Nothing listens on port 1: exit 2, the URL named, and no recording file.
    let o = run(&[
        "record",
        "--duration",
        "2s",
        "--engine",
        "postgres://plumb@127.0.0.1:1/postgres",
        "--out",
        s(&f),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--engine postgres://plumb@127.0.0.1:1/postgres"),
        "{}",
        stderr(&o)
    );
    assert!(!f.exists());

    // A live PostgreSQL of plumb's own, with commits while it is recorded.
    let has_pg = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| rd.flatten().any(|e| e.path().join("bin/initdb").exists()))
        .unwrap_or(false);
    if !has_pg {
        skip("skipped the live part: no PostgreSQL server binaries (apt-get install postgresql)");
        return;
    }
    let pg = tempfile::Builder::new()
        .prefix("plumb-rec-pg")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(
        pg.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let server = common::Private::start(&pg.path().join("pg"), &[]);
    let (dir, url) = (server.dir.clone(), server.url());
    let mut rec = plumb()
        .args([
            "record",
            "--interval",
            "500ms",
            "--duration",
            "4s",
            "--engine",
            &url,
            "--out",
            s(&f),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        let _ = plumb()
            .args([
                "engine",
                "psql",
                "--dir",
                s(&dir),
                "--",
                "-qc",
                "SELECT 1; SELECT 2; SELECT 3",
            ])
            .output();
    }
    assert!(rec.wait().unwrap().success());
    let o = run(&[
        "--json",
        "export",
        s(&f),
        "--metric",
        "engine.db.commits_per_s",
    ]);
    drop(server);
    let best = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["values"]["engine.db.commits_per_s"].as_f64())
        .fold(0.0, f64::max);
    assert!(best > 5.0, "commits per second seen: {best}");
}

/// A private PostgreSQL in a directory of its own under /var/tmp, stopped and removed however
/// the test ends (the server first, then its directory).
struct PrivatePg {
    pg: common::Private,
    _tmp: tempfile::TempDir,
}

impl PrivatePg {
    fn start(prefix: &str) -> PrivatePg {
        PrivatePg::start_with(prefix, &[])
    }

    /// With `plumb engine start` flags (`--set NAME=VALUE`).
    fn start_with(prefix: &str, extra: &[&str]) -> PrivatePg {
        let tmp = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::set_permissions(
            tmp.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let pg = common::Private::start(&tmp.path().join("pg"), extra);
        PrivatePg { pg, _tmp: tmp }
    }
}

/// A recorded series by name, with its sample times in seconds.
fn series(rec: &plumb_store::Recording, name: &str) -> Vec<(f64, f64)> {
    let cat = plumb_analyze::series::catalog(rec);
    let m = plumb_analyze::series::find(&cat, name).unwrap_or_else(|| {
        panic!(
            "{name} not recorded; have {:?}",
            cat.iter().map(|m| m.name.as_str()).collect::<Vec<_>>()
        )
    });
    let v = plumb_analyze::series::compute(rec, m);
    plumb_analyze::series::times_s(rec)
        .into_iter()
        .zip(v)
        .filter(|(_, v)| v.is_finite())
        .collect()
}

#[test]
fn a_postmasters_tree_is_recorded_with_its_backends_by_role() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let pg = PrivatePg::start("plumb-rec-tree");
    let st = pg.pg.status();
    let pm = st["instance"]["pid"].as_u64().unwrap().to_string();
    let port = st["instance"]["port"].as_u64().unwrap().to_string();
    let url = st["url"].as_str().unwrap().to_string();
    let sock = format!("{}/sock", s(&pg.pg.dir));
    let pgbench = pg_bin("pgbench");
    let conn = format!("-h {sock} -p {port} -U plumb postgres");
    let i = Command::new("sh")
        .args(["-c", &format!("{pgbench} -i -q -s 1 {conn}")])
        .output()
        .unwrap();
    assert!(i.status.success(), "{i:?}");
    // The cache's pages by state (pg_buffercache ships with the server).
    let ext = run(&[
        "engine",
        "psql",
        "--dir",
        s(&pg.pg.dir),
        "--",
        "-qc",
        "CREATE EXTENSION pg_buffercache",
    ]);
    assert!(ext.status.success(), "{}", stderr(&ext));
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("tree.plumb");
    // One client for three seconds, then four: the tree's backends rise with the clients.
    let script = format!(
        "{pgbench} -n -c 1 -T 3 {conn} >/dev/null 2>&1 && {pgbench} -n -c 4 -j 2 -T 3 {conn} >/dev/null 2>&1"
    );
    let o = run(&[
        "record",
        "--interval",
        "500ms",
        "--pid",
        &pm,
        "--engine",
        &url,
        "--out",
        s(&f),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rec = plumb_store::read(&f).unwrap();
    let cpu = series(&rec, &format!("tree.{pm}.cpu_pct"));
    let busy = cpu.iter().map(|x| x.1).sum::<f64>() / cpu.len() as f64;
    assert!(
        busy > 10.0,
        "the server's tree used {busy:.1}% of a CPU: {cpu:?}"
    );
    let backends = series(&rec, &format!("role.{pm}-backend.processes_count"));
    let early = backends
        .iter()
        .filter(|(t, _)| *t > 0.9 && *t < 2.6)
        .map(|x| x.1)
        .fold(0.0, f64::max);
    let late = backends.iter().map(|x| x.1).fold(0.0, f64::max);
    // plumb's own connection (--engine) is left out: one client is one backend.
    assert!((1.0..=2.0).contains(&early), "{backends:?}");
    assert!(late >= 4.0, "{backends:?}");
    // The server's own processes, by role, and the backends that came and went.
    for role in ["checkpointer", "walwriter"] {
        assert!(
            !series(&rec, &format!("role.{pm}-{role}.processes_count")).is_empty(),
            "{role}"
        );
    }
    let exited: f64 = series(&rec, &format!("tree.{pm}.exited_per_s"))
        .windows(2)
        .map(|w| w[1].1 * (w[1].0 - w[0].0))
        .sum();
    assert!(exited >= 4.5, "backends that left: {exited}");
    assert!(!series(&rec, &format!("tree.{pm}.pss_bytes")).is_empty());
    // Members have series of their own, named by their titles.
    let titled = rec
        .metrics
        .iter()
        .filter_map(|m| m.label.as_deref())
        .filter(|l| l.starts_with("postgres: "))
        .count();
    assert!(titled > 0, "no member of the tree labelled with its title");
    // The engine's gauges: sessions (plumb's own left out) and the cache's pages.
    let active = series(&rec, "engine.activity.sessions_active_count");
    let most = active.iter().map(|x| x.1).fold(0.0, f64::max);
    assert!((2.0..=4.0).contains(&most), "active sessions: {active:?}");
    for name in [
        "engine.activity.sessions_idle_count",
        "engine.activity.waiting_lwlock_count",
        "engine.checkpoint.running_count",
        "engine.replication.standbys_count",
    ] {
        assert!(!series(&rec, name).is_empty(), "{name}");
    }
    let clean = series(&rec, "engine.buffercache.clean_bytes");
    assert!(clean.iter().any(|x| x.1 > 0.0), "{clean:?}");
    let dirty = series(&rec, "engine.buffercache.dirty_bytes");
    assert!(
        dirty.iter().any(|x| x.1 > 0.0),
        "pgbench dirtied no buffer: {dirty:?}"
    );
    // The report draws the tree, the sessions and the cache beside the tree's PSS.
    let out = d.path().join("report");
    let r = run(&["report", s(&f), "--out", s(&out)]);
    assert!(r.status.success(), "{}", stderr(&r));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("Process trees: CPU by role"), "no tree chart");
    assert!(html.contains("backends"), "no backends line");
    assert!(html.contains("Database: sessions and waits"));
    assert!(html.contains("Database: memory as the engine sees it"));
    assert!(html.contains("shared buffers: dirty pages"));
    assert!(html.contains(&format!("kernel: PSS of PID {pm}")));

    // --no-children: the postmaster alone; --engine-server finds it without its PID.
    let one = d.path().join("one.plumb");
    let o = run(&[
        "record",
        "--duration",
        "1s",
        "--interval",
        "200ms",
        "--pid",
        &pm,
        "--no-children",
        "--out",
        s(&one),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec = plumb_store::read(&one).unwrap();
    assert!(rec.metrics.iter().all(|m| !m.name.starts_with("tree.")));
    assert!(rec
        .metrics
        .iter()
        .any(|m| m.name == format!("proc.{pm}.cpu_ticks")));
    let found = d.path().join("found.plumb");
    let o = run(&[
        "record",
        "--duration",
        "1s",
        "--interval",
        "200ms",
        "--engine-server",
        "--out",
        s(&found),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec = plumb_store::read(&found).unwrap();
    assert!(
        rec.metrics
            .iter()
            .any(|m| m.name == format!("tree.{pm}.cpu_ticks")),
        "--engine-server did not find PID {pm}"
    );
}

/// At 100 ms the host is read every sample and the slow metrics (process trees, smaps) about
/// once a second; the file says which samples read them, and their rates span those samples.
#[test]
fn a_100ms_recording_reads_the_slow_metrics_once_a_second() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("fast.plumb");
    let o = run(&[
        "record",
        "--interval",
        "100ms",
        "--out",
        s(&f),
        "--",
        "sh",
        "-c",
        // Two seconds of a CPU kept busy (a dd of a fixed size can end within one slow
        // interval on a fast host), so at least one whole slow interval shows it.
        "sleep 0.5; timeout 2 sh -c 'while :; do :; done'; sleep 1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rec = plumb_store::read(&f).unwrap();
    assert_eq!(rec.header.interval_ms, 100);
    assert_eq!(rec.header.slow_interval_ms, Some(1000));
    let n = rec.times_ms.len();
    assert!(n >= 15, "{n} samples");
    let slow = rec.slow_rows().expect("the slow samples are marked");
    let count = slow.iter().filter(|x| **x).count();
    // About one in ten, the first and the last (after the command exited) among them.
    assert!(slow[0] && slow[n - 1], "{slow:?}");
    assert!(count >= 2 && count <= n / 5 + 2, "{count} of {n}: {slow:?}");
    let host = series(&rec, "cpu.all.user_pct");
    assert!(
        host.len() >= n - 2,
        "host CPU in every sample: {} of {n}",
        host.len()
    );
    let tree = rec
        .metrics
        .iter()
        .find(|m| m.name.starts_with("tree.") && m.name.ends_with(".cpu_ticks"))
        .expect("the command's tree is recorded");
    assert!(tree.slow);
    let cpu = series(&rec, &tree.name.replace("cpu_ticks", "cpu_pct"));
    // Only in the samples that read it; the loop kept a CPU busy for 2 s, so it shows.
    assert!(
        cpu.len() < count,
        "{} values from {count} slow samples",
        cpu.len()
    );
    assert!(cpu.iter().any(|(_, v)| *v > 20.0), "{cpu:?}");
}

/// A Python that has pandas: Debian's (python3-pandas, from `scripts/setup --test`) first.
fn python_with_pandas() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        std::process::Command::new(p)
            .args(["-c", "import pandas"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The repository's Python with DuckDB (scripts/setup --test makes .venv-test: DuckDB is not
/// in Debian).
fn python_with_duckdb() -> Option<std::path::PathBuf> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-test/bin/python");
    std::process::Command::new(&py)
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some(py)
}

/// DuckDB reads each export as it is: every metric column of the wide CSV typed as a number
/// (so UNPIVOT works), the long CSV with integer times and numeric values, and JSON Lines with
/// samples and marks on the same time fields.
fn load_in_duckdb(dir: &Path, wide: &str, long: &str, jsonl: &str) {
    let Some(py) = python_with_duckdb() else {
        common::skip("skipped loading the exports in DuckDB: no .venv-test with duckdb (scripts/setup --test makes it)");
        return;
    };
    let (w, l, j) = (
        dir.join("d-wide.csv"),
        dir.join("d-long.csv"),
        dir.join("d.jsonl"),
    );
    std::fs::write(&w, wide).unwrap();
    std::fs::write(&l, long).unwrap();
    std::fs::write(&j, jsonl).unwrap();
    let script = r#"
import sys, duckdb
w, l, j = sys.argv[1:4]
con = duckdb.connect()
wide = con.sql(f"SELECT * FROM read_csv('{w}')")
types = dict(zip(wide.columns, [str(t) for t in wide.types]))
numeric = ("DOUBLE", "BIGINT", "INTEGER", "FLOAT", "DECIMAL", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT")
bad = {c: t for c, t in types.items() if c not in ("marks", "time") and not t.startswith(numeric)}
assert not bad, f"not numeric: {bad}"
assert types["unix_ms"] in ("BIGINT", "UBIGINT", "HUGEINT"), types["unix_ms"]
assert types["time"].startswith("TIMESTAMP"), types["time"]
n_wide = con.execute(f"""SELECT count(*) FROM (UNPIVOT (SELECT * EXCLUDE (marks) FROM read_csv('{w}'))
                    ON COLUMNS(* EXCLUDE (t_s, unix_ms, time)) INTO NAME metric VALUE value)""").fetchone()[0]
long = con.sql(f"SELECT * FROM read_csv('{l}')")
lt = dict(zip(long.columns, [str(t) for t in long.types]))
assert lt["unix_ms"] == "BIGINT" and lt["value"] == "DOUBLE", lt
n_long = con.execute(f"SELECT count(*) FROM read_csv('{l}') WHERE metric <> 'mark'").fetchone()[0]
marks = con.execute(f"SELECT count(*) FROM read_csv('{l}') WHERE metric = 'mark'").fetchone()[0]
js = con.execute(f"SELECT kind, count(*), min(t_s), min(unix_ms) FROM read_json_auto('{j}', format='newline_delimited') GROUP BY kind ORDER BY kind").fetchall()
kinds = {k: (n, t, u) for k, n, t, u in js}
assert set(kinds) == {"mark", "sample"}, kinds
assert all(t is not None and u is not None for _, t, u in kinds.values()), kinds
print(n_wide, n_long, marks)
"#;
    let o = std::process::Command::new(&py)
        .args(["-c", script])
        .arg(&w)
        .arg(&l)
        .arg(&j)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "duckdb: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let n: Vec<usize> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    // UNPIVOT drops NULLs: every value of the wide form is a row of the long form.
    assert_eq!(n[0], n[1], "wide values {} long rows {}", n[0], n[1]);
    assert!(n[2] >= 2, "marks in the long form");
}

#[test]
fn exports_load_clean_in_pandas_wide_long_and_json() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.plumb");
    let o = run(&[
        "record",
        "--interval",
        "200ms",
        "--out",
        s(&f),
        "--",
        "sh",
        "-c",
        "sleep 1.2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let export = |extra: &[&str]| -> (String, String) {
        let mut args = vec!["export", s(&f)];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        (String::from_utf8(o.stdout.clone()).unwrap(), stderr(&o))
    };
    // Wide: no column empty in every row; the marks in a column of their own.
    let (wide, err) = export(&[]);
    let rows: Vec<Vec<&str>> = wide.lines().map(|l| l.split(',').collect()).collect();
    let header = &rows[0];
    assert_eq!(header.last(), Some(&"marks"));
    for (c, name) in header.iter().enumerate() {
        assert!(
            rows[1..].iter().any(|r| !r[c].is_empty()),
            "column {name} is empty in every row"
        );
    }
    assert!(wide.contains("command started") && wide.contains("command exited"));
    // What was left out is said (the first sample has no rates, so a 200 ms recording of an
    // idle disk leaves some await columns without a value).
    let listed = String::from_utf8(run(&["export", s(&f), "--list"]).stdout)
        .unwrap()
        .lines()
        .count();
    if header.len() - 3 < listed {
        assert!(err.contains("left out"), "{err}");
    }
    // JSON Lines: marks carry the samples' time fields.
    let (jsonl, _) = export(&["--json"]);
    let marks: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "mark")
        .collect();
    assert!(marks.len() >= 2);
    for m in &marks {
        assert!(
            m["t_s"].is_f64() && m["unix_ms"].is_u64() && m.get("t_ms").is_none(),
            "{m}"
        );
    }
    let (long, _) = export(&["--long"]);
    assert!(long.starts_with("unix_ms,time,metric,unit,object,value\n"));
    load_in_duckdb(d.path(), &wide, &long, &jsonl);

    let Some(py) = python_with_pandas() else {
        common::skip(
            "skipped loading the exports: no pandas (scripts/setup --test installs python3-pandas)",
        );
        return;
    };
    let wide_p = d.path().join("wide.csv");
    let long_p = d.path().join("long.csv");
    std::fs::write(&wide_p, &wide).unwrap();
    std::fs::write(&long_p, &long).unwrap();
    let script = r#"
import sys, pandas as pd
wide = pd.read_csv(sys.argv[1])
metrics = [c for c in wide.columns if c not in ("t_s", "unix_ms", "time", "marks")]
bad = [c for c in metrics if not pd.api.types.is_numeric_dtype(wide[c])]
assert not bad, f"not numeric: {bad}"
wt = pd.to_datetime(wide["time"], utc=True)
wms = (wt - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)
assert (wms == wide["unix_ms"]).all(), "the wide form's time and unix_ms agree"
# UNPIVOT: one value column, numeric.
melted = wide.melt(id_vars=["t_s", "unix_ms", "time"], value_vars=metrics, var_name="metric")
assert pd.api.types.is_numeric_dtype(melted["value"]), melted.dtypes
long = pd.read_csv(sys.argv[2])
assert pd.api.types.is_numeric_dtype(long["value"]), long.dtypes
assert pd.api.types.is_integer_dtype(long["unix_ms"]), long.dtypes
t = pd.to_datetime(long["time"], utc=True)
ms = (t - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)
assert (ms == long["unix_ms"]).all(), "time and unix_ms agree"
values = long[long.metric != "mark"]
assert set(values.metric) == set(melted.dropna().metric), "the same metrics in both forms"
assert (long.metric == "mark").sum() >= 2
print(len(melted.dropna()), len(values))
"#;
    let o = std::process::Command::new(py)
        .args(["-c", script])
        .arg(&wide_p)
        .arg(&long_p)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "pandas: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // Every value of the wide form is a row of the long form.
    let counts: Vec<usize> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(
        counts[0], counts[1],
        "wide values {} long rows {}",
        counts[0], counts[1]
    );
}

/// A recorder left running (`--out-dir`): a new file every --rotate, each a recording of its
/// own, the samples going on from one file into the next; the oldest of plumb's files removed
/// past --keep-for and --keep-size (marked), and nothing else in the directory touched.
#[test]
fn out_dir_rotates_and_removes_only_plumbs_oldest_files() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let now = std::time::SystemTime::now();
    let put = |name: &str, bytes: usize, age_s: u64| {
        let p = dir.join(name);
        std::fs::write(&p, vec![b'x'; bytes]).unwrap();
        let t = now - Duration::from_secs(age_s);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_times(std::fs::FileTimes::new().set_modified(t))
            .unwrap();
    };
    put("plumb-20200101-000000.plumb", 10, 3 * 3600); // past --keep-for 1h
    put("plumb-20261120-000000.plumb", 2 << 20, 60); // past --keep-size 1M
    put("notes.txt", 3 << 20, 5 * 3600); // not plumb's: never touched
    put("plumb-mine.plumb", 3 << 20, 5 * 3600); // not a name plumb gives
    let o = run(&[
        "record",
        "--interval",
        "250ms",
        "--out-dir",
        s(dir),
        "--rotate",
        "10s",
        "--keep-size",
        "1M",
        "--keep-for",
        "1h",
        "--duration",
        "13s",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(names[0], "notes.txt");
    assert_eq!(names[3], "plumb-mine.plumb");
    let (a, b) = (dir.join(&names[1]), dir.join(&names[2]));
    assert!(
        names[1].starts_with("plumb-20") && names[1] < names[2],
        "{names:?}"
    );
    assert!(
        stderr(&o).contains(&format!("in 2 files, the last {}", b.display()))
            && stderr(&o).contains("then a new file every 10s"),
        "{}",
        stderr(&o)
    );
    // Each file is a recording; the samples go on from the first into the second.
    let unix_ms = |f: &Path| -> Vec<u64> {
        let o = run(&["export", s(f)]);
        assert!(o.status.success(), "{}", stderr(&o));
        let csv = String::from_utf8(o.stdout).unwrap();
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = head.iter().position(|h| *h == "unix_ms").unwrap();
        lines
            .map(|l| l.split(',').nth(col).unwrap().parse().unwrap())
            .collect()
    };
    let (ta, tb) = (unix_ms(&a), unix_ms(&b));
    assert!(
        ta.len() >= 36 && tb.len() >= 8,
        "{} and {} samples",
        ta.len(),
        tb.len()
    );
    let gap = tb[0] - ta[ta.len() - 1];
    assert!((150..=600).contains(&gap), "{gap} ms between the files");
    // The two removals are marked, with the cap that removed each.
    let o = run(&["export", s(&a), "--json", "--metric", "mem."]);
    let marks: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|j| j["kind"] == "mark" && j["name"] == "old recording removed")
        .collect();
    assert_eq!(marks.len(), 2, "{marks:?}");
    let details: Vec<&str> = marks
        .iter()
        .map(|m| m["detail"].as_str().unwrap())
        .collect();
    assert!(
        details
            .iter()
            .any(|d| d.contains("plumb-20200101-000000.plumb") && d.contains("--keep-for"))
            && details
                .iter()
                .any(|d| d.contains("plumb-20261120-000000.plumb") && d.contains("--keep-size")),
        "{details:?}"
    );
    // Wrong input: exit 2 naming the flag, nothing left behind.
    let none = dir.join("no-such-dir");
    for (args, needle) in [
        (vec!["--out-dir", s(&none)], "--out-dir"),
        (vec!["--out-dir", s(dir), "--rotate", "1s"], "--rotate"),
        (
            vec!["--out-dir", s(dir), "--keep-size", "10"],
            "--keep-size",
        ),
        (
            vec!["--out-dir", s(dir), "--rotate", "2h", "--keep-for", "1h"],
            "--keep-for",
        ),
        (vec!["--out-dir", s(dir), "--out", s(&a)], "--out"),
        (vec!["--keep-size", "1G"], "--out-dir"),
    ] {
        let o = run(&[&["record", "--duration", "1s"][..], &args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 4);
    assert!(!none.exists());
}

/// A recording follows the heaviest statements from pg_stat_statements: their figures at every
/// second, their texts with every literal left out (a password in an ALTER ROLE, which
/// pg_stat_statements keeps as typed, never reaches the file), and `plumb report --statements`
/// gives what each did between any two points.
#[test]
fn statements_are_recorded_without_literals_and_tabled_between_two_points() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(why);
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("s.plumb");
    let server = PrivatePg::start_with(
        "plumb-stmt-pg",
        &["--set", "shared_preload_libraries=pg_stat_statements"],
    );
    let (dir, url) = (server.pg.dir.clone(), server.pg.url());
    let psql = |sql: &str| {
        let o = plumb()
            .args(["engine", "psql", "--dir", s(&dir), "--", "-qAtc", sql])
            .output()
            .unwrap();
        assert!(o.status.success(), "{sql}: {}", stderr(&o));
    };
    psql("CREATE EXTENSION pg_stat_statements");
    psql("CREATE ROLE stmt_test_role");
    let rec = plumb()
        .args([
            "record",
            "--interval",
            "500ms",
            "--duration",
            "7s",
            "--engine",
            &url,
            "--out",
            s(&f),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        psql("SELECT pg_sleep(0.05) WHERE 'hunter2-in-a-select' <> ''; ALTER ROLE stmt_test_role PASSWORD 'hunter2-secret'; SELECT count(*) FROM generate_series(1, 20000)");
    }
    let o = rec.wait_with_output().unwrap();
    assert!(o.status.success());
    let bytes = std::fs::read(&f).unwrap();
    assert!(
        !String::from_utf8_lossy(&bytes).contains("hunter2"),
        "a literal reached the recording"
    );
    let table = |args: &[&str]| -> serde_json::Value {
        let o = run(&[&["--json", "report", s(&f), "--statements"][..], args].concat());
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let all = table(&[]);
    let rows = all["rows"].as_array().unwrap();
    let find = |rows: &[serde_json::Value], needle: &str| -> Option<serde_json::Value> {
        rows.iter()
            .find(|r| r["text"].as_str().unwrap().contains(needle))
            .cloned()
    };
    let sleep = find(rows, "pg_sleep").unwrap_or_else(|| panic!("{all}"));
    assert!(
        sleep["text"].as_str().unwrap().contains("pg_sleep($1)"),
        "{sleep}"
    );
    let calls = sleep["calls"].as_f64().unwrap();
    let mean = sleep["mean_ms"].as_f64().unwrap();
    assert!(calls >= 5.0, "{sleep}");
    assert!((45.0..250.0).contains(&mean), "{sleep}");
    // plumb's own queries are not the workload.
    assert!(
        !rows
            .iter()
            .any(|r| r["text"].as_str().unwrap().contains("pg_stat_activity")),
        "{all}"
    );
    // The heaviest first.
    let times: Vec<f64> = rows
        .iter()
        .map(|r| r["time_ms"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    // A stretch of it holds fewer calls than the whole.
    let part = table(&["--from", "1s", "--to", "4s"]);
    let p = find(part["rows"].as_array().unwrap(), "pg_sleep").unwrap_or_else(|| panic!("{part}"));
    let pc = p["calls"].as_f64().unwrap();
    assert!(pc >= 1.0 && pc < calls, "{p} against {sleep}");
    // Text and the page.
    let o = run(&["report", s(&f), "--statements", "--top", "3"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("heaviest by execution time") && text.contains("pg_sleep"),
        "{text}"
    );
    let out = d.path().join("page");
    let o = run(&["report", s(&f), "--out", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("Statements:") && page.contains("pg_sleep"));
    // Wrong input: exit 2, the flag named.
    for (args, needle) in [
        (vec!["--from", "99h"], "--from"),
        (vec!["--from", "3s", "--to", "2s"], "--from"),
        (vec!["--to", "soon"], "--to"),
    ] {
        let o = run(&[&["report", s(&f), "--statements"][..], &args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    drop(server);
}

/// The wide CSV's columns by name, each as (unix_ms, value or NaN) per row.
fn csv_columns(csv: &str) -> std::collections::HashMap<String, Vec<(u64, f64)>> {
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let ms = head.iter().position(|h| *h == "unix_ms").unwrap();
    head.iter()
        .enumerate()
        .map(|(k, h)| {
            let v = rows
                .iter()
                .map(|r| {
                    (
                        r[ms].parse().unwrap(),
                        r.get(k).and_then(|x| x.parse().ok()).unwrap_or(f64::NAN),
                    )
                })
                .collect();
            (h.to_string(), v)
        })
        .collect()
}

#[test]
fn derived_series_in_chromium_equal_the_arithmetic_on_the_exported_csv() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = make_recording(d.path());
    let used = "used_bytes = mem.total_bytes - mem.free_bytes - mem.cache_bytes";
    let growth = "cache_growth = rate(mem.cache_bytes)";
    // A later series may use an earlier one; a ratio named _pct is in percent.
    let share = "used_pct = used_bytes / mem.total_bytes * 100";
    let out = d.path().join("rep");
    let o = run(&[
        "report",
        s(&f),
        "--series",
        used,
        "--series",
        growth,
        "--series",
        share,
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        html.contains("Derived: used_bytes, cache_growth"),
        "one chart for bytes and bytes/s"
    );
    assert!(
        html.contains("Derived: used_pct"),
        "percent on a chart of its own"
    );
    // Bad expressions: exit 2, the missing series named, no page left behind.
    for (spec, says) in [
        (
            "x = mem.totl_bytes - mem.free_bytes",
            "mem.totl_bytes: not in the recording",
        ),
        (
            "x = mem.free_bytes + cpu.all.idle_pct",
            "in different units",
        ),
        (
            "x = mem.free_bytes -",
            "ends where a name or a number belongs",
        ),
        ("mem.free_bytes = mem.total_bytes", "the name is taken"),
    ] {
        let bad = d.path().join("bad");
        let o = run(&["report", s(&f), "--series", spec, "--out", s(&bad)]);
        assert_eq!(o.status.code(), Some(2), "{spec}");
        assert!(
            stderr(&o).contains(says) && stderr(&o).contains(spec),
            "{spec}: {}",
            stderr(&o)
        );
        assert!(!bad.exists(), "{spec}: nothing written");
        let svg = d.path().join("bad.svg");
        let o = run(&["plot", s(&f), "--series", spec, "--out", s(&svg)]);
        assert_eq!(o.status.code(), Some(2), "{spec}");
        assert!(!svg.exists(), "{spec}: no plot");
    }
    // plot: the derived series stacked on recorded ones, bytes on one axis.
    let svg = d.path().join("stack.svg");
    let o = run(&[
        "plot",
        s(&f),
        "--metric",
        "mem.cache_bytes",
        "--metric",
        "mem.free_bytes",
        "--series",
        used,
        "--stack",
        "--out",
        s(&svg),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("used_bytes") && !svg.contains("NaN"));
    let o = run(&[
        "plot",
        s(&f),
        "--metric",
        "sched.runnable_count",
        "--series",
        used,
        "--series",
        share,
        "--out",
        s(&d.path().join("three.svg")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("3 units"), "{}", stderr(&o));

    let o = run(&["export", s(&f), "--metric", "mem."]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cols = csv_columns(&String::from_utf8_lossy(&o.stdout));
    let col = |n: &str| cols.get(n).unwrap_or_else(|| panic!("{n} in the CSV"));
    let (total, free, cache) = (
        col("mem.total_bytes"),
        col("mem.free_bytes"),
        col("mem.cache_bytes"),
    );
    let mut want_used = Vec::new();
    let mut want_growth = Vec::new();
    let mut want_pct = Vec::new();
    for i in 0..total.len() {
        let u = total[i].1 - free[i].1 - cache[i].1;
        want_used.push(u);
        want_pct.push(u / total[i].1 * 100.0);
        want_growth.push(if i == 0 {
            f64::NAN
        } else {
            (cache[i].1 - cache[i - 1].1) / ((cache[i].0 - cache[i - 1].0) as f64 / 1000.0)
        });
    }
    assert!(want_used.iter().all(|u| *u > 0.0), "the host uses memory");
    let Some(v) = browser_derived(&out.join("index.html")) else {
        return;
    };
    let charts = v["derived"].as_array().unwrap();
    assert_eq!(charts.len(), 2, "{v}");
    let drawn = |label: &str| -> Vec<(f64, f64)> {
        for c in charts {
            let labels: Vec<&str> = c["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap())
                .collect();
            if let Some(k) = labels
                .iter()
                .position(|l| l.trim_end_matches(" (right)") == label)
            {
                let x = c["x"].as_array().unwrap();
                let y = c["values"][k].as_array().unwrap();
                return x
                    .iter()
                    .zip(y)
                    .map(|(x, y)| (x.as_f64().unwrap(), y.as_f64().unwrap_or(f64::NAN)))
                    .collect();
            }
        }
        panic!("{label} not drawn: {v}");
    };
    for (label, want) in [
        ("used_bytes", &want_used),
        ("cache_growth", &want_growth),
        ("used_pct", &want_pct),
    ] {
        let got = drawn(label);
        assert_eq!(got.len(), want.len(), "{label}: a point per sample");
        let mut compared = 0;
        for (i, ((x, y), w)) in got.iter().zip(want.iter()).enumerate() {
            assert!(
                (x * 1000.0 - total[i].0 as f64).abs() < 2.0,
                "{label}: sample {i}'s time"
            );
            if w.is_nan() {
                assert!(y.is_nan(), "{label}: sample {i} has no value, drew {y}");
                continue;
            }
            // The page keeps five significant digits.
            assert!(
                (y - w).abs() <= w.abs() * 1e-4 + 1e-9,
                "{label}: sample {i}: drew {y}, the CSV gives {w}"
            );
            compared += 1;
        }
        assert!(
            compared + 1 >= want.len(),
            "{label}: {compared} of {} compared",
            want.len()
        );
    }
}

/// What headless Chromium drew for the page's derived series (tests/browser/derived.py); None
/// (said) when Selenium cannot run here. `PLUMB_SCREENSHOTS=DIR` keeps a screenshot.
fn browser_derived(html: &Path) -> Option<serde_json::Value> {
    if let Some(why) = common::selenium_missing() {
        skip(format!(
            "skipped the derived series' browser check: {why}; scripts/setup --test installs it"
        ));
        return None;
    }
    let shots = std::env::var_os("PLUMB_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let _ = std::fs::create_dir_all(&shots);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/derived.py");
    let o = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(html)
        .arg(shots.join("report-derived-series.png"))
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "derived.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(serde_json::from_slice(&o.stdout).expect("one JSON object"))
}

#[test]
fn report_opens_on_what_happened_in_the_window() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    let f = make_recording(d.path());
    let out = d.path().join("rep");
    let o = run(&["--json", "report", s(&f), "--out", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let json = d.path().join("report.json");
    std::fs::write(&json, &o.stdout).unwrap();
    if let Some(v) = common::validate("report-verdict.schema.json", &json) {
        assert_eq!(v, "", "the verdict against docs/report-verdict.schema.json");
        // A verdict without its busiest resource's peak fails the schema.
        let mut bad = j.clone();
        bad["verdict"]["runs"][0]["busy"][0]
            .as_object_mut()
            .unwrap()
            .remove("peak_pct");
        let badf = d.path().join("bad.json");
        std::fs::write(&badf, bad.to_string()).unwrap();
        assert!(common::validate("report-verdict.schema.json", &badf)
            .unwrap()
            .starts_with("INVALID"));
    }
    let v = &j["verdict"]["runs"][0];
    assert_eq!(v["run"], "test run");
    assert_eq!(v["damaged"], false);
    // The busiest resource first, with its mean no higher than its peak.
    let busy = v["busy"].as_array().unwrap();
    assert!(!busy.is_empty(), "{v}");
    let mean = |b: &serde_json::Value| b["mean_pct"].as_f64().unwrap();
    assert!(busy.windows(2).all(|w| mean(&w[0]) >= mean(&w[1])), "{v}");
    assert!(busy
        .iter()
        .all(|b| mean(b) <= b["peak_pct"].as_f64().unwrap() + 1e-9));
    // The command's end is a mark; it exited 0, so it is not a problem.
    let marks = v["marks"].as_array().unwrap();
    let exited = marks
        .iter()
        .find(|m| m["name"] == "command exited")
        .expect("command exited");
    assert_eq!(exited["problem"], false, "{exited}");
    assert_eq!(exited["kind"], "command");
    // A command that fails is a problem, first among the marks, and marked critical.
    let bad = d.path().join("bad.plumb");
    let o = run(&[
        "record",
        "--interval",
        "250ms",
        "--out",
        s(&bad),
        "--",
        "sh",
        "-c",
        "sleep 1; exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out2 = d.path().join("rep2");
    let o = run(&["report", s(&bad), "--out", s(&out2)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("Verdict\n"), "{text}");
    assert!(
        text.contains("!! 0:01 command exited: exit status: 3"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("index.html"), "{text}");
    // The whole verdict is on the first screen of the page.
    let Some(fs) = common::first_screen(&out.join("index.html"), "report-first-screen") else {
        return;
    };
    let bottom = fs["verdict_bottom"].as_f64().expect("a verdict block");
    assert!(bottom <= fs["inner_height"].as_f64().unwrap(), "{fs}");
    let t = fs["verdict_text"].as_str().unwrap();
    assert!(
        t.contains("busiest") && t.contains("busy on average"),
        "{t}"
    );
}

/// A server that stops answering (SIGSTOP) while it is recorded cannot hold the recording:
/// `--duration 4s` ends within the engine sample's 10 s of its end, and the recording is
/// readable, with the samples taken before the silence.
#[test]
fn a_silent_server_holds_a_recording_no_longer_than_one_engine_sample() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let tmp = common::server_tempdir("plumb-record");
    let p = common::Private::start(&tmp.path().join("pg"), &[]);
    let f = tmp.path().join("silent.plumb");
    let t0 = std::time::Instant::now();
    let child = plumb()
        .args([
            "record",
            "--interval",
            "500ms",
            "--duration",
            "4s",
            "--engine",
        ])
        .arg(p.url())
        .arg("--out")
        .arg(&f)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let silent = p.silence();
    let o = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    drop(silent);
    assert!(
        took < std::time::Duration::from_secs(16),
        "a 4 s recording took {took:?}: {}",
        stderr(&o)
    );
    let rec = plumb_store::read(&f).unwrap();
    assert!(rec.times_ms.len() >= 3, "{} samples", rec.times_ms.len());
}
