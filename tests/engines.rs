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
    let s = mssql::snapshot_from(&sets(name));
    assert!(
        !s.unavailable
            .iter()
            .any(|u| u.contains("differs from the documented shape")),
        "{name}: {:?}",
        s.unavailable
    );
    s
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
    // Four tasks wait; only the lock wait is blocked by another session (a parallel query's
    // CXPACKET and CXCONSUMER name their own session).
    assert_eq!(s.gauges["waiting_tasks.tasks"], 4.0);
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
    // The workload session's own waits and CPU.
    assert_eq!(obj(&s, "session_wait", "CXPACKET", "wait_ms"), 2000.0);
    assert_eq!(s.counters["session.cpu_ms"], 120.0);
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
    // The workload's own session beside the server: 38 of the server's 41.25 s of CXPACKET
    // were its parallel workers', and it used 9 s of CPU.
    assert_eq!(v("session_wait", "CXPACKET", "wait_ms"), 38000.0);
    assert_eq!(
        v("session_wait", "CXPACKET", "server_wide_wait_ms"),
        41250.0
    );
    assert_eq!(v("session", "", "cpu_ms"), 9000.0);
    assert_eq!(v("session", "", "logical_reads"), 900000.0);
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
    let a = mssql::snapshot_from(&sets_b);
    let mut run = RunDelta::default();
    delta::subtract(&b, &a, &mut run);
    assert!(run.values.values().all(|v| *v >= 0.0));
    assert!(
        run.notes.iter().any(|n| n.contains("went backwards")),
        "{:?}",
        run.notes
    );
}

/// A login with the server-state permission only, on SQL Server 2016: sys.master_files hides
/// the sales database's files, tempdb's space view is refused, nobody waits at this moment,
/// the performance counters are disabled (empty sets), and after 120 days of CPU time over
/// its CPUs @@CPU_BUSY is no longer accurate. Every other set is still read.
#[test]
fn a_limited_login_still_gets_every_set_it_may_read() {
    let mut failed = BTreeMap::new();
    failed.insert(
        "tempdb".to_string(),
        "The user does not have permission to perform this action.".to_string(),
    );
    let s = mssql::snapshot_with(&sets("limited-login.json"), &failed);
    assert_eq!(s.version, "13.0.6300.2");
    // Files the login may not see by name keep their figures under their ids.
    let hidden = "sales/file 1 (name not visible)";
    assert_eq!(obj(&s, "file", hidden, "read_bytes"), 41943040000.0);
    assert!(s.objects["file"].contains_key("tempdb/tempdev ROWS (/var/opt/mssql/data/tempdb.mdf)"));
    let said = s.unavailable.join("\n");
    assert!(
        said.contains("file names and paths for 2 of 3 files")
            && said.contains("VIEW ANY DEFINITION"),
        "{said}"
    );
    // The refusal in the server's words, and the permission for a 2016 server.
    assert!(
        said.contains("tempdb (tempdb.sys.dm_db_file_space_usage): The user does not have permission to perform this action.; the login needs VIEW SERVER STATE"),
        "{said}"
    );
    // Empty sets are sets with no rows, not errors.
    assert_eq!(s.gauges["waiting_tasks.tasks"], 0.0);
    assert_eq!(s.gauges["waiting_tasks.blocked"], 0.0);
    assert!(
        !said.contains("differs from the documented shape"),
        "{said}"
    );
    // @@CPU_BUSY dropped, with the reason; the schedulers' CPU column is absent on this login's
    // probe, so the scheduler figures stay without it.
    assert!(
        !s.counters.keys().any(|k| k.starts_with("busy.")),
        "{:?}",
        s.counters
    );
    assert!(said.contains("120 days of CPU time"), "{said}");
    assert!(!s.counters.contains_key("scheduler.cpu_ms"));
    assert_eq!(s.gauges["scheduler.runnable_tasks"], 1.0);
    // Waits, latches and memory are all there.
    assert!(s.objects["wait"].contains_key("CXPACKET"));
    assert!(s.gauges.contains_key("memory.process_in_use_bytes"));
}

