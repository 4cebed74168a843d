//! The HTML renderers on synthetic inputs, compared with checked-in snapshots: a recording of
//! every metric plumb knows (values from a fixed formula, three marks) for `plumb report`, and
//! a lab report around a captured host for `plumb lab`'s page. No live host or lab is needed.
//! `PLUMB_BLESS=1` rewrites a snapshot after a deliberate change; review its diff.

use plumb_analyze::lab::*;
use plumb_analyze::said::{Said, WithFacts};
use plumb_analyze::series::{How, RULES};
use plumb_store::{Header, Kind, Mark, Writer};
use std::path::{Path, PathBuf};

fn snapshot(name: &str, got: &str) {
    // The embedded chart library and script are checked by their own tests and the browser
    // test; the snapshot keeps what the renderers wrote.
    let got: &str = &got
        .replace(
            &plumb_report::explore::scripts(),
            "<!-- uPlot and plumb.js -->",
        )
        .replace(&plumb_report::explore::head_style(), "<!-- chart style -->");
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("PLUMB_BLESS").is_some() {
        std::fs::write(&p, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&p)
        .unwrap_or_else(|_| panic!("{} missing; run with PLUMB_BLESS=1", p.display()));
    if want != got {
        // The first difference, with a little context (HTML is one long line).
        let at = want
            .bytes()
            .zip(got.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(want.len().min(got.len()));
        let around = |t: &str| {
            let mut lo = at.saturating_sub(60).min(t.len());
            while !t.is_char_boundary(lo) {
                lo -= 1;
            }
            let mut hi = (at + 60).min(t.len());
            while !t.is_char_boundary(hi) {
                hi += 1;
            }
            t[lo..hi].to_string()
        };
        panic!(
            "{} differs at byte {at}:\nwant: …{}…\ngot:  …{}…\n(PLUMB_BLESS=1 rewrites it)",
            p.display(),
            around(&want),
            around(&got)
        );
    }
}

/// The raw name a rule reads, with a made-up object where the family has one.
fn raw_name(family: &str, per_object: bool, raw: &str) -> String {
    if !per_object {
        return format!("{family}.{raw}");
    }
    let object = match family {
        "cpu" => "all",
        "disk" => "vda",
        "proc" | "trace" => "4242",
        "psi" => "memory",
        "engine" => "db",
        _ => "x",
    };
    format!("{family}.{object}.{raw}")
}

/// Sixty one-second samples of every metric: counters grow by a wave, gauges follow one.
fn synthetic_recording(dir: &Path) -> plumb_store::Recording {
    let path = dir.join("synthetic.plumb");
    let header = Header {
        format_version: plumb_store::FORMAT_VERSION,
        plumb_version: "0.0.0-snapshot".into(),
        // 2026-11-23 10:00:00 UTC
        started_unix_ms: 1_795_428_000_000,
        interval_ms: 1000,
        slow_interval_ms: None,
        hostname: Some("db1".into()),
        kernel: Some("6.1.0".into()),
        cpus: Some(2),
        clock_ticks_per_s: Some(100),
        page_size_bytes: Some(4096),
        command_line: "plumb record --pid 4242".into(),
        labels: [("run".to_string(), "synthetic".to_string())]
            .into_iter()
            .collect(),
    };
    let mut w = Writer::create(&path, &header).unwrap();
    let names: Vec<(String, Kind)> = RULES
        .iter()
        .map(|r| {
            let kind = match r.how {
                How::Gauge(_) => Kind::Gauge,
                _ => Kind::Counter,
            };
            (raw_name(r.family, r.per_object, r.raw), kind)
        })
        .collect();
    let mut totals = vec![0u64; names.len()];
    for i in 0..60u64 {
        let rows: Vec<(&str, Kind, u64)> = names
            .iter()
            .enumerate()
            .map(|(k, (n, kind))| {
                // A wave per metric, phase-shifted: 10..=90 in steps.
                let wave = 10 + ((i * 7 + k as u64 * 13) % 81);
                let v = match kind {
                    // Bytes in MiB, counts as they are.
                    Kind::Gauge if n.ends_with("_bytes") => wave << 20,
                    Kind::Gauge => wave,
                    Kind::Counter => {
                        totals[k] += wave;
                        totals[k]
                    }
                };
                (n.as_str(), *kind, v)
            })
            .collect();
        w.sample(i * 1000, &rows).unwrap();
    }
    drop(w);
    for (t, name) in [
        (5_000, "pgbench run"),
        (30_000, "checkpoint"),
        (50_000, "done"),
    ] {
        plumb_store::append_mark(
            &path,
            &Mark {
                t_ms: t,
                name: name.into(),
                detail: Some(format!("at {t} ms")),
            },
        )
        .unwrap();
    }
    let mut rec = plumb_store::read(&path).unwrap();
    // The snapshot must not depend on the temporary directory's name.
    rec.path = PathBuf::from("synthetic.plumb");
    rec
}

#[test]
fn recording_report_html() {
    let d = tempfile::tempdir().unwrap();
    let rec = synthetic_recording(d.path());
    let run = plumb_report::record_render::Run::new(&rec, "synthetic".into());
    let html = plumb_report::record_render::html(&[run]);
    assert!(html.contains("<svg") && html.contains("checkpoint"));
    snapshot("record-report.html", &html);
}

#[test]
fn lab_report_html() {
    let d = tempfile::tempdir().unwrap();
    let rec = synthetic_recording(d.path());
    let root = plumb_sys::Root::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/v2-systemd-lvm"
    ));
    let sample = plumb_sys::snapshot::collect(&root, &[812], None).unwrap();
    let single = |method: &str, us: u64| LoopResult {
        scenario: "single".into(),
        wal_sync_method: method.trim_end_matches("+O_DIRECT").into(),
        wal_direct: method.ends_with("+O_DIRECT"),
        iterations: 2,
        rows_per_iteration: 100,
        commits_per_iteration: 100,
        insert_ms: Latency::from_us(&[20_000, 22_000]),
        checkpoint_ms: Latency::from_us(&[2_000, 3_000]),
        commit: Latency::from_us(&vec![us; 200]),
        wal_bytes: Some(1_638_400.0),
        wal_syncs: Some(200.0),
        wal_sync_ms: Some(180.0),
        disk_writes: Some(410),
        disk_flushes: Some(202),
        flushes_per_commit: Some(1.01),
        trace: None,
    };
    let windows: Vec<Window> = [
        ("pgbench", true, 5.0, 30.0),
        ("checkpoint", true, 30.0, 50.0),
    ]
    .iter()
    .map(|(name, workload, s, e)| Window {
        // The checkpoint phase had a neighbour.
        interference: Some(watched(*name == "checkpoint")),
        ..window(&rec, name, *workload, *s, *e, Some("vda"), Some(4242))
    })
    .collect();
    let r = LabReport {
        report_schema: REPORT_SCHEMA,
        command_line: "plumb lab --quick".into(),
        started_unix_ms: 1_795_428_000_000,
        elapsed_s: 61.0,
        quick: true,
        target: "plumb's private PostgreSQL 15.18 (removed after the lab)".into(),
        engine_version: Some("PostgreSQL 15.18".into()),
        data_dir: "/var/tmp/plumb-lab-1-00000/pg/data".into(),
        out_dir: "plumb-lab-20261123-100000".into(),
        host: plumb_analyze::os::build(&sample, 4096),
        memory: None,
        durability: Some(durability()),
        sweep: Some(sweep()),
        seq_read: None,
        pgbench: Some(Pgbench {
            script: None,
            scale: 5,
            clients: 4,
            threads: 2,
            duration_s: 10.0,
            init_s: 2.5,
            database_bytes: Some(80 << 20),
            transactions: 12_000,
            failed: 0,
            tps: 1200.0,
            tps_p10: Some(1100.0),
            tps_p90: Some(1290.0),
            tps_seconds: Vec::new(),
            latency: Latency::from_us(&(1..=500).map(|i| i * 10).collect::<Vec<_>>()),
            wal_sync_method: "fdatasync".into(),
            // As PostgreSQL 17 counts them over a 10 s pgbench: the client backends' writes
            // and extends, the WAL writer's none (relation rows only before 18).
            server_io: Some(ServerIo {
                pg_major: 17,
                io: vec![
                    IoRow {
                        backend_type: "client backend".into(),
                        object: "relation".into(),
                        context: "normal".into(),
                        reads: 1250.0,
                        read_time_ms: 31.0,
                        read_bytes: 1250.0 * 8192.0,
                        writes: 310.0,
                        write_time_ms: 4.5,
                        write_bytes: 310.0 * 8192.0,
                        extends: 42.0,
                        extend_bytes: 42.0 * 8192.0,
                        hits: 480_000.0,
                        evictions: 300.0,
                        ..Default::default()
                    },
                    IoRow {
                        backend_type: "autovacuum worker".into(),
                        object: "relation".into(),
                        context: "vacuum".into(),
                        reads: 12.0,
                        read_time_ms: 0.4,
                        read_bytes: 12.0 * 8192.0,
                        hits: 900.0,
                        ..Default::default()
                    },
                ],
                io_timing: true,
                checkpoints: Some(CheckpointFigures {
                    requested: 1.0,
                    buffers_written: 2048.0,
                    write_time_ms: 812.0,
                    sync_time_ms: 35.0,
                    ..Default::default()
                }),
            }),
        }),
        workloads: Vec::new(),
        mariadb_durability: None,
        loops: vec![single("fdatasync", 1500), single("open_datasync", 2500)],
        experiments: vec![],
        windows,
        // A name with markup in it: the HTML must escape it.
        findings: vec![Finding::new(Severity::Warn, "commit-latency")
            .text("configuration", "open_datasync <&>")
            .text("cause", "flush")
            .secs("p99_s", 0.0025)
            .secs("threshold_s", 0.002)
            .evidence(vec![Evidence::Said(
                Said::new("commit-figures")
                    .count("commits", 200.0)
                    .text("configuration", "open_datasync <&>")
                    .secs("p50_s", 0.0015)
                    .secs("p99_s", 0.0025)
                    .secs("max_s", 0.004),
            )])],
        skipped: vec!["the wal_sync_method comparison: <not run>".into()],
        recording: Some("recording.plumb".into()),
    };
    let mut text = Vec::new();
    plumb_report::emit(
        &plumb_report::lab_render::LabOutput(&r),
        plumb_report::Format::Text,
        &mut text,
    )
    .unwrap();
    snapshot("lab-summary.txt", &String::from_utf8(text).unwrap());
    let html = plumb_report::lab_render::html(&r, &rec);
    // Text from the report is escaped, never markup.
    assert!(html.contains("open_datasync &lt;&amp;&gt;") && !html.contains("open_datasync <&>"));
    snapshot("lab-report.html", &html);
}

