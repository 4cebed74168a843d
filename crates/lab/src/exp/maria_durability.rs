//! MariaDB's durability paths on plumb's private MariaDB: each configuration of
//! `innodb_flush_log_at_trx_commit`, `innodb_flush_method` and the binary log set at a start of
//! the server and read back, then single-row commits (each timed) and 10,000-row transactions;
//! as root the server is traced over the single-row commits, so its syscalls and the FLUSH and
//! FUA requests per commit are its own, not the device's (which counts every neighbour).
//! MariaDB stopped counting its log fsyncs in 10.8: these counts are the evidence.

use super::{Context, Experiment, Outcome, Section};
use crate::error::Context as _;
use crate::{Plan, Result};
use plumb_analyze::lab::{BiosPerCommit, Latency, MariaConfig, MariaDurability, PerCommit};
use plumb_engine::mariadb::MariaSession;
use plumb_engine::private_maria::{self, MariaOptions};
use plumb_engine::Session as _;
use plumb_record::PhaseKind;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub struct MariaDurabilityExp;

/// A configuration: its short name and the server options it starts with.
pub type Config = (&'static str, Vec<(&'static str, &'static str)>);

/// How InnoDB writes its files, as 10.11 and earlier say it: one `innodb_flush_method`.
fn flush_method(m: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![("innodb_flush_method", m)]
}

/// The same on 11.0 and later, which deprecate `innodb_flush_method` for four switches
/// (MariaDB's own mapping: fsync is buffered data and log; O_DSYNC is write-through data and
/// log, unbuffered; O_DIRECT, the default, is all four off).
fn file_switches(
    buffering: &'static str,
    write_through: &'static str,
) -> Vec<(&'static str, &'static str)> {
    vec![
        ("innodb_log_file_buffering", buffering),
        ("innodb_data_file_buffering", buffering),
        ("innodb_log_file_write_through", write_through),
        ("innodb_data_file_write_through", write_through),
    ]
}

/// The server's version as numbers, from what it reports (`10.11.19-MariaDB-0+deb12u1`).
pub(crate) fn version_of(v: &str) -> Option<(u32, u32, u32)> {
    let mut n = v
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|x| x.parse::<u32>().ok());
    Some((n.next()??, n.next()??, n.next().flatten().unwrap_or(0)))
}

/// The configurations for a server of this version, in the order they run. 11.0 and later
/// (not tested against a live server here: Debian 12 ships 10.11) get the four switches that
/// replace `innodb_flush_method`, and from 11.0.6 `innodb_doublewrite=fast` too.
pub fn configs(version: &str) -> Vec<Config> {
    let v = version_of(version).unwrap_or((10, 11, 0));
    let eleven = v >= (11, 0, 0);
    let (buffered, through, direct) = if eleven {
        (
            ("trx_commit=1 buffered", file_switches("ON", "OFF")),
            ("trx_commit=1 write-through", file_switches("OFF", "ON")),
            ("trx_commit=1 direct", file_switches("OFF", "OFF")),
        )
    } else {
        (
            ("trx_commit=1 fsync", flush_method("fsync")),
            ("trx_commit=1 O_DSYNC", flush_method("O_DSYNC")),
            ("trx_commit=1 O_DIRECT", flush_method("O_DIRECT")),
        )
    };
    let opts = |trx: &'static str,
                base: &[(&'static str, &'static str)],
                extra: &[(&'static str, &'static str)]| {
        let mut o = vec![("innodb_flush_log_at_trx_commit", trx)];
        o.extend_from_slice(base);
        o.extend_from_slice(extra);
        o
    };
    let binlog = |sync: &'static str| [("log_bin", "plumb-bin"), ("sync_binlog", sync)];
    let d = &direct.1;
    let mut out: Vec<Config> = vec![
        (buffered.0, opts("1", &buffered.1, &[])),
        (through.0, opts("1", &through.1, &[])),
        (direct.0, opts("1", d, &[])),
    ];
    if v >= (11, 0, 6) {
        out.push((
            "trx_commit=1 doublewrite=fast",
            opts("1", d, &[("innodb_doublewrite", "fast")]),
        ));
    }
    out.push(("trx_commit=2", opts("2", d, &[])));
    out.push(("binlog sync_binlog=0", opts("1", d, &binlog("0"))));
    out.push(("binlog sync_binlog=1", opts("1", d, &binlog("1"))));
    out
}

