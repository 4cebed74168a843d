//! Safe to run as root on a host that holds other people's data (issue 11): the private
//! PostgreSQL admits nobody but its caller, plumb deletes and re-owns nothing it did not
//! create, and failed or concurrent starts leave nothing behind.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Output;

use crate::common;
use crate::common::*;

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap()
}

/// Skip (printing why) unless plumb runs as root here; under CI, which runs as root, a failure.
fn need_root(why: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(format!("skipped: {why} (needs root)"));
    false
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
    let _group = common::beside();
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
    let _group = common::beside();
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

    // Too deep for a Unix socket path: refused before anything is made.
    let deep_ok = tmp.path().join("a".repeat(100));
    std::fs::create_dir(&deep_ok).unwrap();
    let o = run(&[
        "engine",
        "start",
        "--dir",
        deep_ok.join("pg").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("107"), "{}", err(&o));
    assert_eq!(std::fs::read_dir(&deep_ok).unwrap().count(), 0);

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
    let _group = common::beside();
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
    let _group = common::beside();
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

/// Every file under `dir`, with its bytes.
fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push((p, b));
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn issue_11_no_password_reaches_an_output_a_file_or_a_recording() {
    let _group = common::beside();
    if !need_postgres() {
        return;
    }
    // The test adds a password-authenticated role to the instance's pg_hba.conf, which the
    // server's user (postgres, when plumb runs as root) owns.
    if !need_root("editing the private instance's pg_hba.conf needs root") {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("plumb-safety-secret")
        .tempdir_in("/var/tmp")
        .unwrap();
    let pg = tmp.path().join("pg");
    let dir = pg.to_str().unwrap();
    let o = run(&["engine", "start", "--dir", dir, "--shared-buffers", "16MB"]);
    assert!(o.status.success(), "{}", err(&o));
    let port = status_json(dir)["instance"]["port"].as_u64().unwrap();
    let sock = pg.join("sock");
    // A role that needs its password, over the socket (root reaches the socket directory).
    let o = run(&[
        "engine",
        "psql",
        "--dir",
        dir,
        "--",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        "CREATE ROLE pwuser LOGIN SUPERUSER PASSWORD 'Lab-Leak-PW1'",
        "-c",
        "ALTER ROLE pwuser PASSWORD 'Lab-Leak-PW1'",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let hba = pg.join("data/pg_hba.conf");
    let mut text = std::fs::read_to_string(&hba).unwrap();
    text.insert_str(0, "local all pwuser scram-sha-256\n");
    std::fs::write(&hba, text).unwrap();
    let o = run(&[
        "engine",
        "psql",
        "--dir",
        dir,
        "--",
        "-c",
        "SELECT pg_reload_conf()",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let secrets = ["Lab-Leak-PW1"];

    // A wrong password is refused: the test's server really checks it.
    let bad = format!(
        "postgresql:///postgres?host={}&port={port}&user=pwuser&password=Wrong-PW0",
        sock.display()
    );
    let o = run(&["delta", "--engine", &bad, "--sql", "SELECT 1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!contains(&o.stderr, "Wrong-PW0"), "{}", err(&o));

    let forms = [
        // ?password= in the query
        format!(
            "postgresql:///postgres?host={}&port={port}&user=pwuser&password=Lab-Leak-PW1",
            sock.display()
        ),
        // user:password@ (the host in the query)
        format!(
            "postgresql://pwuser:Lab-Leak-PW1@/postgres?host={}&port={port}",
            sock.display()
        ),
        // libpq key=value, spaces around '=' and a quoted value
        format!(
            "host={} port = {port} user=pwuser dbname=postgres password = 'Lab-Leak-PW1'",
            sock.display()
        ),
    ];
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();

    // The lab against the target, pgbench and the loops included (they get the password in
    // their environment, never on their command line): report, recording, stdout, stderr.
    let o = plumb()
        .args([
            "lab",
            "--quick",
            "--skip",
            "storage",
            "--allow-writes",
            "--engine",
            &forms[0],
            "--dir",
        ])
        .arg(tmp.path())
        .arg("--out")
        .arg(out.join("lab"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("lab/report.json")).unwrap()).unwrap();
    assert!(
        report["pgbench"]["tps"].as_f64().unwrap_or(0.0) > 0.0,
        "pgbench did not run with the password-only role"
    );
    outputs.push(("lab stdout".into(), o.stdout));
    outputs.push(("lab stderr".into(), o.stderr));

    // plumb load's own wire client logs in by SCRAM with the password-only role.
    let o = plumb()
        .args([
            "--json",
            "load",
            "--engine",
            &forms[1],
            "--allow-writes",
            "--workload",
            "tpcb",
            "--scale",
            "1",
            "--clients",
            "2",
            "--rampup",
            "0s",
            "--duration",
            "2s",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let load: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        load["types"][0]["committed"].as_u64().unwrap_or(0) > 0,
        "plumb load did not run with the password-only role: {load}"
    );
    outputs.push(("load stdout".into(), o.stdout));
    outputs.push(("load stderr".into(), o.stderr));
    assert!(out.join("lab/recording.plumb").exists());

    // A recording with the engine's counters: its header keeps the command line.
    let rec = out.join("rec.plumb");
    let child = plumb()
        .args(["record", "--interval", "1s", "--out"])
        .arg(&rec)
        .args(["--engine", &forms[1], "--", "sleep", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // Its process title, which every local user can read, no longer shows the password.
    let title = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap_or_default();
    outputs.push(("record's process title".into(), title));
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    outputs.push(("record stdout".into(), o.stdout));
    outputs.push(("record stderr".into(), o.stderr));
    for args in [
        vec![
            "report".to_string(),
            rec.display().to_string(),
            "--out".into(),
            out.join("rec.html").display().to_string(),
        ],
        vec!["export".to_string(), rec.display().to_string()],
        vec![
            "--json".to_string(),
            "export".to_string(),
            rec.display().to_string(),
        ],
    ] {
        let o = plumb().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", err(&o));
        outputs.push((format!("{args:?} stdout"), o.stdout));
        outputs.push((format!("{args:?} stderr"), o.stderr));
    }

    // delta, text and JSON, with the key=value form; and errors that quote a URL.
    for fmt in ["text", "json"] {
        let o = run(&[
            "--format", fmt, "delta", "--engine", &forms[2], "--sql", "SELECT 1",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        outputs.push((format!("delta {fmt} stdout"), o.stdout));
        outputs.push((format!("delta {fmt} stderr"), o.stderr));
    }
    for url in [
        "postgres://u:Lab-Leak-PW1@127.0.0.1:1/x".to_string(),
        "postgres://u:p@Lab-Leak-PW1@127.0.0.1:1/x".to_string(),
        "postgres://u@127.0.0.1:1/x?password=Lab-Leak-PW1".to_string(),
        "oracle://u:Lab-Leak-PW1@h/x".to_string(),
        "host=127.0.0.1 port=1 password='Lab-Leak-PW1 x'".to_string(),
    ] {
        let o = run(&["delta", "--engine", &url, "--sql", "SELECT 1"]);
        assert_eq!(o.status.code(), Some(2), "{url}");
        outputs.push((format!("delta --engine {url:?} stderr"), o.stderr));
        // The lab's old name for --engine, still accepted.
        let o = run(&["lab", "--target", &url, "--dir", "/nonexistent"]);
        assert_eq!(o.status.code(), Some(2), "{url}");
        outputs.push((format!("lab --target {url:?} stderr"), o.stderr));
    }
    for (p, b) in files_under(&out) {
        outputs.push((p.display().to_string(), b));
    }
    assert!(outputs.len() > 20);
    for (what, bytes) in &outputs {
        for s in secrets {
            assert!(
                !contains(bytes, s),
                "{what} shows the password: {}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
    // The fragments of a password with '@' in it are masked whole, not after the first '@'.
    assert!(outputs.iter().all(|(_, b)| !contains(b, "p@***")));

    // Password files: empty, another user's, a kernel file, readable by others: refused.
    let pw = tmp.path().join("pw");
    for (content, mode, owner, what) in [
        ("", 0o600, None, "empty"),
        ("Lab-Leak-PW1\n", 0o644, None, "others"),
        ("Lab-Leak-PW1\n", 0o600, Some(65534), "not by you"),
    ] {
        let _ = std::fs::remove_file(&pw);
        std::fs::write(&pw, content).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(mode)).unwrap();
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&pw, Some(uid), None).unwrap();
        }
        let o = run(&[
            "delta",
            "--engine",
            "postgres://u@127.0.0.1:1/x",
            "--password-file",
            pw.to_str().unwrap(),
            "--sql",
            "SELECT 1",
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            err(&o).contains("--password-file") && err(&o).contains(what),
            "{}",
            err(&o)
        );
    }
    let o = run(&[
        "delta",
        "--engine",
        "postgres://u@127.0.0.1:1/x",
        "--password-file",
        "/proc/self/environ",
        "--sql",
        "SELECT 1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("kernel file"), "{}", err(&o));

    let o = run(&["engine", "stop", "--remove", "--dir", dir]);
    assert!(o.status.success(), "{}", err(&o));
}

/// Something of the user's at a path plumb is asked to write: it must survive untouched.
#[derive(Debug, Clone, Copy)]
enum InTheWay {
    File,
    Link,
    FullDir,
}

fn plant(p: &Path, what: InTheWay, victim: &Path) {
    match what {
        InTheWay::File => std::fs::write(p, "USER DATA").unwrap(),
        InTheWay::Link => std::os::unix::fs::symlink(victim, p).unwrap(),
        InTheWay::FullDir => {
            std::fs::create_dir(p).unwrap();
            std::fs::write(p.join("notes.txt"), "USER DATA").unwrap();
        }
    }
}

fn untouched(p: &Path, what: InTheWay, victim: &Path) -> bool {
    let victim_ok = std::fs::read_to_string(victim).ok().as_deref() == Some("USER DATA");
    match what {
        InTheWay::File => std::fs::read_to_string(p).ok().as_deref() == Some("USER DATA"),
        InTheWay::Link => {
            p.symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
                && victim_ok
        }
        InTheWay::FullDir => {
            std::fs::read_dir(p).map(|d| d.count()).unwrap_or(0) == 1
                && std::fs::read_to_string(p.join("notes.txt")).ok().as_deref() == Some("USER DATA")
        }
    }
}

#[test]
fn issue_11_no_command_writes_over_a_file_a_link_or_into_a_full_directory() {
    let _group = common::beside();
    let tmp = scratch("plumb-safety-out");
    let base = tmp.path();
    let victim = base.join("victim.txt");
    std::fs::write(&victim, "USER DATA").unwrap();
    // A small recording for the commands that read one.
    let rec = base.join("rec.plumb");
    let o = run(&[
        "record",
        "--interval",
        "100ms",
        "--duration",
        "300ms",
        "--out",
        rec.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let rec = rec.to_str().unwrap().to_string();
    let target = base.join("io.dat");
    let target = target.to_str().unwrap().to_string();

    // Each command with the path it writes, and whether the path is a file or a directory.
    type Cmd = Box<dyn Fn(&str) -> Vec<String>>;
    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }
    let mut cmds: Vec<(&str, &str, Cmd)> = vec![
        (
            "io sweep --chart",
            "--chart",
            Box::new({
                let target = target.clone();
                move |p: &str| {
                    s(&[
                        "io",
                        "sweep",
                        "--ioengine",
                        "null",
                        "--qd-levels",
                        "1,2",
                        "--reps",
                        "1",
                        "--duration",
                        "200ms",
                        "--warmup",
                        "0s",
                        "--size",
                        "1M",
                        "--chart",
                        p,
                        &target,
                    ])
                }
            }),
        ),
        (
            "record --out",
            "--out",
            Box::new(|p: &str| s(&["record", "--duration", "200ms", "--out", p, "--", "true"])),
        ),
        (
            "plot --out",
            "--out",
            Box::new({
                let rec = rec.clone();
                move |p: &str| s(&["plot", &rec, "--metric", "cpu.all.idle_pct", "--out", p])
            }),
        ),
        (
            "report --out",
            "--out",
            Box::new({
                let rec = rec.clone();
                move |p: &str| s(&["report", &rec, "--out", p])
            }),
        ),
        (
            "lab --out",
            "--out",
            Box::new(|p: &str| s(&["lab", "--quick", "--dir", "/var/tmp", "--out", p])),
        ),
        (
            "io run (a write test's file)",
            "",
            Box::new(|p: &str| {
                s(&[
                    "io",
                    "run",
                    "--ioengine",
                    "null",
                    "--write-pct",
                    "100",
                    "--duration",
                    "200ms",
                    "--size",
                    "1M",
                    p,
                ])
            }),
        ),
    ];
    if no_postgres().is_none() {
        cmds.push((
            "engine start --dir",
            "--dir",
            Box::new(|p: &str| s(&["engine", "start", "--dir", p])),
        ));
    }
    for (name, flag, cmd) in &cmds {
        for what in [InTheWay::File, InTheWay::Link, InTheWay::FullDir] {
            let p = base.join(format!(
                "{}-{what:?}",
                name.replace([' ', '(', ')', '\''], "_")
            ));
            plant(&p, what, &victim);
            let args = cmd(p.to_str().unwrap());
            let o = plumb().args(&args).output().unwrap();
            assert_eq!(
                o.status.code(),
                Some(2),
                "{name} over a {what:?}: {}",
                err(&o)
            );
            assert!(
                err(&o).contains(flag) && err(&o).contains(p.to_str().unwrap()),
                "{name} over a {what:?}: the error names neither the flag nor the path: {}",
                err(&o)
            );
            assert!(
                untouched(&p, what, &victim),
                "{name} over a {what:?} changed it"
            );
            // Nothing was started or left half-made beside it.
            assert!(processes_in(&p).is_empty());
        }
    }
    // A directory that does not exist is found before the work, not after it: the sweep's
    // chart (it used to run the whole sweep and then drop the results).
    let t0 = std::time::Instant::now();
    let o = run(&[
        "io",
        "sweep",
        "--ioengine",
        "null",
        "--qd-levels",
        "1,2",
        "--reps",
        "1",
        "--duration",
        "3s",
        "--size",
        "1M",
        "--chart",
        "/nonexistent/dir/c.svg",
        &target,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("does not exist"), "{}", err(&o));
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(3),
        "the sweep ran first"
    );
    assert!(!Path::new(&target).exists());
    // man pages go into a shared directory: next to other programs' pages, over its own, but
    // never over a page that is not plumb's.
    let man = base.join("man1");
    std::fs::create_dir(&man).unwrap();
    std::fs::write(man.join("ls.1"), "USER DATA").unwrap();
    assert!(run(&["man", "--out", man.to_str().unwrap()])
        .status
        .success());
    assert!(run(&["man", "--out", man.to_str().unwrap()])
        .status
        .success());
    std::fs::write(man.join("plumb-os.1"), "USER DATA").unwrap();
    let o = run(&["man", "--out", man.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("plumb-os.1"), "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(man.join("plumb-os.1")).unwrap(),
        "USER DATA"
    );
    assert_eq!(
        std::fs::read_to_string(man.join("ls.1")).unwrap(),
        "USER DATA"
    );
}

/// Wait for a child: its exit status (a shell's: 128 + the signal that killed it) and its own
/// peak memory, polled from /proc/PID/status (VmHWM) while it runs. Not wait4's ru_maxrss:
/// Linux counts the parent's memory into it when the child is spawned with vfork.
fn wait_rusage(mut child: std::process::Child) -> (i32, u64) {
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    loop {
        if let Ok(t) = std::fs::read_to_string(&status) {
            if let Some(kb) = t
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak = peak.max(kb * 1024);
            }
        }
        if let Some(st) = child.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            let code = st.code().or(st.signal().map(|s| 128 + s)).unwrap();
            return (code, peak);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

#[test]
fn issue_11_signals_stop_every_run_at_once_clean_up_and_bound_memory() {
    let _group = common::beside();
    let tmp = scratch("plumb-safety-sig");
    let dat = |n: &str| tmp.path().join(n);
    let io = |file: &Path, extra: &[&str]| {
        plumb()
            .args(["io", "run", "--size", "4M"])
            .args(extra)
            .arg(file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Long pacing sleeps wake on the signal; INT, TERM and HUP each stop, clean up, and exit
    // with 128 + the signal; a second Ctrl-C does not skip the cleanup.
    let cases: [(&str, &[&str], &[i32], i32); 5] = [
        (
            "think",
            &["--burst", "1", "--think", "60s", "--duration", "5m"],
            &[libc::SIGINT],
            130,
        ),
        (
            "rate",
            &["--rate", "0.0000001iops", "--duration", "5m"],
            &[libc::SIGTERM],
            143,
        ),
        ("hup", &["--duration", "5m"], &[libc::SIGHUP], 129),
        (
            "twice",
            &["--burst", "1", "--think", "60s", "--duration", "5m"],
            &[libc::SIGINT, libc::SIGINT],
            130,
        ),
        (
            "6h",
            &["--threads", "2", "--duration", "6h"],
            &[libc::SIGINT],
            130,
        ),
    ];
    for (name, args, sigs, want) in cases {
        let f = dat(&format!("{name}.dat"));
        let c = io(&f, args);
        let t0 = std::time::Instant::now();
        while !f.exists() && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let t1 = std::time::Instant::now();
        for s in sigs {
            signal(&c, *s);
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        let (code, maxrss) = wait_rusage(c);
        assert_eq!(code, want, "{name}");
        assert!(
            t1.elapsed() < std::time::Duration::from_secs(5),
            "{name}: {:?} from the signal to the exit",
            t1.elapsed()
        );
        assert!(!f.exists(), "{name}: the file plumb created was left");
        // Memory follows what was measured (seconds), not what was planned (hours): it was
        // 646 MB for a 6-hour run stopped after 2 s.
        assert!(maxrss < 100 << 20, "{name}: peak RSS {maxrss} bytes");
    }

    // record -- CMD: a signal sent to plumb alone reaches the command; the command's end is
    // reported as a shell does (128 + the signal that killed it).
    let rec = tmp.path().join("r1.plumb");
    let c = plumb()
        .args([
            "record",
            "--out",
            rec.to_str().unwrap(),
            "--",
            "sleep",
            "77.7",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    signal(&c, libc::SIGTERM);
    let t1 = std::time::Instant::now();
    let (code, _) = wait_rusage(c);
    assert_eq!(code, 143);
    assert!(t1.elapsed() < std::time::Duration::from_secs(5));
    let left = std::process::Command::new("pgrep")
        .args(["-f", "sleep 77.7"])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "the command was left running");
    let o = run(&[
        "record",
        "--out",
        tmp.path().join("r2.plumb").to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "kill -9 $$",
    ]);
    assert_eq!(o.status.code(), Some(137), "{}", err(&o));

    // A reader that closes the pipe early is not an error, and nothing panics.
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} completions bash | head -c10 >/dev/null; echo ${{PIPESTATUS:-}}",
            env!("CARGO_BIN_EXE_plumb")
        ))
        .output()
        .unwrap();
    assert!(!err(&o).contains("panicked"), "{}", err(&o));
    let mut c = plumb()
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    let o = c.wait_with_output().unwrap();
    // The status of a command that lost its reader, as a shell shows one SIGPIPE ended.
    assert_eq!(o.status.code(), Some(141), "{}", err(&o));

    // A duration too long for any clock is an error naming the flag, not a panic.
    let huge = "99999999999999999999s";
    for args in [
        vec!["io", "run", "--duration", huge, "x.dat"],
        vec!["io", "run", "--think", huge, "--burst", "1", "x.dat"],
        vec!["record", "--interval", huge],
        vec!["lab", "--duration", huge],
        vec!["mem", "pressure", "1M", "--every", huge],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        assert!(err(&o).contains(huge), "{args:?}: {}", err(&o));
    }
}

fn tracefs_instances() -> Vec<String> {
    [
        "/sys/kernel/tracing/instances",
        "/sys/kernel/debug/tracing/instances",
    ]
    .iter()
    .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
    .map(|e| e.file_name().to_string_lossy().into_owned())
    .filter(|n| n.starts_with("plumb-"))
    .collect()
}

fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
}

/// Alone: it checks that tracefs is left as found (no instance of plumb's, mounted only if it
/// was), which a plumb tracing beside it would change.
#[test]
fn issue_11_two_durability_probes_share_tracefs_and_a_killed_one_is_cleaned_up() {
    let _group = common::alone();
    if !need_root("block tracing needs root") {
        return;
    }
    let d = tempfile::Builder::new()
        .prefix("plumb-safety-trace")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mounted_before = tracefs_mounted();
    let probe = || {
        plumb()
            // The shortest probe: the test is about tracefs and cleanup, not the figures.
            .args([
                "--json",
                "io",
                "durability",
                "--duration",
                "100ms",
                "--reps",
                "1",
            ])
            .args(["--bs", "8K"])
            .arg(d.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Two at once: neither loses the device's side of the evidence (the first used to unmount
    // tracefs under the second).
    let a = probe();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let b = probe();
    for (name, c) in [("first", a), ("second", b)] {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}: {}", err(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            v["trace_unavailable"].is_null(),
            "{name}: {}",
            v["trace_unavailable"]
        );
        let rows = v["rows"].as_array().unwrap();
        assert!(
            rows.iter().all(|r| r["device"].is_object()),
            "{name}: a mode without the device's counts"
        );
    }
    assert!(tracefs_instances().is_empty(), "{:?}", tracefs_instances());

    // Killed outright: its trace instance and its file stay; the next probe removes both.
    let c = probe();
    let pid = c.id();
    let file = d.path().join(format!("plumb-durability-{pid}.dat"));
    let t0 = std::time::Instant::now();
    while !tracefs_instances().contains(&format!("plumb-{pid}"))
        && t0.elapsed() < std::time::Duration::from_secs(20)
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    signal(&c, libc::SIGKILL);
    let _ = c.wait_with_output();
    // (Any plumb command started now removes the instance first, tests/together/ledger.rs shows; the
    // file is the probe's own to remove.)
    assert!(file.exists());
    let o = probe().wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(tracefs_instances().is_empty(), "{:?}", tracefs_instances());
    assert!(!file.exists(), "the killed probe's file is still there");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    // tracefs is mounted afterwards only if it was before.
    assert_eq!(tracefs_mounted(), mounted_before);
}

#[test]
fn issue_11_a_lab_killed_outright_is_cleaned_up_by_the_next_one() {
    let _group = common::beside();
    if !need_postgres() {
        return;
    }
    let d = tempfile::Builder::new()
        .prefix("plumb-safety-deadlab")
        .tempdir_in("/var/tmp")
        .unwrap();
    let lab = |out: &str| {
        plumb()
            .args(["lab", "--quick", "--dir"])
            .arg(d.path())
            .arg("--out")
            .arg(d.path().join(out))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let work_dirs = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("plumb-lab-")
            })
            .collect()
    };
    let c = lab("first");
    let t0 = std::time::Instant::now();
    // The server itself (`postgres -D DIR`), not initdb (`-U postgres`) or its bootstrap
    // backend, which end on their own once the lab is gone.
    while processes_in(d.path())
        .iter()
        .all(|p| !p.contains("postgres -D"))
        && t0.elapsed() < std::time::Duration::from_secs(60)
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    signal(&c, libc::SIGKILL);
    let _ = c.wait_with_output();
    assert_eq!(work_dirs().len(), 1, "the killed lab's work directory");
    assert!(
        processes_in(d.path())
            .iter()
            .any(|p| p.contains("postgres")),
        "the killed lab's server was expected to outlive it"
    );
    // The next lab stops that server and removes its directory before it starts its own.
    let mut c = lab("second");
    let stderr = c.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(l);
        }
    });
    let mut said = false;
    let mut lines = Vec::new();
    while let Ok(l) = rx.recv_timeout(std::time::Duration::from_secs(60)) {
        lines.push(l.clone());
        if l.contains("left by a lab that was killed")
            || l.contains("removed what a plumb that was killed")
        {
            said = true;
        }
        if l.contains("[2/") || l.contains("durab") {
            break;
        }
    }
    signal(&c, libc::SIGINT);
    let o = c.wait_with_output().unwrap();
    lines.extend(rx.try_iter());
    // Every plumb command reclaims what a killed plumb left, so another test's plumb may have
    // done it (and said so) before this lab started; tests/together/ledger.rs, whose tests run alone,
    // checks the words. Here: it is gone either way.
    let _ = said;
    assert_eq!(o.status.code(), Some(130));
    assert!(work_dirs().is_empty(), "{:?}\n{lines:#?}", work_dirs());
    assert!(
        processes_in(d.path()).is_empty(),
        "{:?}",
        processes_in(d.path())
    );
}

/// Run plumb to the end and return (exit code, stderr, peak RSS bytes, seconds).
fn run_measured(args: &[&str]) -> (i32, String, u64, f64) {
    let t0 = std::time::Instant::now();
    let mut c = plumb()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = c.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    // A run that reads forever is killed after 30 s (and fails the test below).
    let pid = c.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(30));
        // SAFETY: signalling our own child, if it still runs.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let (code, rss) = wait_rusage(c);
    drop(watchdog);
    (
        code,
        reader.join().unwrap(),
        rss,
        t0.elapsed().as_secs_f64(),
    )
}

/// CRC-32 (IEEE), as the recording's frames carry it.
fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for b in data {
        c ^= *b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn header() -> plumb_store::Header {
    plumb_store::Header {
        format_version: plumb_store::FORMAT_VERSION,
        plumb_version: "test".into(),
        started_unix_ms: 1_700_000_000_000,
        interval_ms: 1000,
        slow_interval_ms: None,
        hostname: None,
        kernel: None,
        cpus: Some(2),
        clock_ticks_per_s: Some(100),
        page_size_bytes: Some(4096),
        command_line: "crafted by a test".into(),
        labels: Default::default(),
    }
}

#[test]
fn issue_11_inputs_are_read_within_bounds() {
    let _group = common::beside();
    let tmp = scratch("plumb-safety-input");
    // Endless inputs: an error naming the input, not an endless read.
    for args in [
        vec!["k8s", "lint", "/dev/zero"],
        vec!["export", "/dev/zero"],
        vec!["report", "/dev/zero", "--out", "/nonexistent/x"],
        vec![
            "delta",
            "--engine",
            "postgres://u@127.0.0.1:1/x",
            "--file",
            "/dev/zero",
        ],
        // Each input file plumb reads: never a device (compare read /dev/zero to 24 GB).
        vec!["compare", "/dev/zero", "--", "/dev/zero"],
        vec!["compare", "--history", "/dev"],
        vec!["lab", "--workload", "/dev/zero"],
    ] {
        let (code, e, rss, secs) = run_measured(&args);
        assert_eq!(code, 2, "{args:?}: {e}");
        assert!(e.contains("/dev/"), "{args:?}: {e}");
        assert!(
            secs < 10.0 && rss < 200 << 20,
            "{args:?}: {secs} s, {rss} bytes"
        );
    }

    // A pipe nobody writes to: a recording is a regular file, refused at once (an open of a
    // FIFO waits for a writer for ever).
    let fifo = tmp.path().join("nobody-writes.plumb");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap();
    for args in [
        vec!["export", fifo],
        vec!["report", fifo, "--out", "/nonexistent/x"],
    ] {
        let (code, e, _, secs) = run_measured(&args);
        assert_eq!(code, 2, "{args:?}: {e}");
        assert!(
            e.contains("nobody-writes.plumb") && e.contains("not a regular file"),
            "{args:?}: {e}"
        );
        assert!(secs < 10.0, "{args:?}: {secs} s");
    }

    // A sample and a mark at 2^50 ms: the report and the plot end (they hung at 10 GB).
    let far = tmp.path().join("far.plumb");
    {
        let mut w = plumb_store::Writer::create(&far, &header()).unwrap();
        for (i, t) in [0u64, 1000, 2000, 1 << 50].iter().enumerate() {
            w.sample(
                *t,
                &[
                    (
                        "cpu.all.user_ticks",
                        plumb_store::Kind::Counter,
                        i as u64 * 50,
                    ),
                    ("mem.available_bytes", plumb_store::Kind::Gauge, 1 << 30),
                ],
            )
            .unwrap();
        }
    }
    plumb_store::append_mark(
        &far,
        &plumb_store::Mark {
            t_ms: 1 << 50,
            name: "far".into(),
            detail: None,
        },
    )
    .unwrap();
    let far = far.to_str().unwrap();
    for args in [
        vec![
            "report",
            far,
            "--out",
            tmp.path().join("far-report").to_str().unwrap(),
        ],
        vec!["export", far],
    ] {
        let (code, e, rss, secs) = run_measured(&args);
        assert!(code == 0, "{args:?}: {e}");
        assert!(
            e.contains("impossible"),
            "{args:?}: the damage is not named: {e}"
        );
        assert!(
            secs < 10.0 && rss < 200 << 20,
            "{args:?}: {secs} s, {rss} bytes"
        );
    }

    // 20,000 metrics and 50,000 samples that change nothing: under a megabyte on disk, a
    // billion values decoded (export --list went past 3 GB).
    let bomb = tmp.path().join("bomb.plumb");
    {
        let mut w = plumb_store::Writer::create(&bomb, &header()).unwrap();
        let names: Vec<String> = (0..20_000).map(|i| format!("m.x{i}_bytes")).collect();
        let rows: Vec<(&str, plumb_store::Kind, u64)> = names
            .iter()
            .map(|n| (n.as_str(), plumb_store::Kind::Gauge, 1))
            .collect();
        w.sample(0, &rows).unwrap();
    }
    // 49,999 samples in which nothing changed, framed by hand (the Writer would compare 20,000
    // values for each): len, crc32(type ++ payload), type 3, varint t_ms, varint 0.
    {
        let mut raw = Vec::new();
        for t in 1..50_000u64 {
            let mut payload = Vec::new();
            let mut v = t * 1000;
            while v >= 0x80 {
                payload.push((v as u8) | 0x80);
                v >>= 7;
            }
            payload.push(v as u8);
            payload.push(0);
            let mut typed = vec![3u8];
            typed.extend_from_slice(&payload);
            raw.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            raw.extend_from_slice(&crc32(&typed).to_le_bytes());
            raw.extend_from_slice(&typed);
        }
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&bomb)
            .unwrap()
            .write_all(&raw)
            .unwrap();
    }
    assert!(std::fs::metadata(&bomb).unwrap().len() < 4 << 20);
    let bomb = bomb.to_str().unwrap();
    for args in [vec!["export", bomb, "--list"], vec!["export", bomb]] {
        let (code, e, rss, secs) = run_measured(&args);
        assert_eq!(code, 2, "{args:?}: {e}");
        assert!(
            e.contains("bomb.plumb") && e.contains("values"),
            "{args:?}: {e}"
        );
        assert!(
            secs < 10.0 && rss < 200 << 20,
            "{args:?}: {secs} s, {rss} bytes"
        );
    }
}

#[test]
fn issue_11_conflicting_flags_are_refused_not_settled_silently() {
    let _group = common::beside();
    for (args, names) in [
        (
            vec!["--json", "--format", "csv", "os"],
            vec!["--json", "csv"],
        ),
        (
            vec!["--json", "--format", "text", "os"],
            vec!["--json", "text"],
        ),
        (
            vec!["io", "durability", "--quick", "--duration", "5s", "/tmp"],
            vec!["--quick", "--duration"],
        ),
        (
            vec!["mem", "assume", "--kind", "mssql", "--shared-buffers", "1G"],
            vec!["--shared-buffers", "mssql"],
        ),
        (
            vec![
                "mem",
                "assume",
                "--kind",
                "postgres",
                "--innodb-buffer-pool-size",
                "1G",
            ],
            vec!["--innodb-buffer-pool-size"],
        ),
        (
            vec![
                "delta",
                "--engine",
                "postgres://u@127.0.0.1:1/x",
                "--set",
                "work_mem=1MB",
                "--sql",
                "SELECT 1",
            ],
            vec!["--set", "--engine"],
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        for n in names {
            assert!(err(&o).contains(n), "{args:?}: {}", err(&o));
        }
    }
    // --format json with --json says the same thing twice: fine.
    let o = run(&[
        "--json",
        "--format",
        "json",
        "k8s",
        "advise",
        "--node-memory",
        "8Gi",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
}

#[test]
fn issue_11_csv_headers_are_quoted() {
    let _group = common::beside();
    // A metric name with a comma (an engine's wait event, a process title) stays one column.
    let tmp = scratch("plumb-safety-csv");
    let rec = tmp.path().join("c.plumb");
    {
        let mut w = plumb_store::Writer::create(&rec, &header()).unwrap();
        for t in 0..3u64 {
            w.sample(
                t * 1000,
                &[
                    ("mem.available_bytes", plumb_store::Kind::Gauge, 1 << 30),
                    ("disk.a,b.read_bytes", plumb_store::Kind::Counter, t * 4096),
                ],
            )
            .unwrap();
        }
    }
    let o = run(&["export", rec.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let head = text.lines().next().unwrap();
    assert!(head.contains("\"disk.a,b."), "{head}");
    // Every row has as many fields as the header, counted the RFC 4180 way.
    let fields = |l: &str| {
        let mut n = 1;
        let mut quoted = false;
        for c in l.chars() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => n += 1,
                _ => {}
            }
        }
        n
    };
    let want = fields(head);
    assert!(text.lines().skip(1).all(|l| fields(l) == want), "{text}");
}

/// A build named with --bin-dir is checked program by program and down to its libraries: a
/// world-writable `lib/` beside it (its programs load libssl and libz from `$ORIGIN/../lib`) is
/// refused before anything starts, and a `psql` beside the build that another user owns and
/// anyone can write never runs, as root, under `plumb engine psql`.
#[test]
fn a_build_others_can_change_is_refused_program_by_program() {
    let _group = common::beside();
    if !need_postgres() || !need_root("the private instance runs as postgres") {
        return;
    }
    let debian = plumb_engine::private::find_bin().unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("plumb-build-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // A build of links to Debian's programs (a server finds its files from its real path).
    let bin = tmp.path().join("build/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for p in ["initdb", "pg_ctl", "postgres"] {
        std::os::unix::fs::symlink(debian.join(p), bin.join(p)).unwrap();
    }
    let lib = tmp.path().join("build/lib");
    std::fs::create_dir(&lib).unwrap();
    std::fs::set_permissions(&lib, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let dir = tmp.path().join("pg");
    let dir_s = dir.to_str().unwrap();
    let o = run(&[
        "engine",
        "start",
        "--dir",
        dir_s,
        "--bin-dir",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains(&format!("{}: others can change it", lib.display())),
        "{}",
        err(&o)
    );
    assert!(!dir.exists(), "an instance directory was made");

    // With the library directory fixed, the build starts; a psql planted beside it does not run.
    std::fs::set_permissions(&lib, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = run(&[
        "engine",
        "start",
        "--dir",
        dir_s,
        "--bin-dir",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let marker = tmp.path().join("psql-ran");
    let psql = bin.join("psql");
    std::fs::write(&psql, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&psql, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let id = |flag: &str| -> u32 {
        let o = std::process::Command::new("id")
            .args([flag, "nobody"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .expect("a nobody user")
    };
    std::os::unix::fs::chown(&psql, Some(id("-u")), Some(id("-g"))).unwrap();
    let o = run(&["engine", "psql", "--dir", dir_s, "--", "-Atc", "SELECT 1"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains(&format!("{}: others can change it", psql.display())),
        "{}",
        err(&o)
    );
    assert!(!marker.exists(), "the planted psql ran as root");
    // A directory on the way that others can write is named too.
    std::fs::remove_file(&psql).unwrap();
    std::fs::set_permissions(
        tmp.path().join("build"),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let o = run(&["engine", "stop", "--dir", dir_s]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains(&format!(
            "{}: on the way to",
            tmp.path().join("build").display()
        )),
        "{}",
        err(&o)
    );
    std::fs::set_permissions(
        tmp.path().join("build"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let o = run(&["engine", "stop", "--remove", "--dir", dir_s]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
}

/// The private MariaDB (`plumb engine start --kind mariadb`) admits nobody but its caller: no
/// TCP, a socket in a directory only the server's user enters, one account (the caller's, by
/// unix_socket alone) beside the locked mariadb.sys; the server's own OS user is refused, and
/// nobody else reads its files. A killed server is started again on the next start; removal
/// leaves nothing; a directory holding a PostgreSQL is refused.
#[test]
fn the_private_mariadb_admits_nobody_but_its_caller() {
    let _group = common::beside();
    if !std::path::Path::new("/usr/sbin/mariadbd").exists() {
        skip("skipped: no MariaDB server (apt-get install mariadb-server)");
        return;
    }
    if !need_root("the private MariaDB runs as the mysql user") {
        return;
    }
    let tmp = server_tempdir("plumb-safety-maria");
    let d = tmp.path().join("m");
    let dir = d.to_str().unwrap();
    // A failed assertion still stops the server.
    struct Stop(String);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = run(&["engine", "stop", "--remove", "--dir", &self.0]);
        }
    }
    let _stop = Stop(dir.to_string());
    let o = run(&["engine", "start", "--kind", "mariadb", "--dir", dir]);
    assert!(o.status.success(), "{}", err(&o));
    let st: serde_json::Value =
        serde_json::from_slice(&run(&["--json", "engine", "status", "--dir", dir]).stdout).unwrap();
    assert_eq!(st["engine"], "mariadb", "{st}");
    let sock = st["instance"]["socket"].as_str().unwrap().to_string();
    let client = |os_user: Option<&str>, args: &[&str]| -> Output {
        let mut c = match os_user {
            Some(u) => {
                let mut c = std::process::Command::new("setpriv");
                c.args(["--reuid", u, "--regid", u, "--clear-groups", "mariadb"]);
                c
            }
            None => std::process::Command::new("mariadb"),
        };
        c.arg("--no-defaults")
            .arg(format!("--socket={sock}"))
            .args(["-N", "-B"])
            .args(args)
            .output()
            .expect("mariadb client")
    };
    let sql = |q: &str| -> String {
        let o = client(None, &["-uroot", "-e", q]);
        assert!(o.status.success(), "{q}: {}", err(&o));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    // The caller gets in; no TCP; only the caller's account and the locked mariadb.sys.
    assert_eq!(sql("SELECT current_user()"), "root@localhost");
    assert_eq!(sql("SELECT @@skip_networking"), "1");
    assert_eq!(
        sql("SELECT group_concat(concat(User, '@', Host, ':', JSON_VALUE(Priv, '$.plugin')) ORDER BY User) FROM mysql.global_priv"),
        "mariadb.sys@localhost:mysql_native_password,root@localhost:unix_socket"
    );
    assert_eq!(sql("SELECT JSON_VALUE(Priv, '$.account_locked') FROM mysql.global_priv WHERE User = 'mariadb.sys'"), "1");
    assert_eq!(sql("SHOW DATABASES LIKE 'test'"), "", "a test database");
    let m = std::fs::metadata(d.join("sock")).unwrap();
    assert_eq!(m.mode() & 0o077, 0, "socket directory mode {:o}", m.mode());
    // Nobody reaches the socket; the server's own OS user reaches it and is refused, as
    // root and as itself, with a password or without.
    let o = client(Some("65534"), &["-uroot", "-e", "SELECT 1"]);
    assert!(!o.status.success(), "nobody got in");
    for args in [
        &["-uroot", "-e", "SELECT 1"][..],
        &["-umysql", "-e", "SELECT 1"],
        &["-uroot", "-pinvalid", "-e", "SELECT 1"],
        &["-umariadb.sys", "-e", "SELECT 1"],
    ] {
        let o = client(Some("mysql"), args);
        assert!(
            !o.status.success(),
            "the mysql OS user got in with {args:?}"
        );
        assert!(err(&o).contains("Access denied"), "{args:?}: {}", err(&o));
    }
    // Its files: no one but the server's user (and root).
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "ls",
        ])
        .arg(d.join("data"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "nobody listed the data directory");
    // A killed server: the next start starts it again (no second bootstrap: the data stays).
    sql("CREATE DATABASE kept");
    let pid = st["instance"]["pid"].as_u64().unwrap() as i32;
    // SAFETY: the server this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let o = run(&["engine", "status", "--dir", dir]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = run(&["engine", "start", "--kind", "mariadb", "--dir", dir]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(sql("SHOW DATABASES LIKE 'kept'"), "kept");
    // What opens the server is plumb's to set; a PostgreSQL's directory is refused.
    let o = run(&[
        "engine",
        "start",
        "--kind",
        "mariadb",
        "--dir",
        dir,
        "--set",
        "skip-grant-tables=1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("plumb sets it itself"), "{}", err(&o));
    let other = tmp.path().join("other");
    let o = run(&[
        "engine",
        "start",
        "--kind",
        "mariadb",
        "--dir",
        other.to_str().unwrap(),
        "--set",
        "bind_address=0.0.0.0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("plumb sets it itself"), "{}", err(&o));
    assert!(!other.exists(), "a refused start made its directory");
    let o = run(&["engine", "stop", "--remove", "--dir", dir]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!d.exists(), "the directory plumb made is gone");
    // A directory that holds plumb's private PostgreSQL is not taken for a MariaDB.
    if no_postgres().is_none() {
        let pg = tmp.path().join("pg");
        let pgs = pg.to_str().unwrap();
        let _stop_pg = Stop(pgs.to_string());
        assert!(
            run(&["engine", "start", "--dir", pgs, "--shared-buffers", "16MB"])
                .status
                .success()
        );
        let o = run(&["engine", "start", "--kind", "mariadb", "--dir", pgs]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            err(&o).contains("holds plumb's private PostgreSQL"),
            "{}",
            err(&o)
        );
        let o = run(&["engine", "status", "--dir", pgs]);
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("PostgreSQL"),
            "{}",
            err(&o)
        );
    }
}

/// The PIDs of the processes whose command line holds every one of `words`.
fn processes_with(words: &[&str]) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let c = String::from_utf8_lossy(&c).replace('\0', " ");
        if words.iter().all(|w| c.contains(w)) {
            out.push(pid);
        }
    }
    out
}

/// A plumb killed (SIGKILL) while it makes a private MariaDB takes mariadb-install-db with it
/// (the parent-death signal); the bootstrap server the script started is ended by the next
/// start, which makes the server from nothing (it used to fail: "Directory not empty").
#[test]
fn a_killed_mariadb_start_leaves_nothing_that_stops_the_next() {
    let _group = common::beside();
    if !std::path::Path::new("/usr/sbin/mariadbd").exists() {
        skip("skipped: no MariaDB server (apt-get install mariadb-server)");
        return;
    }
    if !need_root("the private MariaDB runs as the mysql user") {
        return;
    }
    let tmp = server_tempdir("plumb-safety-maria");
    let d = tmp.path().join("m");
    let dir = d.to_str().unwrap().to_string();
    struct Stop(String);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = run(&["engine", "stop", "--remove", "--dir", &self.0]);
        }
    }
    let _stop = Stop(dir.clone());
    let mut child = plumb()
        .args(["engine", "start", "--kind", "mariadb", "--dir", &dir])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let data = format!("--datadir={dir}/data");
    let t0 = std::time::Instant::now();
    while processes_with(&["--bootstrap", &data]).is_empty() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "the bootstrap never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    // The script and its bootstrap server go with plumb at once (the bootstrap alone takes
    // about half a second here).
    let t0 = std::time::Instant::now();
    while !processes_with(&[&data]).is_empty() {
        assert!(
            t0.elapsed() < std::time::Duration::from_millis(200),
            "the bootstrap outlived the plumb that started it: {:?}",
            processes_with(&[&data])
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let o = run(&["engine", "start", "--kind", "mariadb", "--dir", &dir]);
    assert!(o.status.success(), "the next start: {}", err(&o));
    let o = run(&["engine", "stop", "--remove", "--dir", &dir]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(processes_with(&[&data]), Vec::<u32>::new(), "left running");
}

/// `CMD 2>&1 | head -N` in bash: plumb's exit status and what it printed before the pipe
/// closed, and how long it ran.
fn through_head(args: &str, lines: u32) -> (i32, String, std::time::Duration) {
    let t0 = std::time::Instant::now();
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} {args} 2>&1 | head -{lines}; echo \"status ${{PIPESTATUS[0]}}\"",
            env!("CARGO_BIN_EXE_plumb")
        ))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let code = out
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("status "))
        .and_then(|c| c.parse().ok())
        .unwrap_or(-1);
    (code, out, t0.elapsed())
}

/// A reader that goes away (`| head`) stops plumb as SIGTERM would, quietly: no panic, what it
/// made removed (the lab's private server and its --out files, the I/O test file), and the
/// status of a command that lost its reader (141).
#[test]
fn a_closed_output_stops_plumb_cleanly_and_never_panics() {
    let _group = common::beside();
    let tmp = scratch("plumb-pipe");
    let dat = tmp.path().join("t.dat");
    let (code, out, took) = through_head(
        &format!("io diskspd -- -d20 -c16M -b4K -r -w0 {}", dat.display()),
        1,
    );
    assert_eq!(code, 141, "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert!(!dat.exists(), "the test file was left");
    assert!(
        took < std::time::Duration::from_secs(15),
        "ran on for {took:?}"
    );
    let rec = tmp.path().join("r.plumb");
    // A recording goes to its file: plumb record carries on until it next writes to the
    // closed pipe (its end), then ends quietly.
    let (code, out, _) = through_head(
        &format!(
            "record --interval 100ms --duration 3s --out {}",
            rec.display()
        ),
        1,
    );
    assert_eq!(code, 141, "{out}");
    assert!(!out.contains("panicked"), "{out}");
    // The recording is a result, kept as on Ctrl-C, and readable.
    let page = tmp.path().join("page");
    assert!(run(&[
        "report",
        rec.to_str().unwrap(),
        "--out",
        page.to_str().unwrap()
    ])
    .status
    .success());
    if no_postgres().is_some() {
        skip("skipped the lab's part: no PostgreSQL");
        return;
    }
    let out_dir = tmp.path().join("lab");
    let (code, out, _) = through_head(
        &format!(
            "lab --quick --dir {} --out {}",
            tmp.path().display(),
            out_dir.display()
        ),
        2,
    );
    assert_eq!(code, 141, "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert!(!out_dir.exists(), "the lab left its --out");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("plumb-lab-"))
        .collect();
    assert!(
        left.is_empty(),
        "the lab's work directory was left: {left:?}"
    );
}

/// What a hostile server says to whoever connects: a title change, a screen clear and a forged
/// green line.
const HOSTILE: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J\r\u{1b}[32mplumb: all good\u{1b}[0m \u{9b}2J";

/// A server on loopback that answers every connection with `answer(stream)`; its port.
fn hostile_server(answer: fn(std::net::TcpStream)) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || answer(s));
        }
    });
    port
}

/// A PostgreSQL server that refuses every login with the hostile text as its error message.
fn pg_refuses(mut s: std::net::TcpStream) {
    use std::io::{Read, Write};
    loop {
        let mut len = [0u8; 4];
        if s.read_exact(&mut len).is_err() {
            return;
        }
        let n = u32::from_be_bytes(len) as usize;
        let mut body = vec![0u8; n.saturating_sub(4)];
        if s.read_exact(&mut body).is_err() {
            return;
        }
        // SSLRequest or GSSENCRequest: no.
        if body.len() == 4 && (body == [4, 210, 22, 47] || body == [4, 210, 22, 48]) {
            let _ = s.write_all(b"N");
            continue;
        }
        let mut e = Vec::new();
        for (k, v) in [
            ("S", "FATAL"),
            ("V", "FATAL"),
            ("C", "28000"),
            ("M", HOSTILE),
        ] {
            e.extend_from_slice(k.as_bytes());
            e.extend_from_slice(v.as_bytes());
            e.push(0);
        }
        e.push(0);
        let mut m = vec![b'E'];
        m.extend_from_slice(&((e.len() + 4) as u32).to_be_bytes());
        m.extend_from_slice(&e);
        let _ = s.write_all(&m);
        return;
    }
}

/// A MySQL server whose greeting names the hostile text as its authentication plugin, and
/// which then refuses the login with it as its error.
fn mysql_refuses(mut s: std::net::TcpStream) {
    use std::io::{Read, Write};
    let packet = |seq: u8, body: &[u8]| {
        let mut p = (body.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(body);
        p
    };
    let mut g = vec![10u8];
    g.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
    g.extend_from_slice(&7u32.to_le_bytes());
    g.extend_from_slice(b"abcdefgh\0");
    g.extend_from_slice(&0xa20fu16.to_le_bytes());
    g.push(33);
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&0x0008u16.to_le_bytes());
    g.push(21);
    g.extend_from_slice(&[0u8; 10]);
    g.extend_from_slice(b"ijklmnopqrst\0");
    g.extend_from_slice(HOSTILE.as_bytes());
    g.push(0);
    if s.write_all(&packet(0, &g)).is_err() {
        return;
    }
    let mut head = [0u8; 4];
    if s.read_exact(&mut head).is_err() {
        return;
    }
    let n = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    let mut body = vec![0u8; n];
    let _ = s.read_exact(&mut body);
    let mut err = vec![0xffu8];
    err.extend_from_slice(&1045u16.to_le_bytes());
    err.extend_from_slice(b"#28000");
    err.extend_from_slice(HOSTILE.as_bytes());
    let _ = s.write_all(&packet(head[3].wrapping_add(1), &err));
}

/// What a server says reaches the terminal as text: its error messages and its authentication
/// plugin's name have their control characters escaped (`\x1b`), through both clients, in the
/// error printer; no raw ESC, BEL, CR or C1 reaches stderr.
#[test]
fn what_a_server_says_never_controls_the_terminal() {
    let _group = common::beside();
    let pg = hostile_server(pg_refuses);
    let my = hostile_server(mysql_refuses);
    for url in [
        format!("postgresql://u@127.0.0.1:{pg}/db?sslmode=disable"),
        format!("mysql://u@127.0.0.1:{my}/db"),
    ] {
        for args in [
            vec![
                "load",
                "--engine",
                &url,
                "--allow-writes",
                "--duration",
                "1s",
            ],
            vec!["delta", "--engine", &url, "--sql", "SELECT 1"],
        ] {
            let o = run(&args);
            let e = err(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
            assert!(
                !e.bytes().any(|b| b == 0x1b || b == 0x07 || b == b'\r') && !e.contains('\u{9b}'),
                "{args:?}: raw control characters reached stderr: {e:?}"
            );
            assert!(e.contains("\\x1b]0;owned"), "{args:?}: {e}");
        }
    }
}

/// As root, plumb makes its directories only where nobody else can change the way there: a
/// link another user placed in a directory they own (`A/B/new`, B a link to /etc) is refused
/// with the component named, for the private PostgreSQL, the private MariaDB and the lab's work
/// directory, and nothing is made where the link leads.
#[test]
fn a_way_another_user_controls_is_refused_as_root() {
    let _group = common::beside();
    if !need_root("the check is for what plumb makes as root") {
        return;
    }
    let tmp = scratch("plumb-safety-way");
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let target = tmp.path().join("where-the-link-leads");
    std::fs::create_dir(&target).unwrap();
    let link = theirs.join("B");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    for p in [&theirs, &link] {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a path we made, handed to another uid.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
    }
    let new = link.join("new");
    let new_s = new.to_str().unwrap();
    for args in [
        vec!["engine", "start", "--dir", new_s],
        vec!["engine", "start", "--kind", "mariadb", "--dir", new_s],
        vec!["lab", "--quick", "--dir", link.to_str().unwrap()],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        assert!(
            err(&o).contains(&format!("{}: on the way to", theirs.display())),
            "{args:?}: {}",
            err(&o)
        );
        let made: Vec<_> = std::fs::read_dir(&target).unwrap().flatten().collect();
        assert!(
            made.is_empty(),
            "{args:?} made {made:?} where the link leads"
        );
    }
    // The same path, ours all the way: it starts.
    let ours = tmp.path().join("ours");
    std::fs::create_dir(&ours).unwrap();
    let d = ours.join("pg");
    let o = run(&["engine", "start", "--dir", d.to_str().unwrap()]);
    let started = o.status.success();
    let _ = run(&["engine", "stop", "--remove", "--dir", d.to_str().unwrap()]);
    if no_postgres().is_none() {
        assert!(started, "{}", err(&o));
    }
}

/// A MySQL server that accepts the connection and then says nothing: plumb says it timed out
/// logging in, after how long and where (it said `CodecError { … os error 11 }` after 60 s).
#[test]
fn a_silent_mysql_login_is_said_to_have_timed_out() {
    let _group = common::beside();
    let port = hostile_server(|s| {
        std::thread::sleep(std::time::Duration::from_secs(60));
        drop(s);
    });
    let url = format!("mysql://u@127.0.0.1:{port}/db");
    let t0 = std::time::Instant::now();
    let o = run(&[
        "load",
        "--engine",
        &url,
        "--allow-writes",
        "--duration",
        "1s",
    ]);
    let took = t0.elapsed();
    let e = err(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("timed out logging in") && e.contains("15 s"),
        "{e}"
    );
    assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(
        !e.contains("os error 11") && !e.contains("CodecError"),
        "{e}"
    );
    assert!(took < std::time::Duration::from_secs(25), "{took:?}");
}
