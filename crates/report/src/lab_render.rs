//! `plumb lab`'s summary (text), report.json and index.html. Both text and HTML are drawn from
//! the same tables, so they always say the same thing.

use crate::fmt::{bytes, duration, latency_ms, ms, MISSING, UNKNOWN};
use crate::html::Html;
use crate::record_render::{charts_html, page, Run};
use crate::words;
use crate::Render;
use plumb_analyze::lab::{LabReport, Latency, Severity};
use serde::Serialize;
use std::io::{self, Write};

/// The lab's report as output: text summary, or JSON with the envelope (the report's fields
/// and its top-level `verdict`).
pub struct LabOutput<'a>(pub &'a LabReport);

#[derive(Serialize)]
struct WithVerdict<'a> {
    #[serde(flatten)]
    report: &'a LabReport,
    verdict: plumb_analyze::verdict::RunVerdict,
}

impl Serialize for LabOutput<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        WithVerdict {
            report: self.0,
            verdict: plumb_analyze::verdict::lab(self.0),
        }
        .serialize(s)
    }
}

/// The verdict block of a lab report.
fn verdict_block(r: &LabReport) -> crate::verdict_render::Block {
    crate::verdict_render::lab_block(&plumb_analyze::verdict::lab(r), &r.findings)
}

/// One table of the report.
struct Table {
    id: &'static str,
    title: String,
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    /// Lines under the table.
    notes: Vec<String>,
}

/// A latency given in milliseconds, or the missing-cell mark.
fn opt_latency_ms(v: Option<f64>) -> String {
    v.map(latency_ms).unwrap_or_else(|| MISSING.into())
}

fn opt1(v: Option<f64>, unit: &str) -> String {
    v.map(|v| format!("{v:.1}{unit}"))
        .unwrap_or_else(|| MISSING.into())
}

/// A whole number with thousands separators.
fn count(v: f64) -> String {
    crate::fmt::count(v.round())
}

fn lat_cols(l: &Option<Latency>) -> [String; 4] {
    match l {
        Some(l) => [
            latency_ms(l.p50_ms),
            opt_latency_ms(l.p95_ms),
            opt_latency_ms(l.p99_ms),
            latency_ms(l.max_ms),
        ],
        None => [
            MISSING.into(),
            MISSING.into(),
            MISSING.into(),
            MISSING.into(),
        ],
    }
}

fn header_lines(r: &LabReport) -> Vec<(&'static str, String)> {
    let h = &r.host;
    let mut v = vec![("target", r.target.clone())];
    v.push((
        "host",
        format!(
            "{} · {} · {} CPUs · {} memory{}",
            h.host.hostname.clone().unwrap_or_else(|| UNKNOWN.into()),
            h.host
                .kernel_release
                .clone()
                .map(|k| format!("Linux {k}"))
                .unwrap_or_else(|| UNKNOWN.into()),
            h.cpu
                .online_cpus
                .map(|c| c.to_string())
                .unwrap_or_else(|| UNKNOWN.into()),
            h.memory
                .total_bytes
                .map(bytes)
                .unwrap_or_else(|| UNKNOWN.into()),
            if h.host.virtualization_evidence.is_empty() {
                String::new()
            } else {
                " · virtual machine".to_string()
            }
        ),
    ));
    if let Some(s) = r.durability.as_ref().and_then(|d| d.storage.as_ref()) {
        v.push((
            "data",
            format!(
                "{} · {} on {} · disks {}",
                r.data_dir.display(),
                s.fs_type,
                s.source,
                s.disks.join(", ")
            ),
        ));
        if let Some(d) = &s.durability {
            v.push(("device", words::said(d)));
        }
    } else {
        v.push(("data", r.data_dir.display().to_string()));
    }
    if let Some(m) = &r.memory {
        v.push((
            "memory",
            format!(
                "{} {} · limit {} · peak estimate {}",
                m.cache_name,
                m.cache_bytes.map(bytes).unwrap_or_else(|| UNKNOWN.into()),
                m.cgroup_limit_bytes
                    .map(bytes)
                    .unwrap_or_else(|| "none".into()),
                m.peak_estimate_bytes
                    .map(bytes)
                    .unwrap_or_else(|| UNKNOWN.into())
            ),
        ));
    }
    let end_ms = r.started_unix_ms + (r.elapsed_s.max(0.0) * 1000.0) as u64;
    v.push((
        "run",
        format!(
            "{} to {} · {}{} · {}",
            crate::record_render::wall_utc(r.started_unix_ms),
            crate::record_render::wall_utc(end_ms),
            duration(r.elapsed_s),
            if r.quick { " (--quick)" } else { "" },
            r.command_line
        ),
    ));
    v
}

