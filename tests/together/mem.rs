//! `plumb mem`: the engine rules, the pressure program, and (as root) the real experiment: swapped
//! shared memory that VmSwap misses and smaps shows.

use crate::common;
use crate::common::{plumb, run, skip, stderr};

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "plumb {args:?}: {}",
        stderr(&o)
    );
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

extern "C" {
    fn geteuid() -> u32;
    fn kill(pid: i32, sig: i32) -> i32;
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { geteuid() == 0 }
}

#[test]
fn sql_server_detected_ram_matches_the_seed() {
    let _group = common::beside();
    // A 7 GB AKS node reports 7113152Ki: with no limit SQL Server logged "Detected 5557 MB".
    let j = json(&[
        "mem",
        "assume",
        "--kind",
        "mssql",
        "--host-memory",
        "7113152Ki",
        "--limit",
        "7113152Ki",
        "--json",
    ]);
    assert_eq!(j["assumption"]["mssql_detected_mb"], 5557);
    // With a 3Gi pod limit: "Detected 2458 MB".
    let j = json(&[
        "mem",
        "assume",
        "--kind",
        "mssql",
        "--host-memory",
        "7113152Ki",
        "--limit",
        "3Gi",
        "--json",
    ]);
    assert_eq!(j["assumption"]["mssql_detected_mb"], 2458);
    // MSSQL_MEMORY_LIMIT_MB wins, and no headroom under the limit is a failed check (exit 1).
    let o = run(&[
        "mem",
        "assume",
        "--kind",
        "mssql",
        "--host-memory",
        "16G",
        "--limit",
        "12G",
        "--memory-limit-mb",
        "12288",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no headroom"));
    let o = run(&[
        "mem",
        "assume",
        "--kind",
        "mssql",
        "--host-memory",
        "16G",
        "--limit",
        "12G",
        "--memory-limit-mb",
        "10240",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn postgres_cache_above_the_limit_is_flagged() {
    let _group = common::beside();
    let o = run(&[
        "mem",
        "assume",
        "--kind",
        "postgres",
        "--shared-buffers",
        "8G",
        "--limit",
        "4Gi",
        "--host-memory",
        "32G",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("cannot stay resident"), "{t}");
    let o = run(&[
        "mem",
        "assume",
        "--kind",
        "mariadb",
        "--innodb-buffer-pool-size",
        "2G",
        "--limit",
        "4Gi",
        "--host-memory",
        "32G",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn bad_sizes_and_pids_exit_2() {
    let _group = common::beside();
    for (args, needle) in [
        (
            vec!["mem", "assume", "--kind", "mssql", "--limit", "12XB"],
            "--limit",
        ),
        (
            vec!["mem", "assume", "--kind", "mssql", "--limit", "-1G"],
            "--limit",
        ),
        (vec!["mem", "assume", "--kind", "oracle"], "--kind oracle"),
        (vec!["mem", "pressure", "12XB"], "SIZE"),
        (vec!["mem", "pressure", "0"], "SIZE"),
        (vec!["mem", "pressure", "999T"], "--force"),
        (vec!["mem", "pressure", "1M", "--swap", "disk:1G"], "--swap"),
        (vec!["mem", "--pid", "999999999"], "--pid 999999999"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn pressure_reports_its_own_memory_and_releases_it() {
    let _group = common::beside();
    let o = run(&[
        "mem", "pressure", "48M", "--hold", "1500ms", "--every", "500ms", "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "mem_pressure_setup");
    assert_eq!(lines[0]["size_bytes"], 48 << 20);
    let last = lines.last().unwrap();
    assert_eq!(last["kind"], "mem_pressure_tick");
    assert_eq!(last["touched_bytes"], 48 << 20);
    assert!(
        last["rss_anon_bytes"].as_u64().unwrap() >= 48 << 20,
        "{last}"
    );
}

#[test]
fn mem_reports_a_named_process() {
    let _group = common::beside();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id().to_string();
    let j = json(&[
        "mem",
        "--pid",
        &pid,
        "--no-engines",
        "--interval",
        "200ms",
        "--json",
    ]);
    let _ = child.kill();
    let _ = child.wait();
    let p = &j["processes"][0];
    assert_eq!(p["pid"].as_u64().unwrap().to_string(), pid);
    assert_eq!(p["name"], "sleep");
    assert!(p["vm_rss_bytes"].as_u64().unwrap() > 0);
    assert_eq!(p["smaps_swap_bytes"], 0);
    assert!(j["host"]["total_bytes"].as_u64().unwrap() > 0);
    assert!(j["interval_s"].as_f64().unwrap() >= 0.2);
}

fn first_line(c: &mut Child) -> Value {
    let out = c.stdout.as_mut().unwrap();
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line:?}"))
}

fn stop(c: Child) -> Output {
    // SAFETY: signalling our own child.
    unsafe {
        kill(c.id() as i32, 2);
    }
    c.wait_with_output().unwrap()
}

/// The seed's experiment, for real: an idle process holding MAP_SHARED memory (like
/// shared_buffers) and one holding private memory share a 300 MiB memory cgroup; with zram swap
/// set up, `plumb mem pressure` in the same cgroup pushes their idle pages out. smaps must show
/// the shared process's swap, which VmSwap cannot.
#[test]
fn swapped_shared_memory_is_seen_by_smaps_not_vmswap() {
    let _group = common::beside();
    if !is_root() {
        skip("skipped: needs root (a memory cgroup and zram swap)");
        return;
    }
    if !Path::new("/sys/block/zram0").exists() && !Path::new("/sys/class/zram-control").exists() {
        skip("skipped: no zram support in this kernel");
        return;
    }
    let mut shared = plumb()
        .args([
            "mem",
            "pressure",
            "150M",
            "--shared",
            "--idle",
            "--hold",
            "60s",
            "--cgroup-limit",
            "300M",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let setup = first_line(&mut shared);
    let Some(cg) = setup["cgroup"].as_str().map(String::from) else {
        let o = stop(shared);
        panic!("no cgroup: {setup} {}", stderr(&o));
    };
    let mut private = plumb()
        .args([
            "mem", "pressure", "60M", "--idle", "--hold", "60s", "--cgroup", &cg, "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    first_line(&mut private);
    // Let both finish writing their pages.
    std::thread::sleep(Duration::from_secs(2));
    let mut pusher = plumb()
        .args([
            "mem", "pressure", "220M", "--hold", "12s", "--cgroup", &cg, "--swap", "zram:1G",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ps = first_line(&mut pusher);
    assert!(ps["zram_device"].is_string(), "{ps}");
    // Wait until the shared holder has pages in swap (reclaim takes a moment).
    let spid = shared.id().to_string();
    let t0 = Instant::now();
    let mut report = Value::Null;
    while t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(500));
        report = json(&[
            "mem",
            "--pid",
            &spid,
            "--pid",
            &private.id().to_string(),
            "--no-engines",
            "--interval",
            "200ms",
            "--json",
        ]);
        if report["processes"][0]["smaps_swap_bytes"]
            .as_u64()
            .unwrap_or(0)
            > 16 << 20
        {
            break;
        }
    }
    let p = &report["processes"][0];
    let smaps_swap = p["smaps_swap_bytes"].as_u64().unwrap();
    let vm_swap = p["vm_swap_bytes"].as_u64().unwrap();
    let pusher_out = stop(pusher);
    let private_out = stop(private);
    let shared_out = stop(shared);
    // The cgroup plumb created is gone, and so is the zram swap.
    assert!(!Path::new(&cg).exists(), "cgroup {cg} left behind");
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(!swaps.contains("zram"), "zram swap left behind: {swaps}");
    assert!(
        smaps_swap > 16 << 20,
        "shared memory was not swapped: {report}\n{}",
        stderr(&pusher_out)
    );
    assert!(
        vm_swap + (8 << 20) < smaps_swap,
        "VmSwap {vm_swap} should miss the swapped shared memory that smaps shows ({smaps_swap})"
    );
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["text"].as_str().unwrap().contains("VmSwap")),
        "{}",
        report["findings"]
    );
    // The private holder's swap shows in VmSwap.
    assert!(
        report["processes"][1]["vm_swap_bytes"].as_u64().unwrap() > 0,
        "{report}"
    );
    for o in [pusher_out, private_out, shared_out] {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

/// A real PostgreSQL (as root, run as the postgres user): plumb finds it by name and reads its
/// shared_buffers from its configuration, and sees its shared memory segment.
#[test]
fn finds_a_real_postgres_and_its_shared_buffers() {
    let _group = common::beside();
    let bin = Path::new("/usr/lib/postgresql/15/bin");
    let has_user = Command::new("id")
        .arg("postgres")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !is_root() || !bin.join("postgres").exists() || !has_user {
        skip("skipped: needs root, PostgreSQL 15 server binaries and a postgres user");
        return;
    }
    let d = tempfile::tempdir_in("/tmp").unwrap();
    let data = d.path().join("data");
    let run_as = |cmd: String| {
        Command::new("su")
            .args(["postgres", "-s", "/bin/sh", "-c", &cmd])
            .output()
            .unwrap()
    };
    Command::new("chown")
        .args(["postgres", d.path().to_str().unwrap()])
        .status()
        .unwrap();
    let o = run_as(format!(
        "{}/initdb -D {} >/dev/null",
        bin.display(),
        data.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(
        data.join("postgresql.auto.conf"),
        "shared_buffers = '96MB'\n",
    )
    .unwrap();
    let o = run_as(format!(
        "{}/pg_ctl -D {} -o '-k {} -c listen_addresses=' -l {}/log -w start",
        bin.display(),
        data.display(),
        d.path().display(),
        d.path().display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    struct Stop(String);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = Command::new("su")
                .args(["postgres", "-s", "/bin/sh", "-c", &self.0])
                .output();
        }
    }
    let _stop = Stop(format!(
        "{}/pg_ctl -D {} -m immediate stop",
        bin.display(),
        data.display()
    ));
    let pid = std::fs::read_to_string(data.join("postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let j = json(&["mem", "--pid", &pid, "--interval", "200ms", "--json"]);
    let e = j["engines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["main_pid"].as_u64().unwrap().to_string() == pid)
        .unwrap()
        .clone();
    assert_eq!(e["engine"], "postgres");
    assert_eq!(e["settings"]["shared_buffers_bytes"], 96 << 20);
    assert!(
        e["believed_cache_bytes"].as_u64().unwrap() >= 96 << 20,
        "{e}"
    );
    assert!(
        e["processes"].as_u64().unwrap() >= 4,
        "postmaster and its background processes"
    );
    assert!(e["belief_source"]
        .as_str()
        .unwrap()
        .contains("shared memory segment"));
}