/// The most configurations any version runs (for the time budget, before the version is
/// known).
const MAX_CONFIGS: u32 = 7;

/// The variables read back after each start, beside the ones asked for.
const READ_BACK: [&str; 5] = [
    "innodb_flush_log_at_trx_commit",
    "innodb_flush_method",
    "log_bin",
    "sync_binlog",
    "innodb_doublewrite",
];

/// Single-row commits per configuration: ten for each of the plan's single-row iterations.
fn single_commits(plan: &Plan) -> u32 {
    plan.single_iterations * 10
}

impl Experiment for MariaDurabilityExp {
    fn name(&self) -> &'static str {
        "MariaDB's durability paths"
    }

    fn precondition(&self, cx: &Context) -> Option<String> {
        cx.server.private_maria.is_none().then(|| {
            "MariaDB's durability paths: they restart the server with other settings, so only on plumb's private MariaDB".to_string()
        })
    }

    fn budget(&self, plan: &Plan) -> Duration {
        // A commit of up to 5 ms on a slow disk, a bulk transaction of up to 2 s, and the
        // restarts and traces around them.
        (Duration::from_millis(5) * single_commits(plan)
            + Duration::from_secs(2) * plan.bulk_iterations
            + Duration::from_secs(4))
            * MAX_CONFIGS
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        // Per configuration on this VM: about 0.5 s to restart, 1 s around the trace, 0.5 ms a
        // commit, 0.3 s a bulk transaction; 10.11's six configurations.
        vec![
            (Duration::from_millis(1500)
                + Duration::from_micros(500) * single_commits(plan)
                + Duration::from_millis(300) * plan.bulk_iterations)
                * configs("10.11").len() as u32,
        ]
    }

    fn findings(&self, r: &plumb_analyze::lab::LabReport) -> Vec<plumb_analyze::lab::Finding> {
        finding(r).into_iter().collect()
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        let Some(first) = cx.server.private_maria.clone() else {
            crate::refuse!("MariaDB's durability paths need plumb's private MariaDB");
        };
        let to_run = configs(&first.version);
        cx.progress.step(&format!(
            "MariaDB's durability paths: {} configurations",
            to_run.len()
        ));
        let dir = first
            .data
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        let buffer_pool = first.settings.first().map(|(_, v)| v.clone());
        let disks: Vec<String> = cx
            .storage
            .as_ref()
            .map(|s| s.disks.clone())
            .unwrap_or_default();
        let (device_fua, device_write_back) = device_cache(cx);
        let untraced_because = if !cx.config.trace {
            Some("--no-trace".to_string())
        } else if !plumb_sys::os::is_root() {
            Some("tracing needs root".to_string())
        } else {
            None
        };
        let mut configs = Vec::new();
        let mut samples: Vec<Vec<f64>> = Vec::new();
        let mut phases = Vec::new();
        let mut trace_error = None;
        for (name, settings) in &to_run {
            cx.stopped()?;
            let asked: Vec<(String, String)> = settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            private_maria::stop(&dir)?;
            let (r, _) = private_maria::start_or_find(
                &dir,
                &MariaOptions {
                    buffer_pool: buffer_pool.clone(),
                    settings: asked.clone(),
                },
            )
            .with_context(|| format!("starting the lab's MariaDB with {name}"))?;
            // The new server's I/O is the lab's own, and later steps find it.
            cx.recorder.also_own(r.pid);
            cx.server.local_pid = Some(r.pid);
            cx.server.private_maria = Some(r.clone());
            let open = cx
                .recorder
                .begin(&format!("durability {name}"), PhaseKind::Workload, None);
            let m = measure(cx, &r, name, &asked, &disks, untraced_because.is_none())?;
            phases.push(cx.recorder.end(open));
            if let Some(e) = m.trace_error {
                trace_error.get_or_insert(e);
            }
            samples.push(m.single_us);
            configs.push(m.config);
        }
        // The server as the lab started it again, for what runs after (the experiments).
        cx.stopped()?;
        private_maria::stop(&dir)?;
        let (r, _) = private_maria::start_or_find(
            &dir,
            &MariaOptions {
                buffer_pool,
                settings: Vec::new(),
            },
        )
        .context("starting the lab's MariaDB again with its own settings")?;
        cx.recorder.also_own(r.pid);
        cx.server.local_pid = Some(r.pid);
        cx.server.private_maria = Some(r);
        let traced = untraced_because.is_none() && trace_error.is_none();
        let mut d = MariaDurability {
            configs,
            traced,
            untraced_because: untraced_because.or(trace_error),
            device_fua,
            device_write_back,
            fastest_durable: None,
            faster_than: Vec::new(),
            not_compared: Vec::new(),
            not_distinguishable_from: Vec::new(),
        };
        rank(&mut d, &samples);
        Ok(Outcome {
            section: Section::MariaDurability(d),
            phases,
        })
    }
}

