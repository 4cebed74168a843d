//! Safe to run as root on a host that holds other people's data (issue 11): the private
//! PostgreSQL admits nobody but its caller, plumb deletes and re-owns nothing it did not
//! create, and failed or concurrent starts leave nothing behind.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Output;

mod common;
use common::*;

fn run(args: &[&str]) -> Output {
    plumb().args(args).output().expect("run plumb")
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap()
}

/// Skip (printing why) unless PostgreSQL runs here; under CI a missing part fails.
fn need_postgres() -> bool {
    if let Some(why) = no_postgres() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must have PostgreSQL: {why}"
        );
        eprintln!("skipped: {why}");
        return false;
    }
    true
}

fn psql() -> std::path::PathBuf {
    let bin = plumb_engine::private::find_bin().unwrap();
    [bin.join("psql"), "/usr/bin/psql".into()]
        .into_iter()
        .find(|p| p.exists())
        .expect("psql")
}

fn status_json(dir: &str) -> serde_json::Value {
    serde_json::from_slice(&run(&["--json", "engine", "status", "--dir", dir]).stdout).unwrap()
}

#[test]
fn issue_11_private_instance_admits_nobody_but_its_caller() {
    if !need_postgres() {
        return;
    }
    let tmp = scratch("plumb-safety-auth");
    let d = tmp.path().join("pg");
    let dir = d.to_str().unwrap();
    let o = run(&["engine", "start", "--dir", dir, "--shared-buffers", "16MB"]);
    assert!(o.status.success(), "{}", err(&o));
    let st = status_json(dir);
    let port = st["instance"]["port"].as_u64().unwrap();
    let socket_dir = d.join("sock");

    // No TCP at all: the old instance took `trust` logins on 127.0.0.1.
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port as u16)).is_err(),
        "the private instance listens on TCP port {port}"
    );
    // The caller gets in over the socket.
    let o = run(&[
        "engine",
        "psql",
        "--dir",
        dir,
        "--",
        "-Atc",
        "SELECT current_user",
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "plumb");
    // The socket's directory admits only the server's user.
    let m = std::fs::metadata(&socket_dir).unwrap();
    assert_eq!(m.mode() & 0o077, 0, "socket directory mode {:o}", m.mode());

    if is_root() {
        // Another local user, as in the report: `copy ... to program` as the superuser.
        let attempt = |user: &str, conn: String| {
            std::process::Command::new("setpriv")
                .args(["--reuid", user, "--regid", user, "--clear-groups"])
                .arg(psql())
                .arg(conn)
                .args(["-Atc", "copy (select 1) to program 'id'"])
                .output()
                .expect("setpriv")
        };
        for conn in [
            format!("host=127.0.0.1 port={port} user=plumb dbname=postgres"),
            format!(
                "host={} port={port} user=plumb dbname=postgres",
                socket_dir.display()
            ),
        ] {
            let o = attempt("65534", conn.clone());
            assert!(!o.status.success(), "nobody got in with {conn}");
        }
        // Not even the server's own OS user is admitted as plumb's superuser.
        let o = attempt(
            "postgres",
            format!(
                "host={} port={port} user=plumb dbname=postgres",
                socket_dir.display()
            ),
        );
        assert!(!o.status.success(), "the postgres OS user got in");
        assert!(err(&o).contains("authentication failed"), "{}", err(&o));
    }
    let o = run(&["engine", "stop", "--remove", "--dir", dir]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!d.exists(), "the directory plumb made is gone");
}

