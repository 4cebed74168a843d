//! The private PostgreSQL instance and the reader against it: real server, real statistics.

use plumb_engine::{pg, private};
use std::path::Path;

fn skip() -> Option<String> {
    if let Err(e) = private::find_bin() {
        return Some(format!("{e}"));
    }
    None
}

#[test]
fn start_status_snapshot_stop() {
    if let Some(why) = skip() {
        eprintln!("skipped: {why}");
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("plumb-pg-test")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = tmp.path().join("pg");
    let _guard = private::StopOnDrop(dir.clone());
    let opts = private::StartOptions {
        settings: vec![("shared_buffers".into(), "16MB".into())],
        port: None,
        ..Default::default()
    };
    let r = private::start(&dir, &opts).expect("start");
    assert!(r.port > 0 && r.pid > 0);
    assert!(Path::new(&format!("/proc/{}", r.pid)).exists());
    // A second start finds the running one instead of starting another.
    let again = private::start(&dir, &opts).expect("second start");
    assert_eq!(again.pid, r.pid);
    assert_eq!(private::status(&dir).unwrap().map(|s| s.pid), Some(r.pid));

    let cfg = pg::parse_url(&r.target()).expect("the instance's own URL parses");
    assert!(pg::is_local(&cfg));
    let mut obs = plumb_engine::observer(&r.target()).expect("observer");
    let s = obs.snapshot().expect("snapshot via the trait");
    assert_eq!(s.engine, "postgresql");
    let mut c = pg::Conn::connect(&r.config("postgres"), "private", true).expect("connect");
    assert!(c.version_num >= 100000);
    let s = pg::snapshot(&mut c).expect("snapshot");
    assert_eq!(s.settings["shared_buffers"], "16MB");
    assert!(s.counters.contains_key("db.blks_read"));
    assert!(s.counters.contains_key("checkpointer.checkpoints_timed"));
    assert!(!s.server_start.is_empty());
    assert!(s.resets.contains_key("db"));
    drop(obs);
    // The observer session is read-only.
    let err = c
        .client
        .batch_execute("CREATE TABLE nope (x int)")
        .unwrap_err();
    let msg = err
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_default();
    assert!(msg.contains("read-only"), "{msg}");
    drop(c);

    // A restart keeps the settings and the port, and comes back with a new postmaster.
    let again = private::restart(&dir).expect("restart");
    assert_eq!(again.port, r.port);
    assert_ne!(again.pid, r.pid);
    assert_eq!(again.settings, opts.settings);
    let r = again;

    assert!(private::stop(&dir).unwrap());
    assert!(private::status(&dir).unwrap().is_none());
    assert!(
        !Path::new(&format!("/proc/{}", r.pid)).exists()
            || std::fs::read_to_string(format!("/proc/{}/stat", r.pid))
                .map(|s| s.contains(") Z"))
                .unwrap_or(true)
    );
    // Stopping a stopped instance is not an error.
    assert!(!private::stop(&dir).unwrap());
}
