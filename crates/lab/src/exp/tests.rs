//! The finding rules of the host and of each experiment, on reports built by hand.

use super::{durability_probe::Durability, loops::Loops, storage::Storage, Experiment};
use plumb_analyze::lab::*;
use plumb_analyze::sweep::SweepReport;
use plumb_analyze::WithFacts;

/// Every rule, as the lab runs them.
fn findings(r: &LabReport) -> Vec<Finding> {
    let exps: Vec<Box<dyn Experiment>> = vec![
        Box::new(Durability::default()),
        Box::new(Storage),
        Box::new(Loops),
    ];
    crate::all_findings(r, &exps)
}

/// A report around the v2-systemd-lvm fixture's host; each test sets what its rule reads.
fn report() -> LabReport {
    let root = plumb_sys::Root::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/v2-systemd-lvm"
    ));
    let sample = plumb_sys::snapshot::collect(&root, &[], None).unwrap();
    LabReport {
        report_schema: plumb_analyze::lab::REPORT_SCHEMA,
        command_line: "plumb lab".into(),
        started_unix_ms: 0,
        elapsed_s: 1.0,
        quick: true,
        target: "t".into(),
        engine_version: None,
        data_dir: "/d".into(),
        out_dir: "/o".into(),
        host: plumb_analyze::os::build(&sample, 4096),
        memory: None,
        durability: None,
        sweep: None,
        seq_read: None,
        pgbench: None,
        workloads: Vec::new(),
        mariadb_durability: None,
        loops: vec![],
        experiments: vec![],
        windows: vec![],
        findings: vec![],
        skipped: vec![],
        recording: None,
    }
}

fn single(method: &str, commit_us: Vec<u64>, flushes: Option<f64>) -> LoopResult {
    LoopResult {
        scenario: "single".into(),
        wal_sync_method: method.trim_end_matches("+O_DIRECT").into(),
        wal_direct: method.ends_with("+O_DIRECT"),
        iterations: 2,
        rows_per_iteration: 100,
        commits_per_iteration: 100,
        insert_ms: Latency::from_us(&[20_000, 22_000]),
        checkpoint_ms: Latency::from_us(&[2_000, 3_000]),
        commit: Latency::from_us(&commit_us),
        wal_bytes: None,
        wal_syncs: None,
        wal_sync_ms: None,
        disk_writes: None,
        disk_flushes: None,
        flushes_per_commit: flushes,
        trace: None,
    }
}

fn win(phase: &str, workload: bool) -> Window {
    Window {
        phase: phase.into(),
        workload,
        start_s: 0.0,
        end_s: 10.0,
        cpu_busy_pct: Some(50.0),
        steal_pct: Some(0.0),
        runnable_mean: Some(1.0),
        runnable_max: Some(2.0),
        disk: Some("vda".into()),
        disk_queue_mean: Some(1.0),
        disk_write_await_ms: Some(0.1),
        disk_util_pct: Some(10.0),
        swap_in_bytes_per_s_max: Some(0.0),
        engine_swap_bytes_max: Some(0.0),
        interference: None,
    }
}

/// A window's verdict: disturbed by PID 4321 (fio) writing 500 MiB.
fn disturbed() -> plumb_analyze::interference::Interference {
    use plumb_analyze::interference::{Interference, Neighbour, Verdict};
    Interference {
        accepted: vec![],
        verdict: Verdict::Disturbed,
        window_s: 10.0,
        devices: vec!["vda".into()],
        device_read_bytes: 0,
        device_write_bytes: 600 << 20,
        device_flushes: 0,
        own_read_bytes: 0,
        own_write_bytes: 100 << 20,
        own_cpu_s: 1.0,
        others_cpu_s: 2.0,
        neighbours: vec![Neighbour {
            pid: 4321,
            comm: "fio".into(),
            read_bytes: 0,
            write_bytes: 500 << 20,
            cpu_s: 2.0,
        }],
        steal_pct: Some(0.0),
        idle_pct: Some(10.0),
        io_share: Some(500.0 / 600.0),
        cpu_share: None,
        notes: vec![
            plumb_analyze::Note::new(plumb_analyze::Level::Warn, "neighbour-io")
                .pct("share_pct", 500.0 / 600.0 * 100.0)
                .pct("disturbing_share_pct", 10.0)
                .list("devices", vec!["vda".into()])
                .bytes("device_write_bytes", (600u64 << 20) as f64)
                .bytes("own_write_bytes", (100u64 << 20) as f64),
        ],
    }
}