/// The data device's FUA support and whether its cache is volatile (`write back`).
fn device_cache(cx: &Context) -> (Option<bool>, Option<bool>) {
    let Some(s) = cx.storage.as_ref() else {
        return (None, None);
    };
    let q = s
        .disks
        .iter()
        .filter_map(|d| s.layers.iter().find(|l| &l.device.name == d))
        .find_map(|l| l.device.queue.as_ref());
    match q {
        Some(q) => (q.fua, q.write_cache.as_deref().map(|c| c.contains("back"))),
        None => (None, None),
    }
}

struct Measured {
    config: MariaConfig,
    single_us: Vec<f64>,
    trace_error: Option<String>,
}

/// One configuration on the running server `r`.
fn measure(
    cx: &mut Context,
    r: &plumb_engine::private::MariaRunning,
    name: &str,
    asked: &[(String, String)],
    disks: &[String],
    trace: bool,
) -> Result<Measured> {
    let target = plumb_engine::Target::new(&r.url());
    let ctx = || format!("MariaDB's durability paths, {name}");
    let mut s = MariaSession::connect(&target).with_context(ctx)?;
    for sql in [
        "CREATE DATABASE IF NOT EXISTS plumb_durability",
        "CREATE TABLE IF NOT EXISTS plumb_durability.t (id bigint AUTO_INCREMENT PRIMARY KEY, col1 varchar(2000) NOT NULL DEFAULT REPEAT('T', 2000)) ENGINE=InnoDB",
        "TRUNCATE plumb_durability.t",
    ] {
        s.execute(sql).with_context(ctx)?;
    }
    let mut names: Vec<&str> = READ_BACK.to_vec();
    names.extend(asked.iter().map(|(k, _)| k.as_str()));
    names.sort_unstable();
    names.dedup();
    let read_back = s.variables(&names).with_context(ctx)?;
    let ignored = ignored(asked, &read_back);
    let setting = |k: &str| read_back.get(k).map(String::as_str).unwrap_or("");
    let binlog = setting("log_bin").eq_ignore_ascii_case("ON");
    let durable_by_settings = setting("innodb_flush_log_at_trx_commit") == "1"
        && (!binlog || setting("sync_binlog") == "1");
    // A few commits first: the first ones open files and extend the table.
    for _ in 0..10 {
        s.execute("INSERT INTO plumb_durability.t () VALUES ()")
            .with_context(ctx)?;
    }
    let counters = ["binlog_commits", "binlog_group_commits"];
    let st0 = s.status(&counters).with_context(ctx)?;
    let (tracing, mut trace_error) = if trace {
        start_trace(r.pid)
    } else {
        (None, None)
    };
    let n = single_commits(&cx.plan);
    let (_, f0) = super::loops::disk_counts(disks);
    let mut single = Vec::with_capacity(n as usize);
    for _ in 0..n {
        cx.stopped()?;
        let t = Instant::now();
        s.execute("INSERT INTO plumb_durability.t () VALUES ()")
            .with_context(ctx)?;
        single.push(t.elapsed().as_micros() as u64);
    }
    let (_, f1) = super::loops::disk_counts(disks);
    let traced = match tracing.map(|t| t.finish("commits ended")) {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            trace_error = Some(format!("{e:#}"));
            None
        }
        None => None,
    };
    let st1 = s.status(&counters).with_context(ctx)?;
    let d = |k: &str| Some(st1.get(k)? - st0.get(k)?);
    let group_commit_ratio = if binlog {
        d("binlog_commits")
            .zip(d("binlog_group_commits"))
            .filter(|(_, g)| *g > 0.0)
            .map(|(c, g)| c / g)
    } else {
        None
    };
    // The 10,000-row transactions, each COMMIT timed apart.
    let (mut commit, mut whole) = (Vec::new(), Vec::new());
    let (_, b0) = super::loops::disk_counts(disks);
    for _ in 0..cx.plan.bulk_iterations {
        cx.stopped()?;
        let t = Instant::now();
        s.execute("START TRANSACTION").with_context(ctx)?;
        s.execute(
            "INSERT INTO plumb_durability.t (col1) SELECT REPEAT('T', 2000) FROM seq_1_to_10000",
        )
        .with_context(ctx)?;
        let c = Instant::now();
        s.execute("COMMIT").with_context(ctx)?;
        commit.push(c.elapsed().as_micros() as u64);
        whole.push(t.elapsed().as_micros() as u64);
    }
    let (_, b1) = super::loops::disk_counts(disks);
    s.execute("DROP DATABASE plumb_durability")
        .with_context(ctx)?;
    let per = |a: Option<u64>, b: Option<u64>, k: u32| {
        a.zip(b)
            .map(|(a, b)| b.saturating_sub(a) as f64 / k.max(1) as f64)
    };
    let k = n.max(1) as f64;
    let mut config = MariaConfig {
        name: name.to_string(),
        asked: asked.iter().cloned().collect(),
        read_back,
        ignored,
        durable_by_settings,
        single: Latency::from_us(&single),
        bulk_commit: Latency::from_us(&commit),
        bulk_transaction: Latency::from_us(&whole),
        syscalls_per_commit: Vec::new(),
        sync_calls_per_commit: None,
        write_calls_per_commit: None,
        server_bios_per_commit: None,
        device_flushes_per_commit: per(f0, f1, n),
        device_flushes_per_bulk: per(b0, b1, cx.plan.bulk_iterations),
        group_commit_ratio,
        trace_lost: false,
    };
    if let Some(t) = &traced {
        add_traced(&mut config, t, k);
    }
    Ok(Measured {
        config,
        single_us: single.iter().map(|v| *v as f64).collect(),
        trace_error,
    })
}

