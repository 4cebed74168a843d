//! `plumb io` end to end: the real binary, the null engine for exact counts, real files for the
//! safety rules and Ctrl-C. The tests whose figures another test's I/O or CPU would move (a timed
//! rate, a comparison, a sweep's latencies, the durability probe) and the loop device's hold
//! `common::alone()`; the rest run beside the binary's other tests.

use crate::common;
use crate::common::{plumb, run, skip, stderr};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(o.status.success(), "plumb {args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

/// A scratch directory on a real filesystem (the target dir), where O_DIRECT works.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn total_row(j: &Value, table: &str) -> Value {
    j["tables"][table]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["thread"].is_null())
        .unwrap()
        .clone()
}

#[test]
fn null_engine_rate_limit_within_2_percent_over_5_s() {
    let _group = common::alone();
    let d = scratch();
    let f = d.path().join("null.dat");
    let j = json(&[
        "io",
        "run",
        "--json",
        "--ioengine",
        "null",
        "--rate",
        "2000iops",
        "--threads",
        "2",
        "--qd",
        "4",
        "--duration",
        "5s",
        "--warmup",
        "0",
        "--size",
        "1M",
        "--bs",
        "4K",
        s(&f),
    ]);
    let ios = total_row(&j, "total")["ios"].as_u64().unwrap();
    assert!(
        (9800..=10200).contains(&ios),
        "{ios} I/Os for 2000 IOPS x 5 s"
    );
    assert_eq!(j["paced"], true);
    let series: u64 = j["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["read_ios"].as_u64().unwrap())
        .sum();
    assert_eq!(series, ios, "the per-second series adds up to the total");
    assert_eq!(j["series"].as_array().unwrap().len(), 5);
    assert!(!f.exists(), "the created file is removed");
}

#[test]
fn percentiles_appear_only_with_enough_samples() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("p.dat");
    // A rate of 1500 IOPS for 2 s: 3000 samples support the 99.9th but not the 99.99th.
    let j = json(&[
        "io",
        "run",
        "--json",
        "--ioengine",
        "null",
        "--rate",
        "1500iops",
        "--duration",
        "2s",
        "--warmup",
        "0",
        "--size",
        "1M",
        "--bs",
        "4K",
        "--write-pct",
        "100",
        s(&f),
    ]);
    let n = total_row(&j, "total")["ios"].as_u64().unwrap();
    assert!((2940..=3060).contains(&n), "{n}");
    let rows = j["percentiles"].as_array().unwrap();
    let get = |label: &str| rows.iter().find(|r| r["label"] == label).unwrap().clone();
    assert!(get("3-nines")["write_s"].is_number());
    assert!(get("4-nines")["write_s"].is_null());
    assert!(get("8-nines")["total_s"].is_null());
    assert!(get("max")["total_s"].is_number());
    assert!(
        get("50th")["read_s"].is_null(),
        "no reads in a write-only job"
    );
    let text = String::from_utf8(
        run(&[
            "io",
            "run",
            "--ioengine",
            "null",
            "--rate",
            "1500iops",
            "--duration",
            "1s",
            "--warmup",
            "0",
            "--size",
            "1M",
            "--bs",
            "4K",
            s(&d.path().join("q.dat")),
        ])
        .stdout,
    )
    .unwrap();
    assert!(text.contains("4-nines |        N/A"), "{text}");
}

