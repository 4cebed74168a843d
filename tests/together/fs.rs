//! `plumb fs` against real servers: plumb's private PostgreSQL and a MariaDB this test starts,
//! read through FUSE with the tools a DBA pipes views through (cat, grep, awk -F'\t',
//! column -t -s $'\t', jq, wc -l). Needs root (the servers run as their own users, and the
//! mount needs /dev/fuse), jq and column (bsdextrautils).

use crate::common;
use crate::common::maria::Maria;
use crate::common::{engine_psql as psql, is_root, plumb, skip};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Why these tests cannot run here, if they cannot.
fn cannot_run() -> Option<String> {
    if !is_root() {
        return Some(
            "skipped: plumb fs is tested as root (the servers run as their own users)".into(),
        );
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("skipped: no /dev/fuse".into());
    }
    for tool in ["jq", "column", "awk"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| !o.status.success())
            .unwrap_or(true)
        {
            return Some(format!(
                "skipped: no {tool} (scripts/setup --test installs it)"
            ));
        }
    }
    None
}

fn sh(cmd: &str) -> String {
    let o = Command::new("bash").args(["-c", cmd]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{cmd}: {err}");
    out
}

/// The line /proc/mounts has for a mount point.
fn mount_line(m: &Path) -> Option<String> {
    std::fs::read_to_string("/proc/mounts")
        .ok()?
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(1) == Some(&m.to_str().unwrap())).then(|| l.to_string())
        })
}

/// A plumb fs in the background; its process, from what it printed.
fn mount(mp: &Path, url: &str, extra: &[&str]) -> u32 {
    let o = plumb()
        .arg("fs")
        .arg(mp)
        .args(["--engine", url])
        .args(extra)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("mounted on"), "{out}");
    out.split("by process ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no process in {out}"))
}

fn unmount(mp: &Path, pid: u32) {
    let o = plumb().args(["fs", "--unmount"]).arg(mp).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    // The plumb serving it sees the mount go and ends.
    let t0 = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "plumb fs {pid} still runs"
    );
    assert_eq!(mount_line(mp), None);
}

/// Unmounts whatever is left at the end of a test, and stops the private PostgreSQL.
struct Cleanup {
    mounts: Vec<PathBuf>,
    /// Stopped and removed after the mounts are gone (fields drop after `drop` runs).
    _pg: Option<common::Private>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for m in &self.mounts {
            if mount_line(m).is_some() {
                let _ = plumb().args(["fs", "--unmount"]).arg(m).output();
            }
        }
    }
}