/// The server's threads traced over the single-row commits (None, and why, when they cannot
/// be).
fn start_trace(pid: u32) -> (Option<plumb_record::trace::Polled>, Option<String>) {
    let root = plumb_sys::Root::host();
    match plumb_record::trace::Session::server(&root, pid) {
        Ok((t, _)) => (Some(plumb_record::trace::Polled::start(t)), None),
        Err(e) => (None, Some(format!("{e:#}"))),
    }
}

/// What the kernel saw of the server over `k` commits, per commit: its busiest calls, its
/// sync and write calls, its block requests (FLUSH and FUA among them).
fn add_traced(config: &mut MariaConfig, t: &plumb_analyze::trace::TraceReport, k: f64) {
    let mut rows: Vec<&plumb_analyze::trace::SyscallRow> = t.syscalls.iter().collect();
    rows.sort_by(|x, y| y.calls.cmp(&x.calls).then(x.name.cmp(&y.name)));
    config.syscalls_per_commit = rows
        .iter()
        .take(8)
        .map(|r| PerCommit {
            name: r.name.clone(),
            per_commit: r.calls as f64 / k,
        })
        .collect();
    config.sync_calls_per_commit = Some(plumb_analyze::trace::sync_calls(&t.syscalls) as f64 / k);
    config.write_calls_per_commit = Some(plumb_analyze::trace::write_calls(&t.syscalls) as f64 / k);
    let mut bios = BiosPerCommit::default();
    for p in t.processes.iter().filter_map(|p| p.block.as_ref()) {
        bios.writes += p.bios.writes as f64 / k;
        bios.flushes += p.bios.flushes as f64 / k;
        bios.fua_writes += p.bios.fua_writes as f64 / k;
    }
    config.server_bios_per_commit = Some(bios);
    let l = &t.lost;
    config.trace_lost = l.syscall_updates + l.sched_updates + l.processes + l.block_events > 0;
}