/// On SQL Server 2022 a refusal names VIEW SERVER PERFORMANCE STATE; a set whose columns
/// differ from the documentation is listed with the column, and the rest is read.
#[test]
fn refusals_and_unexpected_shapes_are_said_per_set() {
    let mut failed = BTreeMap::new();
    failed.insert(
        "waits".to_string(),
        "VIEW SERVER PERFORMANCE STATE permission was denied on object 'server', database 'master'."
            .to_string(),
    );
    failed.insert(
        "latches".to_string(),
        "Invalid column name 'waiting_requests_count'.".to_string(),
    );
    let mut bad = sets("before.json");
    bad.remove("waits");
    bad.remove("latches");
    bad.get_mut("files").unwrap().columns[7] = "bytes_read".into();
    let s = mssql::snapshot_with(&bad, &failed);
    let said = s.unavailable.join("\n");
    assert!(
        said.contains(
            "waits (sys.dm_os_wait_stats): VIEW SERVER PERFORMANCE STATE permission was denied"
        ) && said
            .contains("the login needs VIEW SERVER PERFORMANCE STATE (SQL Server 2022 and later"),
        "{said}"
    );
    // Not a permission: the server's text, no grant advice.
    assert!(
        said.contains(
            "latches (sys.dm_os_latch_stats): Invalid column name 'waiting_requests_count'."
        ),
        "{said}"
    );
    assert!(
        !said.contains("'waiting_requests_count'.; the login"),
        "{said}"
    );
    assert!(said.contains("files (sys.dm_io_virtual_file_stats): the result differs from the documented shape: column num_of_bytes_read missing"), "{said}");
    // Nothing of a set that failed is half-kept; the others are whole.
    assert!(!s.objects.contains_key("file"));
    assert!(!s.objects.contains_key("wait"));
    assert!(s.objects["spinlock"].contains_key("LOCK_HASH"));
    assert_eq!(s.version, "16.0.4135.4");
}

