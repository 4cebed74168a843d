//! A plumb killed outright (kill -9) at the points where it holds something that outlives it:
//! what it started dies with it, and the next plumb command, whatever it is, removes what it
//! made (zram swap, cgroups, trace instances, the lab's private server and work directory) and
//! says so. Root only (what outlives plumb is what needs root to make); each test runs alone
//! (`common::alone`), so that no other plumb cleans up in between.

use crate::common;
use crate::common::{is_root, plumb, processes_in, skip};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn root() -> bool {
    if is_root() {
        return true;
    }
    skip("skipped: what outlives a killed plumb needs root to make");
    false
}

fn sigkill(c: &mut Child) {
    // SAFETY: kill(2) on our child.
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    let _ = c.wait();
}

/// The next command (any: `plumb os`) and what it said.
fn next_command() -> String {
    let o = plumb().args(["os"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn swaps() -> String {
    std::fs::read_to_string("/proc/swaps").unwrap_or_default()
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// `plumb mem pressure` with zram swap and a cgroup of its own, killed once both are in place:
/// the next command swaps the device off, resets it and removes the cgroup, and says so.
#[test]
fn a_killed_memory_pressure_leaves_no_swap_and_no_cgroup() {
    let _group = common::alone();
    if !root() {
        return;
    }
    if !Path::new("/sys/class/zram-control").exists()
        && std::process::Command::new("modprobe")
            .arg("zram")
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
    {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("no zram module here");
        }
        skip("skipped: no zram module");
        return;
    }
    let mut c = plumb()
        .args([
            "--json",
            "mem",
            "pressure",
            "32M",
            "--hold",
            "2m",
            "--swap",
            "zram:64M",
            "--cgroup-limit",
            "48M",
            "--every",
            "200ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = c.id();
    // Its setup line names the device and the cgroup.
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    let t0 = Instant::now();
    let (dev, cg) = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "no setup line");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        let s = if v["setup"].is_object() {
            &v["setup"]
        } else {
            &v
        };
        if let (Some(d), Some(g)) = (s["zram_device"].as_str(), s["cgroup"].as_str()) {
            break (d.to_string(), g.to_string());
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{line}");
    };
    assert!(swaps().contains(&dev), "{}", swaps());
    assert!(Path::new(&cg).is_dir());
    sigkill(&mut c);
    // kill -9 ran no cleanup: the swap and the cgroup are still there.
    assert!(swaps().contains(&dev), "{}", swaps());
    assert!(Path::new(&cg).is_dir());
    let said = next_command();
    assert!(
        said.contains(&format!(
            "removed what a plumb that was killed (PID {pid}) left: the zram swap {dev}"
        )) && said.contains(&format!("left: the cgroup {cg}")),
        "{said}"
    );
    assert!(!swaps().contains(&format!("{dev} ")), "{}", swaps());
    assert!(!Path::new(&cg).exists(), "{cg} is still there");
    // And only once: the command after that has nothing to say.
    let again = next_command();
    assert!(!again.contains("was killed"), "{again}");
}

/// A durability probe killed while it traces: its trace instance (events enabled) is removed
/// by the next command, which says so.
#[test]
fn a_killed_trace_leaves_no_trace_instance() {
    let _group = common::alone();
    if !root() {
        return;
    }
    let d = tempfile::Builder::new()
        .prefix("plumb-ledger-trace")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mut c = plumb()
        .args(["io", "durability", "--bs", "8K"])
        .arg(d.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = c.id();
    let instance = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .map(|t| Path::new(t).join(format!("instances/plumb-{pid}")))
        .collect::<Vec<_>>();
    let t0 = Instant::now();
    while !instance.iter().any(|p| p.is_dir()) {
        if t0.elapsed() > Duration::from_secs(30) {
            sigkill(&mut c);
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("the probe never made its trace instance");
            }
            skip("skipped: no tracefs instance (tracing unavailable here)");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    sigkill(&mut c);
    let said = next_command();
    assert!(
        said.contains(&format!(
            "removed what a plumb that was killed (PID {pid}) left: the trace instance"
        )),
        "{said}"
    );
    assert!(!instance.iter().any(|p| p.exists()));
}

/// `plumb lab --pressure` killed while its pressure program runs: the program ends with the
/// lab (it is told to), and the next command stops the lab's PostgreSQL and removes its cgroup
/// and work directory, and says so.
#[test]
fn a_killed_lab_with_pressure_leaves_nothing_running() {
    let _group = common::alone();
    if !root() {
        return;
    }
    if let Some(why) = common::no_postgres() {
        skip(why);
        return;
    }
    let d = tempfile::Builder::new()
        .prefix("plumb-ledger-lab")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mut c = plumb()
        // The pressure experiment comes sooner without the storage probes and the loops, and
        // after the shortest run of the workload.
        .args([
            "lab",
            "--quick",
            "--skip",
            "storage,loops",
            "--duration",
            "2s",
            "--pressure",
            "128M",
            "--dir",
        ])
        .arg(d.path())
        .arg("--out")
        .arg(d.path().join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lab = c.id();
    // Wait for its pressure program (a child plumb: `plumb --json mem pressure …`).
    let child_of = |parent: u32| -> Option<u32> {
        std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                let ppid = stat
                    .rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok());
                let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                ppid == Some(parent) && String::from_utf8_lossy(&cmd).contains("pressure")
            })
    };
    let t0 = Instant::now();
    let pressure = loop {
        if let Some(p) = child_of(lab) {
            break p;
        }
        if let Ok(Some(s)) = c.try_wait() {
            panic!("the lab ended ({s}) before its pressure program started");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(240),
            "no pressure program after 4 minutes"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        processes_in(d.path())
            .iter()
            .any(|p| p.contains("postgres")),
        "the lab's server runs"
    );
    sigkill(&mut c);
    // The pressure program is told (SIGTERM) and ends on its own, taking its swap down.
    let t0 = Instant::now();
    while running(pressure) && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!running(pressure), "the pressure program outlived the lab");
    // The server outlives a kill -9; the next command, any command, stops it.
    let said = next_command();
    assert!(
        said.contains(&format!(
            "removed what a plumb that was killed (PID {lab}) left: the private database server in"
        )) && said.contains("left: the cgroup ")
            && said.contains("left: the scratch directory "),
        "{said}"
    );
    assert!(
        processes_in(d.path()).is_empty(),
        "{:?}",
        processes_in(d.path())
    );
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("plumb-lab-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `plumb lab --replica sync` killed once its standby runs: the next command stops both
/// servers (the standby first), removes the standby's cgroup and the work directory.
#[test]
fn a_killed_lab_with_a_standby_leaves_nothing_running() {
    let _group = common::alone();
    if !root() {
        return;
    }
    if let Some(why) = common::no_postgres() {
        skip(why);
        return;
    }
    let d = tempfile::Builder::new()
        .prefix("plumb-ledger-replica")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mut c = plumb()
        // The standby comes sooner without the storage probes and the loops, and after the
        // shortest run of the workload.
        .args([
            "lab",
            "--quick",
            "--skip",
            "storage,loops",
            "--duration",
            "2s",
            "--replica",
            "sync",
            "--dir",
        ])
        .arg(d.path())
        .arg("--out")
        .arg(d.path().join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lab = c.id();
    let t0 = Instant::now();
    while !processes_in(d.path())
        .iter()
        .any(|p| p.contains("/standby"))
    {
        if let Ok(Some(s)) = c.try_wait() {
            panic!("the lab ended ({s}) before its standby started");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(240),
            "no standby after 4 minutes"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    sigkill(&mut c);
    assert!(
        !processes_in(d.path()).is_empty(),
        "the servers outlive a kill -9"
    );
    let said = next_command();
    let standby = said
        .find("left: the private database server in ")
        .zip(said.find("/standby"));
    assert!(
        said.contains(&format!("(PID {lab}) left: the private database server in"))
            && standby.is_some()
            && said.contains(&format!("left: the cgroup "))
            && said.contains(&format!("plumb-lab-{lab}-standby"))
            && said.contains("left: the scratch directory "),
        "{said}"
    );
    assert!(
        processes_in(d.path()).is_empty(),
        "{:?}",
        processes_in(d.path())
    );
    let cgroups = std::process::Command::new("find")
        .args(["/sys/fs/cgroup", "-maxdepth", "3", "-name"])
        .arg(format!("plumb-lab-{lab}*"))
        .output()
        .unwrap();
    assert!(
        cgroups.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&cgroups.stdout)
    );
}

/// `plumb repl timeline` killed while its uprobes are in place: the next command removes them
/// and says so.
#[test]
fn a_killed_timeline_leaves_no_uprobes() {
    let _group = common::alone();
    if !root() {
        return;
    }
    if let Some(why) = common::no_postgres() {
        skip(why);
        return;
    }
    let tmp = common::server_tempdir("plumb-ledger-repl-");
    let (p, s) = (tmp.path().join("primary"), tmp.path().join("standby"));
    struct Remove(Vec<std::path::PathBuf>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for d in &self.0 {
                let _ = plumb()
                    .args(["engine", "stop", "--remove", "--dir"])
                    .arg(d)
                    .output();
            }
        }
    }
    let _remove = Remove(vec![s.clone(), p.clone()]);
    for args in [
        vec!["start", "--dir", p.to_str().unwrap()],
        vec![
            "start",
            "--dir",
            s.to_str().unwrap(),
            "--standby-of",
            p.to_str().unwrap(),
            "--sync",
        ],
    ] {
        let o = plumb().arg("engine").args(&args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let _ = common::engine_psql(&p, "CREATE TABLE t (x int)");
    let mut c = plumb()
        .args(["repl", "timeline", "--standby-dir"])
        .arg(&s)
        .args(["--sql", "INSERT INTO t VALUES (1)", "--repeat", "100000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = c.id();
    let mine = format!("plumb_{pid}/");
    // (tracefs may be mounted by the timeline itself: looked for at each read.)
    let probes = || -> String {
        ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .filter_map(|t| std::fs::read_to_string(Path::new(t).join("uprobe_events")).ok())
            .collect()
    };
    let t0 = Instant::now();
    while !probes().contains(&mine) {
        if t0.elapsed() > Duration::from_secs(60) {
            sigkill(&mut c);
            panic!("the timeline set no uprobes: {}", probes());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    sigkill(&mut c);
    assert!(probes().contains(&mine), "kill -9 removed nothing");
    let said = next_command();
    assert!(
        said.contains(&format!(
            "removed what a plumb that was killed (PID {pid}) left: the uprobe {mine}"
        )),
        "{said}"
    );
    assert!(!probes().contains(&mine), "{}", probes());
}

/// `plumb engine start --standby-of` killed while pg_basebackup copies: the copy ends with
/// plumb, and the next command removes the half-made standby and its slot on the primary (a
/// slot nobody reads keeps the primary's WAL for ever).
#[test]
fn a_killed_standby_start_leaves_no_copy_and_no_slot() {
    let _group = common::alone();
    if !root() {
        return;
    }
    if let Some(why) = common::no_postgres() {
        skip(why);
        return;
    }
    let tmp = common::server_tempdir("plumb-ledger-standby-");
    let (p, s) = (tmp.path().join("primary"), tmp.path().join("standby"));
    struct Remove(Vec<std::path::PathBuf>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for d in &self.0 {
                let _ = plumb()
                    .args(["engine", "stop", "--remove", "--dir"])
                    .arg(d)
                    .output();
            }
        }
    }
    let _remove = Remove(vec![s.clone(), p.clone()]);
    let o = plumb()
        .args(["engine", "start", "--dir"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Enough data that the copy takes a moment.
    let _ = common::engine_psql(
        &p,
        "CREATE TABLE pad AS SELECT g, repeat('x', 500) AS t FROM generate_series(1, 400000) g",
    );
    let mut c = plumb()
        .args(["engine", "start", "--dir"])
        .arg(&s)
        .arg("--standby-of")
        .arg(&p)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let starter = c.id();
    let t0 = Instant::now();
    let copier = loop {
        let found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            String::from_utf8_lossy(&cmd)
                .contains("pg_basebackup")
                .then_some(pid)
        });
        if let Some(pid) = found {
            break pid;
        }
        if let Ok(Some(st)) = c.try_wait() {
            skip(format!(
                "skipped: the standby was made ({st}) before its copy could be caught"
            ));
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no pg_basebackup");
        std::thread::sleep(Duration::from_millis(20));
    };
    sigkill(&mut c);
    let t0 = Instant::now();
    while running(copier) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !running(copier),
        "pg_basebackup copied on after plumb was killed"
    );
    let said = next_command();
    assert!(
        said.contains(&format!(
            "removed what a plumb that was killed (PID {starter}) left: the private database server in {}",
            s.display()
        )),
        "{said}"
    );
    assert_eq!(
        common::engine_psql(
            &p,
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'plumb%'"
        ),
        "0"
    );
    assert!(!s.join("data").exists());
}