/// The settings that read back with another value than asked (case and MariaDB's spellings
/// of on/off aside; `log_bin` asks for a file name and reads back ON).
fn ignored(asked: &[(String, String)], read: &BTreeMap<String, String>) -> Vec<String> {
    asked
        .iter()
        .filter(|(k, v)| {
            let got = read.get(k.as_str()).map(String::as_str).unwrap_or("");
            let want = if k == "log_bin" { "ON" } else { v.as_str() };
            !got.eq_ignore_ascii_case(want)
        })
        .map(|(k, v)| {
            format!(
                "{k}={v} (read back {})",
                read.get(k.as_str())
                    .map(String::as_str)
                    .unwrap_or("nothing")
            )
        })
        .collect()
}

/// The fastest durable configuration by its single-row commits' median, and whether it is
/// faster than each other durable one beyond chance and a 10% floor.
fn rank(d: &mut MariaDurability, samples: &[Vec<f64>]) {
    let durable: Vec<usize> = (0..d.configs.len())
        .filter(|&i| plumb_analyze::lab::maria_durable(&d.configs[i], d.device_write_back))
        .collect();
    let median = |i: usize| plumb_analyze::stats::median(&samples[i]).unwrap_or(f64::MAX);
    let Some(&best) = durable
        .iter()
        .min_by(|a, b| median(**a).total_cmp(&median(**b)))
    else {
        return;
    };
    d.fastest_durable = Some(d.configs[best].name.clone());
    for &i in durable.iter().filter(|&&i| i != best) {
        let name = d.configs[i].name.clone();
        match plumb_analyze::stats::larger_beyond_noise(&samples[best], &samples[i], 0.10) {
            Some(true) => d.faster_than.push(name),
            _ => d.not_distinguishable_from.push(name),
        }
    }
}

/// No comparison from configurations measured beside other work: once the lab's windows are
/// graded, a configuration whose window (or the fastest one's) was disturbed by a share too
/// large against the difference between their medians is moved to `not_compared`; the section,
/// the finding and the verdict read the same lists. With nothing left compared, no
/// configuration is called the fastest.
pub(crate) fn withhold_disturbed(
    d: &mut plumb_analyze::lab::MariaDurability,
    windows: &[plumb_analyze::lab::Window],
) {
    let Some(best) = d.fastest_durable.clone() else {
        return;
    };
    let window = |name: &str| {
        let phase = format!("durability {name}");
        windows
            .iter()
            .find(|w| w.phase == phase)
            .and_then(|w| w.interference.as_ref())
    };
    let p50 = |name: &str| {
        d.configs
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.single.as_ref())
            .map(|l| l.p50_ms)
    };
    let stands = |other: &str, judged_faster: bool| {
        // The difference claimed: a "faster" one's size; "not distinguishable" claims none, so
        // any disturbance withholds it.
        let effect = match (judged_faster, p50(&best), p50(other)) {
            (true, Some(b), Some(o)) if b > 0.0 => (o / b - 1.0) * 100.0,
            _ => 0.0,
        };
        [window(&best), window(other)]
            .into_iter()
            .flatten()
            .all(|i| i.effect_stands(effect))
    };
    let mut not_compared = Vec::new();
    let faster: Vec<String> = std::mem::take(&mut d.faster_than);
    for name in faster {
        if stands(&name, true) {
            d.faster_than.push(name);
        } else {
            not_compared.push(name);
        }
    }
    let tied: Vec<String> = std::mem::take(&mut d.not_distinguishable_from);
    for name in tied {
        if stands(&name, false) {
            d.not_distinguishable_from.push(name);
        } else {
            not_compared.push(name);
        }
    }
    if !not_compared.is_empty() && d.faster_than.is_empty() && d.not_distinguishable_from.is_empty()
    {
        d.fastest_durable = None;
    }
    d.not_compared = not_compared;
}

