//! `plumb lab --quick` end to end: a private PostgreSQL, the storage probes, pgbench and the
//! insert/CHECKPOINT loops, the report (validated against docs/lab-report.schema.json and rendered in
//! Chromium), the experiments, a neighbour, a standby, MariaDB and a server of yours. The ways
//! out (Ctrl-C, the server killed, a disk too small, bad input), which measure nothing, are
//! tests/together/lab_ends.rs's.

use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common;
use crate::common::lab::*;
use crate::common::*;

// Labs take both CPUs and the disk. Those whose checks are figures run alone (common::alone),
// no other test beside one: the lab judges whether its windows were disturbed,
// and another test's processes would be a real neighbour. The labs that check what plumb does
// on a server of yours and with a named workload (what it creates, drops, refuses and runs)
// check no figure a neighbour could move: they run beside each other (common::beside).

fn validate(report: &Path) -> Option<String> {
    common::validate("lab-report.schema.json", report)
}

/// A quick lab on the private PostgreSQL, end to end: `o` is its process's output, `out` its
/// report directory in the scratch directory `d`, where only `keep` may be left.
fn check_quick_lab(o: &Output, d: &tempfile::TempDir, out: &Path, keep: &[&str]) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    // Only the report is left; the instance and its files are gone.
    assert_nothing_left(d.path(), keep);
    for f in [
        "index.html",
        "report.json",
        "summary.txt",
        "recording.plumb",
    ] {
        assert!(out.join(f).exists(), "no {f}");
    }
    assert!(
        stdout.contains("Findings") && stdout.contains("Insert/CHECKPOINT loops"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("summary.txt")).unwrap(),
        stdout
    );
    // The summary opens on its verdict: trust, the headline figures, what needs action.
    let head: String = stdout.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(
        head.contains("Verdict") && head.contains("trust"),
        "the summary does not open on its verdict:\n{head}"
    );
    first_screen_holds_the_verdict(&out.join("index.html"), "lab-first-screen");

    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    // The verdict in JSON: every watched phase graded, the headline figures with units.
    let v = &r["verdict"];
    assert!(
        ["clean", "noted", "disturbed"].contains(&v["trust"].as_str().unwrap()),
        "{v:#}"
    );
    assert_eq!(
        v["windows"].as_array().unwrap().len(),
        r["windows"].as_array().unwrap().len()
    );
    let codes: Vec<&str> = v["headline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["code"].as_str().unwrap())
        .collect();
    for c in ["tps", "latency_p99"] {
        assert!(
            codes.contains(&c),
            "no {c} in the verdict's headline: {codes:?}"
        );
    }
    // What one durable write costs: from a mode's clean runs, or named as not compared where it
    // had none (a busy CI host).
    assert!(
        codes.contains(&"durable_write_mean") || codes.contains(&"durable_write_unclean"),
        "{codes:?}"
    );
    // The sweep states a knee as a range, or none up to the deepest level (a quick lab on a
    // fast virtual disk can see latency grow no faster than throughput all the way); a
    // disturbed sweep states neither, as its section says.
    if r["sweep"]["disturbance"] == "disturbed" {
        assert!(codes.contains(&"knee_withheld"), "{codes:?}");
    } else {
        assert!(
            codes.contains(&"knee") || codes.contains(&"no_knee"),
            "the knee (or none) in the verdict's headline: {codes:?}"
        );
    }
    let tps = v["headline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["code"] == "tps")
        .unwrap();
    assert_eq!(
        tps["value"], r["pgbench"]["tps"],
        "the headline is the run's figure"
    );
    assert_eq!(tps["unit"], "per_s");
    if let Some(v) = validate(&out.join("report.json")) {
        assert!(
            !v.starts_with("INVALID"),
            "report.json against its schema: {v}"
        );
        // The schema can fail: a report without findings is not one.
        let mut broken = r.clone();
        broken.as_object_mut().unwrap().remove("findings");
        let bad = d.path().join("broken.json");
        std::fs::write(&bad, broken.to_string()).unwrap();
        assert!(validate(&bad).unwrap().starts_with("INVALID"));
        // Nor is a verdict with a trust grade the schema does not know.
        let mut broken = r.clone();
        broken["verdict"]["trust"] = "fine".into();
        std::fs::write(&bad, broken.to_string()).unwrap();
        assert!(validate(&bad).unwrap().starts_with("INVALID"));
        std::fs::remove_file(&bad).unwrap();
    }
    // Every phase was watched.
    for w in r["windows"].as_array().unwrap() {
        assert!(w["interference"]["verdict"].is_string(), "{w:#}");
    }
    // Real figures in every section.
    let modes = r["durability"]["rows"].as_array().unwrap();
    assert!(modes
        .iter()
        .any(|m| m["durable"] == true && m["writes"].as_u64().unwrap() > 100));
    let levels = r["sweep"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 4);
    let iops = |i: usize| levels[i]["iops"]["median"].as_f64().unwrap();
    // Every level measured something (which level does more is the device's and its
    // neighbours' business: bench/ measures that, a test cannot assume it).
    for i in 0..levels.len() {
        assert!(iops(i) > 0.0, "level {i}: no IOPS");
    }
    assert!(r["seq_read"]["bytes_per_s"].as_f64().unwrap() > 1e6);
    let pg = &r["pgbench"];
    assert!(pg["tps"].as_f64().unwrap() > 10.0, "{pg}");
    assert!(pg["transactions"].as_u64().unwrap() > 100);
    assert!(pg["latency"]["p99_s"].as_f64().unwrap() >= pg["latency"]["p50_s"].as_f64().unwrap());
    let loops = r["loops"].as_array().unwrap();
    assert_eq!(
        loops.len(),
        6,
        "bulk and single under fdatasync, open_datasync, and open_datasync with O_DIRECT WAL"
    );
    for l in loops {
        assert!(l["insert"]["p50_s"].as_f64().unwrap() > 0.0);
        assert!(l["checkpoint"]["p50_s"].as_f64().unwrap() > 0.0);
        // 10,000 rows of 2,000 bytes write WAL: the statistics were really read.
        if l["scenario"] == "bulk" {
            assert!(l["wal_bytes"].as_f64().unwrap() > 10e6, "{l}");
        } else {
            assert!(l["commit"]["count"].as_u64().unwrap() >= 100 * 40);
        }
    }
    let methods: Vec<String> = loops
        .iter()
        .map(|l| {
            format!(
                "{}{}",
                l["wal_sync_method"].as_str().unwrap(),
                if l["wal_direct"] == true {
                    "+O_DIRECT"
                } else {
                    ""
                }
            )
        })
        .collect();
    for m in ["fdatasync", "open_datasync", "open_datasync+O_DIRECT"] {
        assert_eq!(methods.iter().filter(|x| *x == m).count(), 2, "{methods:?}");
    }
    // The O_DIRECT instance is gone with the lab's work directory (checked above), and its
    // loops wrote WAL like the others.
    let direct_bulk = loops
        .iter()
        .find(|l| l["wal_direct"] == true && l["scenario"] == "bulk")
        .unwrap();
    assert!(direct_bulk["wal_bytes"].as_f64().unwrap() > 10e6);
    // fdatasync issues WAL syncs; open_datasync writes with O_DSYNC and issues none.
    let syncs = |m: &str| {
        loops
            .iter()
            .find(|l| {
                l["wal_sync_method"] == m && l["wal_direct"] == false && l["scenario"] == "single"
            })
            .unwrap()["wal_syncs"]
            .as_f64()
    };
    if let (Some(f), Some(o)) = (syncs("fdatasync"), syncs("open_datasync")) {
        assert!(
            f >= 100.0 * 40.0 && o == 0.0,
            "fdatasync {f}, open_datasync {o}"
        );
    }
    // Traced as root: each commit's syscalls. Under fdatasync one fdatasync per commit from
    // the committing backend; under open_datasync none, and a WAL write per commit carries the
    // flush; a FLUSH per commit on a disk without FUA either way.
    if common::is_root() {
        let traced = |m: &str, direct: bool| {
            loops
                .iter()
                .find(|l| {
                    l["wal_sync_method"] == m
                        && l["wal_direct"] == direct
                        && l["scenario"] == "single"
                })
                .unwrap()["trace"]
                .clone()
        };
        let f = traced("fdatasync", false);
        let sync = f["sync_calls_per_commit"].as_f64().unwrap();
        assert!(
            (0.9..=1.2).contains(&sync),
            "fdatasync: {sync} syncs per commit: {f}"
        );
        let o = traced("open_datasync", false);
        assert!(o["sync_calls_per_commit"].as_f64().unwrap() < 0.05, "{o}");
        assert!(o["write_calls_per_commit"].as_f64().unwrap() >= 0.9, "{o}");
        for t in [&f, &o] {
            let fl = t["backend_bios"]["flushes"].as_f64().unwrap()
                + t["backend_bios"]["fua_writes"].as_f64().unwrap();
            assert!(fl >= 0.9, "a durable commit asks for a FLUSH or FUA: {t}");
        }
    }
    let pgw = r["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["phase"] == "pgbench")
        .unwrap();
    assert!(pgw["cpu_busy_pct"].as_f64().unwrap() > 5.0, "{pgw}");
    let rules: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"data-and-wal-on-one-device"), "{rules:?}");
    assert!(rules.contains(&"wal-sync-method"), "{rules:?}");
    // Findings carry their figures as numbers, not only in the sentence.
    let find = |rule: &str| {
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == rule)
            .cloned()
            .unwrap()
    };
    let w = find("wal-sync-method");
    assert!(
        w["experiment"]
            .as_str()
            .is_some_and(|x| x.contains("private instance")),
        "the comparison is labelled as plumb's own experiment: {w}"
    );
    assert!(
        w["numbers"]["single.fdatasync.p50_s"].as_f64().unwrap() > 0.0,
        "{w}"
    );
    // Traced as root: the FLUSHes compared are the committing backend's own, not the device's.
    let whose = if is_root() {
        "the committing backend's own"
    } else {
        "the whole device's"
    };
    assert!(
        w["statement"].as_str().unwrap().contains(whose),
        "{whose}: {w}"
    );
    assert!(
        find("data-and-wal-on-one-device")["numbers"]["disks"]
            .as_f64()
            .unwrap()
            >= 1.0
    );

    // The recording has the phases as marks and plumb can read it back.
    let o = plumb()
        .arg("export")
        .arg(out.join("recording.plumb"))
        .arg("--metric")
        .arg("cpu.all.user_pct")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).lines().count() > 10);

    // The engine's own counters are in the recording: commits per second during pgbench.
    let o = plumb()
        .arg("--json")
        .arg("export")
        .arg(out.join("recording.plumb"))
        .args(["--metric", "engine.db.commits_per_s"])
        .output()
        .unwrap();
    let best = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["values"]["engine.db.commits_per_s"].as_f64())
        .fold(0.0, f64::max);
    assert!(best > 50.0, "engine.db.commits_per_s peaked at {best}");

    // The page, as a browser shows it.
    let Some(chrome) = chromium() else {
        skip("skipped the browser check: no chromium (scripts/setup --test installs it)");
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", out.join("index.html").display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    for id in [
        "engine",
        "findings",
        "durability",
        "sweep",
        "pgbench",
        "loops",
        "phases",
        "recording",
        "sweep-chart",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "no section {id} in the rendered page"
        );
    }
    if is_root() {
        assert!(
            dom.contains("id=\"loops-trace\""),
            "no traced loops in the page"
        );
    }
    // The sweep is an SVG picture; the recording's charts are drawn by the page's script.
    assert!(dom.contains("<svg"), "no sweep chart drawn");
    assert!(
        dom.matches("class=\"uplot").count() >= 3,
        "time charts drawn: {}",
        dom.matches("class=\"uplot").count()
    );
    let png = profile.path().join("lab.png");
    Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--window-size=1000,3000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", out.join("index.html").display()))
        .output()
        .unwrap();
    assert!(
        std::fs::metadata(&png)
            .map(|m| m.len() > 50_000)
            .unwrap_or(false),
        "blank screenshot"
    );
}