fn tables(r: &LabReport) -> Vec<Table> {
    let mut out = Vec::new();
    durability_tables(r, &mut out);
    sweep_tables(r, &mut out);
    pgbench_tables(r, &mut out);
    for w in &r.workloads {
        out.push(workload_table(w));
        out.extend(explain_table(w, None));
    }
    if let Some(d) = &r.mariadb_durability {
        out.push(maria_durability_table(d));
    }
    if let Some(t) = r
        .pgbench
        .as_ref()
        .and_then(|p| p.server_io.as_ref())
        .map(server_io_table)
    {
        out.push(t);
    }
    loops_tables(r, &mut out);
    loop_trace_tables(r, &mut out);
    experiment_tables(r, &mut out);
    window_tables(r, &mut out);
    out
}

/// The durability probe's table: each write mode's cost and what the device saw.
fn durability_tables(r: &LabReport, out: &mut Vec<Table>) {
    if let Some(d) = &r.durability {
        let rows = d
            .rows
            .iter()
            .map(|m| {
                vec![
                    m.mode.to_string(),
                    bytes(m.block_size as u64),
                    if m.durable { "yes" } else { "no" }.into(),
                    format!("{}/{}", m.clean_runs, m.runs),
                    count(m.writes_per_s),
                    match (m.mean_s, m.plus_minus()) {
                        (Some(x), Some(pm)) => format!("{} ±{:.0}%", ms(x), pm * 100.0),
                        (Some(x), None) => ms(x),
                        _ => MISSING.into(),
                    },
                    m.p99_s.map(ms).unwrap_or_else(|| MISSING.into()),
                    m.per_write
                        .map(|p| format!("{:.2} FLUSH, {:.2} FUA", p.flushes, p.fua_writes))
                        .unwrap_or_else(|| MISSING.into()),
                    m.device
                        .as_ref()
                        .map(|c| {
                            format!(
                                "{} writes ({} FUA), {} FLUSH",
                                count(c.writes as f64),
                                count(c.fua_writes as f64),
                                count((c.flushes + c.preflush_writes) as f64)
                            )
                        })
                        .unwrap_or_else(|| MISSING.into()),
                ]
            })
            .collect();
        let notes = d.conclusions.iter().map(words::note).collect();
        out.push(Table {
            id: "durability",
            title: "Durability: what one durable write costs".into(),
            headers: vec![
                "mode",
                "block",
                "durable",
                "clean runs",
                "writes/s",
                "mean",
                "p99",
                "plumb asked per write",
                "the device received (everybody's)",
            ],
            rows,
            notes,
        });
    }
}

/// The queue-depth sweep's table and its knee.
fn sweep_tables(r: &LabReport, out: &mut Vec<Table>) {
    if let Some(s) = &r.sweep {
        let rows = s
            .levels
            .iter()
            .map(|l| {
                vec![
                    l.label.clone(),
                    l.iops
                        .as_ref()
                        .map(|x| count(x.median))
                        .unwrap_or_else(|| MISSING.into()),
                    l.bytes_per_s
                        .as_ref()
                        .map(|x| format!("{}/s", bytes(x.median as u64)))
                        .unwrap_or_else(|| MISSING.into()),
                    l.lat_mean_s
                        .as_ref()
                        .map(|x| ms(x.median))
                        .unwrap_or_else(|| MISSING.into()),
                    l.lat_p99_s
                        .as_ref()
                        .map(|x| ms(x.median))
                        .unwrap_or_else(|| MISSING.into()),
                    // Throughput that did not move makes the ratio meaningless.
                    match l.latency_elasticity {
                        Some(e) if e.abs() <= 50.0 => format!("{e:.2}"),
                        Some(_) => "throughput flat".into(),
                        None => MISSING.into(),
                    },
                    format!("{}/{}", l.clean_reps, l.reps.len()),
                ]
            })
            .collect();
        // A disturbed sweep states neither a knee nor its absence (the verdict says the same).
        let disturbed = s.verdict == plumb_analyze::interference::Verdict::Disturbed;
        let mut notes = vec![match &s.knee {
            _ if disturbed => "no knee is stated: the sweep was disturbed".into(),
            Some(k) if k.from != k.to => format!(
                "knee between queue depth {} and {}: the repetitions' spread allows both (on the medians, from {} to {} throughput {:+.0}%, latency {:+.0}%)",
                k.from, k.to, k.level, k.next, k.throughput_change_pct, k.latency_change_pct
            ),
            Some(k) => format!(
                "knee at queue depth {}: from {} to {} throughput {:+.0}%, latency {:+.0}%",
                k.level, k.level, k.next, k.throughput_change_pct, k.latency_change_pct
            ),
            None => "no knee: latency never outgrew throughput beyond the spread of the runs over these queue depths".into(),
        }];
        notes.extend(
            s.notes
                .iter()
                .map(|n| format!("{}: {}", n.code, words::note(n))),
        );
        if let Some(q) = &r.seq_read {
            notes.push(format!(
                "sequential {} reads, {} outstanding: {}/s{}",
                bytes(q.block_size as u64),
                q.queue_depth,
                bytes(q.bytes_per_s as u64),
                q.lat_mean_ms
                    .map(|m| format!(", {} mean", latency_ms(m)))
                    .unwrap_or_default()
            ));
        }
        out.push(Table {
            id: "sweep",
            title: format!(
                "Random {} reads by queue depth (O_DIRECT, {} per level)",
                bytes(s.job.block_size as u64),
                duration(s.job.duration.as_secs_f64())
            ),
            headers: vec![
                "queue depth",
                "IOPS",
                "throughput",
                "mean",
                "p99",
                "latency elasticity",
                "clean runs",
            ],
            rows,
            notes,
        });
    }
}