fn rule<'a>(f: &'a [Finding], name: &str) -> Option<&'a Finding> {
    f.iter().find(|x| x.rule == name)
}

#[test]
fn slow_commits_are_named_with_their_cause() {
    let mut r = report();
    // 200 commits, three slow: the 99th percentile is the second slowest, 5 ms.
    let mut v = vec![1000u64; 197];
    v.extend([5000, 5000, 40_000]);
    r.loops = vec![single("fdatasync", v, Some(1.02))];
    let f = findings(&r);
    let c = rule(&f, "commit-latency").expect("a commit finding");
    assert_eq!(c.severity, Severity::Warn);
    assert!(
        plumb_report::words::statement(c).contains("cache FLUSH"),
        "{}",
        plumb_report::words::statement(c)
    );
    // It is about plumb's own loops, not the server's setting, and says so.
    assert!(
        c.experiment
            .as_ref()
            .map(plumb_report::words::said)
            .is_some_and(|x| x.contains("wal_sync_method=fdatasync") && x.contains("plumb")),
        "{:?}",
        c.experiment
    );
    // Ten times the threshold is critical; fast commits are no finding at all.
    r.loops = vec![single("fdatasync", vec![25_000; 100], Some(1.0))];
    assert_eq!(
        rule(&findings(&r), "commit-latency").unwrap().severity,
        Severity::Critical
    );
    r.loops = vec![single("fdatasync", vec![300; 100], Some(1.0))];
    assert!(rule(&findings(&r), "commit-latency").is_none());
}

#[test]
fn memory_rules_cache_above_limit_and_swap() {
    let mut r = report();
    let settings = plumb_sys::engine_conf::EngineSettings {
        shared_buffers_bytes: Some(8 << 30),
        ..Default::default()
    };
    r.memory = Some(plumb_analyze::mem::assume(
        plumb_sys::smaps::EngineKind::Postgres,
        16 << 30,
        Some(4 << 30),
        r.host.cgroup_mode,
        &settings,
    ));
    let mut w = win("pgbench", true);
    w.engine_swap_bytes_max = Some(300.0 * 1048576.0);
    r.windows = vec![w];
    let f = findings(&r);
    assert_eq!(
        rule(&f, "cache-above-limit").unwrap().severity,
        Severity::Critical
    );
    let s = rule(&f, "engine-memory-in-swap").unwrap();
    assert!(
        plumb_report::words::statement(s).contains("300 MiB")
            && plumb_report::words::statement(s).contains("pgbench"),
        "{}",
        plumb_report::words::statement(s)
    );
    // Critical findings come first.
    assert_eq!(f[0].severity, Severity::Critical);
}

#[test]
fn knee_and_run_queue_look_at_workload_phases_only() {
    let mut r = report();
    let mut job = plumb_io::job::preset("data-read").unwrap();
    job.targets = vec![];
    r.sweep = Some(SweepReport {
        command_line: String::new(),
        sweep_over: plumb_analyze::sweep::SweepKind::QueueDepth,
        job,
        repetitions: 1,
        levels: vec![],
        knee: Some(plumb_analyze::sweep::Knee {
            level: "4".into(),
            next: "16".into(),
            throughput_change_pct: 50.0,
            latency_change_pct: 170.0,
            from: "4".into(),
            to: "16".into(),
        }),
        verdict: plumb_analyze::interference::Verdict::Clean,
        notes: vec![],
        chart: None,
    });
    // plumb's own sweep ran at QD 32: not a finding.
    let mut probe = win("storage sweep", false);
    probe.disk_queue_mean = Some(30.0);
    probe.runnable_mean = Some(50.0);
    r.windows = vec![probe, win("pgbench", true)];
    let f = findings(&r);
    assert!(rule(&f, "device-past-knee").is_none());
    let k = plumb_report::words::statement(rule(&f, "device-knee").unwrap());
    assert!(k.contains("between queue depth 4 and 16"), "{k}");
    assert!(rule(&f, "run-queue-above-cpus").is_none());
    let mut busy = win("pgbench", true);
    // Inside the knee's range (4 to 16) is not past it.
    busy.disk_queue_mean = Some(9.5);
    r.windows.push(busy.clone());
    assert!(rule(&findings(&r), "device-past-knee").is_none());
    r.windows.pop();
    busy.disk_queue_mean = Some(19.5);
    busy.runnable_mean = Some(64.0);
    r.windows.push(busy);
    let f = findings(&r);
    assert!(plumb_report::words::statement(rule(&f, "device-past-knee").unwrap()).contains("19.5"));
    assert!(rule(&f, "run-queue-above-cpus").is_some());
    // A disturbed sweep states no knee: no finding, and the verdict's figures say it was
    // withheld (they said "no knee up to queue depth 64" while the section withheld it).
    r.sweep.as_mut().unwrap().verdict = plumb_analyze::interference::Verdict::Disturbed;
    let f = findings(&r);
    assert!(rule(&f, "device-past-knee").is_none() && rule(&f, "device-knee").is_none());
    let v = plumb_analyze::verdict::lab(&r);
    let figures: Vec<String> = plumb_report::verdict_render::figure_lines(&v)
        .into_iter()
        .map(|l| l.text)
        .collect();
    let said = figures.join("\n");
    assert!(
        !said.contains("the knee")
            && !said.contains("no knee of")
            && said.contains("is stated: the sweep"),
        "{said}"
    );
}

