//! `plumb lab`'s ways out, which measure nothing: Ctrl-C and a killed server mid-lab (on
//! PostgreSQL and MariaDB), a disk too small, bad input and what MariaDB's lab cannot do yet,
//! each leaving nothing behind. The labs that measure are tests/together/lab.rs's, alone.

use crate::common;
use crate::common::lab::*;
use crate::common::*;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn ctrl_c_mid_lab_leaves_nothing() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    let out = d.path().join("report");
    let (mut c, _) = start_until(d.path(), &out, "[3/7]");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    assert_eq!(wait(&mut c, Duration::from_secs(60)), 130);
    assert_nothing_left(d.path(), &[]);
}

#[test]
fn server_killed_mid_lab_is_a_clear_error() {
    let _group = common::beside();
    if let Some(why) = no_postgres() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    let out = d.path().join("report");
    // The storage probes are not what this test is about: pgbench (step 5) comes sooner.
    let mut c = plumb()
        .args(["lab", "--quick", "--skip", "storage", "--dir"])
        .arg(d.path())
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut r = BufReader::new(c.stderr.take().unwrap());
    let mut all = String::new();
    let mut killed = false;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        all.push_str(&line);
        if !killed && line.contains("[5/7]") {
            std::thread::sleep(Duration::from_secs(2));
            // The postmaster: its data directory is under the scratch directory.
            let pm = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| {
                    let pid: i32 = e.file_name().to_str()?.parse().ok()?;
                    let c = std::fs::read(e.path().join("cmdline")).ok()?;
                    let c = String::from_utf8_lossy(&c).into_owned();
                    (c.contains(" -D ") || c.contains("\0-D\0"))
                        .then_some(())
                        .filter(|_| c.contains(d.path().to_str().unwrap()))
                        .map(|_| pid)
                })
                .next()
                .expect("the lab's postmaster");
            // SAFETY: killing the server this test's lab started.
            unsafe { libc::kill(pm, libc::SIGKILL) };
            killed = true;
        }
    }
    assert!(killed, "the lab never reached pgbench: {all}");
    assert_eq!(wait(&mut c, Duration::from_secs(60)), 2, "{all}");
    assert!(all.contains("stopped unexpectedly"), "{all}");
    // Killed servers' children may linger as zombies here (PID 1 does not reap); wait for
    // the live ones to go.
    let t0 = Instant::now();
    while !processes_in(d.path()).is_empty() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_nothing_left(d.path(), &[]);
}

#[test]
fn a_disk_too_small_is_refused_before_anything_starts() {
    let _group = common::beside();
    if !is_root() {
        skip("skipped: mounting a small tmpfs needs root");
        return;
    }
    let d = scratch();
    let small: PathBuf = d.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m", "plumb-lab-test"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(st.success());
    let o = plumb()
        .args(["lab", "--quick", "--dir"])
        .arg(&small)
        .arg("--out")
        .arg(d.path().join("report"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let left = leftovers(&small, &[]);
    let _ = Command::new("umount").arg(&small).status();
    assert_eq!(o.status.code(), Some(2), "{err}");
    // The sizes in words: the 64 MiB tmpfs's room, never a count of bytes.
    assert!(
        err.contains("--dir") && err.contains("MiB free") && !err.contains("bytes"),
        "{err}"
    );
    assert!(left.is_empty(), "{left:?}");
    assert!(!d.path().join("report").exists());
}

#[test]
fn bad_input_is_named_and_exits_2() {
    let _group = common::beside();
    let d = scratch();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--dir".into(), "/nonexistent/plumb".into()],
            "--dir /nonexistent/plumb",
        ),
        (vec!["--duration".into(), "soon".into()], "--duration soon"),
        (vec!["--duration".into(), "1s".into()], "--duration"),
        (
            vec!["--out".into(), env!("CARGO_MANIFEST_DIR").into()],
            "exists and is not empty",
        ),
        (vec!["--format".into(), "csv".into()], "--format csv"),
        (vec!["--pressure".into(), "300%".into()], "--pressure 300%"),
        (
            vec!["--throttle-writes".into(), "100iops".into()],
            "bytes per second",
        ),
        (
            vec!["--engine".into(), "redis://x".into()],
            "--engine redis://x",
        ),
        (
            vec!["--skip".into(), "storage,network".into()],
            "--skip network: \"network\" is not a part",
        ),
    ];
    for (mut args, want) in cases {
        if args[0] != "--dir" {
            args.extend(["--dir".to_string(), d.path().display().to_string()]);
        }
        let o = plumb().arg("lab").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_nothing_left(d.path(), &[]);
    }
}

#[test]
fn ctrl_c_mid_mariadb_lab_leaves_nothing() {
    let _group = common::beside();
    if let Some(why) = no_mariadb() {
        skip(format!("skipped: {why}"));
        return;
    }
    let d = scratch();
    let out = d.path().join("report");
    let (mut c, seen) = start_until_with(&["--kind", "mariadb"], d.path(), &out, "clients for");
    // The storage probes ran before the workload, as on PostgreSQL.
    for step in [
        "] durability: what one durable write costs",
        "] random-read queue-depth sweep and sequential read",
    ] {
        assert!(seen.contains(step), "{step}: {seen}");
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    assert_eq!(wait(&mut c, Duration::from_secs(60)), 130);
    assert_nothing_left(d.path(), &[]);
}

#[test]
fn mariadb_lab_refuses_what_it_cannot_do_yet() {
    let _group = common::beside();
    let d = tempfile::tempdir().unwrap();
    for (extra, says) in [
        (&["--engine", "mysql://u@h/db"][..], "cannot be used with"),
        (&["--replica", "sync"][..], "--replica"),
        (
            &["--pressure", "64M", "--workload", "Cargo.toml"][..],
            "with a file of SQL",
        ),
    ] {
        let o = plumb()
            .args(["lab", "--quick", "--kind", "mariadb", "--dir"])
            .arg(d.path())
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{extra:?}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}
