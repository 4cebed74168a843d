//! SQL Server Availability Group replication from the documentation: the Extended Events
//! session plumb prints, and the timeline of one commit merged from the two replicas' events.
//! No SQL Server runs here: the events (tests/fixtures/mssql/ag-commit-*.xml) are shaped as
//! `sys.fn_xe_file_target_read_file` documents its event_data (one `<event>` per row, as
//! sqlcmd prints them), in the order the seed's walk-through of one synchronous commit gives,
//! with times chosen for it; not captured from a live Availability Group.

mod common;
use common::plumb;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/mssql/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn timeline(secondary: &str, json: bool) -> std::process::Output {
    let mut c = plumb();
    c.args(["repl", "xe-timeline", "--primary-events"])
        .arg(fixture("ag-commit-primary.xml"))
        .arg("--standby-events")
        .arg(fixture(secondary));
    if json {
        c.arg("--json");
    }
    c.output().unwrap()
}

#[test]
fn the_session_script_names_every_event_and_its_read_back() {
    let o = plumb().args(["repl", "xe-session"]).output().unwrap();
    assert!(o.status.success());
    let sql = String::from_utf8_lossy(&o.stdout);
    for ev in [
        "sqlserver.hadr_log_block_group_commit",
        "sqlserver.hadr_capture_log_block",
        "ucs.ucs_connection_send_msg",
        "sqlserver.hadr_transport_receive_log_block_message",
        "sqlserver.hadr_lsn_send_complete",
        "sqlserver.hadr_db_commit_mgr_harden",
    ] {
        assert!(sql.contains(&format!("ADD EVENT {ev}")), "{ev}: {sql}");
    }
    assert!(sql.contains("CREATE EVENT SESSION [plumb_ag_commit] ON SERVER"));
    assert!(sql.contains("sys.fn_xe_file_target_read_file(N'plumb_ag_commit*.xel'"));
    // A name that would break the script is refused.
    let o = plumb()
        .args(["repl", "xe-session", "--name", "x]; DROP TABLE t; --"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn one_commit_merged_from_both_replicas() {
    let o = timeline("ag-commit-secondary.xml", true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 19);
    let names: Vec<&str> = steps.iter().map(|s| s["event"].as_str().unwrap()).collect();
    // The seed's order: the primary's capture and send, the secondary's receive, harden and
    // reply, the primary's harden result last.
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(at("hadr_capture_log_block") < at("hadr_transport_receive_log_block_message"));
    assert!(at("hadr_transport_receive_log_block_message") < at("hadr_lsn_send_complete"));
    assert!(at("hadr_lsn_send_complete") < at("hadr_receive_harden_lsn_message"));
    assert_eq!(*names.last().unwrap(), "hadr_db_commit_mgr_harden");
    assert_eq!(v["span_us"].as_f64().unwrap(), 1225.0);
    // The clocks were in order: nothing shifted, and the window they allow is reported.
    assert_eq!(v["secondary_shift_us"].as_f64().unwrap(), 0.0);
    let w = v["offset_window_us"].as_array().unwrap();
    assert_eq!(
        (w[0].as_f64().unwrap(), w[1].as_f64().unwrap()),
        (-119.0, 207.0)
    );
    assert!(v["missing"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m == "primary: hadr_capture_filestream_wait"));
    // The text: every event with what it marks.
    let o = timeline("ag-commit-secondary.xml", false);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("19 events, 1.22 ms from the first to the last"),
        "{text}"
    );
    assert!(
        text.contains("hadr_receive_harden_lsn_message (hardened LSN received from the secondary)"),
        "{text}"
    );
}

#[test]
fn a_secondary_clock_behind_is_corrected_and_said() {
    // The secondary's timestamps 5 ms early: its receive would come before the primary sent.
    let o = timeline("ag-commit-secondary-clock-behind.xml", true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Shifted by the least that puts the receive after the primary's send (4.88 ms), not the
    // 5 ms truth: what the events prove, and no more.
    assert_eq!(v["secondary_shift_us"].as_f64().unwrap(), 4881.0);
    let steps = v["steps"].as_array().unwrap();
    let t = |side: &str, n: &str| {
        steps
            .iter()
            .find(|s| s["replica"] == side && s["event"] == n)
            .unwrap()["t_us"]
            .as_f64()
            .unwrap()
    };
    // Nothing the secondary does with the block comes before the primary sent it, and the
    // primary hears of the hardened LSN after the secondary sent it.
    let sent = t("primary", "ucs_connection_send_msg");
    for ev in [
        "hadr_transport_receive_log_block_message",
        "hadr_log_block_decompression",
        "hadr_apply_log_block",
    ] {
        assert!(t("secondary", ev) >= sent, "{ev} before the block was sent");
    }
    assert!(
        t("primary", "hadr_receive_harden_lsn_message") >= t("secondary", "hadr_lsn_send_complete")
            || t("primary", "hadr_receive_harden_lsn_message")
                >= t("secondary", "hadr_send_harden_lsn_message")
    );
    let o = timeline("ag-commit-secondary-clock-behind.xml", false);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("shifted by +4.88 ms"), "{text}");
    // The durations: measured ones with their unit, the events' own fields by name.
    assert!(text.contains("took  the event's own field"), "{text}");
    assert!(text.contains("288.0 µs           duration 288"), "{text}");
    assert!(
        text.contains("documents neither processing_time's unit nor duration's"),
        "{text}"
    );
}

#[test]
fn the_commit_is_drawn_as_a_chart() {
    let d = tempfile::tempdir().unwrap();
    let svg = d.path().join("ag.svg");
    let o = plumb()
        .args(["repl", "xe-timeline", "--primary-events"])
        .arg(fixture("ag-commit-primary.xml"))
        .arg("--standby-events")
        .arg(fixture("ag-commit-secondary.xml"))
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    assert_eq!(text.matches("<circle").count(), 19);
    assert!(text.contains(">primary</text>") && text.contains(">secondary</text>"));
    // The two messages between the replicas.
    assert!(text.contains("<title>log block: ") && text.contains("<title>hardened LSN: "));
    // An existing file is not overwritten.
    let o = plumb()
        .args(["repl", "xe-timeline", "--primary-events"])
        .arg(fixture("ag-commit-primary.xml"))
        .arg("--standby-events")
        .arg(fixture("ag-commit-secondary.xml"))
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--svg"));
}

#[test]
fn bad_event_files_are_named() {
    let d = tempfile::tempdir().unwrap();
    let junk = d.path().join("junk.xml");
    std::fs::write(&junk, "<event name=\"x\" timestamp=\"yesterday\"></event>").unwrap();
    for (file, want) in [
        (
            junk.to_str().unwrap().to_string(),
            "timestamp yesterday unreadable",
        ),
        ("/nonexistent/p.xml".to_string(), "/nonexistent/p.xml"),
    ] {
        let o = plumb()
            .args([
                "repl",
                "xe-timeline",
                "--primary-events",
                &file,
                "--standby-events",
            ])
            .arg(fixture("ag-commit-secondary.xml"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--primary-events") && err.contains(want),
            "{err}"
        );
    }
    // A server that is not SQL Server.
    let o = plumb()
        .args([
            "repl",
            "xe-timeline",
            "--primary",
            "postgres://a@b/c",
            "--standby",
            "postgres://a@d/c",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("SQL Server's"));
}