#[test]
fn the_host_section_reads_through_a_root() {
    // The captured host of the fixtures: PostgreSQL as PID 812, its data on LVM.
    let root = plumb_sys::Root::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/v2-systemd-lvm"
    ));
    let v = super::read_host(
        &root,
        plumb_sys::smaps::EngineKind::Postgres,
        Some(812),
        std::path::Path::new("/var/lib/postgresql/15/main/base"),
    )
    .unwrap();
    assert!(v.host.processes.iter().any(|p| p.pid == 812));
    let m = v.memory.expect("a memory assumption");
    assert_eq!(m.cache_name, "shared_buffers");
    assert_eq!(m.cgroup_limit_bytes, Some(4 << 30));
    let st = v.storage.expect("the data's storage");
    assert!(!st.disks.is_empty(), "{st:?}");
}

#[test]
fn findings_from_a_disturbed_phase_are_lowered_and_say_why() {
    let mut r = report();
    let mut busy = win("pgbench", true);
    busy.runnable_mean = Some(64.0);
    busy.engine_swap_bytes_max = Some(64.0 * 1048576.0);
    r.windows = vec![busy.clone()];
    r.loops = vec![single("fdatasync", vec![25_000; 100], Some(1.0))];
    let clean = findings(&r);
    assert_eq!(
        rule(&clean, "run-queue-above-cpus").unwrap().severity,
        Severity::Warn
    );
    assert_eq!(
        rule(&clean, "commit-latency").unwrap().severity,
        Severity::Critical
    );

    // The same figures, with a neighbour in pgbench and in the loops.
    busy.interference = Some(disturbed());
    let mut loops = win("single-row commits, fdatasync", true);
    loops.interference = Some(disturbed());
    r.windows = vec![busy, loops];
    let f = findings(&r);
    for name in ["run-queue-above-cpus", "commit-latency"] {
        let x = rule(&f, name).unwrap();
        assert_eq!(x.severity, Severity::Info, "{name}");
        assert!(
            plumb_report::words::statement(x).contains("lowered to info"),
            "{}",
            plumb_report::words::statement(x)
        );
        assert!(
            plumb_report::words::evidence(x)
                .iter()
                .any(|e| e.contains("in: ") && e.contains("PID 4321 (fio)")),
            "{:?}",
            plumb_report::words::evidence(x)
        );
        assert_eq!(x.disturbed.as_ref().unwrap().phases.len(), 1);
        let json = plumb_report::words::speaking(|| serde_json::to_value(x)).unwrap();
        assert_eq!(json["numbers"]["disturbed_phases"], 1);
    }
    // Memory in swap is a fact, whoever pushed it out.
    assert_eq!(
        rule(&f, "engine-memory-in-swap").unwrap().severity,
        Severity::Critical
    );
}