/// The private PostgreSQL and what removes it, or None (skipped) where these tests cannot run.
fn pg_setup(tag: &str) -> Option<(tempfile::TempDir, PathBuf, String, Cleanup)> {
    if let Some(why) = cannot_run().or_else(common::no_postgres) {
        skip(why);
        return None;
    }
    let tmp = common::server_tempdir(&format!("plumb-fs-{tag}-"));
    let pg = common::Private::start(&tmp.path().join("pg"), &[]);
    let (d, url) = (pg.dir.clone(), pg.url());
    let clean = Cleanup {
        mounts: vec![],
        _pg: Some(pg),
    };
    Some((tmp, d, url, clean))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A new directory only its owner can enter (a query directory plumb accepts).
fn private_dir(p: &Path) -> PathBuf {
    std::fs::create_dir(p).unwrap();
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    p.to_path_buf()
}

fn write_private(p: &Path, s: &str) {
    std::fs::write(p, s).unwrap();
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

/// The views of the private PostgreSQL, read the way the dbfs walk-through reads DMVs, and the
/// DBA's own queries.
#[test]
fn postgresql_views_read_through_cat_grep_awk_column_jq_and_wc() {
    let _group = common::beside();
    let Some((tmp, d, url, mut clean)) = pg_setup("pg") else {
        return;
    };
    psql(
        &d,
        "CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 5)",
    );
    // A password in the URL (the private instance does not need it): it must show nowhere.
    let secret = "Fs-S3cret-9x";
    psql(&d, &format!("ALTER ROLE plumb PASSWORD '{secret}'"));
    let url = url.replacen("postgresql://", &format!("postgresql://plumb:{secret}@"), 1);
    let q = private_dir(&tmp.path().join("queries"));
    write_private(&q.join("rows.sql"), "SELECT count(*) AS n FROM t");
    write_private(
        &q.join("tricky.sql"),
        "SELECT E'a\\tb\\nc\\\\d' AS tricky, 2 AS n, NULL::text AS nothing, true AS yes",
    );
    write_private(&q.join("slow.sql"), "SELECT pg_sleep(1.5) AS slept");
    write_private(&q.join("too_slow.sql"), "SELECT pg_sleep(30)");
    let m = tmp.path().join("mnt");
    std::fs::create_dir(&m).unwrap();
    clean.mounts.push(m.clone());
    let pid = mount(
        &m,
        &url,
        &[
            "--queries",
            q.to_str().unwrap(),
            "--cache",
            "0",
            "--timeout",
            "3s",
        ],
    );

    // The mount: read-only, plumb's, and no password in the mount table or a command line.
    let line = mount_line(&m).expect("mounted");
    assert!(line.starts_with("plumb:postgresql "), "{line}");
    assert!(line.contains(" ro,") || line.contains(" ro "), "{line}");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    for place in [line.as_bytes(), &cmdline[..]] {
        assert!(!String::from_utf8_lossy(place).contains(secret));
    }
    let readme = read(&m.join("README"));
    assert!(
        readme.contains("PostgreSQL 15") || readme.contains("PostgreSQL 1"),
        "{readme}"
    );
    assert!(!readme.contains(secret), "{readme}");
    for dir in [
        "activity",
        "stats",
        "tables",
        "config",
        "replication",
        "queries",
    ] {
        assert!(m.join(dir).is_dir(), "{dir} missing");
    }

    // cat, and the header row.
    let activity = read(&m.join("activity/pg_stat_activity"));
    let header: Vec<&str> = activity.lines().next().unwrap().split('\t').collect();
    assert_eq!(&header[..3], &["datid", "datname", "pid"]);
    // grep finds plumb's own session by its name.
    let mine = sh(&format!(
        "grep 'plumb fs' {}/activity/pg_stat_activity",
        m.display()
    ));
    assert!(!mine.is_empty());
    // awk -F'\t': the column of the header's name, on every row.
    let app = header
        .iter()
        .position(|c| *c == "application_name")
        .unwrap()
        + 1;
    let apps = sh(&format!(
        "awk -F'\\t' 'NR > 1 {{ print ${app} }}' {}/activity/pg_stat_activity",
        m.display()
    ));
    assert!(apps.lines().any(|a| a == "plumb fs"), "{apps}");
    // column -t -s $'\t' keeps every row to the header's columns.
    let col = sh(&format!(
        "column -t -s $'\\t' -o '|' {}/config/pg_settings | awk -F'|' '{{ print NF }}' | sort -u",
        m.display()
    ));
    assert_eq!(
        col.trim(),
        header_count(&m.join("config/pg_settings")).to_string()
    );
    // wc -l: the view's rows and the header.
    let n: usize = psql(&d, "SELECT count(*) FROM pg_settings")
        .parse()
        .unwrap();
    let wc = sh(&format!("wc -l < {}/config/pg_settings", m.display()));
    assert_eq!(wc.trim().parse::<usize>().unwrap(), n + 1);
    // jq on the JSON form, the same rows.
    let names = sh(&format!(
        "jq -r .name {}/config/pg_settings.json",
        m.display()
    ));
    assert_eq!(names.lines().count(), n);
    assert!(names.lines().any(|l| l == "shared_buffers"));
    let sb = sh(&format!(
        "jq -r 'select(.name == \"shared_buffers\") | .setting' {}/config/pg_settings.json",
        m.display()
    ));
    assert_eq!(
        sb.trim(),
        psql(
            &d,
            "SELECT setting FROM pg_settings WHERE name = 'shared_buffers'"
        )
    );
    // The aligned form, for eyes.
    let txt = read(&m.join("stats/pg_stat_database.txt"));
    assert!(txt.lines().nth(1).unwrap().starts_with("-----"), "{txt}");
    assert!(txt.trim_end().ends_with("rows)"), "{txt}");

    // ls -l sizes are the sizes cat reads, and the file's time is when it was taken.
    let size = std::fs::metadata(m.join("config/pg_settings"))
        .unwrap()
        .len();
    assert_eq!(size as usize, read(&m.join("config/pg_settings")).len());

    // A value with a tab, a newline and a backslash stays in its row and column; NULL is
    // empty; JSON has the value itself, typed.
    let tricky = read(&m.join("queries/tricky"));
    assert_eq!(tricky, "tricky\tn\tnothing\tyes\na\\tb\\nc\\\\d\t2\t\tt\n");
    let j: serde_json::Value =
        serde_json::from_str(read(&m.join("queries/tricky.json")).trim()).unwrap();
    assert_eq!(j["tricky"], "a\tb\nc\\d");
    assert_eq!(j["n"], 2);
    assert!(j["nothing"].is_null());
    assert_eq!(j["yes"], true);

    // One open, one moment: rows added after the open are not in what it reads.
    let mut f = std::fs::File::open(m.join("queries/rows")).unwrap();
    psql(&d, "INSERT INTO t VALUES (6)");
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s, "n\n5\n");
    assert_eq!(
        read(&m.join("queries/rows")),
        "n\n6\n",
        "a new open: the new count"
    );
    drop(f);

    // The DBA's own files: a new one appears, a changed one changes, a wrong one says why.
    write_private(&q.join("added.sql"), "SELECT 'first' AS v");
    let ls = sh(&format!("ls {}/queries", m.display()));
    assert!(ls.lines().any(|l| l == "added"), "{ls}");
    assert!(ls.lines().any(|l| l == "added.json"), "{ls}");
    assert_eq!(read(&m.join("queries/added")), "v\nfirst\n");
    write_private(&q.join("added.sql"), "SELECT 'second' AS v");
    assert_eq!(read(&m.join("queries/added")), "v\nsecond\n");
    write_private(&q.join("added.sql"), "SELECT * FROM no_such_table");
    let err = sh(&format!("cat {}/queries/added", m.display()));
    assert!(
        err.starts_with("error: ") && err.contains("no_such_table"),
        "{err}"
    );
    let errs = read(&m.join(".errors"));
    assert!(
        errs.lines().any(|l| l.starts_with("queries/added\t")),
        "{errs}"
    );
    assert!(read(&m.join("queries/.errors")).contains("no_such_table"));
    let je: serde_json::Value =
        serde_json::from_str(read(&m.join("queries/added.json")).trim()).unwrap();
    assert!(je["error"].as_str().unwrap().contains("no_such_table"));
    // Read-only, even for a query that tries to write.
    write_private(&q.join("writes.sql"), "INSERT INTO t VALUES (99)");
    assert!(read(&m.join("queries/writes")).starts_with("error: "));
    assert_eq!(psql(&d, "SELECT count(*) FROM t WHERE id = 99"), "0");
    // Nor can it end the read-only transaction and go on: one statement or nothing.
    let rows = psql(&d, "SELECT count(*) FROM t");
    write_private(
        &q.join("escape.sql"),
        "COMMIT; BEGIN TRANSACTION READ WRITE; DROP TABLE t; SELECT 1",
    );
    let escape = read(&m.join("queries/escape"));
    assert!(
        escape.starts_with("error: ") && escape.contains("one statement"),
        "{escape}"
    );
    assert_eq!(psql(&d, "SELECT count(*) FROM t"), rows);
    // A file other users could write is not run.
    std::fs::write(q.join("open.sql"), "SELECT 1").unwrap();
    std::fs::set_permissions(
        q.join("open.sql"),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    assert!(read(&m.join("queries/open")).contains("other users can write it"));
    // The statement timeout applies, as the file's error.
    let t0 = Instant::now();
    let slow = read(&m.join("queries/too_slow"));
    assert!(
        slow.starts_with("error: ") && slow.contains("timeout"),
        "{slow}"
    );
    assert!(t0.elapsed() < Duration::from_secs(20));

    // Writes are refused as on a read-only file system.
    let e = std::fs::write(m.join("README"), "x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let e = std::fs::write(m.join("activity/new"), "x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");

    // Twenty readers at once, one of them on a slow query: all answer, and the slow one holds
    // up nobody.
    let files: Vec<PathBuf> = sh(&format!(
        "ls {0}/stats/* {0}/tables/* {0}/activity/* | grep -v '\\.' | head -19",
        m.display()
    ))
    .lines()
    .map(PathBuf::from)
    .collect();
    assert_eq!(files.len(), 19);
    let slow_file = m.join("queries/slow");
    let slow = std::thread::spawn(move || {
        let s = read(&slow_file);
        (s, Instant::now())
    });
    std::thread::sleep(Duration::from_millis(200));
    let readers: Vec<_> = files
        .into_iter()
        .map(|f| std::thread::spawn(move || (read(&f), f, Instant::now())))
        .collect();
    let mut last_fast = Instant::now();
    for r in readers {
        let (s, f, at) = r.join().unwrap();
        assert!(
            s.lines()
                .next()
                .is_some_and(|h| !h.is_empty() && !h.starts_with("error")),
            "{}: {s}",
            f.display()
        );
        last_fast = last_fast.max(at);
    }
    let (s, slow_done) = slow.join().unwrap();
    assert_eq!(s, "slept\n\n");
    assert!(
        last_fast < slow_done,
        "the fast files waited for the slow query"
    );

    // Only its owner may enter the mount: another user is refused by the kernel.
    let other = Command::new("runuser")
        .args(["-u", "nobody", "--", "cat"])
        .arg(m.join("README"))
        .output()
        .unwrap();
    assert!(!other.status.success());
    assert!(
        text(&other).1.contains("Permission denied"),
        "{:?}",
        text(&other)
    );

    // Connections the server drops are replaced: the next read does not fail.
    psql(
        &d,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'plumb fs'",
    );
    let after = read(&m.join("stats/pg_stat_database"));
    assert!(after.starts_with("datid\tdatname"), "{after}");
    assert_eq!(read(&m.join("queries/rows")), "n\n6\n");

    unmount(&m, pid);
}

/// Statements the server logged since byte `from` of its log that contain `needle`.
fn logged(d: &Path, from: u64, needle: &str) -> usize {
    let log = std::fs::read(d.join("postgresql.log")).unwrap();
    String::from_utf8_lossy(&log[(from as usize).min(log.len())..])
        .matches(needle)
        .count()
}

fn log_len(d: &Path) -> u64 {
    std::fs::metadata(d.join("postgresql.log")).unwrap().len()
}

/// A role with only CREATE on a schema plants a view named like a statistics view whose
/// function would run as the mounting role: it is not listed, so no `ls` or `cat` runs it. An
/// extension's statistics view (pg_stat_statements) still is. And `ls -l` runs nobody's SQL:
/// a view's or query file's size is its newest result's, 0 before the first read.
#[test]
fn a_planted_view_is_not_listed_and_ls_runs_no_query() {
    let _group = common::beside();
    let Some((tmp, d, url, mut clean)) = pg_setup("planted") else {
        return;
    };
    psql(
        &d,
        "CREATE ROLE mallory LOGIN; CREATE SCHEMA evil AUTHORIZATION mallory; \
         CREATE SCHEMA ext; CREATE EXTENSION pg_stat_statements SCHEMA ext",
    );
    psql(&d, "ALTER SYSTEM SET log_statement = 'all'");
    psql(&d, "SELECT pg_reload_conf()");
    psql(
        &d,
        "SET ROLE mallory; \
         CREATE TABLE evil.ran (at timestamptz); \
         CREATE FUNCTION evil.f() RETURNS int LANGUAGE plpgsql AS \
           $$ BEGIN INSERT INTO evil.ran VALUES (now()); RETURN 1; END $$; \
         CREATE VIEW evil.pg_stat_evil AS SELECT evil.f() AS x; \
         CREATE VIEW evil.pg_stat_activity AS SELECT evil.f() AS x",
    );
    let q = private_dir(&tmp.path().join("queries"));
    write_private(
        &q.join("mine.sql"),
        "SELECT 'my-own-query' AS what, 42 AS n",
    );
    let m = tmp.path().join("mnt");
    std::fs::create_dir(&m).unwrap();
    clean.mounts.push(m.clone());
    let pid = mount(
        &m,
        &url,
        &["--queries", q.to_str().unwrap(), "--cache", "0"],
    );

    // Not listed anywhere; the real pg_stat_activity is pg_catalog's; the extension's view is.
    let all = sh(&format!("find {} | sort", m.display()));
    assert!(!all.contains("evil"), "{all}");
    assert!(all.contains("/stats/pg_stat_statements\n"), "{all}");
    let activity = read(&m.join("activity/pg_stat_activity"));
    assert!(activity.starts_with("datid\t"), "{activity}");

    // ls -lR and stat of every file: no statement reaches the server.
    let from = log_len(&d);
    let listing = sh(&format!(
        "ls -lR {} && stat {}/queries/mine {}/config/pg_settings",
        m.display(),
        m.display(),
        m.display()
    ));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(logged(&d, from, "my-own-query"), 0, "ls ran the query file");
    assert_eq!(logged(&d, from, "FROM \"pg_catalog\"."), 0, "ls ran a view");
    // Before its first read a query file's size is 0; after it, the size cat read.
    assert_eq!(
        std::fs::metadata(m.join("queries/mine")).unwrap().len(),
        0,
        "{listing}"
    );
    let mine = read(&m.join("queries/mine"));
    assert_eq!(mine, "what\tn\nmy-own-query\t42\n");
    assert_eq!(
        std::fs::metadata(m.join("queries/mine")).unwrap().len() as usize,
        mine.len()
    );
    assert_eq!(logged(&d, from, "my-own-query"), 1, "one read, one query");
    // The planted function never ran.
    assert_eq!(psql(&d, "SELECT count(*) FROM evil.ran"), "0");

    // A session whose query text would retitle the reader's terminal: escaped in every text
    // form, so `cat` shows it and the terminal stays the DBA's.
    let mut hostile = plumb()
        .args(["engine", "psql", "--dir"])
        .arg(&d)
        .args(["--", "-Atc", "SELECT pg_sleep(3) /* \x1b]0;pwned\x07 */"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    for form in ["", ".txt"] {
        let bytes = std::fs::read(m.join(format!("activity/pg_stat_activity{form}"))).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("\\x1b]0;pwned\\x07"), "{text}");
        assert!(!bytes.contains(&0x1b) && !bytes.contains(&0x07), "{text}");
    }
    let _ = hostile.wait();
    unmount(&m, pid);
}

fn header_count(p: &Path) -> usize {
    read(p).lines().next().unwrap().split('\t').count()
}

/// `kill -9` leaves a dead mount; the next plumb fs there removes it. Ctrl-C unmounts; bad
/// input exits 2 before mounting; a server that goes away for good unmounts. Alone: any plumb
/// started beside it would remove the dead mount before the test saw it.
#[test]
fn stale_mounts_ctrl_c_bad_input_and_a_server_that_goes_away() {
    let _group = common::alone();
    let Some((tmp, d, url, mut clean)) = pg_setup("life") else {
        return;
    };
    let m = tmp.path().join("mnt");
    std::fs::create_dir(&m).unwrap();
    clean.mounts.push(m.clone());

    // kill -9: the mount stays, dead.
    let pid = mount(&m, &url, &[]);
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    sh(&format!("kill -9 {pid}"));
    let t0 = Instant::now();
    loop {
        match std::fs::metadata(&m) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => break,
            _ if t0.elapsed() > Duration::from_secs(10) => panic!("no dead mount after kill -9"),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    // The next one removes it (every plumb command first takes down what a killed plumb's
    // ledger lists, so another test's plumb may have done it already) and mounts.
    let dead_before = mount_line(&m).is_some();
    let o = plumb()
        .arg("fs")
        .arg(&m)
        .args(["--engine", &url])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        !dead_before
            || err.contains("removed a plumb mount left at")
            || err.contains(&format!(
                "removed what a plumb that was killed (PID {pid}) left: the plumb fs mount on"
            )),
        "{err}"
    );
    assert!(m.join("README").exists());
    // A second plumb fs on a live mount is refused.
    let o = plumb()
        .arg("fs")
        .arg(&m)
        .args(["--engine", &url])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("a running plumb fs is mounted here"));
    let pid2: u32 = out
        .split("by process ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    // Another user's --unmount is refused, saying whose mount it is.
    let o = Command::new("runuser")
        .args([
            "-u",
            "nobody",
            "--",
            env!("CARGO_BIN_EXE_plumb"),
            "fs",
            "--unmount",
        ])
        .arg(&m)
        .output()
        .unwrap();
    let (_, e) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("a plumb mount of root (uid 0); only that user or root can unmount it"),
        "{e}"
    );
    assert!(mount_line(&m).is_some());
    // --unmount through a symbolic link finds the mount where it points.
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&m, &link).unwrap();
    unmount(&link, pid2);
    // A symbolic link as the mount point is refused: the directory itself, or nothing.
    let o = plumb()
        .arg("fs")
        .arg(&link)
        .args(["--engine", &url])
        .output()
        .unwrap();
    let (_, e) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("a symbolic link (it points to"), "{e}");
    assert_eq!(mount_line(&m), None);

    // --cache: opens within the cache time share one result; after it, a new one.
    psql(&d, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)");
    let q = private_dir(&tmp.path().join("q"));
    write_private(&q.join("rows.sql"), "SELECT count(*) AS n FROM t");
    let pid3 = mount(
        &m,
        &url,
        &["--cache", "2s", "--queries", q.to_str().unwrap()],
    );
    let t0 = Instant::now();
    assert_eq!(read(&m.join("queries/rows")), "n\n1\n");
    psql(&d, "INSERT INTO t VALUES (2)");
    let again = read(&m.join("queries/rows"));
    if t0.elapsed() < Duration::from_millis(1800) {
        assert_eq!(again, "n\n1\n", "within the cache time: the same result");
    }
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        read(&m.join("queries/rows")),
        "n\n2\n",
        "after it: a new one"
    );
    // SIGTERM to the background plumb unmounts.
    sh(&format!("kill -TERM {pid3}"));
    let t0 = Instant::now();
    while mount_line(&m).is_some() || Path::new(&format!("/proc/{pid3}")).exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "SIGTERM did not unmount"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Ctrl-C in the foreground: unmounted, exit 130.
    let mut child = plumb()
        .arg("fs")
        .arg(&m)
        .args(["--engine", &url, "--foreground"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !m.join("README").exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "never mounted");
        std::thread::sleep(Duration::from_millis(50));
    }
    sh(&format!("kill -INT {}", child.id()));
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(130));
    assert_eq!(mount_line(&m), None);
    assert!(std::fs::read_dir(&m).unwrap().next().is_none());

    // Bad input: exit 2, nothing mounted.
    let bad = |args: &[&str], mp: &Path, says: &str| {
        let o = plumb().arg("fs").arg(mp).args(args).output().unwrap();
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(mount_line(mp), None);
    };
    bad(
        &[
            "--engine",
            "postgresql:///postgres?host=/nonexistent&user=plumb",
        ],
        &m,
        "/nonexistent",
    );
    bad(
        &["--engine", "http://example.com"],
        &m,
        "not a database URL",
    );
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep"), "x").unwrap();
    bad(&["--engine", &url], &full, "not empty");
    assert_eq!(read(&full.join("keep")), "x");
    bad(&["--engine", &url], &full.join("keep"), "not a directory");
    bad(&["--engine", &url], &tmp.path().join("nope"), "nope");
    let open_dir = tmp.path().join("shared-queries");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(
        &open_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    bad(
        &["--engine", &url, "--queries", open_dir.to_str().unwrap()],
        &m,
        "other users can add files",
    );
    let o = plumb().args(["fs", "--unmount", "/proc"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("not a plumb mount"));

    // The server goes away for good: plumb unmounts and says so.
    let mut child = plumb()
        .arg("fs")
        .arg(&m)
        .args(["--engine", &url, "--foreground", "--gone-after", "2s"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !m.join("README").exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "never mounted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = plumb()
        .args(["engine", "stop", "--dir"])
        .arg(&d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "plumb fs did not end"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("stopped answering"), "{:?}", text(&o));
    assert_eq!(mount_line(&m), None);
}

/// MariaDB's views: performance_schema, status, InnoDB's report.
#[test]
fn mariadb_views_read_through_the_same_tools() {
    let _group = common::beside();
    if let Some(why) = cannot_run() {
        return skip(why);
    }
    let maria = match Maria::start() {
        Ok(m) => m,
        Err(e) => return skip(format!("skipped: {e}")),
    };
    let tmp = tempfile::Builder::new()
        .prefix("plumb-fs-maria-")
        .tempdir_in("/tmp")
        .unwrap();
    let m = tmp.path().join("mnt");
    std::fs::create_dir(&m).unwrap();
    let _clean = Cleanup {
        mounts: vec![m.clone()],
        _pg: None,
    };
    let q = private_dir(&tmp.path().join("q"));
    write_private(
        &q.join("top_waits.sql"),
        "SELECT EVENT_NAME, COUNT_STAR FROM performance_schema.events_waits_summary_global_by_event_name ORDER BY COUNT_STAR DESC LIMIT 5",
    );
    write_private(&q.join("broken.sql"), "SELEC 1");
    maria
        .sql("CREATE DATABASE plumb_fs_test; CREATE TABLE plumb_fs_test.victim (id int)")
        .unwrap();
    write_private(
        &q.join("escape.sql"),
        "COMMIT; SET SESSION TRANSACTION READ WRITE; DROP TABLE plumb_fs_test.victim; SELECT 1",
    );
    let url = maria.url("mysql");
    let pid = mount(
        &m,
        &url,
        &["--queries", q.to_str().unwrap(), "--cache", "0"],
    );
    assert!(mount_line(&m).unwrap().starts_with("plumb:mariadb "));
    for dir in [
        "performance_schema",
        "status",
        "innodb",
        "information_schema",
        "queries",
    ] {
        assert!(m.join(dir).is_dir(), "{dir} missing");
    }
    // wc -l: rows and the header.
    let n: usize = maria
        .sql("SELECT COUNT(*) FROM information_schema.GLOBAL_VARIABLES")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let wc = sh(&format!("wc -l < {}/status/global_variables", m.display()));
    assert_eq!(wc.trim().parse::<usize>().unwrap(), n + 1);
    // grep and awk on status.
    let up = sh(&format!(
        "grep -i '^uptime\t' {}/status/global_status | awk -F'\\t' '{{ print $2 }}'",
        m.display()
    ));
    assert!(up.trim().parse::<u64>().is_ok(), "{up}");
    // performance_schema through column and jq.
    let ev = "performance_schema/events_waits_summary_global_by_event_name";
    let col = sh(&format!(
        "column -t -s $'\\t' -o '|' {}/{ev} | awk -F'|' '{{ print NF }}' | sort -u",
        m.display()
    ));
    assert_eq!(col.trim(), header_count(&m.join(ev)).to_string());
    let counted = sh(&format!(
        "jq -r 'select(.COUNT_STAR > 0) | .EVENT_NAME' {}/{ev}.json | head -3",
        m.display()
    ));
    assert!(counted.lines().count() > 0, "no waits counted");
    // InnoDB's status report, as text.
    let innodb = read(&m.join("innodb/innodb_status.txt"));
    assert!(innodb.contains("BUFFER POOL AND MEMORY"), "{innodb}");
    // The DBA's queries, and one that is wrong.
    let top = read(&m.join("queries/top_waits"));
    assert_eq!(top.lines().next(), Some("EVENT_NAME\tCOUNT_STAR"));
    assert_eq!(top.lines().count(), 6, "{top}");
    let broken = read(&m.join("queries/broken"));
    assert!(
        broken.starts_with("error: ") && broken.contains("SQL syntax"),
        "{broken}"
    );
    assert!(read(&m.join(".errors")).contains("queries/broken"));
    // A file cannot end its read-only transaction and go on: one statement or nothing.
    let escape = read(&m.join("queries/escape"));
    assert!(
        escape.starts_with("error: ") && escape.contains("one statement"),
        "{escape}"
    );
    assert_eq!(
        maria
            .sql("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME = 'victim'")
            .unwrap()
            .trim(),
        "1"
    );
    unmount(&m, pid);
}

/// A kB figure from /proc/PID/status (VmRSS, VmHWM).
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A query that returns a gigabyte: plumb keeps its first rows, says in the file where it cut,
/// holds a bounded amount of memory, and gives it back when the file is deleted.
#[test]
fn a_gigabyte_result_is_cut_and_its_memory_comes_back() {
    let _group = common::beside();
    let Some((tmp, _d, url, mut clean)) = pg_setup("big") else {
        return;
    };
    let q = private_dir(&tmp.path().join("queries"));
    write_private(
        &q.join("big.sql"),
        "SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 1000000) g",
    );
    let m = tmp.path().join("mnt");
    std::fs::create_dir(&m).unwrap();
    clean.mounts.push(m.clone());
    let pid = mount(
        &m,
        &url,
        &["--queries", q.to_str().unwrap(), "--cache", "0"],
    );
    let before = status_kb(pid, "VmRSS");
    for form in ["", ".json", ".txt"] {
        let text = read(&m.join(format!("queries/big{form}")));
        let last = text.lines().last().unwrap_or("");
        assert!(
            last.contains("plumb cut the result here, after") && last.contains("narrow the query"),
            "{form}: {last}"
        );
        assert!(text.len() < 80 << 20, "{form}: {} bytes", text.len());
    }
    let tsv = read(&m.join("queries/big"));
    let kept = tsv.lines().count() - 2;
    assert!(
        (10_000..=100_000).contains(&kept),
        "kept {kept} rows of a million"
    );
    assert!(tsv
        .lines()
        .last()
        .unwrap()
        .starts_with(&format!("# plumb cut the result here, after {kept} rows")));
    let peak = status_kb(pid, "VmHWM");
    assert!(
        peak < 1024 * 1024,
        "plumb fs peaked at {} MiB for a 1 GB result",
        peak / 1024
    );
    // Deleted: the next listing forgets its result, and the memory goes back.
    std::fs::remove_file(q.join("big.sql")).unwrap();
    let listed = sh(&format!("ls {}/queries", m.display()));
    assert!(!listed.contains("big"), "{listed}");
    std::thread::sleep(Duration::from_millis(300));
    let after = status_kb(pid, "VmRSS");
    eprintln!(
        "plumb fs: {} MiB before, peak {} MiB, {} MiB after the file went; {kept} rows kept",
        before / 1024,
        peak / 1024,
        after / 1024
    );
    assert!(
        after < before + 128 * 1024,
        "plumb fs holds {} MiB after the file went (it held {} MiB before the first read, {} MiB at its peak)",
        after / 1024,
        before / 1024,
        peak / 1024
    );
    unmount(&m, pid);
}