/// cgroup directories named plumb-lab-* anywhere under /sys/fs/cgroup.
fn lab_cgroups() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![PathBuf::from("/sys/fs/cgroup")];
    dirs.extend(
        std::fs::read_dir("/sys/fs/cgroup")
            .map(|rd| rd.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default(),
    );
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(&d) {
            out.extend(rd.flatten().map(|e| e.path()).filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("plumb-lab-"))
            }));
        }
    }
    out
}

/// The report's first screen at 1280x800 in Chromium holds the whole verdict block (trust,
/// figures, what needs action) above the fold. The screen as first_screen.py saw it, or None
/// when Selenium cannot run here (said).
fn first_screen_holds_the_verdict(html: &Path, name: &str) -> Option<Value> {
    let s = common::first_screen(html, name)?;
    let (bottom, height) = (
        s["verdict_bottom"].as_f64().expect("a verdict block"),
        s["inner_height"].as_f64().unwrap(),
    );
    assert!(
        bottom <= height,
        "the verdict ends at {bottom} px, below the first screen ({height} px): {s:#}"
    );
    let text = s["verdict_text"].as_str().unwrap();
    for label in ["trust", "figures", "needs action"] {
        assert!(text.contains(label), "no {label} in the verdict: {text}");
    }
    assert!(text.contains("tps"), "no throughput in the verdict: {text}");
    Some(s)
}

fn swaps() -> String {
    std::fs::read_to_string("/proc/swaps").unwrap_or_default()
}