/// pgbench's table: throughput and latency.
fn pgbench_tables(r: &LabReport, out: &mut Vec<Table>) {
    if let Some(p) = &r.pgbench {
        let l = lat_cols(&p.latency);
        out.push(Table {
            id: "pgbench",
            title: match &p.script {
                Some(f) => format!("pgbench (your script {f})"),
                None => "pgbench (TPC-B-like)".into(),
            },
            headers: vec![
                "scale", "size", "clients", "time", "transactions", "failed", "tps", "p50", "p95",
                "p99", "max",
            ],
            rows: vec![vec![
                p.scale.to_string(),
                p.database_bytes.map(bytes).unwrap_or_else(|| MISSING.into()),
                format!("{} ({} threads)", p.clients, p.threads),
                duration(p.duration_s),
                count(p.transactions as f64),
                count(p.failed as f64),
                format!("{:.0}", p.tps),
                l[0].clone(),
                l[1].clone(),
                l[2].clone(),
                l[3].clone(),
            ]],
            notes: vec![format!(
                "latency per transaction from pgbench's transaction log; initialised in {}; wal_sync_method={}",
                duration(p.init_s),
                p.wal_sync_method
            )],
        });
    }
}

/// The insert/CHECKPOINT loops' table: one row per durability setting.
fn loops_tables(r: &LabReport, out: &mut Vec<Table>) {
    if !r.loops.is_empty() {
        let rows = r
            .loops
            .iter()
            .map(|l| {
                let name = if l.scenario == "bulk" {
                    format!(
                        "{} inserts in 1 transaction",
                        count(l.rows_per_iteration as f64)
                    )
                } else {
                    format!("{} single-row commits", l.commits_per_iteration)
                };
                let c = lat_cols(&l.commit);
                vec![
                    name,
                    l.configuration(),
                    l.iterations.to_string(),
                    l.insert_ms
                        .as_ref()
                        .map(|x| latency_ms(x.p50_ms))
                        .unwrap_or_else(|| MISSING.into()),
                    l.checkpoint_ms
                        .as_ref()
                        .map(|x| latency_ms(x.p50_ms))
                        .unwrap_or_else(|| MISSING.into()),
                    l.checkpoint_ms
                        .as_ref()
                        .map(|x| latency_ms(x.max_ms))
                        .unwrap_or_else(|| MISSING.into()),
                    if l.commit.is_some() {
                        c[0].clone()
                    } else {
                        MISSING.into()
                    },
                    if l.commit.is_some() {
                        c[2].clone()
                    } else {
                        MISSING.into()
                    },
                    l.flushes_per_commit
                        .map(|f| format!("{f:.2}"))
                        .unwrap_or_else(|| MISSING.into()),
                    l.wal_syncs.map(count).unwrap_or_else(|| MISSING.into()),
                    l.wal_bytes
                        .map(|b| bytes(b as u64))
                        .unwrap_or_else(|| MISSING.into()),
                ]
            })
            .collect();
        out.push(Table {
            id: "loops",
            title: "Insert/CHECKPOINT loops: durable commits, then CHECKPOINT".into(),
            headers: vec![
                "loop",
                "wal_sync_method",
                "iterations",
                "inserts median",
                "CHECKPOINT median",
                "CHECKPOINT max",
                "commit p50",
                "commit p99",
                "FLUSH per commit",
                "WAL syncs",
                "WAL",
            ],
            rows,
            notes: vec![format!(
                "inserts: the inserts with their commit(s), per iteration; CHECKPOINT: the one after them; commits timed one by one at the client; FLUSH from /proc/diskstats on the data disk; {}",
                if r
                    .engine_version
                    .as_deref()
                    .and_then(crate::delta_render::pg_major)
                    .is_some_and(|m| m >= 18)
                {
                    "WAL from pg_stat_wal, its syncs from pg_stat_io's wal rows (where PostgreSQL 18 moved them)"
                } else {
                    "WAL from pg_stat_wal"
                }
            )],
        });
    }
}