#[test]
fn issue_11_a_directory_plumb_did_not_create_is_never_deleted_or_re_owned() {
    if !need_postgres() {
        return;
    }
    let tmp = scratch("plumb-safety-dir");
    // A non-empty directory of the user's: refused, the file stays, the owner stays.
    let d = tmp.path().join("d");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("notes.txt"), "x").unwrap();
    let owner = std::fs::metadata(&d).unwrap().uid();
    let dir = d.to_str().unwrap();
    let o = run(&["engine", "start", "--dir", dir]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("--dir") && err(&o).contains("did not create"),
        "{}",
        err(&o)
    );
    let o = run(&["engine", "stop", "--remove", "--dir", dir]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert_eq!(std::fs::read_to_string(d.join("notes.txt")).unwrap(), "x");
    assert_eq!(std::fs::metadata(&d).unwrap().uid(), owner);
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);

    // A symbolic link as --dir (or planted where the default directory goes): refused, and
    // neither the link nor what it points to is touched.
    let target = tmp.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let target_owner = std::fs::metadata(&target).unwrap().uid();
    for args in [
        vec!["engine", "start", "--dir", link.to_str().unwrap()],
        vec![
            "engine",
            "stop",
            "--remove",
            "--dir",
            link.to_str().unwrap(),
        ],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(err(&o).contains("symbolic link"), "{}", err(&o));
    }
    let o = plumb()
        .env("PLUMB_PG_DIR", &link)
        .args(["engine", "start"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    assert_eq!(std::fs::metadata(&target).unwrap().uid(), target_owner);

    // A running instance behind a symlinked --dir: stop --remove refuses instead of removing
    // the link and leaving the server.
    let real = tmp.path().join("real");
    let o = run(&["engine", "start", "--dir", real.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    let link2 = tmp.path().join("link2");
    std::os::unix::fs::symlink(&real, &link2).unwrap();
    let o = run(&[
        "engine",
        "stop",
        "--remove",
        "--dir",
        link2.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(link2.symlink_metadata().is_ok());
    assert_eq!(status_json(real.to_str().unwrap())["state"], "running:");
    let o = run(&[
        "engine",
        "stop",
        "--remove",
        "--dir",
        real.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!real.exists() && processes_in(&real).is_empty());

    // Missing parents are not created (and so never left behind).
    let deep = tmp.path().join("no/such/parent");
    let o = run(&["engine", "start", "--dir", deep.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("does not exist"), "{}", err(&o));
    assert!(!tmp.path().join("no").exists());

    // An empty directory of the user's: used, not re-owned, and left (empty) by --remove.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let mode = std::fs::metadata(&empty).unwrap().mode();
    let o = run(&["engine", "start", "--dir", empty.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    let m = std::fs::metadata(&empty).unwrap();
    assert_eq!((m.uid(), m.mode()), (owner, mode));
    let o = run(&[
        "engine",
        "stop",
        "--remove",
        "--dir",
        empty.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(empty.is_dir(), "a directory plumb did not make was deleted");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

#[test]
fn issue_11_failed_and_concurrent_starts_leave_nothing_and_say_already_running() {
    if !need_postgres() {
        return;
    }
    let tmp = scratch("plumb-safety-start");
    let d = tmp.path().join("pg");
    let dir = d.to_str().unwrap();
    // A start that fails takes back what it made, so a second failure quotes its own log.
    let o = run(&["engine", "start", "--dir", dir, "--set", "work_mem=banana"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("banana"), "{}", err(&o));
    assert!(!d.exists(), "a failed start left {}", d.display());
    let o = run(&["engine", "start", "--dir", dir, "--set", "work_mem=apple"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("apple") && !err(&o).contains("banana"),
        "a stale log line was quoted: {}",
        err(&o)
    );
    // Settings that would open the instance to others are plumb's, not the user's.
    let o = run(&[
        "engine",
        "start",
        "--dir",
        dir,
        "--set",
        "listen_addresses=0.0.0.0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("listen_addresses"), "{}", err(&o));
    assert!(!d.exists());

    // Two starts at once: one starts it, the other says it is already running.
    let a = plumb()
        .args(["engine", "start", "--dir", dir])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let b = run(&["engine", "start", "--dir", dir]);
    let a = a.wait_with_output().unwrap();
    let outs = [&a, &b];
    assert!(
        outs.iter().all(|o| o.status.success()),
        "{}{}",
        err(&a),
        err(&b)
    );
    let texts: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .collect();
    assert_eq!(
        texts.iter().filter(|t| t.starts_with("started")).count(),
        1,
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("already running") && t.contains("PID")),
        "{texts:?}"
    );
    let o = run(&["engine", "stop", "--remove", "--dir", dir]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!d.exists() && processes_in(&d).is_empty());
}

#[test]
fn issue_11_delta_removes_the_instance_it_created() {
    if !need_postgres() {
        return;
    }
    let tmp = scratch("plumb-safety-delta");
    let d = tmp.path().join("pg");
    let o = run(&[
        "delta",
        "--dir",
        d.to_str().unwrap(),
        "--sql",
        "SELECT 1",
        "--set",
        "shared_buffers=16MB",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(!d.exists(), "delta left its instance in {}", d.display());
    assert!(processes_in(&d).is_empty());
    assert!(Path::new(tmp.path()).read_dir().unwrap().next().is_none());
}