#[test]
fn diskspd_command_line_runs_as_typed() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("ds.dat");
    let j = json(&[
        "--json",
        "io",
        "diskspd",
        "--ioengine",
        "null",
        "--",
        "-d1",
        "-W0",
        "-o4",
        "-t2",
        "-b8K",
        "-r",
        "-w30",
        "-c1M",
        "-L",
        "-Rxml",
        s(&f),
    ]);
    assert_eq!(j["job"]["threads"], 2);
    assert_eq!(j["job"]["queue_depth"], 4);
    assert_eq!(j["job"]["block_size"], 8192);
    assert_eq!(j["job"]["write_pct"], 30);
    assert_eq!(j["job"]["pattern"], "random");
    assert!(j["command_line"]
        .as_str()
        .unwrap()
        .contains("-d1 -W0 -o4 -t2 -b8K -r -w30"));
    assert!(j["input_notes"][0].as_str().unwrap().contains("-Rxml"));
    // Through the page cache (no -Su or -Sh) a 1 MiB file is memory's speed, and plumb says so.
    let notes = j["input_notes"].to_string();
    assert!(
        notes.contains("fits in the page cache") && notes.contains("use -Sh"),
        "{notes}"
    );
    // Two thread rows and the total.
    assert_eq!(j["tables"]["total"].as_array().unwrap().len(), 3);
    let w = total_row(&j, "write")["ios"].as_f64().unwrap();
    let t = total_row(&j, "total")["ios"].as_f64().unwrap();
    // A 30% mix drawn per I/O: within five points whatever the machine's speed.
    assert!((w / t - 0.30).abs() < 0.05, "write share {}", w / t);

    let o = run(&["io", "diskspd", "--", "-d1", "-Q7", s(&f)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("-Q7"), "{}", stderr(&o));
}

#[test]
fn csv_has_one_row_per_thread_and_direction() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("c.dat");
    let o = run(&[
        "io",
        "run",
        "--format",
        "csv",
        "--ioengine",
        "null",
        "--threads",
        "2",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--size",
        "1M",
        "--bs",
        "4K",
        "--rate",
        "100iops",
        s(&f),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("direction,thread,target,bytes,ios,bytes_per_s,iops,lat_mean_s"));
    // (2 threads + total) x (total, read, write)
    assert_eq!(lines.len(), 1 + 9, "{t}");
}