/// What each traced loop's commits asked of the kernel and the device.
fn loop_trace_tables(r: &LabReport, out: &mut Vec<Table>) {
    let traced: Vec<&plumb_analyze::lab::LoopResult> =
        r.loops.iter().filter(|l| l.trace.is_some()).collect();
    if !traced.is_empty() {
        let f2 = |v: f64| format!("{v:.2}");
        let rows = traced
            .iter()
            .filter_map(|l| {
                let t = l.trace.as_ref()?;
                let mut pats: Vec<(&String, &u64)> = t.patterns.iter().collect();
                pats.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                let n = (l.commits_per_iteration * l.iterations).max(1) as f64;
                Some(vec![
                    if l.scenario == "bulk" {
                        format!(
                            "{} inserts in 1 transaction",
                            count(l.rows_per_iteration as f64)
                        )
                    } else {
                        format!("{} single-row commits", l.commits_per_iteration)
                    },
                    format!(
                        "{}{}",
                        l.configuration(),
                        if t.lost { " (lost events)" } else { "" }
                    ),
                    t.syscalls_per_commit
                        .iter()
                        .take(4)
                        .map(|c| format!("{} {}", c.name, f2(c.per_commit)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    f2(t.sync_calls_per_commit),
                    f2(t.write_calls_per_commit),
                    f2(t.backend_bios.writes),
                    f2(t.backend_bios.flushes),
                    f2(t.backend_bios.fua_writes),
                    f2(t.server_bios.flushes),
                    pats.iter()
                        .take(3)
                        .map(|(k, v)| format!("{k} {}", f2(**v as f64 / n)))
                        .collect::<Vec<_>>()
                        .join(" + "),
                ])
            })
            .collect();
        out.push(Table {
            id: "loops-trace",
            title: "What a commit asked of the kernel (the loops' backend, traced)".into(),
            headers: vec![
                "loop",
                "wal_sync_method",
                "syscalls per commit (most frequent)",
                "fsync/fdatasync",
                "write calls",
                "write bios",
                "FLUSH",
                "FUA",
                "server FLUSH",
                "as blktrace flags them",
            ],
            rows,
            notes: vec![
                "per commit, from tracing the server over each loop (eBPF; plumb's own connection left out): the committing backend's syscalls and the bios it submitted; server FLUSH counts every server process's (the WAL writer's, the checkpointer's at the loop's CHECKPOINTs); WS + FWS is a write and a cache FLUSH, WFS a write with FUA".into(),
            ],
        });
    }
}

/// Each experiment's table: the baseline against what it changed.
fn experiment_tables(r: &LabReport, out: &mut Vec<Table>) {
    for e in &r.experiments {
        let row = |label: &str, p: &Option<plumb_analyze::lab::Pgbench>| {
            let l = p.as_ref().map(|p| lat_cols(&p.latency));
            vec![
                label.to_string(),
                p.as_ref()
                    .map(|p| format!("{:.0}", p.tps))
                    .unwrap_or_else(|| MISSING.into()),
                l.as_ref()
                    .map(|l| l[0].clone())
                    .unwrap_or_else(|| MISSING.into()),
                l.as_ref()
                    .map(|l| l[2].clone())
                    .unwrap_or_else(|| MISSING.into()),
            ]
        };
        let pgbench = e.baseline.is_some() || e.changed.is_some();
        if pgbench {
            out.push(Table {
                id: "experiment",
                title: format!(
                    "Experiment: {} ({})",
                    e.name,
                    crate::words::said(&e.setting)
                ),
                headers: vec!["run", "tps", "p50", "p99"],
                rows: vec![row("without", &e.baseline), row("with", &e.changed)],
                notes: e.notes.iter().map(words::note).collect(),
            });
        }
        // With --explain: the changed run's transactions taken apart (the baseline's table is
        // the workload's own, above).
        if let Some(w) = &e.explained {
            out.extend(explain_table(w, Some(&e.phase)));
        }
        if !e.commits.is_empty() {
            let ms = opt_latency_ms;
            let rows = e
                .commits
                .iter()
                .map(|c| {
                    let l = c.latency.as_ref();
                    vec![
                        c.condition.clone(),
                        c.synchronous_commit.clone(),
                        l.map(|l| l.count.to_string())
                            .unwrap_or_else(|| MISSING.into()),
                        ms(c.p10_ms),
                        ms(l.map(|l| l.p50_ms)),
                        ms(c.p90_ms),
                        ms(l.and_then(|l| l.p99_ms)),
                    ]
                })
                .collect();
            let mut notes: Vec<String> = if pgbench {
                Vec::new()
            } else {
                e.notes.iter().map(words::note).collect()
            };
            notes.push("one session, timed by the client; `local` waits for the local WAL flush alone, `on` also for a synchronous standby's flush; the two alternate commit by commit, so their difference is the wait for the standby".into());
            out.push(Table {
                id: "experiment-commits",
                title: if pgbench {
                    format!("Experiment: {}: single-row commits", e.name)
                } else {
                    format!(
                        "Experiment: {} ({})",
                        e.name,
                        crate::words::said(&e.setting)
                    )
                },
                headers: vec![
                    "condition",
                    "synchronous_commit",
                    "commits",
                    "p10",
                    "p50",
                    "p90",
                    "p99",
                ],
                rows,
                notes,
            });
        }
    }
}

/// The watched windows: whether each phase ran alone.
fn window_tables(r: &LabReport, out: &mut Vec<Table>) {
    if !r.windows.is_empty() {
        let rows = r
            .windows
            .iter()
            .map(|w| {
                vec![
                    w.phase.clone(),
                    duration(w.end_s - w.start_s),
                    opt1(w.cpu_busy_pct, "%"),
                    opt1(w.steal_pct, "%"),
                    match (w.runnable_mean, w.runnable_max) {
                        (Some(a), Some(b)) => format!("{a:.1} / {b:.0}"),
                        _ => MISSING.into(),
                    },
                    opt1(w.disk_queue_mean, ""),
                    opt_latency_ms(w.disk_write_await_ms),
                    opt1(w.disk_util_pct, "%"),
                    w.swap_in_bytes_per_s_max
                        .map(|b| format!("{}/s", bytes(b as u64)))
                        .unwrap_or_else(|| MISSING.into()),
                    w.engine_swap_bytes_max
                        .map(|b| bytes(b as u64))
                        .unwrap_or_else(|| MISSING.into()),
                    match &w.interference {
                        Some(i) if i.is_clean() => "clean".into(),
                        Some(_) => "DISTURBED".into(),
                        None => MISSING.into(),
                    },
                ]
            })
            .collect();
        // What disturbed a phase: the evidence, next to the figures it concerns.
        let notes: Vec<String> = r
            .windows
            .iter()
            .filter_map(|w| {
                let i = w.interference.as_ref().filter(|i| !i.is_clean())?;
                Some(format!(
                    "{} was disturbed: {}",
                    w.phase,
                    words::interference(i)
                ))
            })
            .collect();
        let disk = r
            .windows
            .iter()
            .find_map(|w| w.disk.clone())
            .unwrap_or_else(|| "disk".into());
        out.push(Table {
            id: "phases",
            title: format!("The host during each phase (recorded every second; disk {disk})"),
            headers: vec![
                "phase",
                "length",
                "CPU busy",
                "steal",
                "runnable mean / max",
                "disk queue",
                "write await",
                "disk busy",
                "swap-in max",
                "server swap",
                "verdict",
            ],
            rows,
            notes,
        });
    }
}

/// MariaDB's durability configurations side by side: commit latency, what each commit asked
/// of the kernel and the device, and the verdicts under the table.
fn maria_durability_table(d: &plumb_analyze::lab::MariaDurability) -> Table {
    let per = |v: Option<f64>| {
        v.map(|x| format!("{x:.2}"))
            .unwrap_or_else(|| MISSING.into())
    };
    let lat = |l: &Option<Latency>, p99: bool| {
        l.as_ref()
            .and_then(|l| if p99 { l.p99_ms } else { Some(l.p50_ms) })
            .map(latency_ms)
            .unwrap_or_else(|| MISSING.into())
    };
    let rows = d
        .configs
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                if plumb_analyze::lab::maria_durable(c, d.device_write_back) {
                    "yes"
                } else {
                    "no"
                }
                .into(),
                c.single
                    .as_ref()
                    .map(|l| crate::fmt::count(l.count as f64))
                    .unwrap_or_else(|| MISSING.into()),
                lat(&c.single, false),
                lat(&c.single, true),
                lat(&c.bulk_commit, false),
                per(c.server_bios_per_commit.as_ref().map(|b| b.flushes)),
                per(c.server_bios_per_commit.as_ref().map(|b| b.fua_writes)),
                per(c.sync_calls_per_commit),
                per(c.write_calls_per_commit),
                per(c.device_flushes_per_commit),
                c.group_commit_ratio
                    .map(|g| format!("{g:.2}"))
                    .unwrap_or_else(|| MISSING.into()),
            ]
        })
        .collect();
    let mut notes = vec![if d.traced {
        "FLUSH and FUA per commit are the server's own, from plumb's block trace over the single-row commits (its threads, and the journal commits its syncs waited for); syncs and writes are its fsync/fdatasync and write calls per commit; the device column counts everybody's FLUSHes (/proc/diskstats)".to_string()
    } else {
        format!(
            "not traced ({}): the FLUSH figures are the whole device's, a neighbour's included",
            d.untraced_because.as_deref().unwrap_or("unknown")
        )
    }];
    notes.push("durable: the settings make each commit wait for the redo log's flush (and the binary log's, when it is on) and each commit asked the device for at least 0.9 FLUSH or FUA writes where its cache is volatile; group commit: Binlog_commits over Binlog_group_commits".into());
    for c in d.configs.iter().filter(|c| !c.ignored.is_empty()) {
        notes.push(format!(
            "{}: the server did not take {}",
            c.name,
            c.ignored.join(", ")
        ));
    }
    if let Some(best) = &d.fastest_durable {
        let mut s = format!("fastest durable: {best}");
        if !d.faster_than.is_empty() {
            s.push_str(&format!(
                "; faster beyond chance and by 10% or more than {}",
                d.faster_than.join(", ")
            ));
        }
        if !d.not_distinguishable_from.is_empty() {
            s.push_str(&format!(
                "; not distinguishable on this host from {}",
                d.not_distinguishable_from.join(", ")
            ));
        }
        notes.push(s);
    }
    if !d.not_compared.is_empty() {
        notes.push(format!(
            "not compared (measured beside other work that took too large a share for their difference to be the settings'): {}",
            d.not_compared.join(", ")
        ));
    }
    notes.push(match d.device_fua {
        Some(false) => "this device has no FUA: an O_DSYNC or O_DIRECT log write still ends in a cache FLUSH (the kernel adds one), so no innodb_flush_method can make a durable commit cheaper here".into(),
        Some(true) => "this device accepts FUA writes: where the FUA column is above 0, the log's writes were made durable without a separate FLUSH".into(),
        None => "the device's FUA support is unknown".into(),
    });
    Table {
        id: "mariadb-durability",
        title: "MariaDB's durability paths (single-row commits and 10,000-row transactions)".into(),
        headers: vec![
            "configuration",
            "durable",
            "commits",
            "p50",
            "p99",
            "10k-row COMMIT p50",
            "FLUSH/commit",
            "FUA/commit",
            "syncs/commit",
            "writes/commit",
            "device FLUSH/commit",
            "group commit",
        ],
        rows,
        notes,
    }
}