/// Swap plumb's own --pressure caused is the experiment's, not the server's problem: tagged,
/// info, and the verdict keeps it out of "needs action" and the server's swap figure.
#[test]
fn swap_in_plumbs_own_experiment_is_tagged_not_critical() {
    let mut r = report();
    let mut plain = win("pgbench", true);
    plain.engine_swap_bytes_max = Some(0.0);
    let mut squeezed = win("pgbench under memory pressure", true);
    squeezed.engine_swap_bytes_max = Some(64.5 * 1048576.0);
    // The program holding memory beside the server queues on the CPUs too.
    squeezed.runnable_mean = Some(64.0);
    r.windows = vec![plain, squeezed];
    r.experiments = vec![plumb_analyze::lab::Experiment {
        name: "memory pressure".into(),
        setting: plumb_analyze::said::Said::new("experiment-pressure")
            .bytes("limit_bytes", 512.0 * 1048576.0),
        phase: "pgbench under memory pressure".into(),
        baseline: None,
        changed: None,
        window: None,
        notes: vec![],
        commits: vec![],
        explained: None,
    }];
    let f = findings(&r);
    let s = rule(&f, "engine-memory-in-swap").expect("the swap is said");
    assert_eq!(s.severity, Severity::Info);
    assert_eq!(
        s.experiment.as_ref().map(|x| x.code.as_ref()),
        Some("experiment-pressure")
    );
    let q = rule(&f, "run-queue-above-cpus").expect("the queue is said");
    assert_eq!(q.severity, Severity::Info);
    assert!(q.experiment.is_some());
    r.findings = f;
    let v = plumb_analyze::verdict::lab(&r);
    assert!(v.actions.iter().all(|a| a.rule != "engine-memory-in-swap"));
    assert!(v.actions.iter().all(|a| a.rule != "run-queue-above-cpus"));
    let swap = v.headline.iter().find(|h| h.code == "server_swap").unwrap();
    assert_eq!(swap.value, 0.0, "the plain phases had none");
    // The same swap in a phase of the server's own: critical, about the server.
    r.windows[0].engine_swap_bytes_max = Some(2.0 * 1048576.0);
    let f = findings(&r);
    let s = rule(&f, "engine-memory-in-swap").unwrap();
    assert_eq!(s.severity, Severity::Critical);
    assert!(s.experiment.is_none());
}

fn bulk(method: &str, ins_us: &[u64], flushes: f64) -> LoopResult {
    LoopResult {
        scenario: "bulk".into(),
        iterations: ins_us.len() as u32,
        rows_per_iteration: 10_000,
        commits_per_iteration: 1,
        insert_ms: Latency::from_us(ins_us),
        commit: None,
        flushes_per_commit: Some(flushes),
        trace: None,
        ..single(method, vec![], None)
    }
}

