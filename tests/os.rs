//! `plumb os` end to end: the real binary against the live host (checked against free, findmnt
//! and lsblk) and against captured and constructed trees under tests/fixtures.

mod common;
use common::{plumb, run, stderr};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn json(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "plumb {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// Run a host tool for cross-checking; None when it is not installed.
fn tool(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

fn process(j: &Value, pid: u64) -> &Value {
    j["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("no process {pid} in report"))
}

// ---- the live host ----------------------------------------------------------------------

#[test]
fn live_json_is_valid_and_versioned() {
    let j = json(&["os", "--json"]);
    assert_eq!(j["schema_version"], 1);
    assert_eq!(j["kind"], "os");
    assert_eq!(j["plumb_version"], env!("CARGO_PKG_VERSION"));
    // Pin the report's shape: renaming a section breaks every consumer.
    let mut keys: Vec<&str> = j.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "cgroup_mode",
            "cpu",
            "host",
            "kind",
            "memory",
            "missing",
            "notes",
            "plumb_version",
            "pressure",
            "processes",
            "schema_version",
            "storage"
        ]
    );
    // plumb reports itself first.
    assert_eq!(j["processes"][0]["role"], "plumb");
    // ... with its own PID (the child this test started, not a PID read elsewhere).
    let c = plumb()
        .args(["os", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = c.id();
    let o = c.wait_with_output().unwrap();
    let me: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(me["processes"][0]["pid"], pid);
}

#[test]
fn live_memory_matches_free() {
    let Some(free) = tool("free", &["-b"]) else {
        common::missing_basic("`free` (procps) is not installed");
        return;
    };
    let j = json(&["os", "--json"]);
    let mem: Vec<u64> = free
        .lines()
        .find(|l| l.starts_with("Mem:"))
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    let swap: Vec<u64> = free
        .lines()
        .find(|l| l.starts_with("Swap:"))
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    // total never moves; free's buff/cache and available move a little between two reads.
    assert_eq!(j["memory"]["total_bytes"].as_u64().unwrap(), mem[0]);
    assert_eq!(j["memory"]["swap_total_bytes"].as_u64().unwrap(), swap[0]);
    let near = |a: u64, b: u64| (a as i64 - b as i64).unsigned_abs() < 256 * 1024 * 1024;
    assert!(
        near(j["memory"]["available_bytes"].as_u64().unwrap(), mem[5]),
        "available {} vs free {}",
        j["memory"]["available_bytes"],
        mem[5]
    );
    assert!(near(
        j["memory"]["buff_cache_bytes"].as_u64().unwrap(),
        mem[4]
    ));
    assert!(near(j["memory"]["shmem_bytes"].as_u64().unwrap(), mem[3]));
}

#[test]
fn live_pressure_matches_proc_pressure() {
    let read_total = |name: &str| -> Option<u64> {
        let t = std::fs::read_to_string(format!("/proc/pressure/{name}")).ok()?;
        let l = t.lines().next()?;
        l.split_whitespace()
            .find_map(|kv| kv.strip_prefix("total="))
            .map(|v| v.parse().unwrap())
    };
    let Some(before) = read_total("io") else {
        common::missing_basic("this kernel has no /proc/pressure");
        return;
    };
    let j = json(&["os", "--json"]);
    let after = read_total("io").unwrap();
    // In seconds in JSON (one time unit per document), to the microsecond.
    let ours = (j["pressure"]["io"]["some"]["total_s"].as_f64().unwrap() * 1e6).round() as u64;
    assert!(
        before <= ours && ours <= after,
        "{before} <= {ours} <= {after}"
    );
    assert!(j["pressure"]["memory"]["full"]["avg10_pct"].is_number());
}

#[test]
fn live_storage_matches_findmnt_and_lsblk() {
    let dir = std::env::temp_dir();
    let Some(fm) = tool(
        "findmnt",
        &[
            "-n",
            "-o",
            "FSTYPE,SOURCE,TARGET",
            "--target",
            dir.to_str().unwrap(),
        ],
    ) else {
        common::missing_basic("`findmnt` (util-linux) is not installed");
        return;
    };
    let f: Vec<&str> = fm.split_whitespace().collect();
    let j = json(&["os", "--json", "--path", dir.to_str().unwrap()]);
    let s = &j["storage"];
    assert_eq!(s["fs_type"], f[0]);
    assert_eq!(s["mount_point"], f[2]);
    // findmnt prints bind-mount roots as SOURCE[/dir]; the device part must match.
    assert_eq!(
        s["source"].as_str().unwrap(),
        f[1].split('[').next().unwrap()
    );
    if let Some(dev) = s["device"].as_str() {
        // lsblk -s walks from the device down to its disks, as plumb does.
        let Some(ls) = tool(
            "lsblk",
            &[
                "-s",
                "-n",
                "-r",
                "-o",
                "NAME,TYPE,ROTA,LOG-SEC,PHY-SEC",
                &format!("/dev/{dev}"),
            ],
        ) else {
            eprintln!("skipped lsblk part: cannot ask lsblk about /dev/{dev}");
            return;
        };
        for line in ls.lines() {
            let c: Vec<&str> = line.split_whitespace().collect();
            if c[1] != "disk" {
                continue;
            }
            assert!(
                s["disks"].as_array().unwrap().iter().any(|d| d == c[0]),
                "lsblk disk {} not in {:?}",
                c[0],
                s["disks"]
            );
            let layer = s["layers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["name"] == c[0])
                .unwrap();
            assert_eq!(layer["queue"]["rotational"], c[2] == "1");
            assert_eq!(
                layer["queue"]["logical_block_size_bytes"]
                    .as_u64()
                    .unwrap()
                    .to_string(),
                c[3]
            );
            assert_eq!(
                layer["queue"]["physical_block_size_bytes"]
                    .as_u64()
                    .unwrap()
                    .to_string(),
                c[4]
            );
        }
    }
}

#[test]
fn live_text_report_has_every_section() {
    let out = run(&[
        "os",
        "--path",
        "/",
        "--pid",
        &std::process::id().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let t = String::from_utf8(out.stdout).unwrap();
    for section in [
        "CPU", "Memory", "Swap", "Pressure", "cgroups", "Process", "Storage",
    ] {
        assert!(
            t.lines().any(|l| l.starts_with(section)),
            "no {section} section in:\n{t}"
        );
    }
    assert!(t.contains(&format!("PID {}", std::process::id())), "{t}");
}

// ---- wrong input -------------------------------------------------------------------------

#[test]
fn wrong_pid_exits_2_naming_it() {
    let out = run(&["os", "--pid", "999999999"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("--pid 999999999") && e.contains("no process"),
        "{e}"
    );
    assert!(out.stdout.is_empty(), "no partial report on error");

    let out = run(&["os", "--pid", "twelve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("twelve"));
}

#[test]
fn wrong_path_exits_2_naming_it() {
    let out = run(&["os", "--path", "/nonexistent"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("--path /nonexistent") && e.contains("No such file"),
        "{e}"
    );
}

#[test]
fn csv_of_a_non_table_is_an_error() {
    let out = run(&["os", "--format", "csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--format text or --format json"));
}

#[test]
fn wrong_sysroot_exits_2() {
    let out = run(&["--sysroot", "/nonexistent-root", "os"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--sysroot /nonexistent-root"));
}

/// A closed stdout is not an error: plumb ends quietly, with the status a shell gives a
/// command that lost its reader (141, as SIGPIPE's), nothing on stderr.
#[test]
fn closed_stdout_ends_quietly_as_a_command_that_lost_its_reader() {
    let mut child = plumb()
        .args(["os"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", stderr(&out));
    // (What a plumb killed by an earlier test left is said first, and is not this test's.)
    let said: Vec<String> = stderr(&out)
        .lines()
        .filter(|l| !l.starts_with("plumb: removed what a plumb that was killed"))
        .map(str::to_string)
        .collect();
    assert!(said.is_empty(), "{said:?}");
}

// ---- the CLI's generated documents ---------------------------------------------------------

#[test]
fn help_completions_and_man() {
    for args in [
        vec!["--help"],
        vec!["os", "--help"],
        vec!["completions", "--help"],
        vec!["man", "--help"],
    ] {
        let o = run(&args);
        assert!(o.status.success(), "{args:?}");
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains("Usage"), "{args:?}");
        // man's flag is --out DIR (--dir, its old name, is accepted but not offered).
        assert!(!help.contains("into --dir"), "{args:?}: {help}");
    }
    let o = run(&["completions", "bash"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && t.contains("_plumb") && t.contains("--pid"),
        "{t}"
    );
    let o = run(&["man"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && t.contains(".TH plumb"), "{t}");
    let d = tempfile::tempdir().unwrap();
    let o = run(&["man", "--out", d.path().to_str().unwrap()]);
    assert!(o.status.success());
    let os_page = std::fs::read_to_string(d.path().join("plumb-os.1")).unwrap();
    assert!(
        os_page.contains("\\-\\-path") || os_page.contains("--path"),
        "{os_page}"
    );
}

// ---- fixtures ----------------------------------------------------------------------------

fn sysroot_json(name: &str, extra: &[&str]) -> Value {
    let root = fixture(name);
    let mut args = vec!["--sysroot", root.to_str().unwrap(), "os", "--json"];
    args.extend_from_slice(extra);
    json(&args)
}

#[test]
fn fixture_hybrid_captured_v1_memory_limit() {
    let j = sysroot_json(
        "hybrid-v1-memory-limit",
        &["--pid", "6261", "--path", "/tmp/pgfix/data"],
    );
    assert_eq!(j["cgroup_mode"], "hybrid");
    let pg = process(&j, 6261);
    assert_eq!(pg["name"], "postgres");
    let m = &pg["cgroups"]["memory"];
    assert_eq!(m["version"], 1);
    assert_eq!(m["cgroup_path"], "/plumb-fixture");
    assert_eq!(m["limit"], 1u64 << 30);
    assert_eq!(
        m["memsw_limit"], "max",
        "the v1 sentinel 9223372036854771712 is no limit"
    );
    assert_eq!(pg["memory_limit_bytes"], 1u64 << 30);
    // v1 blkio throttles are merged per device.
    let t = &pg["io_throttles"][0];
    assert_eq!(t["dev"]["major"], 254);
    assert_eq!(t["write_bytes_per_s"], 104857600);
    assert_eq!(t["read_iops"], 2000);
    assert_eq!(t["read_bytes_per_s"], Value::Null);
    assert_eq!(pg["cgroups"]["cpu"]["effective_cpus"], 1.5);
    // On a hybrid host pressure comes from the v2 (unified) hierarchy.
    assert_eq!(
        pg["cgroups"]["pressure"]["dir"],
        "/sys/fs/cgroup/unified/plumb-fixture"
    );
    // plumb itself sits in an unlimited cgroup.
    let me = &j["processes"][0];
    assert_eq!(me["role"], "plumb");
    assert_eq!(me["cgroups"]["memory"]["limit"], "max");
    assert_eq!(me["memory_limit_bytes"], Value::Null);
    let s = &j["storage"];
    assert_eq!(s["fs_type"], "ext4");
    assert_eq!(s["device"], "vda");
    let q = &s["layers"][0]["queue"];
    assert_eq!(q["write_cache"], "write back");
    assert_eq!(q["fua"], false);
    assert_eq!(q["scheduler"], "mq-deadline");
    // This kernel has no /proc/schedstat: reported missing, not zero.
    assert_eq!(j["cpu"]["run_delay_s"], Value::Null);
    assert!(j["missing"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["source"] == "/proc/schedstat"));
}

#[test]
fn fixture_v1_docker_container_with_3gib_limit() {
    let j = sysroot_json("v1-docker-container", &["--path", "/var/opt/mssql/data"]);
    assert_eq!(j["cgroup_mode"], "v1");
    let me = &j["processes"][0];
    assert_eq!(me["name"], "sqlservr");
    let m = &me["cgroups"]["memory"];
    // The container sees its cgroup as the hierarchy root.
    assert_eq!(m["dir"], "/sys/fs/cgroup/memory");
    assert_eq!(
        m["cgroup_path"].as_str().unwrap().len(),
        "/docker/".len() + 64
    );
    assert_eq!(m["limit"], 3221225472u64);
    assert_eq!(m["failcnt"], 1841);
    assert_eq!(m["oom_kill_events"], 2);
    assert_eq!(m["swap_bytes"], 536870912);
    assert_eq!(me["cgroups"]["cpu"]["effective_cpus"], 2.0);
    let ev: Vec<&str> = me["container_evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["points_to"].as_str().unwrap())
        .collect();
    assert!(
        ev.contains(&"docker") && ev.contains(&"container image"),
        "{ev:?}"
    );
    // One evidence line per fact, not one per v1 hierarchy.
    assert_eq!(ev.iter().filter(|e| **e == "docker").count(), 2, "{ev:?}");
    // The data volume: a partition of the host disk.
    let s = &j["storage"];
    assert_eq!(s["mount_point"], "/var/opt/mssql");
    assert_eq!(s["device"], "sda1");
    assert_eq!(s["layers"][0]["kind"], "partition");
    assert_eq!(s["disks"][0], "sda");
    assert_eq!(s["layers"][1]["queue"]["fua"], true);
    assert!(s["durability"].as_str().unwrap().contains("FUA writes"));
    // The root filesystem is an overlay: no block device.
    let j = sysroot_json("v1-docker-container", &["--path", "/"]);
    assert_eq!(j["storage"]["fs_type"], "overlay");
    assert_eq!(j["storage"]["device"], Value::Null);
}

#[test]
fn fixture_v2_memory_max_and_lvm_on_nvme() {
    let j = sysroot_json(
        "v2-systemd-lvm",
        &["--pid", "812", "--path", "/var/lib/postgresql/15/main/base"],
    );
    assert_eq!(j["cgroup_mode"], "v2");
    let pg = process(&j, 812);
    let m = &pg["cgroups"]["memory"];
    assert_eq!(m["version"], 2);
    assert_eq!(m["limit"], 4294967296u64);
    assert_eq!(m["effective_limit"], 4294967296u64);
    assert_eq!(m["high"], 3865470566u64);
    assert_eq!(m["swap_limit"], "max");
    assert_eq!(m["max_events"], 87);
    assert_eq!(m["oom_kill_events"], 1);
    assert_eq!(m["failcnt"], Value::Null, "v2 has no failcnt");
    assert_eq!(
        pg["cgroups"]["pressure"]["memory"]["full"]["avg10_pct"],
        9.75
    );
    assert_eq!(pg["io_throttles"][0]["write_bytes_per_s"], 209715200);
    // The shared_buffers trap: VmSwap misses swapped shared memory, smaps_rollup does not.
    assert_eq!(pg["memory"]["vm_swap_bytes"], 0);
    assert_eq!(pg["memory"]["smaps_swap_bytes"], 1u64 << 30);
    assert!(j["notes"].as_array().unwrap().iter().any(|n| n["text"]
        .as_str()
        .unwrap()
        .contains("swapped shared memory")));
    // plumb's own session scope has no limit anywhere up the tree.
    assert_eq!(
        j["processes"][0]["cgroups"]["memory"]["effective_limit"],
        "max"
    );
    // Data: xfs on LVM on a partition of nvme0n1.
    let s = &j["storage"];
    assert_eq!(s["fs_type"], "xfs");
    assert_eq!(s["device"], "dm-1");
    assert_eq!(s["layers"][0]["kind"], "device_mapper");
    assert_eq!(s["layers"][0]["detail"], "vg0-pgdata");
    assert_eq!(s["layers"][1]["name"], "nvme0n1p2");
    assert_eq!(s["disks"], serde_json::json!(["nvme0n1"]));
    let io = &s["layers"][2]["io_since_boot"];
    assert_eq!(io["flushes"], 120345);
    assert_eq!(io["write_bytes"], 98765432u64 * 512);
    assert!((io["write_mean_s"].as_f64().unwrap() - 2345.678 / 2345678.0).abs() < 1e-9);
    assert_eq!(s["layers"][0]["io_since_boot"]["flushes"], 118000);
    // Run-queue delay from the fixture's /proc/schedstat (20.3 s + 18.7 s).
    assert!((j["cpu"]["run_delay_s"].as_f64().unwrap() - 39.0).abs() < 1e-6);
    // WAL: a separate drive without a volatile cache, mounted without barriers.
    let j = sysroot_json(
        "v2-systemd-lvm",
        &["--path", "/var/lib/postgresql/15/main/pg_wal"],
    );
    let s = &j["storage"];
    assert_eq!(s["disks"], serde_json::json!(["nvme1n1"]));
    assert_eq!(s["layers"][1]["queue"]["write_cache"], "write through");
    assert!(j["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["text"].as_str().unwrap().contains("barriers off")));
}

#[test]
fn fixture_relative_path_with_sysroot_is_rejected() {
    let root = fixture("v2-systemd-lvm");
    let out = run(&[
        "--sysroot",
        root.to_str().unwrap(),
        "os",
        "--path",
        "var/lib",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("must be absolute"),
        "{}",
        stderr(&out)
    );
}

// ---- malformed kernel files ----------------------------------------------------------------

/// Copy a fixture so a test can damage it.
fn damaged_copy(name: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(fixture(name).join("."))
        .arg(d.path())
        .status()
        .unwrap();
    assert!(st.success());
    d
}

#[test]
fn truncated_meminfo_is_an_error_naming_file_and_line() {
    let d = damaged_copy("v2-systemd-lvm");
    let p = d.path().join("proc/meminfo");
    let t = std::fs::read_to_string(&p).unwrap();
    let mut lines: Vec<&str> = t.lines().collect();
    lines[1] = "MemFree:";
    std::fs::write(&p, lines.join("\n")).unwrap();
    let out = run(&["--sysroot", d.path().to_str().unwrap(), "os", "--path", "/"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("proc/meminfo:2") && e.contains("expected"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn malformed_optional_sources_are_reported_missing_not_fatal() {
    let d = damaged_copy("v2-systemd-lvm");
    let r = d.path();
    std::fs::write(r.join("proc/pressure/io"), "some avg10=0.00 avg60=\n").unwrap();
    let svc =
        r.join("sys/fs/cgroup/system.slice/system-postgresql.slice/postgresql@15-main.service");
    std::fs::write(svc.join("memory.stat"), "anon 1\nfile\n").unwrap();
    std::fs::write(
        r.join("proc/812/status"),
        "Name:\tpostgres\nVmRSS:\tlots kB\n",
    )
    .unwrap();
    std::fs::write(r.join("proc/schedstat"), "version 15\ncpu0 1 2\n").unwrap();
    std::fs::write(r.join("proc/loadavg"), "\n").unwrap();
    let j = json(&[
        "--sysroot",
        r.to_str().unwrap(),
        "os",
        "--json",
        "--pid",
        "812",
        "--path",
        "/",
    ]);
    let all = j.to_string();
    for needle in [
        "pressure/io:1",
        "memory.stat:2",
        "812/status:2",
        "schedstat:2",
        "loadavg:1",
    ] {
        assert!(
            all.contains(needle),
            "{needle} not reported in {}",
            j["missing"]
        );
    }
    assert_eq!(j["pressure"], Value::Null);
    assert_eq!(j["cpu"]["load1"], Value::Null);
    let pg = process(&j, 812);
    assert_eq!(pg["memory"]["vm_rss_bytes"], Value::Null);
    assert_eq!(pg["cgroups"]["memory"], Value::Null);
}

#[test]
fn unexpected_fields_are_ignored_and_garbage_mountinfo_is_an_error() {
    let d = damaged_copy("hybrid-v1-memory-limit");
    let r = d.path();
    let mut t = std::fs::read_to_string(r.join("proc/meminfo")).unwrap();
    t.push_str("FutureField:     12 kB\nFutureCount: 7\n");
    std::fs::write(r.join("proc/meminfo"), t).unwrap();
    let j = json(&[
        "--sysroot",
        r.to_str().unwrap(),
        "os",
        "--json",
        "--path",
        "/",
    ]);
    assert!(j["memory"]["total_bytes"].as_u64().unwrap() > 0);

    let mi = r.join("proc/6291/mountinfo");
    let mut t = std::fs::read_to_string(&mi).unwrap();
    t.push_str("99 27 8:1 /x\n");
    std::fs::write(&mi, t).unwrap();
    let out = run(&["--sysroot", r.to_str().unwrap(), "os", "--path", "/"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("mountinfo:"), "{}", stderr(&out));
}

// ---- snapshots of the renderers ----------------------------------------------------------

/// Compare output with a checked-in snapshot; `PLUMB_BLESS=1` rewrites it after a deliberate
/// change (review the diff before committing).
fn check_snapshot(name: &str, actual: &str) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("PLUMB_BLESS").is_some() {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&p)
        .unwrap_or_else(|_| panic!("{} missing; run with PLUMB_BLESS=1", p.display()));
    if expected != actual {
        let diff: Vec<String> = expected
            .lines()
            .zip(actual.lines())
            .enumerate()
            .filter(|(_, (e, a))| e != a)
            .take(10)
            .map(|(i, (e, a))| format!("line {}:\n  expected: {e}\n  actual:   {a}", i + 1))
            .collect();
        panic!(
            "{} differs ({} vs {} lines):\n{}\n(PLUMB_BLESS=1 rewrites it)",
            p.display(),
            expected.lines().count(),
            actual.lines().count(),
            diff.join("\n")
        );
    }
}

#[test]
fn snapshot_text_and_json_of_v2_fixture() {
    let root = fixture("v2-systemd-lvm");
    let args = [
        "--sysroot",
        root.to_str().unwrap(),
        "os",
        "--pid",
        "812",
        "--path",
        "/var/lib/postgresql/15/main/base",
    ];
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    check_snapshot(
        "os-v2-systemd-lvm.txt",
        &String::from_utf8(out.stdout).unwrap(),
    );
    let mut j = json(&[&args[..], &["--json"]].concat());
    j["plumb_version"] = Value::from("VERSION");
    check_snapshot(
        "os-v2-systemd-lvm.json",
        &(serde_json::to_string_pretty(&j).unwrap() + "\n"),
    );
}