/// With `--explain`: where a driver run's time went on the server, as `plumb load --explain`
/// words it; `phase`, an experiment's run (named so).
fn explain_table(w: &plumb_analyze::load::LoadReport, phase: Option<&str>) -> Option<Table> {
    use crate::explain_render as x;
    let (headers, rows) = x::table(w)?;
    let mut notes = vec![x::NOTE.to_string()];
    if let Some(t) = x::engine_title(w) {
        notes.push(t);
        notes.extend(x::engine_lines(w));
    }
    Some(Table {
        id: match (w.workload.as_str(), phase) {
            (_, Some(_)) => "explain-experiment",
            ("insert-single", _) => "explain-insert-single",
            ("insert-bulk", _) => "explain-insert-bulk",
            _ => "explain",
        },
        title: format!(
            "Where the server's time went (--explain): {}",
            phase.unwrap_or(&w.workload)
        ),
        headers,
        rows,
        notes,
    })
}

/// A run of plumb's own driver (a MariaDB lab's workload or insert loop): `plumb load`'s
/// table of transaction types, its figures and header under it.
fn workload_table(w: &plumb_analyze::load::LoadReport) -> Table {
    use crate::load_render as l;
    let id = match w.workload.as_str() {
        "tpcb" => "workload-tpcb",
        "insert-single" => "workload-insert-single",
        "insert-bulk" => "workload-insert-bulk",
        _ => "workload",
    };
    let mut notes: Vec<String> = l::header_lines(w).into_iter().skip(1).collect();
    notes.extend(
        l::headline_rows(w)
            .into_iter()
            .map(|(label, value, meaning)| format!("{label} {}: {meaning}", value.trim())),
    );
    notes.push(l::latency_note(w));
    notes.extend(l::failure_lines(w));
    if !w.checks.is_empty() {
        let held = w.checks.iter().filter(|c| c.violations == 0).count();
        notes.push(format!(
            "consistency after the run: {held} of {} conditions hold",
            w.checks.len()
        ));
    }
    Table {
        id,
        title: format!("Workload (plumb's driver): {}", l::what(w)),
        headers: l::TYPE_COLUMNS.to_vec(),
        rows: l::type_rows(w),
        notes,
    }
}