/// A quick lab (with `extra`) under `--pressure 70% --throttle-writes 1MB/s`, its report in
/// `d/name`, checked to leave nothing but `keep` in d and no cgroup or swap device behind; its
/// report.json (schema-valid) and its standard output, or None when this host has no zram
/// (skipped, said). `stop` runs as soon as the lab has ended, before the checks (a test's
/// neighbour stops there).
fn experiments_lab(
    d: &Path,
    name: &str,
    keep: &[&str],
    extra: &[&str],
    stop: impl FnOnce(),
) -> Option<(Value, String)> {
    let swaps_before = swaps();
    let out = d.join(name);
    let o = plumb()
        .args([
            "lab",
            "--quick",
            "--pressure",
            "70%",
            "--throttle-writes",
            "1MB/s",
        ])
        .args(extra)
        .arg("--dir")
        .arg(d)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    stop();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    if err.contains("zram") && !o.status.success() {
        skip(format!("skipped: no zram here: {err}"));
        return None;
    }
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_nothing_left(d, keep);
    assert!(
        lab_cgroups().is_empty(),
        "cgroups left: {:?}",
        lab_cgroups()
    );
    assert_eq!(swaps(), swaps_before, "a swap device was left on");
    if let Some(v) = validate(&out.join("report.json")) {
        assert!(!v.starts_with("INVALID"), "{v}");
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        html.contains("Experiment: memory pressure") && html.contains("Experiment: write throttle")
    );
    // The first screen says what each experiment changed, as plumb's own doing.
    if let Some(s) =
        first_screen_holds_the_verdict(&out.join("index.html"), "lab-experiments-first-screen")
    {
        let exp = s["experiment_lines"].to_string();
        assert!(
            exp.contains("memory pressure (plumb's own experiment")
                && exp.contains("write throttle (plumb's own experiment"),
            "{s:#}"
        );
    }
    let r = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap());
    Some((r.unwrap(), String::from_utf8_lossy(&o.stdout).into_owned()))
}

/// A lab under `--pressure 70% --throttle-writes 1MB/s` (PostgreSQL): what each experiment
/// changed.
fn check_pressure_and_write_throttle(r: &Value) {
    let ex = r["experiments"].as_array().unwrap();
    let get = |name: &str| {
        ex.iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {ex:?}"))
    };
    // Memory pressure: the server's memory went to swap, as smaps saw it.
    let p = get("memory pressure");
    let swapped = p["window"]["engine_swap_bytes_max"].as_f64().unwrap();
    assert!(swapped > 10.0 * 1048576.0, "server swap {swapped}");
    assert!(p["notes"].to_string().contains("VmSwap"));
    // The swap is plumb's doing: its finding is tagged as the experiment and is not a
    // critical finding about the server, and the verdict says so.
    let swap = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "engine-memory-in-swap")
        .unwrap_or_else(|| panic!("no swap finding: {:#}", r["findings"]));
    assert_eq!(swap["severity"], "info", "{swap:#}");
    assert!(
        swap["experiment"].as_str().is_some_and(|x| !x.is_empty()),
        "the swap finding is not tagged as plumb's experiment: {swap:#}"
    );
    let pressure = r["verdict"]["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "memory pressure")
        .unwrap();
    assert!(pressure["server_swap_bytes"].as_f64().unwrap() > 10.0 * 1048576.0);
    assert!(!r["verdict"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["rule"] == "engine-memory-in-swap" && a["experiment"] == false));
    // Write throttle at 1 MB/s: pgbench cannot keep its pace.
    let t = get("write throttle");
    let (base, with) = (
        t["baseline"]["tps"].as_f64().unwrap(),
        t["changed"]["tps"].as_f64().unwrap(),
    );
    assert!(
        with < base * 0.8,
        "tps {base} → {with} under a 1 MB/s write throttle"
    );
    // A fall that large is beyond the runs' per-second spread, and said so.
    assert!(t["baseline"]["tps_p10"].as_f64().is_some());
    assert_eq!(
        t["notes"][0]["code"], "pgbench-compared",
        "{:#}",
        t["notes"]
    );
}

#[test]
fn target_is_read_only_unless_allowed_and_the_scratch_database_goes() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    // A server of the user's: started here, and still running after the labs.
    let server = common::Private::start(&d.path().join("server"), &[]);
    let (pg, url) = (server.dir.clone(), server.url());
    let databases = || server.psql("SELECT datname FROM pg_database ORDER BY 1");
    let before = databases();
    let lab = |extra: &[&str], out: &str| -> Value {
        let o = plumb()
            .args(["lab", "--quick", "--engine", &url, "--dir"])
            .arg(d.path())
            .arg("--out")
            .arg(d.path().join(out))
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_str(
            &std::fs::read_to_string(d.path().join(out).join("report.json")).unwrap(),
        )
        .unwrap()
    };
    let r = lab(&[], "read-only");
    assert!(r["pgbench"].is_null() && r["loops"].as_array().unwrap().is_empty());
    assert!(
        r["skipped"].to_string().contains("--allow-writes"),
        "{}",
        r["skipped"]
    );
    assert!(r["durability"]["rows"]
        .as_array()
        .is_some_and(|v| !v.is_empty()));
    assert_eq!(databases(), before, "a read-only lab created something");
    // With --allow-writes, a pgbench script of the user's: pgbench runs it on its tables in a
    // scratch database of plumb's.
    let script = d.path().join("select.pgb");
    std::fs::write(
        &script,
        "\\set aid random(1, 100000 * :scale)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n",
    )
    .unwrap();
    let script = script.to_str().unwrap();
    // The storage was probed by the read-only lab: this one is about the workload and the loops.
    let r = lab(
        &[
            "--allow-writes",
            "--workload",
            script,
            "--clients",
            "3",
            "--duration",
            "3s",
            "--skip",
            "storage",
        ],
        "writes",
    );
    let p = &r["pgbench"];
    assert!(p["tps"].as_f64().unwrap() > 0.0, "{p}");
    assert_eq!(p["script"], script, "{p}");
    assert_eq!(p["clients"], 3);
    assert!(p["transactions"].as_u64().unwrap() > 100, "{p}");
    assert_eq!(p["failed"], 0, "{p}");
    let loops = r["loops"].as_array().unwrap();
    assert_eq!(loops.len(), 2, "one wal_sync_method: the server's own");
    assert!(r["skipped"]
        .to_string()
        .contains("wal_sync_method comparison"));
    assert_eq!(databases(), before, "the scratch database was not dropped");
    // The server is the user's: still running, then stopped by the test.
    assert!(plumb()
        .args(["engine", "status", "--dir"])
        .arg(&pg)
        .status()
        .unwrap()
        .success());
    assert!(server.remove().status.success());
    assert_nothing_left(d.path(), &["read-only", "writes", "select.pgb"]);
}

