//! `plumb mem`: the kernel's truth about a database's memory next to what the engine believes,
//! and what an engine will assume about the memory it may use here.

pub use crate::memfig::MemFigures;
use crate::said::Said;
use crate::{Level, Note, WithFacts};
use plumb_sys::cgroup::{CgroupMode, ProcessCgroups};
use plumb_sys::engine_conf::EngineSettings;
use plumb_sys::memsnap::{EngineSample, MemSample, ProcMemSample};
use plumb_sys::pressure::Psi;
use plumb_sys::smaps::{EngineKind, Mapping};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostMem {
    pub total_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    pub swap_used_bytes: Option<u64>,
    /// Rates over the sampling interval (None for a single sample).
    pub swap_in_bytes_per_s: Option<f64>,
    pub swap_out_bytes_per_s: Option<f64>,
    pub major_faults_per_s: Option<f64>,
    pub pressure: Option<Psi>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CgroupMem {
    pub version: u8,
    pub path: String,
    /// The tightest limit up the tree, if below host RAM.
    pub limit_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    pub anon_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub failcnt: Option<u64>,
    pub oom_kills: Option<u64>,
    pub pressure: Option<Psi>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcMem {
    pub pid: u32,
    pub name: Option<String>,
    #[serde(flatten)]
    pub memory: MemFigures,
    pub largest_mappings: Vec<Mapping>,
    pub cgroup: Option<CgroupMem>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineMem {
    pub engine: EngineKind,
    pub main_pid: u32,
    pub processes: usize,
    /// Private memory of all its processes: resident (RssAnon) and in swap (VmSwap), summed.
    pub private_resident_bytes: u64,
    pub private_swapped_bytes: u64,
    /// What the engine believes it holds in memory as cache, and where that figure comes from.
    pub believed_cache_bytes: Option<u64>,
    #[serde(serialize_with = "crate::said::opt_words")]
    pub belief_source: Option<Said>,
    /// Of that cache, what the kernel says is resident and in swap.
    pub cache_resident_bytes: Option<u64>,
    pub cache_swapped_bytes: Option<u64>,
    pub settings: EngineSettings,
    pub assumption: Assumption,
}

/// What an engine will take as its memory here, and whether its caches fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assumption {
    pub engine: EngineKind,
    pub host_memory_bytes: u64,
    pub cgroup_limit_bytes: Option<u64>,
    pub cgroup_mode: CgroupMode,
    /// SQL Server: the memory it will use (the "Detected N MB of RAM" figure), in MB.
    pub mssql_detected_mb: Option<u64>,
    /// SQL Server builds before 2022 CU20 on a cgroup-v2 host: they ignore the limit.
    pub mssql_old_build_detected_mb: Option<u64>,
    /// The engine's main cache (shared_buffers, the InnoDB buffer pool, the SQL Server target).
    pub cache_bytes: Option<u64>,
    pub cache_name: String,
    /// A rough ceiling on what the engine may use (PostgreSQL: shared_buffers plus work_mem per
    /// connection plus maintenance_work_mem).
    pub peak_estimate_bytes: Option<u64>,
    pub statements: Vec<Note>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemReport {
    pub interval_s: Option<f64>,
    pub host: HostMem,
    pub engines: Vec<EngineMem>,
    pub processes: Vec<ProcMem>,
    pub findings: Vec<Note>,
    pub missing: Vec<plumb_sys::process::Missing>,
}

fn mb(b: u64) -> u64 {
    b / (1024 * 1024)
}

/// Overrides for `plumb mem assume`: values the user gives win over what was read.
#[derive(Debug, Clone, Default)]
pub struct AssumeInputs {
    pub host_memory_bytes: Option<u64>,
    pub cgroup_limit_bytes: Option<u64>,
    pub memory_limit_mb: Option<u64>,
    pub shared_buffers_bytes: Option<u64>,
    pub work_mem_bytes: Option<u64>,
    pub max_connections: Option<u64>,
    pub innodb_buffer_pool_size_bytes: Option<u64>,
}

/// A setting given for another engine than the one assumed: refused, never ignored without a
/// word. `setting` is the engine's own name for it (`shared_buffers`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{setting} is a {} setting", of.name())]
pub struct ForeignSetting {
    pub setting: &'static str,
    pub of: EngineKind,
}

impl AssumeInputs {
    /// The first setting given that `kind` does not use.
    pub fn foreign(&self, kind: EngineKind) -> Option<ForeignSetting> {
        [
            (
                "memory_limit_mb",
                self.memory_limit_mb.is_some(),
                EngineKind::Mssql,
            ),
            (
                "shared_buffers",
                self.shared_buffers_bytes.is_some(),
                EngineKind::Postgres,
            ),
            (
                "work_mem",
                self.work_mem_bytes.is_some(),
                EngineKind::Postgres,
            ),
            (
                "max_connections",
                self.max_connections.is_some(),
                EngineKind::Postgres,
            ),
            (
                "innodb_buffer_pool_size",
                self.innodb_buffer_pool_size_bytes.is_some(),
                EngineKind::Mariadb,
            ),
        ]
        .into_iter()
        .find(|(_, given, of)| *given && *of != kind)
        .map(|(setting, _, of)| ForeignSetting { setting, of })
    }

    /// The settings read, with the ones given over them (a given size names its source).
    pub fn over(&self, mut s: EngineSettings) -> EngineSettings {
        if let Some(v) = self.memory_limit_mb {
            s.memory_limit_mb = Some(v);
            s.sources.push("--memory-limit-mb".into());
        }
        if let Some(v) = self.shared_buffers_bytes {
            s.shared_buffers_bytes = Some(v);
            s.sources.push("--shared-buffers".into());
        }
        s.work_mem_bytes = self.work_mem_bytes.or(s.work_mem_bytes);
        s.max_connections = self.max_connections.or(s.max_connections);
        s.innodb_buffer_pool_size_bytes = self
            .innodb_buffer_pool_size_bytes
            .or(s.innodb_buffer_pool_size_bytes);
        s
    }
}

/// What an engine of `kind` will assume on this host (`here`, read by
/// `plumb_sys::memsnap::assume_host`), with the inputs given over what was read.
pub fn assume_here(
    kind: EngineKind,
    here: &plumb_sys::memsnap::AssumeHost,
    inputs: &AssumeInputs,
) -> Assumption {
    let host = inputs.host_memory_bytes.unwrap_or(here.mem_total_bytes);
    let limit = inputs
        .cgroup_limit_bytes
        .or_else(|| crate::os::applied_memory_limit(&here.cgroups, Some(host)));
    let settings = inputs.over(here.settings.clone());
    assume(kind, host, limit, here.cgroup_mode, &settings)
}

/// The engine rules (facts/memory.md §1).
pub fn assume(
    engine: EngineKind,
    host_memory_bytes: u64,
    cgroup_limit_bytes: Option<u64>,
    cgroup_mode: CgroupMode,
    settings: &EngineSettings,
) -> Assumption {
    let visible = cgroup_limit_bytes.map_or(host_memory_bytes, |l| l.min(host_memory_bytes));
    let mut st = Vec::new();
    // The cgroup limit, where the words mention it.
    let limit = |n: Note| match cgroup_limit_bytes {
        Some(l) => n.bytes("cgroup_limit_bytes", l as f64),
        None => n,
    };
    let mut a = Assumption {
        engine,
        host_memory_bytes,
        cgroup_limit_bytes,
        cgroup_mode,
        mssql_detected_mb: None,
        mssql_old_build_detected_mb: None,
        cache_bytes: None,
        cache_name: String::new(),
        peak_estimate_bytes: None,
        statements: Vec::new(),
    };
    match engine {
        EngineKind::Mssql => {
            a.cache_name = "memory limit (memorylimitmb)".into();
            let eighty = |b: u64| ((b as f64 / 1048576.0) * 0.8).round() as u64;
            let detected = match settings.memory_limit_mb {
                Some(m) => {
                    let capped = m.min(mb(host_memory_bytes));
                    st.push(
                        Note::new(Level::Info, "mssql-memory-limit-set")
                            .count("memory_limit_mb", m as f64)
                            .count("used_mb", capped as f64),
                    );
                    capped
                }
                None => {
                    let d = eighty(visible);
                    st.push(limit(
                        Note::new(Level::Info, "mssql-memory-from-host")
                            .bytes("host_memory_bytes", host_memory_bytes as f64)
                            .count("detected_mb", d as f64),
                    ));
                    d
                }
            };
            a.mssql_detected_mb = Some(detected);
            a.cache_bytes = Some(detected * 1048576);
            if cgroup_mode == CgroupMode::V2
                && cgroup_limit_bytes.is_some()
                && settings.memory_limit_mb.is_none()
            {
                let old = eighty(host_memory_bytes);
                a.mssql_old_build_detected_mb = Some(old);
                st.push(
                    Note::new(Level::Warn, "mssql-old-build-ignores-cgroup-v2")
                        .count("old_build_mb", old as f64),
                );
            }
            match (cgroup_limit_bytes, settings.memory_limit_mb) {
                (Some(l), Some(m)) if m * 1048576 >= l => st.push(limit(
                    Note::new(Level::Warn, "mssql-limit-no-headroom")
                        .count("memory_limit_mb", m as f64)
                        .count("advised_mb", (mb(l) * 85 / 100) as f64),
                )),
                (Some(l), Some(m)) if (m as f64) > mb(l) as f64 * 0.9 => st.push(limit(
                    Note::new(Level::Warn, "mssql-limit-above-90-pct")
                        .count("memory_limit_mb", m as f64)
                        .count("advised_mb", (mb(l) * 85 / 100) as f64),
                )),
                (None, _) => st.push(
                    Note::new(Level::Info, "mssql-no-container-limit")
                        .count("detected_mb", detected as f64),
                ),
                _ => {}
            }
            st.push(Note::new(Level::Info, "mssql-max-server-memory"));
        }
        EngineKind::Postgres => {
            a.cache_name = "shared_buffers".into();
            let sb = settings.shared_buffers_bytes.unwrap_or(128 << 20);
            a.cache_bytes = Some(sb);
            let conns = settings.max_connections.unwrap_or(100);
            let wm = settings.work_mem_bytes.unwrap_or(4 << 20);
            let mwm = settings.maintenance_work_mem_bytes.unwrap_or(64 << 20);
            let peak = sb + conns * wm + mwm;
            a.peak_estimate_bytes = Some(peak);
            st.push(
                Note::new(Level::Info, "postgres-memory-model")
                    .bytes("shared_buffers_bytes", sb as f64)
                    .count("max_connections", conns as f64)
                    .bytes("work_mem_bytes", wm as f64)
                    .bytes("peak_bytes", peak as f64),
            );
            let visible_note = |n: Note| n.bytes("visible_bytes", visible as f64);
            if sb >= visible {
                st.push(visible_note(
                    Note::new(Level::Warn, "shared-buffers-above-memory")
                        .bytes("shared_buffers_bytes", sb as f64),
                ));
            } else if sb as f64 > visible as f64 * 0.4 {
                st.push(limit(visible_note(
                    Note::new(Level::Warn, "shared-buffers-above-40-pct")
                        .bytes("shared_buffers_bytes", sb as f64)
                        .bytes("advised_bytes", (visible / 4) as f64),
                )));
            }
            if peak > visible {
                st.push(visible_note(
                    Note::new(Level::Warn, "postgres-peak-above-memory")
                        .bytes("peak_bytes", peak as f64),
                ));
            }
        }
        EngineKind::Mariadb => {
            a.cache_name = "innodb_buffer_pool_size".into();
            let pool = settings.innodb_buffer_pool_size_bytes.unwrap_or(128 << 20);
            a.cache_bytes = Some(pool);
            let pool_note = |n: Note| {
                n.bytes("buffer_pool_bytes", pool as f64)
                    .bytes("visible_bytes", visible as f64)
            };
            st.push(pool_note(
                Note::new(Level::Info, "mariadb-memory-model")
                    .bytes("advised_bytes", (visible * 65 / 100) as f64),
            ));
            if pool >= visible {
                st.push(pool_note(Note::new(
                    Level::Warn,
                    "buffer-pool-above-memory",
                )));
            } else if pool as f64 > visible as f64 * 0.75 {
                st.push(pool_note(Note::new(
                    Level::Warn,
                    "buffer-pool-above-75-pct",
                )));
            }
            if cgroup_mode != CgroupMode::V2 {
                st.push(Note::new(Level::Info, "innodb-no-shrink-here"));
            }
        }
    }
    a.statements = st;
    a
}

fn cgroup_mem(cg: &ProcessCgroups, mem_total: Option<u64>) -> Option<CgroupMem> {
    let m = cg.memory.as_ref()?;
    Some(CgroupMem {
        version: m.at.version,
        path: m.at.cgroup_path.clone(),
        limit_bytes: crate::os::applied_memory_limit(cg, mem_total),
        usage_bytes: m.usage_bytes,
        anon_bytes: m.anon_bytes,
        file_bytes: m.file_bytes,
        shmem_bytes: m.shmem_bytes,
        swap_bytes: m.swap_bytes,
        failcnt: m.failcnt,
        oom_kills: m.oom_kill_events,
        pressure: cg.pressure.as_ref().and_then(|p| p.memory.clone()),
    })
}

fn proc_mem(p: &ProcMemSample, mem_total: Option<u64>) -> ProcMem {
    let st = p.sample.status.as_ref();
    let sm = p.sample.smaps_rollup.as_ref();
    ProcMem {
        pid: p.sample.pid,
        name: st
            .and_then(|s| s.name.clone())
            .or_else(|| p.sample.stat.as_ref().map(|s| s.comm.clone())),
        memory: MemFigures::of(st, sm),
        largest_mappings: p.largest.clone(),
        cgroup: cgroup_mem(&p.cgroups, mem_total),
    }
}

fn rate(prev: Option<u64>, cur: Option<u64>, secs: f64, mult: f64) -> Option<f64> {
    match (prev, cur) {
        // A counter that went backwards (reset) gives no rate rather than a negative one.
        (Some(a), Some(b)) if b >= a && secs > 0.0 => Some((b - a) as f64 * mult / secs),
        _ => None,
    }
}

fn engine_mem(
    e: &EngineSample,
    main: Option<&ProcMemSample>,
    host: u64,
    mode: CgroupMode,
    mem_total: Option<u64>,
) -> EngineMem {
    // (The main process's sample gives the cgroup limit and, for private pools, RssAnon.)
    let limit = main.and_then(|m| crate::os::applied_memory_limit(&m.cgroups, mem_total));
    let assumption = assume(e.procs.kind, host, limit, mode, &e.settings);
    let (mut believed, mut source, mut res, mut swp) = (None, None, None, None);
    match e.procs.kind {
        EngineKind::Postgres => {
            // shared_buffers lives in the postmaster's largest shared anonymous mapping.
            if let Some(seg) = &e.shared_segment {
                believed = Some(seg.size_bytes);
                let mut said = Said::new("belief-shared-segment").text(
                    "segment",
                    if seg.name.is_empty() {
                        "anonymous"
                    } else {
                        &seg.name
                    },
                );
                if let Some(sb) = e.settings.shared_buffers_bytes {
                    said = said.bytes("shared_buffers_bytes", sb as f64);
                }
                if !seg.resident_exact {
                    said = said.text("resident", "lower bound");
                }
                source = Some(said);
                swp = Some(seg.swap_bytes);
                res = Some(seg.resident_bytes);
            }
        }
        EngineKind::Mssql | EngineKind::Mariadb => {
            // Private pools: the engine believes its configured cache is in memory.
            believed = assumption.cache_bytes;
            source =
                Some(Said::new("belief-configured").text("cache", assumption.cache_name.clone()));
            if let Some(st) = main.and_then(|m| m.sample.status.as_ref()) {
                res = st.rss_anon_bytes;
                swp = st.vm_swap_bytes;
            }
        }
    }
    EngineMem {
        engine: e.procs.kind,
        main_pid: e.procs.main_pid,
        processes: e.procs.pids.len(),
        private_resident_bytes: e.private_resident_bytes,
        private_swapped_bytes: e.private_swap_bytes,
        believed_cache_bytes: believed,
        belief_source: source,
        cache_resident_bytes: res,
        cache_swapped_bytes: swp,
        settings: e.settings.clone(),
        assumption,
    }
}

/// What the server itself says its cache holds, from its own figures (an engine snapshot's
/// gauges): InnoDB's Innodb_buffer_pool_bytes_data, SQL Server's Database Cache Memory counter,
/// PostgreSQL's pg_buffercache (buffers holding a page). None when the server gives none.
pub(crate) fn live_cache_belief(
    kind: EngineKind,
    gauges: &std::collections::BTreeMap<String, f64>,
    block_size: u64,
) -> Option<(u64, Said)> {
    let (v, what) = match kind {
        EngineKind::Mariadb => (
            *gauges.get("innodb.buffer_pool_data_bytes")?,
            "belief-innodb-data",
        ),
        EngineKind::Mssql => (
            gauges
                .iter()
                .find(|(k, _)| k.ends_with(".database_cache_memory_bytes"))
                .map(|(_, v)| *v)?,
            "belief-mssql-database-cache",
        ),
        EngineKind::Postgres => (
            gauges.get("buffercache.used_buffers")? * block_size as f64,
            "belief-pg-buffercache",
        ),
    };
    (v.is_finite() && v >= 0.0).then(|| (v as u64, Said::new(what)))
}

/// Set the server's own figure for its cache (from `--engine`'s counters) in the report, or
/// say why it could not be: the server could not be read, has no such figure, or runs no
/// process here to set it beside.
pub fn apply_engine(
    rep: &mut MemReport,
    kind: plumb_engine::Kind,
    block_size: u64,
    snapshot: Result<&plumb_engine::Snapshot, String>,
) {
    let kind = match kind {
        plumb_engine::Kind::Postgres => EngineKind::Postgres,
        plumb_engine::Kind::Mariadb => EngineKind::Mariadb,
        plumb_engine::Kind::Sqlserver => EngineKind::Mssql,
    };
    let note = match snapshot {
        Ok(s) => match live_cache_belief(kind, &s.gauges, block_size) {
            Some(b) => {
                if apply_live_belief(rep, kind, b) {
                    None
                } else {
                    Some(Note::new(Level::Info, "engine-process-not-found"))
                }
            }
            None => {
                Some(Note::new(Level::Info, "engine-no-cache-figure").text("engine", kind.name()))
            }
        },
        Err(e) => Some(Note::new(Level::Info, "engine-unreadable").text("error", e)),
    };
    rep.findings.extend(note);
}

/// Replace the configured belief of the report's first engine of `kind` with the live one.
pub(crate) fn apply_live_belief(
    rep: &mut MemReport,
    kind: EngineKind,
    belief: (u64, Said),
) -> bool {
    match rep.engines.iter_mut().find(|e| e.engine == kind) {
        Some(e) => {
            e.believed_cache_bytes = Some(belief.0);
            e.belief_source = Some(belief.1);
            // The statements follow the new belief.
            rep.findings = findings(&rep.host, &rep.engines, &rep.processes);
            true
        }
        None => false,
    }
}

/// Build the report from a sample, with rates when an earlier sample is given.
pub fn build(cur: &MemSample, prev: Option<&MemSample>) -> MemReport {
    let m = &cur.meminfo;
    let secs = match (prev.and_then(|p| p.taken), cur.taken) {
        (Some(a), Some(b)) => Some(b.duration_since(a).as_secs_f64()),
        _ => None,
    };
    let page = plumb_sys::host::page_size_bytes().unwrap_or(4096) as f64;
    let v = |s: &MemSample, f: fn(&plumb_sys::mem::Vmstat) -> Option<u64>| {
        s.vmstat.as_ref().and_then(f)
    };
    let host = HostMem {
        total_bytes: m.mem_total_bytes,
        available_bytes: m.mem_available_bytes,
        swap_total_bytes: m.swap_total_bytes,
        swap_used_bytes: match (m.swap_total_bytes, m.swap_free_bytes) {
            (Some(t), Some(f)) => Some(t.saturating_sub(f)),
            _ => None,
        },
        swap_in_bytes_per_s: prev.and_then(|p| {
            rate(
                v(p, |x| x.pswpin_pages),
                v(cur, |x| x.pswpin_pages),
                secs?,
                page,
            )
        }),
        swap_out_bytes_per_s: prev.and_then(|p| {
            rate(
                v(p, |x| x.pswpout_pages),
                v(cur, |x| x.pswpout_pages),
                secs?,
                page,
            )
        }),
        major_faults_per_s: prev
            .and_then(|p| rate(v(p, |x| x.pgmajfault), v(cur, |x| x.pgmajfault), secs?, 1.0)),
        pressure: cur.pressure.as_ref().and_then(|p| p.memory.clone()),
    };
    let total = m.mem_total_bytes.unwrap_or(0);
    let engines: Vec<EngineMem> = cur
        .engines
        .iter()
        .map(|e| {
            let main = cur
                .processes
                .iter()
                .find(|p| p.sample.pid == e.procs.main_pid);
            engine_mem(e, main, total, cur.cgroup_mode, m.mem_total_bytes)
        })
        .collect();
    let processes: Vec<ProcMem> = cur
        .processes
        .iter()
        .map(|p| proc_mem(p, m.mem_total_bytes))
        .collect();
    let findings = findings(&host, &engines, &processes);
    MemReport {
        interval_s: secs,
        host,
        engines,
        processes,
        findings,
        missing: cur.missing.clone(),
    }
}

fn findings(host: &HostMem, engines: &[EngineMem], procs: &[ProcMem]) -> Vec<Note> {
    let mut n = Vec::new();
    for e in engines {
        if let (Some(b), Some(r), Some(s)) = (
            e.believed_cache_bytes,
            e.cache_resident_bytes,
            e.cache_swapped_bytes,
        ) {
            let lvl = if s > b / 20 { Level::Warn } else { Level::Info };
            let untouched = b.saturating_sub(r + s);
            let mut note = Note::new(lvl, "engine-cache-belief")
                .text("engine", e.engine.name())
                .count("pid", e.main_pid as f64)
                .bytes("believed_bytes", b as f64)
                .fact(
                    "source",
                    crate::said::Fact::Said(
                        e.belief_source
                            .clone()
                            .unwrap_or_else(|| Said::new("belief-settings")),
                    ),
                )
                .bytes("resident_bytes", r as f64)
                .bytes("swapped_bytes", s as f64);
            if untouched > b / 20 {
                note = note.bytes("untouched_bytes", untouched as f64);
            }
            n.push(note);
        }
        for st in &e.assumption.statements {
            if st.level == Level::Warn {
                let mut note = Note::new(Level::Warn, "engine-statement")
                    .text("engine", e.engine.name())
                    .text("statement", st.code);
                for (k, v) in st.facts.iter() {
                    note = note.fact(k.to_string(), v.clone());
                }
                n.push(note);
            }
        }
    }
    for p in procs {
        if let (Some(vs), Some(ss)) = (p.memory.vm_swap_bytes, p.memory.smaps_swap_bytes) {
            if ss > vs + (1 << 20) {
                n.push(
                    Note::new(Level::Warn, "swap-hides-shared-memory")
                        .count("pid", p.pid as f64)
                        .bytes("smaps_swap_bytes", ss as f64)
                        .bytes("vm_swap_bytes", vs as f64),
                );
            }
        }
        if let Some(cg) = &p.cgroup {
            if cg.oom_kills.unwrap_or(0) > 0 {
                n.push(
                    Note::new(Level::Warn, "cgroup-oom-kills")
                        .count("pid", p.pid as f64)
                        .count("oom_kills", cg.oom_kills.unwrap_or(0) as f64),
                );
            }
            if let Some(ps) = cg.pressure.as_ref().and_then(|x| x.full.as_ref()) {
                if ps.avg10_pct >= 10.0 {
                    n.push(
                        Note::new(Level::Warn, "cgroup-memory-pressure")
                            .count("pid", p.pid as f64)
                            .pct("psi_full_avg10_pct", ps.avg10_pct),
                    );
                }
            }
        }
    }
    if let Some(r) = host.swap_in_bytes_per_s {
        if r > 0.0 {
            n.push(Note::new(Level::Warn, "host-swap-in").bytes_per_s("swap_in_bytes_per_s", r));
        }
    }
    if let Some(p) = &host.pressure {
        if let Some(s) = &p.some {
            if s.avg10_pct >= 10.0 {
                n.push(
                    Note::new(Level::Warn, "host-memory-pressure")
                        .pct("psi_some_avg10_pct", s.avg10_pct),
                );
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> EngineSettings {
        EngineSettings::default()
    }

    #[test]
    fn mssql_detected_matches_the_seed() {
        // A 7 GB AKS node (capacity 7113152Ki) without a limit: "Detected 5557 MB of RAM".
        let a = assume(
            EngineKind::Mssql,
            7113152 * 1024,
            None,
            CgroupMode::V1,
            &settings(),
        );
        assert_eq!(a.mssql_detected_mb, Some(5557));
        // With a 3Gi limit: "Detected 2458 MB of RAM".
        let a = assume(
            EngineKind::Mssql,
            7113152 * 1024,
            Some(3 << 30),
            CgroupMode::V1,
            &settings(),
        );
        assert_eq!(a.mssql_detected_mb, Some(2458));
        assert!(a.mssql_old_build_detected_mb.is_none());
        // On cgroup v2, old builds see the host.
        let a = assume(
            EngineKind::Mssql,
            16 << 30,
            Some(3 << 30),
            CgroupMode::V2,
            &settings(),
        );
        assert_eq!(a.mssql_detected_mb, Some(2458));
        assert_eq!(a.mssql_old_build_detected_mb, Some(13107));
    }

    #[test]
    fn mssql_memorylimitmb_and_headroom() {
        let s = EngineSettings {
            memory_limit_mb: Some(12288),
            ..Default::default()
        };
        let a = assume(
            EngineKind::Mssql,
            16 << 30,
            Some(12 << 30),
            CgroupMode::V2,
            &s,
        );
        assert_eq!(a.mssql_detected_mb, Some(12288));
        assert!(
            a.statements
                .iter()
                .any(|n| n.level == Level::Warn && n.code == "mssql-limit-no-headroom"),
            "{:?}",
            a.statements
        );
        let s = EngineSettings {
            memory_limit_mb: Some(10240),
            ..Default::default()
        };
        let a = assume(
            EngineKind::Mssql,
            16 << 30,
            Some(12 << 30),
            CgroupMode::V2,
            &s,
        );
        assert!(
            !a.statements.iter().any(|n| n.level == Level::Warn),
            "{:?}",
            a.statements
        );
    }

    #[test]
    fn postgres_and_mariadb_caches_against_the_limit() {
        let s = EngineSettings {
            shared_buffers_bytes: Some(4 << 30),
            work_mem_bytes: Some(64 << 20),
            max_connections: Some(200),
            maintenance_work_mem_bytes: Some(1 << 30),
            ..Default::default()
        };
        let a = assume(
            EngineKind::Postgres,
            32 << 30,
            Some(2 << 30),
            CgroupMode::V2,
            &s,
        );
        let w: Vec<&str> = a
            .statements
            .iter()
            .filter(|n| n.level == Level::Warn)
            .map(|n| n.code)
            .collect();
        assert!(w.contains(&"shared-buffers-above-memory"), "{w:?}");
        assert!(w.contains(&"postgres-peak-above-memory"), "{w:?}");
        assert_eq!(
            a.peak_estimate_bytes,
            Some((4u64 << 30) + 200 * (64 << 20) + (1 << 30))
        );
        let m = EngineSettings {
            innodb_buffer_pool_size_bytes: Some(7 << 30),
            ..Default::default()
        };
        let a = assume(
            EngineKind::Mariadb,
            64 << 30,
            Some(8 << 30),
            CgroupMode::V1,
            &m,
        );
        assert!(a
            .statements
            .iter()
            .any(|n| n.level == Level::Warn && n.code == "buffer-pool-above-75-pct"));
    }

    #[test]
    fn rates_never_go_negative() {
        assert_eq!(rate(Some(10), Some(5), 1.0, 1.0), None);
        assert_eq!(rate(Some(10), Some(20), 2.0, 4096.0), Some(20480.0));
        assert_eq!(rate(None, Some(20), 2.0, 1.0), None);
    }

    #[test]
    fn live_beliefs_come_from_the_servers_own_figures() {
        let mut g = std::collections::BTreeMap::new();
        g.insert("innodb.buffer_pool_data_bytes".to_string(), 14_876_672.0);
        g.insert(
            "perf.memory_manager.database_cache_memory_bytes".to_string(),
            2048.0 * 1024.0,
        );
        g.insert("buffercache.used_buffers".to_string(), 100.0);
        let (b, why) = live_cache_belief(EngineKind::Mariadb, &g, 8192).unwrap();
        assert_eq!(b, 14_876_672);
        assert_eq!(why.code, "belief-innodb-data");
        assert_eq!(
            live_cache_belief(EngineKind::Mssql, &g, 8192).unwrap().0,
            2 << 20
        );
        assert_eq!(
            live_cache_belief(EngineKind::Postgres, &g, 8192).unwrap().0,
            819_200
        );
        assert!(live_cache_belief(EngineKind::Postgres, &Default::default(), 8192).is_none());
    }
}