fn sev(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::Warn => "warn",
        Severity::Info => "info",
    }
}

/// The most pg_stat_io rows the report lists (the most I/O first).
const IO_ROWS: usize = 10;

/// PostgreSQL's count of its own I/O over pgbench: pg_stat_io's rows and the checkpoints,
/// and which version brings a view this server lacks.
fn server_io_table(s: &plumb_analyze::lab::ServerIo) -> Table {
    let avg = |time_ms: f64, n: f64| {
        if !s.io_timing || n <= 0.0 {
            MISSING.to_string()
        } else {
            latency_ms(time_ms / n)
        }
    };
    let total = |time_ms: f64, n: f64| {
        if !s.io_timing || n <= 0.0 {
            MISSING.to_string()
        } else {
            latency_ms(time_ms)
        }
    };
    let rows =
        s.io.iter()
            .take(IO_ROWS)
            .map(|r| {
                vec![
                    r.backend_type.clone(),
                    r.object.clone(),
                    r.context.clone(),
                    count(r.reads),
                    bytes(r.read_bytes as u64),
                    avg(r.read_time_ms, r.reads),
                    count(r.writes),
                    bytes(r.write_bytes as u64),
                    avg(r.write_time_ms, r.writes),
                    count(r.extends),
                    bytes(r.extend_bytes as u64),
                    count(r.fsyncs),
                    total(r.fsync_time_ms, r.fsyncs),
                    count(r.hits),
                    count(r.evictions),
                ]
            })
            .collect();
    let mut notes = Vec::new();
    if s.pg_major < 16 {
        notes.push(format!(
            "pg_stat_io arrives in PostgreSQL 16 (this is {}): the server's reads, writes, extends and fsyncs by backend type and context are not counted here",
            s.pg_major
        ));
    } else {
        if s.io.len() > IO_ROWS {
            notes.push(format!(
                "the {IO_ROWS} rows with the most I/O of {}",
                s.io.len()
            ));
        }
        notes.push(format!(
            "operations that reached the kernel, and buffer hits, as the server counted them over the run; bytes {}; {}",
            if s.pg_major >= 18 {
                "as PostgreSQL 18 counts them"
            } else {
                "are operations times op_bytes"
            },
            if s.io_timing {
                "track_io_timing is on: times per read and write measured"
            } else {
                "no times: track_io_timing is off on this server"
            }
        ));
    }
    let view = if s.pg_major >= 17 {
        "pg_stat_checkpointer".to_string()
    } else {
        "pg_stat_bgwriter; pg_stat_checkpointer arrives in PostgreSQL 17".to_string()
    };
    match &s.checkpoints {
        Some(c) if c.timed + c.requested > 0.0 => notes.push(format!(
            "checkpoints during the run: {} timed, {} requested; {} buffers written in {}, synced in {} ({view})",
            count(c.timed),
            count(c.requested),
            count(c.buffers_written),
            latency_ms(c.write_time_ms),
            latency_ms(c.sync_time_ms)
        )),
        Some(_) => notes.push(format!("no checkpoint during the run ({view})")),
        None => {}
    }
    Table {
        id: "server-io",
        title:
            "PostgreSQL's own I/O over pgbench (pg_stat_io, by backend type, object and context)"
                .into(),
        headers: vec![
            "backend type",
            "object",
            "context",
            "reads",
            "read",
            "per read",
            "writes",
            "written",
            "per write",
            "extends",
            "extended",
            "fsyncs",
            "fsync time",
            "hits",
            "evictions",
        ],
        rows,
        notes,
    }
}

