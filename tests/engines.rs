//! Engine readers without a live server: SQL Server's parsers over result sets shaped as the
//! documentation describes (tests/fixtures/mssql; no SQL Server runs here), URL handling, and
//! the deltas those snapshots give.

use plumb_analyze::delta::{self, RunDelta};
use plumb_engine::mssql::{self, ResultSet};
use plumb_engine::{Kind, Snapshot, Target};
use std::collections::BTreeMap;

fn sets(name: &str) -> BTreeMap<String, ResultSet> {
    let p = format!("{}/tests/fixtures/mssql/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn snap(name: &str) -> Snapshot {
    mssql::snapshot_from(&sets(name)).expect("the documented shapes parse")
}

fn obj(s: &Snapshot, set: &str, o: &str, m: &str) -> f64 {
    s.objects[set][o][m]
}

#[test]
fn every_sql_server_metric_set_parses() {
    let s = snap("before.json");
    assert!(s.unavailable.is_empty(), "{:?}", s.unavailable);
    assert_eq!(s.engine, "sqlserver");
    assert_eq!(s.version, "16.0.4135.4");
    assert_eq!(s.server_start, "2026-11-20T08:00:01.123");
    // Waits: the benign ones apart; resource wait = total - signal.
    assert_eq!(obj(&s, "wait", "CXPACKET", "wait_ms"), 9800000.0);
    assert_eq!(
        obj(&s, "wait", "CXPACKET", "resource_ms"),
        9800000.0 - 120300.0
    );
    assert!(s.objects["wait_ignorable"].contains_key("LAZYWRITER_SLEEP"));
    assert!(!s.objects["wait"].contains_key("XE_TIMER_EVENT"));
    assert_eq!(s.gauges["waiting_tasks.tasks"], 3.0);
    assert_eq!(s.gauges["waiting_tasks.blocked"], 1.0);
    // Files by database, logical name, type and path.
    let data = "sales/sales_data ROWS (/var/opt/mssql/data/sales.mdf)";
    assert_eq!(obj(&s, "file", data, "read_bytes"), 41943040000.0);
    assert_eq!(obj(&s, "file", data, "read_stall_ms"), 900000.0);
    assert_eq!(
        obj(&s, "latch", "ACCESS_METHODS_DATASET_PARENT", "wait_ms"),
        280000.0
    );
    assert_eq!(obj(&s, "spinlock", "LOCK_HASH", "sleep_time_ms"), 900.0);
    assert_eq!(s.gauges["scheduler.runnable_tasks"], 1.0);
    assert_eq!(s.counters["scheduler.cpu_ms"], 15900000.0);
    assert_eq!(
        s.gauges["memory.memorycleRK_sqlbufferpool_bytes"
            .to_ascii_lowercase()
            .as_str()],
        20971520.0 * 1024.0
    );
    assert_eq!(s.gauges["memory.process_in_use_bytes"], 23068672.0 * 1024.0);
    assert_eq!(s.gauges["tempdb.internal_objects_bytes"], 8192.0 * 1024.0);
    // @@IO_BUSY ticks of 31250 µs.
    assert_eq!(s.counters["busy.io_ms"], 41000.0 * 31.25);
}

#[test]
fn perf_counters_follow_their_cntr_type() {
    let s = snap("before.json");
    // 65792 raw: a gauge, KB made bytes.
    assert_eq!(
        s.gauges["perf.memory_manager.total_server_memory_bytes"],
        23000000.0 * 1024.0
    );
    assert_eq!(
        s.gauges["perf.buffer_manager.page_life_expectancy"],
        86000.0
    );
    // 272696576 per second: a cumulative counter.
    assert_eq!(s.counters["perf.sql_statistics.batch_requests"], 77000000.0);
    assert!(!s.gauges.contains_key("perf.sql_statistics.batch_requests"));
    // 537003264 ratio over its base, now.
    assert_eq!(
        s.gauges["perf.buffer_manager.buffer_cache_hit_ratio_pct"],
        95.0
    );
    // 1073874176 average: value and base kept, "Average Wait Time (ms)" finds "Average Wait Time Base".
    assert_eq!(
        obj(&s, "perf_avg", "locks.average_wait_time_ms", "total"),
        5000000.0
    );
    assert_eq!(
        obj(&s, "perf_avg", "locks.average_wait_time_ms", "count"),
        25000.0
    );
    assert_eq!(
        obj(
            &s,
            "perf_avg",
            "latches.average_latch_wait_time_ms",
            "count"
        ),
        140000.0
    );
    // Bases are not figures of their own.
    assert!(
        !s.gauges
            .keys()
            .chain(s.counters.keys())
            .any(|k| k.ends_with("base")),
        "{:?}",
        s.gauges.keys()
    );
}

#[test]
fn sql_server_deltas_explain_the_seed() {
    let (b, a) = (snap("before.json"), snap("after.json"));
    let mut run = RunDelta {
        elapsed_s: 6.0,
        ..Default::default()
    };
    delta::subtract(&b, &a, &mut run);
    delta::derive(&mut run, None);
    let v = |g: &str, o: &str, m: &str| {
        *run.values
            .get(&(g.to_string(), o.to_string(), m.to_string()))
            .unwrap_or_else(|| {
                panic!(
                    "{g}[{o}].{m} missing; have {:?}",
                    run.values.keys().filter(|k| k.0 == g).collect::<Vec<_>>()
                )
            })
    };
    assert!(run.notes.is_empty(), "{:?}", run.notes);
    assert_eq!(v("wait", "CXPACKET", "wait_ms"), 41250.0);
    assert_eq!(v("wait", "CXPACKET", "signal_ms"), 2100.0);
    assert_eq!(
        v("latch", "ACCESS_METHODS_DATASET_PARENT", "avg_wait_ms"),
        15400.0 / 3200.0
    );
    let data = "sales/sales_data ROWS (/var/opt/mssql/data/sales.mdf)";
    assert_eq!(v("file", data, "read_bytes"), 1048576000.0);
    assert_eq!(v("file", data, "avg_read_ms"), 25600.0 / 12800.0);
    assert_eq!(v("perf", "", "sql_statistics.batch_requests_per_s"), 2.0);
    assert_eq!(
        v("perf_avg", "locks.average_wait_time_ms", "average"),
        400.0
    );
    // Gauges are shown before and after, never subtracted.
    assert_eq!(
        v("perf", "", "buffer_manager.page_life_expectancy before"),
        86000.0
    );
    assert_eq!(
        v("perf", "", "buffer_manager.page_life_expectancy after"),
        1000.0
    );
    // Summary: the benign waits stay hidden unless asked for.
    let modes = vec![delta::ModeRuns {
        mode: "as found".into(),
        preparation: vec![],
        runs: vec![run],
    }];
    let r = delta::summarize(
        "t".into(),
        None,
        "DBCC CHECKTABLE".into(),
        1,
        modes.clone(),
        vec![],
        1.0,
        false,
    );
    assert!(r
        .rows
        .iter()
        .any(|r| r.group == "wait" && r.object == "CXPACKET"));
    assert!(!r.rows.iter().any(|r| r.group == "wait_ignorable"));
    let all = delta::summarize("t".into(), None, "x".into(), 1, modes, vec![], 1.0, true);
    assert!(all.rows.iter().any(|r| r.group == "wait_ignorable"));
}

#[test]
fn wait_stats_cleared_in_between_is_said() {
    // DBCC SQLPERF('sys.dm_os_wait_stats', CLEAR) leaves no reset time: counters go backwards.
    let b = snap("after.json");
    let mut sets_b = sets("before.json");
    for r in sets_b.get_mut("waits").unwrap().rows.iter_mut() {
        r[2] = mssql::Cell::Int(10);
    }
    let a = mssql::snapshot_from(&sets_b).unwrap();
    let mut run = RunDelta::default();
    delta::subtract(&b, &a, &mut run);
    assert!(run.values.values().all(|v| *v >= 0.0));
    assert!(
        run.notes.iter().any(|n| n.contains("went backwards")),
        "{:?}",
        run.notes
    );
}

#[test]
fn older_servers_and_missing_sets() {
    let s = snap("old-no-tempdb.json");
    assert!(!s.counters.contains_key("scheduler.cpu_ms"));
    assert!(
        s.unavailable.iter().any(|u| u.contains("tempdb")),
        "{:?}",
        s.unavailable
    );
    assert!(mssql::query_for("clerks", 10, false).contains("single_pages_kb"));
    assert!(mssql::query_for("clerks", 16, true).contains("SUM(pages_kb)"));
    assert!(mssql::query_for("schedulers", 16, true).contains("total_cpu_usage_ms"));
    assert!(!mssql::query_for("schedulers", 12, false).contains("total_cpu_usage_ms"));
    // A result set with a column missing is an error that names it.
    let mut bad = sets("before.json");
    bad.get_mut("files").unwrap().columns[5] = "bytes_read".into();
    let e = mssql::snapshot_from(&bad).unwrap_err().to_string();
    assert!(e.contains("num_of_bytes_read"), "{e}");
}

#[test]
fn urls_kinds_and_credentials() {
    assert_eq!(Kind::from_url("postgres://a@b/c").unwrap(), Kind::Postgres);
    assert_eq!(Kind::from_url("mariadb://a@b/c").unwrap(), Kind::Mariadb);
    assert_eq!(
        Kind::from_url("mssql://sa@db:1433/x").unwrap(),
        Kind::Sqlserver
    );
    assert!(Kind::from_url("http://x").is_err());
    let t = Target::new("mssql://sa:Secret1@db.example:1444/sales?trust_server_certificate=true");
    assert!(format!("{t:?}").contains("sa:***@"));
    let c = mssql::parse_url(&t).unwrap();
    assert_eq!(c.get_addr(), "db.example:1444");
    for bad in [
        "mssql://db:1433/x",
        "mssql://sa@db:port/x",
        "mssql://sa@db/x?bogus=1",
    ] {
        let e = mssql::parse_url(&Target::new(bad)).unwrap_err().to_string();
        assert!(
            e.starts_with(bad.split('?').next().unwrap().split(':').next().unwrap()),
            "{e}"
        );
    }
    // Nothing listens on port 1: a connect error naming the URL without its password.
    let e = plumb_engine::observer(&Target::new("mssql://sa:Secret1@127.0.0.1:1/x"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("mssql://sa:***@127.0.0.1:1/x") && !e.contains("Secret1"),
        "{e}"
    );
}

/// What `plumb record --engine mssql://…` keeps with every sample for the memory and waits
/// charts (Memory Manager, Plan Cache and tempdb, as the documentation shapes them): each is
/// in the snapshot, and each is a field the recording's engine rules know.
#[test]
fn sql_server_memory_gauges_are_recordable() {
    let s = snap("before.json");
    let fields = plumb_analyze::series::engine_fields();
    for (key, want) in [
        (
            "perf.memory_manager.database_cache_memory_bytes",
            20971520.0 * 1024.0,
        ),
        ("perf.memory_manager.memory_grants_outstanding", 2.0),
        ("perf.memory_manager.memory_grants_pending", 0.0),
        ("perf.plan_cache.cache_pages", 51200.0),
    ] {
        assert_eq!(s.gauges.get(key), Some(&want), "{key}: {:?}", s.gauges);
        let field = key.split_once('.').unwrap().1;
        assert!(fields.contains(&field), "{field} is not recorded");
    }
    for key in [
        "perf.memory_manager.free_memory_bytes",
        "perf.memory_manager.stolen_server_memory_bytes",
        "tempdb.user_objects_bytes",
        "tempdb.version_store_bytes",
    ] {
        assert!(s.gauges.contains_key(key), "{key}: {:?}", s.gauges);
        assert!(fields.contains(&key.split_once('.').unwrap().1), "{key}");
    }
}