/// A quick sweep of three queue depths, two runs each; one run at QD 4 was disturbed by a
/// neighbour and run again.
/// A window's verdict: clean, or disturbed by PID 1234 (dd) writing 300 MiB.
fn watched(neighbour: bool) -> plumb_analyze::interference::Interference {
    use plumb_analyze::interference::{Interference, Neighbour, Verdict};
    Interference {
        accepted: vec![],
        verdict: if neighbour {
            Verdict::Disturbed
        } else {
            Verdict::Clean
        },
        window_s: 1.0,
        devices: vec!["vda".into()],
        device_read_bytes: 400 << 20,
        device_write_bytes: if neighbour { 300 << 20 } else { 0 },
        device_flushes: 0,
        own_read_bytes: 400 << 20,
        own_write_bytes: 0,
        own_cpu_s: 0.4,
        others_cpu_s: 0.1,
        neighbours: if neighbour {
            vec![Neighbour {
                pid: 1234,
                comm: "dd".into(),
                read_bytes: 0,
                write_bytes: 300 << 20,
                cpu_s: 0.1,
            }]
        } else {
            vec![]
        },
        steal_pct: Some(0.0),
        idle_pct: Some(60.0),
        io_share: None,
        cpu_share: None,
        notes: if neighbour {
            vec![
                plumb_analyze::Note::new(plumb_analyze::Level::Warn, "neighbour-io")
                    .pct("share_pct", 300.0 / 700.0 * 100.0)
                    .pct("disturbing_share_pct", 10.0)
                    .list("devices", vec!["vda".into()])
                    .bytes("device_read_bytes", (400u64 << 20) as f64)
                    .bytes("device_write_bytes", (300u64 << 20) as f64)
                    .bytes("own_read_bytes", (400u64 << 20) as f64)
                    .bytes("own_write_bytes", 0.0)
                    .notes(
                        "neighbours",
                        vec![
                            plumb_analyze::Note::new(plumb_analyze::Level::Info, "neighbour")
                                .count("pid", 1234.0)
                                .text("comm", "dd")
                                .bytes("read_bytes", 0.0)
                                .bytes("write_bytes", (300u64 << 20) as f64),
                        ],
                    ),
            ]
        } else {
            vec![]
        },
    }
}