fn text_table(out: &mut dyn Write, t: &Table) -> io::Result<()> {
    writeln!(out, "{}", t.title)?;
    // A table with no rows (a view the server lacks) is its notes alone.
    if !t.rows.is_empty() {
        crate::table::write_aligned(out, &t.headers, &t.rows)?;
    }
    for note in &t.notes {
        writeln!(out, "  - {note}")?;
    }
    writeln!(out)
}

impl Render for LabOutput<'_> {
    const KIND: &'static str = "lab";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let r = self.0;
        writeln!(out, "plumb lab")?;
        writeln!(out)?;
        crate::verdict_render::text(&verdict_block(r), out)?;
        for (k, v) in header_lines(r) {
            writeln!(out, "{k:<9} {v}")?;
        }
        writeln!(out)?;
        writeln!(out, "Findings")?;
        if r.findings.is_empty() {
            writeln!(out, "  none: nothing crossed a threshold")?;
        }
        for f in &r.findings {
            let mark = match f.severity {
                Severity::Critical => "!!",
                Severity::Warn => "! ",
                Severity::Info => "- ",
            };
            writeln!(
                out,
                "  {mark} [{}] {}",
                sev(f.severity),
                words::statement(f)
            )?;
            if let Some(x) = &f.experiment {
                writeln!(
                    out,
                    "       plumb's own experiment ({}), not your server's configuration",
                    words::said(x)
                )?;
            }
            for e in words::evidence(f) {
                writeln!(out, "       {e}")?;
            }
        }
        writeln!(out)?;
        for t in tables(r) {
            text_table(out, &t)?;
        }
        if !r.skipped.is_empty() {
            writeln!(out, "Not run")?;
            for s in &r.skipped {
                writeln!(out, "  - {s}")?;
            }
            writeln!(out)?;
        }
        writeln!(
            out,
            "report    {} (index.html, report.json, summary.txt, recording.plumb)",
            r.out_dir.display()
        )
    }
}