/// Which configuration is durable on this device, which is fastest beyond the spread, and
/// whether the device's FUA could help.
pub fn finding(r: &plumb_analyze::lab::LabReport) -> Option<plumb_analyze::lab::Finding> {
    use plumb_analyze::lab::{Evidence, Finding, Severity};
    use plumb_analyze::said::Said;
    use plumb_analyze::{Level, Note, WithFacts};
    let d = r.mariadb_durability.as_ref()?;
    let wb = d.device_write_back;
    let durable: Vec<&str> = d
        .configs
        .iter()
        .filter(|c| plumb_analyze::lab::maria_durable(c, wb))
        .map(|c| c.name.as_str())
        .collect();
    let not_durable: Vec<Note> = d
        .configs
        .iter()
        .filter(|c| !plumb_analyze::lab::maria_durable(c, wb))
        .map(|c| {
            let mut n = Note::new(Level::Info, "maria-not-durable")
                .text("configuration", c.name.clone())
                .text("why", why_not_durable(c));
            if let Some(x) = c.durable_requests_per_commit() {
                n = n.ratio("requests_per_commit", x);
            }
            n
        })
        .collect();
    let mut f = Finding::new(Severity::Info, "mariadb-durability")
        .text("durable", durable.join(", "))
        .notes("not_durable", not_durable)
        .text("faster_than", d.faster_than.join(", "))
        .text("not_distinguishable", d.not_distinguishable_from.join(", "))
        .text("not_compared", d.not_compared.join(", "))
        .text(
            "fua",
            match d.device_fua {
                Some(true) => "yes",
                Some(false) => "no",
                None => "unknown",
            },
        )
        .text("whose", if d.traced { "server" } else { "device" })
        .experiment(Said::new("mariadb-durability-settings"));
    if let Some(best) = d
        .configs
        .iter()
        .find(|c| Some(&c.name) == d.fastest_durable.as_ref())
    {
        f = f.text("fastest", best.name.clone());
        if let Some(l) = &best.single {
            f = f.secs("fastest_p50_s", l.p50_ms / 1000.0);
        }
    }
    let evidence = d
        .configs
        .iter()
        .map(|c| {
            let mut s = Said::new("maria-config-figures").text("configuration", c.name.clone());
            if let Some(l) = &c.single {
                s = s.secs("p50_s", l.p50_ms / 1000.0);
            }
            if let Some(b) = &c.server_bios_per_commit {
                s = s
                    .ratio("flushes_per_commit", b.flushes)
                    .ratio("fua_per_commit", b.fua_writes);
            } else if let Some(x) = c.device_flushes_per_commit {
                s = s.ratio("device_flushes_per_commit", x);
            }
            if let Some(x) = c.sync_calls_per_commit {
                s = s.ratio("syncs_per_commit", x);
            }
            Evidence::Said(s)
        })
        .collect();
    let phases = d
        .configs
        .iter()
        .map(|c| format!("durability {}", c.name))
        .collect();
    Some(f.evidence(evidence).phases(phases))
}