#[test]
fn wal_sync_methods_are_ranked_only_by_the_compare_rule() {
    let mut r = report();
    let mut s1 = single("fdatasync", vec![390; 100], Some(1.14));
    s1.insert_ms = Latency::from_us(&[36_000, 39_000, 41_000, 38_000]);
    let mut s2 = single("open_datasync+O_DIRECT", vec![350; 100], Some(1.14));
    s2.insert_ms = Latency::from_us(&[33_000, 37_000, 36_000, 40_000]);
    r.loops = vec![
        bulk("fdatasync", &[75_000, 78_000, 80_000, 76_000, 79_000], 21.0),
        bulk(
            "open_datasync+O_DIRECT",
            &[300_000, 320_000, 330_000, 310_000, 325_000],
            1690.0,
        ),
        s1.clone(),
        s2.clone(),
    ];
    let f = findings(&r);
    let w = rule(&f, "wal-sync-method").unwrap();
    assert!(
        w.experiment.is_some(),
        "the comparison is of plumb's own experiment"
    );
    assert!(
        plumb_report::words::statement(w)
            .contains("10,000-row transactions: 4.10x faster with fdatasync"),
        "{}",
        plumb_report::words::statement(w)
    );
    assert!(
        plumb_report::words::statement(w)
            .contains("single-row commits: not distinguishable on this host"),
        "{}",
        plumb_report::words::statement(w)
    );
    assert!(
        plumb_report::words::statement(w).contains("cost the same cache FLUSHes per commit"),
        "{}",
        plumb_report::words::statement(w)
    );
    assert!(
        plumb_report::words::statement(w).contains("Mann-Whitney p"),
        "the rule's figures are said: {}",
        plumb_report::words::statement(w)
    );
    // The floor reads from the faster configuration: 2.5 times as long is +150%, beyond the
    // 50% floor (read from the slower one it would be -60%, and a floor of -50% would ask for
    // twice as fast, a stricter rule for one direction than the other).
    let mut wide = r.clone();
    wide.loops[0] = bulk(
        "fdatasync",
        &[100_000, 120_000, 150_000, 160_000, 170_000],
        21.0,
    );
    wide.loops[1] = bulk(
        "open_datasync+O_DIRECT",
        &[260_000, 300_000, 310_000, 320_000, 330_000],
        1690.0,
    );
    let ww = plumb_report::words::statement(rule(&findings(&wide), "wal-sync-method").unwrap());
    assert!(
        ww.contains("10,000-row transactions: 2.07x faster with fdatasync"),
        "{ww}"
    );
    // Three iterations a side can never reach p < 0.05, however far apart: too few, not faster.
    let mut three = r.clone();
    three.loops = vec![
        bulk("fdatasync", &[75_000, 78_000, 80_000], 21.0),
        bulk(
            "open_datasync+O_DIRECT",
            &[300_000, 320_000, 330_000],
            1690.0,
        ),
        s1,
        s2,
    ];
    let f3 = findings(&three);
    let w3 = plumb_report::words::statement(rule(&f3, "wal-sync-method").unwrap());
    assert!(
        w3.contains("10,000-row transactions: 3 iterations a side are too few"),
        "{w3}"
    );
    assert!(!w3.contains("faster with"), "{w3}");
    // Each configuration's evidence line names it, O_DIRECT included.
    assert!(
        plumb_report::words::evidence(w)
            .iter()
            .any(|e| e.starts_with("bulk open_datasync+O_DIRECT: inserts median")),
        "{:?}",
        plumb_report::words::evidence(w)
    );
    // Loops beside a neighbour that took 83% of the device's bytes: no "faster" (a quick lab
    // with every phase disturbed said "2.76x faster … p < 0.001").
    let mut busy = r.clone();
    let mut w1 = win("10,000-row transactions, fdatasync", true);
    w1.interference = Some(disturbed());
    busy.windows = vec![w1];
    let wb = plumb_report::words::statement(rule(&findings(&busy), "wal-sync-method").unwrap());
    assert!(
        wb.contains("10,000-row transactions: not compared: the loops ran beside other work (fio (PID 4321), 83% of the window)")
            && !wb.contains("faster with"),
        "{wb}"
    );
    // A neighbour's 12% beside a 4x difference (+250% at least) does not hide it.
    let mut small = disturbed();
    small.io_share = Some(0.12);
    busy.windows[0].interference = Some(small);
    let ws = plumb_report::words::statement(rule(&findings(&busy), "wal-sync-method").unwrap());
    assert!(ws.contains("4.10x faster with fdatasync"), "{ws}");
}

/// A synchronous standby's wait is said when the `on` commits are slower as a whole, even when
/// the local flushes spread wider than the wait (a shared, busy disk); a 5% shift is not a wait.
#[test]
fn a_standby_wait_is_said_beyond_chance_and_the_floor() {
    use super::replica::{slower_beyond_spread as slower, FOLLOW_FLOOR, WAIT_FLOOR};
    let slower_beyond_spread = |a: &[u64], b: &[u64]| slower(a, b, WAIT_FLOOR);
    // Local flushes 100-2,000 µs (a busy disk); `on` the same plus a 300 µs wait.
    let local: Vec<u64> = (0..300).map(|i| 100 + (i * 37 % 1900)).collect();
    let on: Vec<u64> = local.iter().map(|u| u + 300).collect();
    assert_eq!(slower_beyond_spread(&local, &on), Some(true));
    assert_eq!(slower_beyond_spread(&on, &local), Some(false));
    let near: Vec<u64> = local.iter().map(|u| u * 105 / 100).collect();
    assert_eq!(slower_beyond_spread(&local, &near), Some(false));
    assert_eq!(slower_beyond_spread(&local[..3], &on), None);
    // Beside a throttled asynchronous standby on the same disk, commits took 0.42 ms against
    // 0.34 ms (CI, 2026-11-26): slower, but not following the standby's disk.
    let before: Vec<u64> = (0..300).map(|i| 300 + (i * 37 % 80)).collect();
    let after: Vec<u64> = before.iter().map(|u| u * 124 / 100).collect();
    assert_eq!(slower(&before, &after, FOLLOW_FLOOR), Some(false));
    let throttled: Vec<u64> = before.iter().map(|u| u * 280).collect();
    assert_eq!(slower(&before, &throttled, FOLLOW_FLOOR), Some(true));
}