/// index.html: the verdict first, then the run, the findings, the storage, the workloads, the phases and the charts.
pub fn html(r: &LabReport, rec: &plumb_store::Recording) -> String {
    let mut h = Html::new();
    h.el("h1", &[], "plumb lab");
    crate::verdict_render::html(&verdict_block(r), &mut h);
    h.with("table", &[], |h| {
        for (k, v) in header_lines(r) {
            h.with("tr", &[], |h| {
                h.el("th", &[], k).el("td", &[], &v);
            });
        }
    });
    h.el("h2", &[("id", "findings")], "Findings");
    if r.findings.is_empty() {
        h.el("p", &[], "None: nothing crossed a threshold.");
    } else {
        h.with("table", &[], |h| {
            h.with("tr", &[], |h| {
                h.el("th", &[], "severity")
                    .el("th", &[], "finding")
                    .el("th", &[], "evidence");
            });
            for f in &r.findings {
                let class: &[(&str, &str)] = match f.severity {
                    Severity::Critical => &[("class", "crit")],
                    Severity::Warn => &[("class", "warn")],
                    Severity::Info => &[],
                };
                h.with("tr", class, |h| {
                    h.el("td", &[], sev(f.severity))
                        .el("td", &[], &words::statement(f))
                        .with("td", &[], |h| {
                            let evidence = words::evidence(f);
                            if let Some(x) = &f.experiment {
                                h.el(
                                    "em",
                                    &[],
                                    &format!(
                                        "plumb's own experiment ({}), not your server's configuration",
                                        words::said(x)
                                    ),
                                );
                                if !evidence.is_empty() {
                                    h.raw("<br>");
                                }
                            }
                            for (i, e) in evidence.iter().enumerate() {
                                if i > 0 {
                                    h.raw("<br>");
                                }
                                h.text(e);
                            }
                        });
                });
            }
        });
    }
    for t in tables(r) {
        h.el("h2", &[("id", t.id)], &t.title);
        if !t.rows.is_empty() {
            h.with("table", &[], |h| {
                h.with("tr", &[], |h| {
                    for c in &t.headers {
                        h.el("th", &[], c);
                    }
                });
                for row in &t.rows {
                    h.with("tr", &[], |h| {
                        for (i, c) in row.iter().enumerate() {
                            let class: &[(&str, &str)] =
                                if i > 0 { &[("class", "n")] } else { &[] };
                            h.el("td", class, c);
                        }
                    });
                }
            });
        }
        if !t.notes.is_empty() {
            h.list(&t.notes);
        }
        if t.id == "sweep" {
            if let Some(s) = &r.sweep {
                h.with("div", &[("class", "chart"), ("id", "sweep-chart")], |h| {
                    h.raw(&crate::io_render::sweep_chart(s));
                });
            }
        }
    }
    if !r.skipped.is_empty() {
        h.el("h2", &[], "Not run").list(&r.skipped);
    }
    let run = Run::new(rec, "lab".into());
    h.el("h2", &[("id", "recording")], "Recording");
    h.with("p", &[("class", "sub")], |h| {
        h.text("Every second through the lab; the marks are its phases. The raw recording is recording.plumb (")
            .el("code", &[], "plumb report")
            .text(", ")
            .el("code", &[], "plumb export")
            .text(").");
    });
    h.raw(&charts_html(std::slice::from_ref(&run)));
    page("plumb lab", &h.finish())
}