/// The durability probe's rounds: clean runs, one disturbed run retried, the probe's requests
/// per durable write beside the device's (everybody's) counts.
fn durability() -> plumb_analyze::durability_probe::DurabilityReport {
    use plumb_analyze::durability_probe::{build, ModeRep, Probed};
    use plumb_io::job::Durability;
    use plumb_sys::tracefs::{Attributed, BioCounts, RqCounts};
    let rep = |mean_us: f64, flush: bool, neighbour: bool| {
        let n = 1_000_000.0 / mean_us;
        ModeRep {
            writes: n as u64,
            writes_per_s: n,
            mean_s: Some(mean_us / 1e6),
            p50_s: Some(mean_us * 0.9 / 1e6),
            p99_s: Some(mean_us * 2.5 / 1e6),
            max_s: Some(mean_us * 9.0 / 1e6),
            sync_calls: 0,
            device: Some(RqCounts {
                writes: n as u64 + if neighbour { 4000 } else { 0 },
                flushes: if flush { n as u64 } else { 0 } + if neighbour { 4000 } else { 0 },
                ..Default::default()
            }),
            probe: Some(Attributed {
                own: BioCounts {
                    writes: n as u64,
                    write_bytes: n as u64 * 8192,
                    flushes: if flush { n as u64 } else { 0 },
                    ..Default::default()
                },
                syncs: if flush { n as u64 } else { 0 },
                journal_followed: true,
                ..Default::default()
            }),
            interference: Some(watched(neighbour)),
            // Each tenth of the run within ±3% of its mean, in a fixed order.
            tenths_s: (0..10)
                .map(|i| mean_us / 1e6 * (1.0 + 0.03 * ((i * 3 % 10) as f64 - 4.5) / 4.5))
                .collect(),
        }
    };
    let p = Probed {
        file: "/var/tmp/plumb-lab-1-00000/work/plumb-durability-1.dat".into(),
        repetitions: 2,
        modes: vec![
            (
                Durability::parse("fdatasync").unwrap(),
                8192,
                vec![rep(290.0, true, false), rep(300.0, true, false)],
            ),
            (
                Durability::parse("direct-dsync").unwrap(),
                8192,
                vec![
                    rep(500.0, true, false),
                    rep(2400.0, true, true),
                    rep(510.0, true, false),
                ],
            ),
            (
                Durability::parse("direct").unwrap(),
                8192,
                vec![rep(70.0, false, false), rep(71.0, false, false)],
            ),
        ],
        trace_unavailable: None,
        journal_followed: true,
    };
    build(
        &p,
        "/var/tmp/plumb-lab-1-00000/pg/data/pg_wal".into(),
        None,
        0.4,
    )
}