/// The busy-host case: the device counted 1.14, 2.86 and 1.55 FLUSHes per commit for the three
/// configurations (a neighbour's among them) while the traced backend sent 1.00 each. Where the
/// loops were traced, the comparison uses the backend's own and says so; untraced, the device's,
/// and it says that too.
#[test]
fn wal_sync_flushes_are_the_backends_own_where_traced() {
    let traced = |method: &str, device: f64| {
        let mut l = single(method, vec![400; 100], Some(device));
        l.trace = Some(LoopTrace {
            backend_bios: BiosPerCommit {
                writes: 1.0,
                flushes: 1.0,
                fua_writes: 0.0,
            },
            ..LoopTrace::default()
        });
        l
    };
    let mut r = report();
    r.loops = vec![
        traced("fdatasync", 1.14),
        traced("open_datasync", 2.86),
        traced("open_datasync+O_DIRECT", 1.55),
    ];
    let f = findings(&r);
    let s = plumb_report::words::statement(rule(&f, "wal-sync-method").unwrap());
    assert!(s.contains("cost the same cache FLUSHes per commit"), "{s}");
    assert!(s.contains("fdatasync 1.00"), "{s}");
    assert!(s.contains("the committing backend's own"), "{s}");
    // Untraced: the device's counts differ, and the statement says whose they are.
    for l in &mut r.loops {
        l.trace = None;
    }
    let f = findings(&r);
    let s = plumb_report::words::statement(rule(&f, "wal-sync-method").unwrap());
    assert!(s.contains("differ by configuration"), "{s}");
    assert!(s.contains("open_datasync 2.86"), "{s}");
    assert!(s.contains("the whole device's"), "{s}");
}

fn maria(name: &str, p50_us: u64) -> plumb_analyze::lab::MariaConfig {
    plumb_analyze::lab::MariaConfig {
        name: name.into(),
        asked: Default::default(),
        read_back: [("innodb_flush_log_at_trx_commit", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ignored: vec![],
        durable_by_settings: true,
        single: Latency::from_us(&vec![p50_us; 50]),
        bulk_commit: None,
        bulk_transaction: None,
        syscalls_per_commit: vec![],
        sync_calls_per_commit: None,
        write_calls_per_commit: None,
        server_bios_per_commit: None,
        device_flushes_per_commit: Some(1.0),
        device_flushes_per_bulk: None,
        group_commit_ratio: None,
        trace_lost: false,
    }
}

/// A MariaDB lab with its configurations measured beside a neighbour that took 83% of the
/// device's bytes says no configuration is faster "beyond chance"; a 12% share beside a
/// doubling leaves the claim standing.
#[test]
fn mariadb_configurations_measured_beside_other_work_are_not_compared() {
    let d = plumb_analyze::lab::MariaDurability {
        configs: vec![
            maria("trx_commit=1 fsync", 400),
            maria("trx_commit=1 O_DSYNC", 900),
        ],
        traced: false,
        untraced_because: None,
        device_fua: Some(false),
        device_write_back: Some(true),
        fastest_durable: Some("trx_commit=1 fsync".into()),
        faster_than: vec!["trx_commit=1 O_DSYNC".into()],
        not_distinguishable_from: vec![],
        not_compared: vec![],
    };
    let mut w = win("durability trx_commit=1 O_DSYNC", true);
    w.interference = Some(disturbed());
    let mut busy = d.clone();
    super::maria_durability::withhold_disturbed(&mut busy, std::slice::from_ref(&w));
    assert!(busy.faster_than.is_empty() && busy.fastest_durable.is_none());
    assert_eq!(busy.not_compared, ["trx_commit=1 O_DSYNC"]);
    let mut r = report();
    r.mariadb_durability = Some(busy);
    let said = plumb_report::words::statement(&super::maria_durability::finding(&r).unwrap());
    assert!(
        !said.contains("beyond chance") && said.contains("not compared"),
        "{said}"
    );
    let mut small = disturbed();
    small.io_share = Some(0.12);
    w.interference = Some(small);
    let mut calm = d.clone();
    super::maria_durability::withhold_disturbed(&mut calm, std::slice::from_ref(&w));
    assert_eq!(calm.faster_than, ["trx_commit=1 O_DSYNC"]);
    assert!(calm.not_compared.is_empty());
}