/// Why a configuration is not durable, as a code: the redo log is not flushed at commit
/// (`innodb_flush_log_at_trx_commit` not 1), the binary log is not (`sync_binlog` not 1), or the
/// commits did not ask the device for a FLUSH or FUA write each.
fn why_not_durable(c: &MariaConfig) -> &'static str {
    let v = |k: &str| c.read_back.get(k).map(String::as_str).unwrap_or("");
    if v("innodb_flush_log_at_trx_commit") != "1" {
        "redo-not-flushed"
    } else if v("log_bin").eq_ignore_ascii_case("ON") && v("sync_binlog") != "1" {
        "binlog-not-flushed"
    } else {
        "no-request"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(c: &[Config]) -> Vec<&str> {
        c.iter().map(|(n, _)| *n).collect()
    }

    #[test]
    fn versions_are_read_from_what_the_server_reports() {
        assert_eq!(version_of("10.11.19-MariaDB-0+deb12u1"), Some((10, 11, 19)));
        assert_eq!(version_of("11.4.2-MariaDB-ubu2404-log"), Some((11, 4, 2)));
        assert_eq!(version_of("11.0"), Some((11, 0, 0)));
        assert_eq!(version_of(""), None);
        assert_eq!(version_of("MariaDB"), None);
    }

    #[test]
    fn ten_eleven_sets_the_flush_method_and_eleven_its_four_switches() {
        let old = configs("10.11.19-MariaDB-0+deb12u1");
        assert_eq!(
            names(&old),
            [
                "trx_commit=1 fsync",
                "trx_commit=1 O_DSYNC",
                "trx_commit=1 O_DIRECT",
                "trx_commit=2",
                "binlog sync_binlog=0",
                "binlog sync_binlog=1"
            ]
        );
        assert!(old[1].1.contains(&("innodb_flush_method", "O_DSYNC")));
        assert!(old
            .iter()
            .all(|(_, o)| !o.iter().any(|(k, _)| k.contains("write_through"))));
        // An unknown version is taken for the one tested here.
        assert_eq!(names(&configs("?")), names(&old));

        let new = configs("11.4.2-MariaDB");
        assert_eq!(new.len() as u32, MAX_CONFIGS);
        assert!(new
            .iter()
            .all(|(_, o)| !o.iter().any(|(k, _)| *k == "innodb_flush_method")));
        let through = &new[1].1;
        assert!(through.contains(&("innodb_log_file_write_through", "ON")));
        assert!(through.contains(&("innodb_data_file_write_through", "ON")));
        assert!(through.contains(&("innodb_log_file_buffering", "OFF")));
        assert!(new[0].1.contains(&("innodb_data_file_buffering", "ON")));
        assert!(names(&new).contains(&"trx_commit=1 doublewrite=fast"));
        let last = &new.last().unwrap().1;
        assert!(last.contains(&("sync_binlog", "1")) && last.contains(&("log_bin", "plumb-bin")));
        // doublewrite=fast came in 11.0.6.
        assert!(!names(&configs("11.0.5-MariaDB")).contains(&"trx_commit=1 doublewrite=fast"));
        // Every configuration asks for trx_commit first, and each name once.
        for c in [&old, &new] {
            assert!(c
                .iter()
                .all(|(_, o)| o[0].0 == "innodb_flush_log_at_trx_commit"));
            let mut n = names(c);
            n.sort_unstable();
            n.dedup();
            assert_eq!(n.len(), c.len());
        }
    }

    #[test]
    fn a_setting_the_server_did_not_take_is_named() {
        let asked = vec![
            (
                "innodb_log_file_write_through".to_string(),
                "ON".to_string(),
            ),
            (
                "innodb_flush_log_at_trx_commit".to_string(),
                "1".to_string(),
            ),
            ("log_bin".to_string(), "plumb-bin".to_string()),
        ];
        let read: BTreeMap<String, String> = [
            ("innodb_log_file_write_through", "OFF"),
            ("innodb_flush_log_at_trx_commit", "1"),
            ("log_bin", "ON"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            ignored(&asked, &read),
            ["innodb_log_file_write_through=ON (read back OFF)"]
        );
    }
}