/// A second plumb writing to the lab's disk, stopped (SIGTERM, so it removes its file) on drop.
struct Neighbour(Child);

impl Neighbour {
    fn start(dir: &Path) -> Neighbour {
        Neighbour(
            plumb()
                .args([
                    "io",
                    "run",
                    "--duration",
                    "300s",
                    "--warmup",
                    "0s",
                    "--write-pct",
                    "100",
                    "--bs",
                    "64K",
                    "--qd",
                    "8",
                    "--size",
                    "128M",
                ])
                .arg(dir.join("neighbour.dat"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        // SAFETY: signalling the child this test started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// A quick lab whose pgbench initialisation runs alone and whose pgbench and loops run beside a
/// neighbour writing to the same disk: the phases it touched are marked and named, their
/// findings lowered, plumb compare withholds their figures, and the first screen states nothing
/// the sections withhold (no "faster" from loops run beside other work), lists each action once
/// and opens on one scannable trust line naming the worst neighbour. (A disturbed sweep's knee
/// is withheld from the first screen: crates/lab/src/exp/tests.rs.)
#[test]
fn a_neighbour_started_halfway_marks_the_phases_it_touched_and_the_first_screen_withholds_them() {
    let _group = common::alone();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    let out = d.path().join("report");
    // pgbench's initialisation runs alone; the neighbour starts with pgbench's run. (The
    // storage probes are left out: they would run alone as the initialisation does.)
    let (mut c, _) = start_until_with(&["--skip", "storage"], d.path(), &out, "clients for");
    let n = Neighbour::start(d.path());
    let pid = n.0.id();
    assert_eq!(wait(&mut c, Duration::from_secs(300)), 0);
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let windows = r["windows"].as_array().unwrap();
    let verdict = |phase: &str| {
        windows
            .iter()
            .find(|w| w["phase"] == phase)
            .map(|w| w["interference"]["verdict"].clone())
            .unwrap_or_else(|| panic!("no {phase} window: {windows:#?}"))
    };
    assert_eq!(
        verdict("pgbench init"),
        "clean",
        "pgbench's initialisation ran alone: {windows:#?}"
    );
    let touched: Vec<&Value> = windows
        .iter()
        .filter(|w| w["interference"]["verdict"] == "disturbed")
        .collect();
    assert!(
        touched.iter().any(|w| w["phase"] == "pgbench"),
        "pgbench ran beside the neighbour: {windows:#?}"
    );
    let named = touched.iter().any(|w| {
        w["interference"]["neighbours"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["pid"] == pid)
    });
    assert!(named, "PID {pid} named: {touched:#?}");
    // A finding drawn from a disturbed phase is no warning.
    let disturbed: Vec<&str> = touched
        .iter()
        .map(|w| w["phase"].as_str().unwrap())
        .collect();
    for f in r["findings"].as_array().unwrap() {
        let from_disturbed = f["phases"]
            .as_array()
            .is_some_and(|p| p.iter().any(|x| disturbed.contains(&x.as_str().unwrap())));
        if from_disturbed {
            assert_eq!(f["severity"], "info", "{f:#}");
        }
    }
    // The text says which phases and why.
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        summary.contains("DISTURBED") && summary.contains("pgbench was disturbed"),
        "{summary}"
    );
    // plumb compare judges nothing the neighbour touched: pgbench's figures are withheld,
    // the neighbour named.
    let o = plumb()
        .args(["compare", "--json"])
        .arg(&out)
        .arg("--")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let c: Value = serde_json::from_slice(&o.stdout).unwrap();
    let tps = c["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "pgbench tps")
        .unwrap_or_else(|| panic!("{c:#}"));
    assert_eq!(tps["verdict"], "withheld", "{tps:#}");
    assert!(
        tps["disturbed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["phase"] == "pgbench"
                && d["neighbour"]
                    .as_str()
                    .unwrap_or("")
                    .contains(&format!("PID {pid}"))),
        "{tps:#}"
    );
    check_first_screen_withholds(&r, &summary);
    drop(n);
    assert_nothing_left(d.path(), &["report"]);
}

/// The same neighbour accepted by PID (`--accept-neighbour`) is recorded in a `plumb load`'s
/// window and said "noted: accepted"; not accepted, it disturbs that window. Beside the other
/// tests: their processes may disturb the windows too, and what is checked is this neighbour's
/// place in them.
#[test]
fn a_neighbour_accepted_by_pid_is_noted_in_a_loads_window_and_disturbs_it_otherwise() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    let n = Neighbour::start(d.path());
    check_load_window_accepts(d.path(), n.0.id());
    drop(n);
    assert_nothing_left(d.path(), &["pg-a", "pg-b"]);
}

/// The verdict block of a summary: from "Verdict" to the first blank line.
fn verdict_block(summary: &str) -> String {
    summary
        .split("\n\n")
        .find(|b| b.starts_with("Verdict") || b.contains("\nVerdict\n"))
        .unwrap_or("")
        .to_string()
}

/// The first screen of a lab some of whose phases a neighbour disturbed: one trust line naming
/// the worst neighbour, no "faster" from disturbed runs, each action once.
fn check_first_screen_withholds(r: &Value, summary: &str) {
    let block = verdict_block(summary);
    assert!(block.starts_with("Verdict"), "{summary}");
    // One scannable trust line first, the worst neighbour named by PID.
    let trust = block.lines().nth(1).unwrap_or("");
    assert!(
        trust.contains("DISTURBED: ") && trust.contains("; worst: ") && trust.chars().count() < 160,
        "{block}"
    );
    // No knee from a disturbed sweep, in the verdict or as a finding; the section says why.
    if r["sweep"]["disturbance"] == "disturbed" {
        assert!(
            !block.contains("the knee") && !block.contains("grew no faster"),
            "{block}"
        );
        assert!(block.contains("is stated: the sweep"), "{block}");
        assert!(summary.contains("no knee is stated: the sweep was disturbed"));
        let codes = r["findings"].to_string();
        assert!(!codes.contains("device-knee") && !codes.contains("device-past-knee"));
    }
    // No "faster" in the first screen from runs beside other work; the loops' statement says
    // they were not compared where their windows were disturbed.
    assert!(
        !block.replace("grew no faster", "").contains("faster"),
        "{block}"
    );
    let disturbed = |phase: &str| {
        r["windows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["phase"] == phase && w["interference"]["verdict"] == "disturbed")
    };
    let single_row_disturbed = [
        "single-row commits, fdatasync",
        "single-row commits, open_datasync",
        "single-row commits, open_datasync+O_DIRECT",
    ]
    .iter()
    .all(|p| disturbed(p));
    if single_row_disturbed {
        let wal = summary
            .lines()
            .find(|l| l.contains("wal_sync_method compared"))
            .unwrap_or("");
        assert!(
            wal.contains("single-row commits: not compared")
                && !wal.contains("single-row commits: 2"),
            "{wal}"
        );
    }
    // Each action once.
    let actions: Vec<&str> = block
        .lines()
        .filter(|l| l.contains("[warn]") || l.contains("[critical]"))
        .collect();
    let mut unique = actions.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), actions.len(), "{block}");
}

/// `plumb load` beside the neighbour `pid`, accepted and then not: its window records it as
/// accepted, then is disturbed by it. The servers' directories are d/pg-a and d/pg-b.
fn check_load_window_accepts(d: &Path, pid: u32) {
    let load = |accept: bool| -> Value {
        let dir = d.join(if accept { "pg-a" } else { "pg-b" });
        std::fs::create_dir(&dir).unwrap();
        let mut args: Vec<String> = [
            "load",
            "--dir",
            dir.to_str().unwrap(),
            "--workload",
            "point-select",
            "--scale",
            "1",
            "--clients",
            "2",
            "--rampup",
            "1s",
            "--duration",
            "4s",
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if accept {
            args.extend(["--accept-neighbour".to_string(), pid.to_string()]);
        }
        let o = plumb().args(&args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let j = load(true);
    let w = &j["verdict"]["windows"][0];
    assert_eq!(w["phase"], "timed window", "{w:#}");
    assert!(
        w["accepted"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["pid"] == pid)),
        "the accepted neighbour is recorded: {w:#}"
    );
    assert!(
        !w["neighbours"]
            .to_string()
            .contains(&format!("\"pid\":{pid}")),
        "{w:#}"
    );
    assert_ne!(j["verdict"]["trust"], "unwatched");
    let j = load(false);
    let w = &j["verdict"]["windows"][0];
    assert_eq!(w["trust"], "disturbed", "{w:#}");
    assert!(
        w["neighbours"]
            .to_string()
            .contains(&format!("\"pid\":{pid}")),
        "{w:#}"
    );
}

/// A lab under `--pressure 70% --throttle-writes 1MB/s`: what each experiment changed. (Its
/// throttled run is not the one compared below: after the pressure the server's pages come
/// back from swap through the throttle, and its pgbench runs too few transactions for a p99.)
#[test]
fn pressure_and_write_throttle_change_the_results() {
    let _group = common::alone();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    if !is_root() {
        skip("skipped: the experiments need root (a cgroup and a zram swap device)");
        return;
    }
    let d = scratch();
    // The experiments compare the workload with and without them: the storage probes and the
    // loops are not what this test is about; 8 s runs give the per-second spread (five whole
    // seconds) that a change is judged against.
    let skip = ["--skip", "storage,loops", "--duration", "8s"];
    if let Some((r, _)) = experiments_lab(d.path(), "report", &["report"], &skip, || ()) {
        check_pressure_and_write_throttle(&r);
    }
}

/// One lab per configuration, checked many ways: a quick lab end to end (a); a second one (b),
/// which `plumb compare` finds no worse by the rule; and one with `--throttle-writes 2MB/s`
/// (c), whose throttled workload compare finds worse than b's (tps and p99), `--fail-on worse`
/// exiting 1.
#[test]
fn quick_labs_end_to_end_and_compared_quiet_and_under_a_write_throttle() {
    let _group = common::alone();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    let run = |name: &str, extra: &[&str]| -> (Output, PathBuf) {
        let out = d.path().join(name);
        let o = plumb()
            .args(["lab", "--quick", "--dir"])
            .arg(d.path())
            .arg("--out")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        (o, out)
    };
    let (o, a) = run("a", &[]);
    check_quick_lab(&o, &d, &a, &["a"]);
    if !is_root() {
        skip("skipped the comparison: the write throttle needs root (a cgroup)");
        return;
    }
    let ok = |(o, out): (Output, PathBuf)| {
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    };
    // b against a is the rule on two quiet labs: its storage probes and pgbench are enough
    // figures (compare takes those both have), the loops are a's.
    let b = ok(run("b", &["--skip", "loops"]));
    // c's comparison is of the workload: its storage probes and loops are left out, and compare
    // takes the figures both labs have.
    let c = ok(run(
        "c",
        &["--throttle-writes", "2MB/s", "--skip", "storage,loops"],
    ));
    let compare = |x: &Path, y: &Path| -> (i32, Value) {
        let o = plumb()
            .args(["compare", "--fail-on", "worse", "--json"])
            .arg(x)
            .arg("--")
            .arg(y)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        (o.status.code().unwrap(), v)
    };
    let verdict = |v: &Value, name: &str| -> String {
        v["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {v:#}"))["verdict"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let worse_of = |v: &Value| -> Vec<String> {
        v["figures"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["verdict"] == "worse")
            .map(|f| {
                format!(
                    "{} {:+.1}% ({:+.1}% to {:+.1}%) p={}",
                    f["name"],
                    f["change_pct"].as_f64().unwrap_or(f64::NAN),
                    f["change_low_pct"].as_f64().unwrap_or(f64::NAN),
                    f["change_high_pct"].as_f64().unwrap_or(f64::NAN),
                    f["p"]
                )
            })
            .collect()
    };
    let (code, quiet) = compare(&a, &b);
    let said = worse_of(&quiet);
    let worse = &said;
    assert!(worse.is_empty(), "two quiet labs: {said:#?}");
    assert_eq!(code, 0);
    assert!(
        ["not_distinguishable", "better"].contains(&quiet["verdict"]["outcome"].as_str().unwrap()),
        "{:#}",
        quiet["verdict"]
    );
    assert!(
        quiet["figures"].as_array().unwrap().len() >= 20,
        "{quiet:#}"
    );
    // One run a side: pgbench's seconds are the samples.
    assert!(quiet["per_second"].as_bool().unwrap());
    assert!(
        quiet["figures"][0]["baseline"]["n"].as_u64().unwrap() >= 5,
        "{:#}",
        quiet["figures"][0]
    );

    // The throttled lab against the quiet one run just before it: adjacent runs, so that a
    // host drifting over the three labs cannot make an unthrottled figure "better" (c against a
    // once gave pgbench's tps better by chance, and the outcome "mixed").
    let (code, throttled) = compare(&b, &c);
    assert_eq!(
        verdict(&throttled, "pgbench tps [write throttle]"),
        "worse",
        "{throttled:#}"
    );
    assert_eq!(
        verdict(&throttled, "pgbench latency p99 (ms) [write throttle]"),
        "worse",
        "{throttled:#}"
    );
    assert_eq!(code, 1, "--fail-on worse");
    // The verdict first, for a pipeline: the comparison in one word with the figures.
    assert_eq!(
        throttled["verdict"]["outcome"], "worse",
        "{:#}",
        throttled["verdict"]
    );
    assert!(throttled["verdict"]["worse"]
        .to_string()
        .contains("pgbench tps [write throttle]"));
    let differed = throttled["differed"].to_string();
    assert!(differed.contains("write throttle"), "{differed}");
    // The other way round the throttled run is the baseline: better, exit 0.
    let (code, back) = compare(&c, &b);
    assert_eq!(verdict(&back, "pgbench tps [write throttle]"), "better");
    assert_eq!(code, 0, "{:#?}", worse_of(&back));

    // Windows of the recordings: pgbench in the quiet lab against pgbench under the throttle.
    let span = |lab: &Path, phase: &str| -> PathBuf {
        let r: Value =
            serde_json::from_str(&std::fs::read_to_string(lab.join("report.json")).unwrap())
                .unwrap();
        let ws = r["windows"].as_array().unwrap();
        let w = ws
            .iter()
            .find(|w| w["phase"] == phase)
            .or_else(|| {
                ws.iter()
                    .find(|w| w["phase"].as_str().unwrap().starts_with(phase))
            })
            .unwrap_or_else(|| panic!("no {phase} window"))
            .clone();
        PathBuf::from(format!(
            "{}@{:.0}s-{:.0}s",
            lab.join("recording.plumb").display(),
            w["start_s"].as_f64().unwrap().ceil(),
            w["end_s"].as_f64().unwrap().floor()
        ))
    };
    let (code, rec) = compare(&span(&a, "pgbench"), &span(&c, "pgbench, writes throttled"));
    assert_eq!(rec["what"], "a recording's window", "{rec:#}");
    assert_eq!(verdict(&rec, "commits a second"), "worse", "{rec:#}");
    assert_eq!(code, 1);
    for bad in ["@5m-1m", "@x-y", "@100h-101h", "@1:99-2:00"] {
        let arg = format!("{}{bad}", a.join("recording.plumb").display());
        let o = plumb()
            .args(["compare", &arg, "--", &arg])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(bad),
            "{bad}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_nothing_left(d.path(), &["a", "b", "c"]);
}

/// `--replica sync` and then `async`: beside a synchronous standby a commit waits for the
/// standby's flush, and with the standby's writes throttled the primary's commits follow its
/// disk; beside an asynchronous one they do neither. Nothing is left: no standby, no slot, no
/// cgroup.
#[test]
fn a_synchronous_standby_slows_commits_to_its_disk_and_an_asynchronous_one_does_not() {
    let _group = common::alone();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    if !is_root() {
        skip("skipped: --replica needs root (the standby's cgroup)");
        return;
    }
    let lab = |mode: &str| -> Value {
        let d = scratch();
        let out = d.path().join("report");
        let o = plumb()
            // The commits beside the standby are the test: no storage probes, no loops, and
            // the workload's runs short (the commit loops are as long).
            .args([
                "lab",
                "--quick",
                "--skip",
                "storage,loops",
                "--duration",
                "5s",
                "--replica",
                mode,
                "--dir",
            ])
            .arg(d.path())
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "--replica {mode}: {err}");
        assert_nothing_left(d.path(), &["report"]);
        assert!(
            lab_cgroups().is_empty(),
            "cgroups left: {:?}",
            lab_cgroups()
        );
        if let Some(v) = validate(&out.join("report.json")) {
            assert!(!v.starts_with("INVALID"), "{v}");
        }
        let html = std::fs::read_to_string(out.join("index.html")).unwrap();
        assert!(html.contains("Experiment: standby"), "--replica {mode}");
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
    };
    // The median of the `on` commits under a condition, in seconds.
    let p50 = |r: &Value, name: &str, condition_has: &str| -> f64 {
        let e = r["experiments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {}", r["experiments"]));
        e["commits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["synchronous_commit"] == "on"
                    && c["condition"].as_str().unwrap().contains(condition_has)
            })
            .unwrap_or_else(|| panic!("no {condition_has} in {}", e["commits"]))["latency"]["p50_s"]
            .as_f64()
            .unwrap()
    };
    let codes = |r: &Value, name: &str| -> String {
        r["experiments"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == name)
            .map(|e| e["notes"].to_string())
            .collect()
    };

    let sync = lab("sync");
    let beside = p50(&sync, "standby", "beside");
    let throttled = p50(&sync, "standby's writes throttled", "throttled");
    assert!(
        throttled > 5.0 * beside,
        "sync: {beside} s beside the standby, {throttled} s with its writes throttled"
    );
    assert!(codes(&sync, "standby").contains("standby-commit-wait"));
    assert!(codes(&sync, "standby's writes throttled").contains("standby-commit-follows-standby"));
    assert!(sync["findings"]
        .to_string()
        .contains("synchronous-standby-disk"));

    let asynchronous = lab("async");
    let beside = p50(&asynchronous, "standby", "beside");
    let throttled = p50(&asynchronous, "standby's writes throttled", "throttled");
    assert!(
        throttled < (3.0 * beside).max(0.002),
        "async: {beside} s beside the standby, {throttled} s with its writes throttled"
    );
    assert!(
        !codes(&asynchronous, "standby's writes throttled")
            .contains("standby-commit-follows-standby"),
        "{}",
        codes(&asynchronous, "standby's writes throttled")
    );
    assert!(!asynchronous["findings"]
        .to_string()
        .contains("synchronous-standby-disk"));
}

/// One quick MariaDB lab, beside a neighbour writing O_DSYNC to the same disk and with both
/// experiments (`--pressure 70% --throttle-writes 1MB/s`): plumb's driver runs the workload,
/// the loops and each durability setting, the server's own FLUSHes told from the device's, and
/// the experiments rerun the workload.
#[test]
fn quick_lab_on_mariadb_runs_the_workload_the_loops_and_the_experiments_on_plumbs_driver() {
    let _group = common::alone();
    if let Some(why) = no_mariadb() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    let out = d.path().join("report");
    // A neighbour on the same filesystem all along: 8 KiB O_DSYNC writes, each one a cache
    // FLUSH (or a FUA write) of its own, which the device counts and the server's trace must not.
    let file = d.path().join("neighbour");
    let mut n = Command::new("sh")
        .process_group(0)
        .arg("-c")
        .arg(format!(
            "while :; do dd if=/dev/zero of={} bs=8k count=256 oflag=dsync conv=notrunc status=none; done",
            file.display()
        ))
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            // SAFETY: the neighbour's shell and its dd are this test's own.
            unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let neighbour = Kill(&mut n);
    let lab = experiments_lab(
        d.path(),
        "report",
        &["report"],
        // 5 s runs of the workload: enough for its checks and each experiment's change. The
        // storage probes are no engine's (they run on MariaDB's lab in lab_ends' Ctrl-C test).
        // With --explain: the driver's transactions taken apart, as plumb load's are.
        &[
            "--kind",
            "mariadb",
            "--duration",
            "5s",
            "--skip",
            "storage",
            "--explain",
        ],
        || {
            drop(neighbour);
            let _ = std::fs::remove_file(&file);
        },
    );
    let Some((r, text)) = lab else {
        return;
    };
    check_mariadb_experiments(&r);
    // The throttled run taken apart in the summary, as the lab's own run is.
    assert!(
        text.contains("Where the server's time went (--explain): tpcb, writes throttled to 1MB/s"),
        "{text}"
    );
    assert!(
        r["target"].as_str().unwrap().contains("private MariaDB"),
        "{}",
        r["target"]
    );
    // pgbench is PostgreSQL's: plumb's driver ran the workload and both loops on MariaDB.
    assert!(r["pgbench"].is_null(), "{}", r["pgbench"]);
    let w = r["workloads"].as_array().unwrap();
    let names: Vec<&str> = w.iter().map(|x| x["workload"].as_str().unwrap()).collect();
    assert_eq!(names, ["tpcb", "insert-single", "insert-bulk"]);
    for x in w {
        assert_eq!(x["engine"], "MariaDB", "{x}");
    }
    let committed = |x: &Value, t: &str| {
        x["types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|y| y["name"] == t)
            .map(|y| y["committed"].as_u64().unwrap())
            .unwrap_or(0)
    };
    assert!(committed(&w[0], "tpcb") > 100, "{}", w[0]);
    assert!(w[0]["tpm"].as_f64().unwrap() > 0.0, "{}", w[0]);
    // pgbench's balances agree after the run.
    let checks = w[0]["checks"].as_array().unwrap();
    assert!(!checks.is_empty());
    assert!(checks.iter().all(|c| c["violations"] == 0), "{}", w[0]);
    assert!(committed(&w[1], "single-commits") > 0, "{}", w[1]);
    assert!(committed(&w[2], "bulk-insert") > 0, "{}", w[2]);
    // Each run is a phase with its window.
    let phases: Vec<&str> = r["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["phase"].as_str().unwrap())
        .collect();
    for p in ["tpcb load", "tpcb", "insert-single", "insert-bulk"] {
        assert!(phases.contains(&p), "{phases:?}");
    }
    assert!(r["durability"].is_null() && r["sweep"].is_null());
    assert!(text.contains("Workload (plumb's driver): tpcb"), "{text}");
    // --explain: every run on the driver taken apart, each transaction's parts closed, the
    // single-row commits each one fsync and the bulk inserts' commit one in 10,000 inserts.
    assert!(
        text.contains("Where the server's time went (--explain): tpcb"),
        "{text}"
    );
    let explained = |x: &Value, t: &str| -> Value {
        x["types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|y| y["name"] == t)
            .map(|y| y["explained"].clone())
            .unwrap_or_default()
    };
    for (x, t) in [(&w[0], "tpcb"), (&w[1], "single-commits")] {
        let e = explained(x, t);
        assert!(e["closed"].as_f64().unwrap() >= 0.95, "{t}: {e}");
        let syncs = e["mean"]["syncs"].as_f64().unwrap();
        assert!(syncs > 0.3, "{t}: {e}");
    }
    // MariaDB's durability settings: each set, read back and measured from the block layer.
    let md = &r["mariadb_durability"];
    let cfg = |name: &str| -> &Value {
        md["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {md}"))
    };
    for c in md["configs"].as_array().unwrap() {
        assert_eq!(c["ignored"], serde_json::json!([]), "{c}");
        for (k, v) in c["asked"].as_object().unwrap() {
            let want = if k == "log_bin" {
                "ON"
            } else {
                v.as_str().unwrap()
            };
            assert!(
                c["read_back"][k]
                    .as_str()
                    .unwrap()
                    .eq_ignore_ascii_case(want),
                "{k}: {c}"
            );
        }
        assert!(c["single"]["count"].as_u64().unwrap() >= 100, "{c}");
        // The verdict's figures carry each configuration's single-row commit p50.
        let name = c["name"].as_str().unwrap();
        let p50 = r["verdict"]["headline"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["code"] == "commit_p50" && h["of"].as_str().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("{name}'s commit p50 in the verdict: {}", r["verdict"]));
        let (got, want) = (
            p50["value"].as_f64().unwrap(),
            c["single"]["p50_s"].as_f64().unwrap(),
        );
        assert!((got - want).abs() <= want * 1e-9, "{name}: {got} vs {want}");
    }
    assert!(text.contains("a single-row commit, p50 / p99: "), "{text}");
    assert_eq!(
        cfg("trx_commit=2")["read_back"]["innodb_flush_log_at_trx_commit"],
        "2"
    );
    assert_eq!(md["traced"], true, "{md}");
    let flushes = |c: &Value| c["server_bios_per_commit"]["flushes"].as_f64().unwrap();
    let write_back = md["device_write_back"] == true;
    if write_back {
        // Each durable commit asked for its own cache FLUSH (or a FUA write); with the log
        // flushed once a second, far fewer.
        let fsync = cfg("trx_commit=1 fsync");
        let fua = fsync["server_bios_per_commit"]["fua_writes"]
            .as_f64()
            .unwrap();
        assert!(flushes(fsync) + fua >= 1.0, "{fsync}");
        assert!(
            flushes(cfg("trx_commit=2")) < 0.5 * flushes(fsync),
            "{}",
            cfg("trx_commit=2")
        );
        // The device counted the neighbour's FLUSHes too; the server's own count did not grow
        // with them (a durable commit here costs one or two of its own). The block layer merges
        // FLUSHes that wait at the same time into one, so the neighbour's add less than one a
        // commit (CI once saw 0.1 a durable commit): the device must have
        // seen at least the server's own everywhere, and more than them somewhere.
        let mut widest = f64::MIN;
        for c in md["configs"].as_array().unwrap() {
            let server = flushes(c);
            let device = c["device_flushes_per_commit"].as_f64().unwrap();
            assert!(
                device > server - 0.05,
                "{}: device {device}, server {server}",
                c["name"]
            );
            if c["durable_by_settings"] == true {
                widest = widest.max(device - server);
            }
            assert!(server < 3.0, "{}: server {server}", c["name"]);
        }
        assert!(widest > 0.02, "the neighbour's FLUSHes went unseen: {md}");
    }
    assert!(
        cfg("binlog sync_binlog=1")["group_commit_ratio"]
            .as_f64()
            .unwrap()
            >= 1.0,
        "{md}"
    );
    assert!(
        text.contains("MariaDB's durability settings on this device"),
        "{text}"
    );
    if let Some(v) = validate(&out.join("report.json")) {
        assert!(!v.starts_with("INVALID"), "{v}");
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        html.contains("insert-bulk"),
        "the HTML report lacks the loops"
    );
    assert_nothing_left(d.path(), &["report"]);
}

#[test]
fn a_named_workload_runs_on_plumbs_driver_in_pgbenchs_place() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    let lab = |out: &Path, extra: &[&std::ffi::OsStr]| -> Value {
        let o = plumb()
            .args(["lab", "--quick", "--dir"])
            .arg(d.path())
            .arg("--out")
            .arg(out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    // A named workload in pgbench's place, open loop at a rate; the loops stay PostgreSQL's.
    let r = lab(
        &d.path().join("named"),
        &[
            os("--workload"),
            os("point-select"),
            os("--clients"),
            os("2"),
            os("--rate"),
            os("300/s"),
            os("--duration"),
            os("4s"),
            os("--skip"),
            os("storage"),
        ],
    );
    assert!(r["pgbench"].is_null(), "{}", r["pgbench"]);
    let w = &r["workloads"][0];
    assert_eq!(w["workload"], "point-select", "{w}");
    assert_eq!(w["engine"], "PostgreSQL", "{w}");
    assert_eq!(w["clients"], 2);
    assert_eq!(w["rate_per_s"], 300.0);
    let tps = w["types"][0]["committed"].as_f64().unwrap() / w["window_s"].as_f64().unwrap();
    assert!((tps - 300.0).abs() < 30.0, "{tps} tps at --rate 300: {w}");
    assert!(!r["loops"].as_array().unwrap().is_empty());
    assert_nothing_left(d.path(), &["named"]);
}

#[test]
fn a_mariadb_of_yours_runs_the_workload_only_with_allow_writes_in_a_scratch_database() {
    let _group = common::beside();
    let m = match common::maria::Maria::start() {
        Ok(m) => m,
        Err(why) => {
            skip(format!("skipped: {why}"));
            return;
        }
    };
    let d = scratch();
    let url = m.url("mysql");
    let databases = || m.sql("SHOW DATABASES").unwrap();
    let before = databases();
    // The storage probes are the PostgreSQL target's test: these labs are about MariaDB's.
    let lab = |extra: &[&str], out: &str| -> Value {
        let o = plumb()
            .args([
                "lab", "--quick", "--skip", "storage", "--engine", &url, "--dir",
            ])
            .arg(d.path())
            .arg("--out")
            .arg(d.path().join(out))
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        serde_json::from_slice(&std::fs::read(d.path().join(out).join("report.json")).unwrap())
            .unwrap()
    };
    let r = lab(&[], "read-only");
    assert_eq!(r["workloads"], serde_json::json!([]), "{}", r["workloads"]);
    assert!(
        r["skipped"].to_string().contains("--allow-writes"),
        "{}",
        r["skipped"]
    );
    assert_eq!(databases(), before, "a read-only lab created something");
    // The workload this time is a file of the user's SQL, on pgbench's tables.
    let script = d.path().join("w.sql");
    std::fs::write(
        &script,
        "-- move a unit between two accounts\nSET @aid = 1 + FLOOR(RAND() * 100000 * :scale);\nUPDATE pgbench_accounts SET abalance = abalance - 1 WHERE aid = @aid;\nUPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1;\n",
    )
    .unwrap();
    let r = lab(
        &[
            "--allow-writes",
            "--workload",
            script.to_str().unwrap(),
            "--clients",
            "2",
            "--duration",
            "3s",
        ],
        "writes",
    );
    let names: Vec<&str> = r["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            format!("script {}", script.display()).as_str(),
            "insert-single",
            "insert-bulk"
        ]
    );
    let w = &r["workloads"][0];
    assert_eq!(w["clients"], 2);
    assert_eq!(w["types"][0]["name"], "script");
    assert!(w["types"][0]["committed"].as_u64().unwrap() > 10, "{w}");
    assert_eq!(w["types"][0]["failed"], serde_json::json!({}), "{w}");
    // MariaDB's durability settings are changed only on plumb's own server.
    assert!(r["mariadb_durability"].is_null());
    assert!(
        r["skipped"].to_string().contains("durability paths"),
        "{}",
        r["skipped"]
    );
    assert_eq!(databases(), before, "the scratch database was not dropped");
    assert_nothing_left(d.path(), &["read-only", "writes", "w.sql"]);
}

/// A MariaDB lab's experiments: both ran plumb's driver's workload again, against the lab's own
/// run as the baseline; the write throttle cut its rate.
fn check_mariadb_experiments(r: &Value) {
    let ex = r["experiments"].as_array().unwrap();
    let get = |name: &str| {
        ex.iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {ex:?}"))
    };
    // Both ran plumb's driver's workload again, against the lab's own run as the baseline.
    let p = get("memory pressure");
    assert_eq!(p["phase"], "tpcb under memory pressure", "{p}");
    assert!(p["changed"]["tps"].as_f64().unwrap() > 0.0, "{p}");
    assert!(p["notes"].to_string().contains("VmSwap"), "{p}");
    let t = get("write throttle");
    let (base, with) = (
        t["baseline"]["tps"].as_f64().unwrap(),
        t["changed"]["tps"].as_f64().unwrap(),
    );
    assert_eq!(
        base,
        r["workloads"][0]["types"][0]["committed"].as_f64().unwrap()
            / r["workloads"][0]["window_s"].as_f64().unwrap()
    );
    assert!(
        with < base * 0.8,
        "tps {base} → {with} under a 1 MB/s write throttle"
    );
    assert_eq!(
        t["notes"][0]["code"], "pgbench-compared",
        "{:#}",
        t["notes"]
    );
    // With --explain, the throttled run's transactions taken apart too: waiting for durable
    // writes (the thread's own, or the group-commit leader's it waited for) grows from a small
    // share of the server's time to the largest, with about one FLUSH a commit all along.
    if r["command_line"]
        .as_str()
        .unwrap_or("")
        .contains("--explain")
    {
        let durable = |x: &Value| -> (f64, f64) {
            let parts = x["types"][0]["explained"]["mean"]["parts"]
                .as_array()
                .unwrap_or_else(|| panic!("no parts: {x:#}"));
            let ms = |keys: &[&str]| -> f64 {
                parts
                    .iter()
                    .filter(|p| keys.is_empty() || keys.contains(&p["part"].as_str().unwrap()))
                    .filter(|p| p["part"] != "client")
                    .map(|p| p["ms"].as_f64().unwrap())
                    .sum()
            };
            let flushes = x["types"][0]["explained"]["mean"]["flushes"]
                .as_f64()
                .unwrap();
            (ms(&["durable_write", "others_durable"]) / ms(&[]), flushes)
        };
        let (base_share, _) = durable(&r["workloads"][0]);
        let (share, flushes) = durable(&t["explained"]);
        assert!(
            share >= 0.3 && share >= 2.0 * base_share,
            "durable share {base_share:.2} → {share:.2}: {:#}",
            t["explained"]["types"][0]["explained"]["mean"]
        );
        // FLUSHes a commit where the device has a write cache, none where it writes through.
        assert!((0.0..3.0).contains(&flushes), "{:#}", t["explained"]);
    }
}