#[test]
fn real_io_uring_direct_reads() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("r.dat");
    let o = run(&[
        "io",
        "run",
        "--json",
        "--preset",
        "data-read",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--size",
        "64M",
        s(&f),
    ]);
    if !o.status.success() && stderr(&o).contains("O_DIRECT") {
        skip(format!("skipped: {}", stderr(&o)));
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["engine"].as_str().unwrap().starts_with("io_uring"));
    assert!(total_row(&j, "read")["ios"].as_u64().unwrap() > 500);
    assert!(
        j["cpu"].as_array().unwrap().len() >= 2,
        "per-CPU rows and the average"
    );
    // The verdict: the run's window graded, the totals diskspd puts first.
    let v = &j["verdict"];
    assert!(
        ["clean", "noted", "disturbed"].contains(&v["trust"].as_str().unwrap()),
        "{v:#}"
    );
    let iops = v["headline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["code"] == "iops")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(iops["value"], total_row(&j, "total")["iops"], "{v:#}");
    common::assert_valid("verdict.schema.json", &j);
    // A figure in a unit the schema does not know fails it.
    let mut bad = j.clone();
    bad["verdict"]["headline"][0]["unit"] = "furlongs".into();
    let badf = d.path().join("bad.json");
    std::fs::write(&badf, bad.to_string()).unwrap();
    if let Some(v) = common::validate("verdict.schema.json", &badf) {
        assert!(v.starts_with("INVALID"), "{v}");
    }
    assert!(v["headline"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["code"] == "latency_p99" && h["of"] == "read"));
    assert!(!f.exists());
    // The text opens on it.
    let o = run(&[
        "io",
        "run",
        "--preset",
        "data-read",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--size",
        "64M",
        s(&f),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("Verdict\n  trust"), "{text}");
    assert!(
        text.contains("  figures         total: ") && text.contains(" IOPS"),
        "{text}"
    );
}

#[test]
fn existing_file_is_never_written_without_overwrite() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("customer.db");
    std::fs::write(&f, vec![42u8; 1 << 20]).unwrap();
    let o = run(&[
        "io",
        "run",
        "--ioengine",
        "psync",
        "--write-pct",
        "50",
        "--duration",
        "1s",
        "--durability",
        "none",
        s(&f),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--overwrite"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&f).unwrap(), vec![42u8; 1 << 20], "untouched");
    // Reading it is fine and leaves it in place.
    let o = run(&[
        "io",
        "run",
        "--ioengine",
        "psync",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--durability",
        "none",
        "--bs",
        "4K",
        s(&f),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(f.exists());
    assert_eq!(std::fs::read(&f).unwrap(), vec![42u8; 1 << 20]);
}

#[test]
fn wrong_input_names_the_flag() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("x.dat");
    for (args, needle) in [
        (vec!["--bs", "huge"], "--bs"),
        (vec!["--durability", "fua"], "--durability"),
        (vec!["--preset", "nosuch"], "--preset nosuch"),
        (vec!["--rate", "fast"], "--rate"),
        (vec!["--qd", "0"], "--qd 0"),
        (vec!["--burst", "5"], "--burst and --think"),
        (vec!["--ioengine", "libaio"], "--ioengine"),
    ] {
        let mut a = vec!["io", "run"];
        a.extend(args.iter());
        a.push(s(&f));
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(!f.exists(), "nothing created on bad input");
    }
    let o = run(&[
        "io",
        "run",
        "--duration",
        "1s",
        d.path().join("no/such/dir/x.dat").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
}

fn wait_for(p: &Path, timeout: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if p.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn interrupt(child: &std::process::Child) {
    // SAFETY: sending a signal to our own child.
    unsafe {
        libc_kill(child.id() as i32, 2);
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn ctrl_c_during_the_run_leaves_nothing_behind() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("cc.dat");
    let child = plumb()
        .args([
            "io",
            "run",
            "--ioengine",
            "psync",
            "--durability",
            "none",
            "--write-pct",
            "50",
            "--duration",
            "60s",
            "--size",
            "8M",
            s(&f),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for(&f, Duration::from_secs(10)), "file never created");
    std::thread::sleep(Duration::from_millis(700));
    interrupt(&child);
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "stopped promptly");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert!(!f.exists(), "the created file is removed on Ctrl-C");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn ctrl_c_during_prefill_leaves_nothing_behind() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("big.dat");
    let child = plumb()
        .args(["io", "run", "--duration", "60s", "--size", "4G", s(&f)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if !wait_for(&f, Duration::from_secs(10)) {
        let out = child.wait_with_output().unwrap();
        // Not enough space for 4 GiB here: refused before creating anything, which is also right.
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("free space"), "{}", stderr(&out));
        return;
    }
    std::thread::sleep(Duration::from_millis(300));
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(!f.exists(), "a partly written file is removed");
}

/// Root only: a loop device with an ext4 signature is refused, and only --destroy-data-on
/// with its exact path lets plumb write to it.
#[test]
fn block_device_needs_destroy_data_on() {
    let _group = common::alone();
    if unsafe { geteuid() } != 0 {
        skip("skipped: needs root to set up a loop device");
        return;
    }
    let d = scratch();
    let backing = d.path().join("disk.img");
    let mut img = vec![0u8; 16 << 20];
    img[1080] = 0x53;
    img[1081] = 0xEF;
    std::fs::write(&backing, &img).unwrap();
    let Ok(o) = Command::new("losetup")
        .args(["--find", "--show", s(&backing)])
        .output()
    else {
        skip("skipped: losetup is not installed");
        return;
    };
    if !o.status.success() {
        skip(format!(
            "skipped: losetup failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
        return;
    }
    let dev = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim());
    let detach = Detach(dev.clone());
    let o = run(&[
        "io",
        "run",
        "--write-pct",
        "100",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--bs",
        "4K",
        s(&dev),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("--destroy-data-on") && e.contains("ext2/3/4"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(&backing).unwrap()[1080..1082],
        [0x53, 0xEF],
        "not written"
    );
    // Reading a device needs no flag.
    let o = run(&[
        "io",
        "run",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--bs",
        "4K",
        s(&dev),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "io",
        "run",
        "--write-pct",
        "100",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--bs",
        "4K",
        "--destroy-data-on",
        s(&dev),
        s(&dev),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    drop(detach);
}

extern "C" {
    fn geteuid() -> u32;
}

struct Detach(PathBuf);

impl Drop for Detach {
    fn drop(&mut self) {
        let _ = Command::new("losetup")
            .args(["-d", self.0.to_str().unwrap()])
            .status();
    }
}

#[test]
fn durability_probe_reports_every_mode_and_cleans_up() {
    let _group = common::alone();
    let d = scratch();
    let o = run(&[
        "io",
        "durability",
        s(d.path()),
        "--duration",
        "300ms",
        "--bs",
        "8K",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["rows"].as_array().unwrap();
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(
        modes,
        [
            "fdatasync",
            "fsync",
            "dsync",
            "direct-dsync",
            "direct-fdatasync",
            "none",
            "direct"
        ]
    );
    let get = |m: &str| rows.iter().find(|r| r["mode"] == m).unwrap();
    let fd = get("fdatasync");
    assert!(fd["writes"].as_u64().unwrap() > 10);
    assert_eq!(fd["sync_calls"], fd["writes"], "one fdatasync per write");
    assert_eq!(
        get("direct-dsync")["sync_calls"],
        0,
        "O_DSYNC needs no sync call"
    );
    assert_eq!(get("none")["durable"], false);
    assert_eq!(get("dsync")["durable"], true);
    let concl = j["conclusions"].as_array().unwrap();
    assert!(
        concl
            .iter()
            .any(|c| c["text"].as_str().unwrap().contains("wal_sync_method")),
        "{concl:?}"
    );
    // fdatasync against open_datasync is judged by plumb compare's rule, over the runs' tenths:
    // its p, the change's interval and the floor are in the statement and its numbers.
    let wal = concl
        .iter()
        .find(|c| c["code"].as_str().unwrap().starts_with("wal-sync-"))
        .expect("a wal_sync_method statement");
    let n = &wal["numbers"];
    assert!((0.0..=1.0).contains(&n["p"].as_f64().unwrap()), "{wal:#}");
    assert!(n["change_low_pct"].as_f64().unwrap() <= n["change_high_pct"].as_f64().unwrap());
    assert!(
        [5.0, 50.0].contains(&n["floor_pct"].as_f64().unwrap()),
        "{wal:#}"
    );
    assert!(
        wal["text"]
            .as_str()
            .unwrap()
            .contains("plumb compare's rule"),
        "{wal:#}"
    );
    // Every mode ran at least twice (rounds), each run judged for interference, each with its
    // mean write latency per tenth of the measured window. A run in which plumb's own writer
    // stopped for two tenths or more is disturbed by it (and repeated); every other run has
    // writes in at least nine of its tenths.
    for r in rows {
        let reps = r["reps"].as_array().unwrap();
        assert!((2..=4).contains(&reps.len()), "{r:#}");
        assert!(reps
            .iter()
            .all(|x| x["interference"]["verdict"].is_string()));
        assert_eq!(r["runs"], reps.len());
        assert!(
            reps.iter()
                .filter(|x| x["writes"].as_u64() > Some(0))
                .count()
                >= 2,
            "{r:#}"
        );
        for x in reps {
            if x["writes"] == 0 {
                // No write completed within the run's window (one outlasted it): no tenths and
                // no mean, and the row's figures are the runs' that wrote.
                assert!(x["tenths_s"].is_null() && x["mean_s"].is_null(), "{x:#}");
                continue;
            }
            let t = x["tenths_s"].as_array().expect("tenths");
            let stalled = x["interference"]["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["code"] == "own-stall");
            if stalled {
                assert_eq!(x["interference"]["verdict"], "disturbed", "{x:#}");
            } else if x["max_s"].as_f64().unwrap() < 0.015 {
                // Every write quicker than half a tenth (30 ms): no stall, so no empty tenths
                // but one, and each tenth's mean near the run's. (Where one write took longer,
                // the tenth it ended in carries it alone: its mean is that write's, however
                // quick the rest.)
                assert!(t.len() >= 9 && t.len() <= 10, "{x:#}");
                let mean = x["mean_s"].as_f64().unwrap();
                let avg = t.iter().map(|v| v.as_f64().unwrap()).sum::<f64>() / t.len() as f64;
                assert!(
                    avg > mean / 3.0 && avg < mean * 3.0,
                    "tenths {t:?} against mean {mean}"
                );
            }
        }
    }
    // As root, the block layer shows what the probe asked of the device.
    if let Some(dev) = fd["device"].as_object() {
        let per_write = |m: &str| get(m)["per_write"]["flushes"].as_f64().unwrap_or(0.0);
        assert!(
            per_write("direct") < 0.05,
            "plain O_DIRECT writes ask for no FLUSH"
        );
        let wc = j["storage"]["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|l| l["queue"]["write_cache"].as_str().map(String::from));
        if wc.as_deref() == Some("write back") {
            assert!(
                dev["flushes"].as_u64().unwrap() > 0 && per_write("fdatasync") >= 0.9,
                "fdatasync on a write-back cache sends a FLUSH per write"
            );
        }
    } else {
        eprintln!("no block-layer evidence here: {}", j["trace_unavailable"]);
    }
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        0,
        "the probe file is removed"
    );
}

#[test]
fn durability_compares_candidate_directories_side_by_side() {
    let _group = common::alone();
    let disk = scratch();
    // A candidate in memory: the comparison must say it is not durable at all.
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let j = json(&[
        "io",
        "durability",
        "--json",
        "--quick",
        "--reps",
        "1",
        "--bs",
        "8K",
        s(disk.path()),
        s(shm.path()),
    ]);
    assert_eq!(j["kind"], "io_durability_comparison");
    let probes = j["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2);
    assert_eq!(probes[0]["path"], s(disk.path()));
    assert_eq!(probes[1]["path"], s(shm.path()));
    // In memory nothing is durable, whatever the mode.
    assert!(probes[1]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["durable"] == false));
    let notes = j["comparison"].as_array().unwrap();
    let compared = notes
        .iter()
        .filter(|n| n["code"].as_str().unwrap().starts_with("candidates-"))
        .count();
    assert_eq!(compared, 3, "one statement per mode compared: {notes:#?}");
    // The verdict: what a durable write costs in the disk's directory; none from memory,
    // where nothing is durable.
    let heads = j["verdict"]["headline"].as_array().unwrap();
    assert!(
        heads.iter().any(|h| h["code"] == "durable_write_mean"
            && h["of"] == format!("{} fdatasync 8K", s(disk.path()))),
        "{heads:#?}"
    );
    assert!(
        !heads
            .iter()
            .any(|h| h["of"].as_str().unwrap().starts_with(s(shm.path()))),
        "{heads:#?}"
    );
    common::assert_valid("verdict.schema.json", &j);
    assert!(
        notes.iter().any(|n| n["code"] == "candidate-not-durable"
            && n["text"].as_str().unwrap().contains(s(shm.path()))),
        "{notes:#?}"
    );
    for d in [disk.path(), shm.path()] {
        assert_eq!(
            std::fs::read_dir(d).unwrap().count(),
            0,
            "probe file left in {d:?}"
        );
    }
}

/// The comparison's CSV, every run with its directory first, and a directory named twice: what
/// they check is the output's shape and the refusal, no figure, so they run beside the others.
#[test]
fn durability_comparison_as_csv_and_a_directory_named_twice() {
    let _group = common::beside();
    let disk = scratch();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let o = run(&[
        "io",
        "durability",
        "--format",
        "csv",
        "--duration",
        "200ms",
        "--reps",
        "1",
        "--bs",
        "8K",
        s(disk.path()),
        s(shm.path()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = String::from_utf8_lossy(&o.stdout);
    assert!(csv.starts_with("path,block_size,mode,"), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with(s(shm.path()))));
    // The same directory twice is refused by name.
    let o = run(&["io", "durability", s(disk.path()), s(disk.path())]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("named twice"), "{}", stderr(&o));
    for d in [disk.path(), shm.path()] {
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 0, "{d:?}");
    }
}

#[test]
fn sweep_over_rates_orders_levels_and_writes_the_chart() {
    let _group = common::beside();
    let d = scratch();
    let f = d.path().join("sw.dat");
    let chart = d.path().join("curve.svg");
    let j = json(&[
        "io",
        "sweep",
        "--json",
        "--ioengine",
        "null",
        "--rates",
        "unthrottled,1000iops,500iops",
        "--reps",
        "2",
        "--duration",
        "1s",
        "--warmup",
        "0",
        "--size",
        "1M",
        "--bs",
        "4K",
        "--chart",
        s(&chart),
        s(&f),
    ]);
    assert_eq!(j["kind"], "io_sweep");
    let levels = j["levels"].as_array().unwrap();
    let labels: Vec<&str> = levels
        .iter()
        .map(|l| l["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["500iops", "1000iops", "unthrottled"],
        "in order of increasing load"
    );
    for (l, want) in levels.iter().zip([500.0, 1000.0]) {
        // Two clean runs; the other tests running beside this one may disturb a run, which is
        // then run again (up to four runs in all).
        let runs = l["reps"].as_array().unwrap().len();
        assert!((2..=4).contains(&runs), "{runs} runs");
        let clean = l["clean_reps"].as_u64().unwrap() as usize;
        assert!(clean >= 2 || runs == 4, "{clean} clean of {runs}");
        let med = l["iops"]["median"].as_f64().unwrap();
        // A rate is a ceiling: never above it; on a loaded machine it may fall short, not far.
        assert!(med <= want * 1.02 && med >= want * 0.7, "{med} vs {want}");
        assert!(
            l["iops"]["min"].as_f64().unwrap() <= med && med <= l["iops"]["max"].as_f64().unwrap()
        );
    }
    assert!(
        levels[2]["iops"]["median"].as_f64().unwrap() > 10_000.0,
        "the null engine unthrottled is fast"
    );
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("Latency vs throughput"));
    assert_eq!(j["chart"], s(&chart));
    assert!(!f.exists(), "the sweep's file is removed at the end");
}

#[test]
fn sweep_over_queue_depths_with_real_io() {
    let _group = common::alone();
    let d = scratch();
    let f = d.path().join("qd.dat");
    let o = run(&[
        "io",
        "sweep",
        "--json",
        "--no-chart",
        "--qd-levels",
        "1,8",
        "--reps",
        "1",
        "--duration",
        "500ms",
        "--warmup",
        "100ms",
        "--size",
        "32M",
        "--bs",
        "4K",
        s(&f),
    ]);
    if !o.status.success() && stderr(&o).contains("O_DIRECT") {
        skip(format!("skipped: {}", stderr(&o)));
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let l = j["levels"].as_array().unwrap();
    assert_eq!(l[0]["label"], "1");
    assert_eq!(l[1]["label"], "8");
    // Little's law: 8 outstanding I/Os cannot take less time each than 1 does.
    assert!(
        l[1]["lat_mean_s"]["median"].as_f64().unwrap()
            >= l[0]["lat_mean_s"]["median"].as_f64().unwrap() * 0.9
    );
    assert!(j["chart"].is_null());
    assert!(!f.exists());
}

/// A piped sweep says how it is going while it runs (a CI log, `| tee`): a plain line at each
/// run and every ten seconds, with the share of the planned time done and the time left, and
/// a last line at 100%.
#[test]
fn piped_progress_predicts_and_ends_at_100() {
    let _group = common::beside();
    use std::io::BufRead;
    let d = scratch();
    let f = d.path().join("p.dat");
    let mut child = plumb()
        .args([
            "io",
            "sweep",
            "--json",
            "--no-chart",
            "--ioengine",
            "null",
            "--qd-levels",
            "1,2,4",
            "--reps",
            "1",
            "--duration",
            "1s",
            "--warmup",
            "0",
            "--size",
            "1M",
            s(&f),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    let mut running_at_first = None;
    for l in err.lines() {
        let l = l.unwrap();
        if l.starts_with("plumb io sweep") && running_at_first.is_none() {
            running_at_first = Some(child.try_wait().unwrap().is_none());
        }
        lines.push(l);
    }
    assert!(child.wait().unwrap().success(), "{lines:?}");
    assert_eq!(
        running_at_first,
        Some(true),
        "progress before the end: {lines:?}"
    );
    let progress: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("plumb io sweep"))
        .collect();
    assert!(progress.len() >= 4, "{lines:?}");
    assert!(
        progress[..progress.len() - 1]
            .iter()
            .all(|l| l.contains("% · level") && l.contains("left")),
        "{lines:?}"
    );
    assert!(progress[1].contains("run 1/1"), "{lines:?}");
    assert!(
        progress.last().unwrap().contains("100% · done in"),
        "{lines:?}"
    );
}

/// `plumb compare` on real storage tests: a run held to 2,000 I/O a second against one
/// unlimited is worse by its seconds (and `--fail-on worse` exits 1); the unlimited run
/// against itself shows nothing.
#[test]
fn compare_finds_a_rate_limited_run_worse() {
    let _group = common::alone();
    let d = scratch();
    let f = d.path().join("c.dat");
    let result = |extra: &[&str], name: &str| -> PathBuf {
        let mut args = vec![
            "io",
            "run",
            "--json",
            "--duration",
            "6s",
            "--warmup",
            "1s",
            "--qd",
            "4",
            "--bs",
            "8K",
            "--size",
            "64M",
        ];
        args.extend_from_slice(extra);
        args.push(s(&f));
        let o = run(&args);
        if !o.status.success() && stderr(&o).contains("O_DIRECT") {
            return PathBuf::new();
        }
        assert!(o.status.success(), "{}", stderr(&o));
        let p = d.path().join(name);
        std::fs::write(&p, &o.stdout).unwrap();
        p
    };
    let free = result(&[], "free.json");
    if free.as_os_str().is_empty() {
        skip("skipped: no O_DIRECT here");
        return;
    }
    let held = result(&["--rate", "2000iops"], "held.json");
    let cmp = |a: &Path, b: &Path| {
        let o = run(&["compare", "--fail-on", "worse", "--json", s(a), "--", s(b)]);
        let v: Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
        (o.status.code(), v)
    };
    let (code, v) = cmp(&free, &held);
    let iops = v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "IOPS")
        .unwrap_or_else(|| panic!("{v:#}"))
        .clone();
    assert_eq!(iops["verdict"], "worse", "{iops:#}");
    assert!(
        iops["baseline"]["n"].as_u64().unwrap() >= 5,
        "its seconds: {iops:#}"
    );
    assert_eq!(code, Some(1));
    assert!(v["what"].as_str().unwrap().starts_with("plumb io"));
    assert!(
        v["differed"].to_string().contains("--rate 2000iops"),
        "{v:#}"
    );
    let (code, same) = cmp(&free, &free);
    assert_eq!(code, Some(0), "{same:#}");
    assert!(
        same["figures"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["verdict"] != "worse"),
        "{same:#}"
    );
    assert_ne!(same["verdict"]["outcome"], "worse", "{same:#}");

    // The page: the table with the worse row marked, and both runs' seconds overlaid, as a
    // browser shows it.
    let page = d.path().join("compare.html");
    let o = run(&["compare", "--html", s(&page), s(&free), "--", s(&held)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let Some(chrome) = common::chromium() else {
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
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(
        dom.contains("id=\"figures\"") && dom.contains("class=\"crit\""),
        "{dom}"
    );
    assert!(dom.contains("<svg"), "no chart: {dom}");
    for side in ["baseline: ", "candidate: "] {
        assert!(
            dom.contains(&format!(
                "{side}{}",
                s(if side.starts_with('b') { &free } else { &held })
            )),
            "{side}: {dom}"
        );
    }
}

/// Three 2-second runs at queue depth 16 against three at queue depth 1: IOPS worse by the
/// seconds inside the runs (three runs a side alone could never reach p < 0.05: "too few"
/// and exit 0 before), `--fail-on worse` exits 1, and the rule says how it was judged.
#[test]
fn three_short_runs_a_side_are_enough_when_the_change_is_plain() {
    let _group = common::alone();
    let d = scratch();
    let f = d.path().join("qd.dat");
    let mut files: Vec<PathBuf> = Vec::new();
    for (qd, i) in [
        ("16", 0),
        ("16", 1),
        ("16", 2),
        ("1", 0),
        ("1", 1),
        ("1", 2),
    ] {
        let o = run(&[
            "io",
            "run",
            "--json",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
            "--qd",
            qd,
            "--bs",
            "4K",
            "--size",
            "64M",
            s(&f),
        ]);
        if !o.status.success() && stderr(&o).contains("O_DIRECT") {
            skip(format!("skipped: {}", stderr(&o)));
            return;
        }
        assert!(o.status.success(), "{}", stderr(&o));
        let p = d.path().join(format!("qd{qd}-{i}.json"));
        std::fs::write(&p, &o.stdout).unwrap();
        files.push(p);
    }
    let mut args = vec!["compare", "--fail-on", "worse", "--json"];
    args.extend(files[..3].iter().map(|p| s(p)));
    args.push("--");
    args.extend(files[3..].iter().map(|p| s(p)));
    let o = run(&args);
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    let iops = v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "IOPS")
        .unwrap_or_else(|| panic!("{v:#}"))
        .clone();
    assert_eq!(iops["verdict"], "worse", "{iops:#}");
    assert_eq!(v["within_runs"], true, "{v:#}");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    args.retain(|a| *a != "--json");
    let text = String::from_utf8_lossy(&run(&args).stdout).to_string();
    assert!(text.contains("over the seconds inside the runs"), "{text}");
}

/// `plumb compare --history`: eight dated storage tests, the last four held to 5,000 I/O a
/// second: one change point, at the fifth run, worse; `--fail-on worse` exits 1.
#[test]
fn history_names_the_run_where_iops_moved() {
    let _group = common::alone();
    let d = scratch();
    let f = d.path().join("h.dat");
    let dir = d.path().join("nightly");
    std::fs::create_dir(&dir).unwrap();
    for i in 1..=8 {
        let mut args = vec![
            "io",
            "run",
            "--json",
            "--duration",
            "1s",
            "--warmup",
            "500ms",
            "--qd",
            "4",
            "--bs",
            "8K",
            "--size",
            "64M",
        ];
        if i > 4 {
            args.extend_from_slice(&["--rate", "5000iops"]);
        }
        args.push(s(&f));
        let o = run(&args);
        if !o.status.success() && stderr(&o).contains("O_DIRECT") {
            skip(format!("skipped: {}", stderr(&o)));
            return;
        }
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::write(dir.join(format!("2026-11-0{i}.json")), &o.stdout).unwrap();
    }
    let o = run(&[
        "compare",
        "--history",
        s(&dir),
        "--fail-on",
        "worse",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let iops: Vec<&Value> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["figure"] == "IOPS")
        .collect();
    assert_eq!(iops.len(), 1, "{v:#}");
    assert!(
        iops[0]["run"]
            .as_str()
            .unwrap()
            .ends_with("2026-11-05.json"),
        "{v:#}"
    );
    assert_eq!(iops[0]["better"], false);
    assert!(
        (iops[0]["after"].as_f64().unwrap() - 5000.0).abs() < 250.0,
        "{v:#}"
    );
    // Too few results, and a directory that is not there: exit 2, named.
    let two = d.path().join("two");
    std::fs::create_dir(&two).unwrap();
    for n in ["a", "b"] {
        std::fs::copy(dir.join("2026-11-01.json"), two.join(format!("{n}.json"))).unwrap();
    }
    for bad in [two.clone(), d.path().join("none")] {
        let o = run(&["compare", "--history", s(&bad)]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(s(&bad)), "{}", stderr(&o));
    }
}