#[test]
fn queries_are_those_of_sql_server_2016_and_later() {
    assert!(mssql::query_for("clerks", true, None).contains("SUM(pages_kb)"));
    assert!(mssql::query_for("schedulers", true, None).contains("total_cpu_usage_ms"));
    assert!(!mssql::query_for("schedulers", false, None).contains("total_cpu_usage_ms"));
    // Schedulers for user work are those under 1048576 (255 was SQL Server 2005's limit).
    assert!(mssql::query_for("schedulers", true, None).contains("scheduler_id < 1048576"));
    assert!(mssql::query_for("session_waits", true, Some(57)).ends_with("WHERE session_id = 57"));
    assert!(mssql::query_for("files", true, None).contains("LEFT JOIN sys.master_files"));
    // The version needs no permission; the server facts are a set of their own.
    assert!(
        mssql::queries::SERVER.contains("SERVERPROPERTY")
            && !mssql::queries::SERVER.contains("dm_os_sys_info")
    );
    let server = |major: i64, edition: i64, version: &str| ResultSet {
        columns: vec![
            "major_version".into(),
            "product_version".into(),
            "version".into(),
            "engine_edition".into(),
        ],
        rows: vec![vec![
            mssql::Cell::Int(major),
            mssql::Cell::Text(version.into()),
            mssql::Cell::Text(format!("Microsoft SQL Server {version}")),
            mssql::Cell::Int(edition),
        ]],
    };
    assert_eq!(
        mssql::check_version(&server(13, 2, "13.0.6300.2")).unwrap(),
        13
    );
    let e = mssql::check_version(&server(12, 3, "12.0.6444.4"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("12.0.6444.4") && e.contains("2016"), "{e}");
    // Azure SQL Database and Managed Instance say 12 and are current.
    assert!(mssql::check_version(&server(12, 5, "12.0.2000.8")).is_ok());
    assert!(mssql::check_version(&server(12, 8, "12.0.2000.8")).is_ok());
}

/// @@CPU_BUSY's fallback tick is 31,250 µs; a busy count larger than uptime × CPUs is dropped.
#[test]
fn busy_ticks_and_their_limits() {
    let busy = |cpu: i64, ticks: Option<i64>| ResultSet {
        columns: vec![
            "cpu_busy".into(),
            "io_busy".into(),
            "idle".into(),
            "timeticks".into(),
        ],
        rows: vec![vec![
            mssql::Cell::Int(cpu),
            mssql::Cell::Int(10),
            mssql::Cell::Int(0),
            ticks.map(mssql::Cell::Int).unwrap_or(mssql::Cell::Null),
        ]],
    };
    let mut s = Snapshot::default();
    mssql::parse_busy(&busy(1000, None), &mut s).unwrap();
    assert_eq!(s.counters["busy.cpu_ms"], 31_250.0);
    // One hour up on 2 CPUs is 7,200 s of CPU at most: 1,000,000 ticks (31,250 s) cannot be.
    let mut sets = sets("before.json");
    sets.insert("busy".into(), busy(1_000_000, Some(31_250)));
    sets.get_mut("sys_info").unwrap().rows[0][4] = mssql::Cell::Int(3_600_000);
    let s = mssql::snapshot_from(&sets);
    assert!(!s.counters.contains_key("busy.cpu_ms"));
    assert!(
        s.unavailable
            .iter()
            .any(|u| u.contains("more than uptime × CPUs (7200 s)")),
        "{:?}",
        s.unavailable
    );
}

/// Ratio and average counters find their base by the words before the suffix, including
/// Microsoft's irregular names; a counter left without one is said, not dropped silently.
#[test]
fn every_ratio_finds_its_base() {
    for (counter, base) in [
        ("Buffer cache hit ratio", "Buffer cache hit ratio base"),
        ("Worktables From Cache Ratio", "Worktables From Cache Base"),
        ("Average Wait Time (ms)", "Average Wait Time Base"),
        (
            "Avg. Length of Batched Writes",
            "Avg. Length of Batched Writes BS",
        ),
        ("Cache Hit Ratio", "Cache Hit Ratio Base"),
    ] {
        assert_eq!(mssql::base_key(counter), mssql::base_key(base), "{counter}");
    }
    let t = |x: &str| mssql::Cell::Text(x.into());
    let rs = ResultSet {
        columns: [
            "object_name",
            "counter_name",
            "instance_name",
            "cntr_value",
            "cntr_type",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![
            vec![
                t("SQLServer:Access Methods"),
                t("Worktables From Cache Ratio"),
                t(""),
                mssql::Cell::Int(45),
                mssql::Cell::Int(537003264),
            ],
            vec![
                t("SQLServer:Access Methods"),
                t("Worktables From Cache Base"),
                t(""),
                mssql::Cell::Int(50),
                mssql::Cell::Int(1073939712),
            ],
            vec![
                t("SQLServer:Latches"),
                t("Some Future Ratio"),
                t(""),
                mssql::Cell::Int(1),
                mssql::Cell::Int(537003264),
            ],
        ],
    };
    let mut s = Snapshot::default();
    mssql::parse_perf(&rs, &mut s).unwrap();
    assert_eq!(
        s.gauges["perf.access_methods.worktables_from_cache_ratio_pct"],
        90.0
    );
    assert!(
        s.unavailable
            .iter()
            .any(|u| u.contains("Latches: Some Future Ratio")),
        "{:?}",
        s.unavailable
    );
}

/// Waits that mean nothing for a workload, from the lists DBAs use, stay out of the figures.
#[test]
fn idle_waits_are_ignorable() {
    for w in [
        "PREEMPTIVE_XE_DISPATCHER",
        "HADR_FABRIC_CALLBACK",
        "UCS_SESSION_REGISTRATION",
        "PREEMPTIVE_SP_SERVER_DIAGNOSTICS",
        "PREEMPTIVE_HADR_LEASE_MECHANISM",
        "PARALLEL_REDO_TRAN_TURN",
        "DBMIRROR_DBM_MUTEX",
        "FT_IFTSISM_MUTEX",
        "POPULATE_LOCK_ORDINALS",
    ] {
        assert!(mssql::is_ignorable(w), "{w}");
    }
    assert!(!mssql::is_ignorable("CXPACKET"));
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
    // trust_server_certificate=false is the default, said explicitly.
    assert!(mssql::parse_url(&Target::new(
        "mssql://sa@db/x?trust_server_certificate=false&encrypt=mandatory"
    ))
    .is_ok());
    // TDS 8.0 strict encryption is refused with a reason, not taken for "on".
    let e = mssql::parse_url(&Target::new("mssql://sa@db/x?encrypt=strict"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("strict") && e.contains("not supported"), "{e}");
    for bad in [
        "mssql://db:1433/x",
        "mssql://sa@db:port/x",
        "mssql://sa@db/x?bogus=1",
        "mssql://sa@db/x?encrypt=maybe",
        "mssql://sa@db/x?trust_server_certificate=perhaps",
    ] {
        let e = mssql::parse_url(&Target::new(bad)).unwrap_err().to_string();
        assert!(
            e.starts_with(bad.split('?').next().unwrap().split(':').next().unwrap()),
            "{e}"
        );
    }
    // Nothing listens on port 1: a connect error naming the URL without its password.
    mssql::use_client_program(std::path::Path::new(env!("CARGO_BIN_EXE_plumb")));
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

/// SQL Server's per-statement figures as sys.dm_exec_query_stats returns them (documented
/// columns; not run against a live server): a row per query_hash, the text as cached with its
/// literals, which never reach plumb's statement; hits are logical reads less physical ones.
#[test]
fn sql_server_query_stats_become_statements_without_literals() {
    use mssql::Cell;
    assert!(
        mssql::queries::QUERY_STATS.contains("sys.dm_exec_query_stats")
            && mssql::queries::QUERY_STATS.contains("GROUP BY qs.query_hash")
    );
    let rs = ResultSet {
        columns: [
            "query_hash",
            "calls",
            "time_us",
            "rows_total",
            "physical_reads",
            "logical_reads",
            "statement_text",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![
            vec![
                Cell::Text("0x1A2B3C4D5E6F7081".into()),
                Cell::Int(120),
                Cell::Int(4_500_000),
                Cell::Int(120),
                Cell::Int(30),
                Cell::Int(1_000),
                Cell::Text(
                    "SELECT name FROM dbo.customers WHERE ssn = '078-05-1120' AND id = 42".into(),
                ),
            ],
            vec![
                Cell::Text("0x00000000000000FF".into()),
                Cell::Int(3),
                Cell::Float(10.5),
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Text("EXEC dbo.report @from = N'2026-01-01'".into()),
            ],
            // A row without a hash (a statement the server did not hash) is left out.
            vec![
                Cell::Null,
                Cell::Int(1),
                Cell::Int(1),
                Cell::Int(1),
                Cell::Int(1),
                Cell::Int(1),
                Cell::Text("x".into()),
            ],
        ],
    };
    let s = mssql::parse_query_stats(&rs).unwrap();
    assert_eq!(s.len(), 2, "{s:?}");
    let a = s.iter().find(|x| x.id == "0x1A2B3C4D5E6F7081").unwrap();
    assert_eq!((a.calls, a.time_us, a.rows), (120.0, 4_500_000.0, 120.0));
    assert_eq!((a.blks_read, a.blks_hit), (Some(30.0), Some(970.0)));
    assert_eq!(
        a.text,
        "SELECT name FROM dbo.customers WHERE ssn = ? AND id = ?"
    );
    let b = s.iter().find(|x| x.id == "0x00000000000000FF").unwrap();
    assert_eq!((b.blks_read, b.blks_hit), (None, None));
    assert_eq!(b.text, "EXEC dbo.report @from = ?");
    // A result without the columns is an error naming the one missing.
    let bad = ResultSet {
        columns: vec!["query_hash".into()],
        rows: vec![],
    };
    let e = mssql::parse_query_stats(&bad).unwrap_err().to_string();
    assert!(e.contains("calls"), "{e}");
}