fn sweep() -> plumb_analyze::sweep::SweepReport {
    use plumb_analyze::sweep::{judge_levels, set_elasticity, Level, Rep, SweepKind};
    let rep = |iops: f64, lat_ms: f64, neighbour: bool| Rep {
        ios: (iops * 1.0) as u64,
        iops,
        bytes_per_s: iops * 8192.0,
        lat_mean_s: Some(lat_ms / 1e3),
        lat_p99_s: Some(lat_ms * 3.0 / 1e3),
        interference: Some(watched(neighbour)),
    };
    let mut levels = vec![
        Level::new(
            "1".into(),
            Some(1.0),
            vec![rep(9000.0, 0.11, false), rep(9100.0, 0.11, false)],
        ),
        Level::new(
            "4".into(),
            Some(4.0),
            vec![
                rep(30000.0, 0.13, false),
                rep(900.0, 4.4, true),
                rep(31000.0, 0.13, false),
            ],
        ),
        Level::new(
            "16".into(),
            Some(16.0),
            vec![rep(40000.0, 0.40, false), rep(41000.0, 0.39, false)],
        ),
    ];
    set_elasticity(&mut levels);
    let (knee, verdict, notes) = judge_levels(&levels);
    let mut job = plumb_io::job::preset("data-read").unwrap();
    job.targets = vec![];
    plumb_analyze::sweep::SweepReport {
        command_line: "plumb lab".into(),
        sweep_over: SweepKind::QueueDepth,
        job,
        repetitions: 2,
        levels,
        knee,
        verdict,
        notes,
        chart: None,
    }
}
