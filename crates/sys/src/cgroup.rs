//! cgroups v1, v2 and hybrid: which layout the host uses, and for a process its memory, io and
//! cpu limits, usage and events.

use crate::mount::{normalize, MountEntry};
use crate::pressure::{self, Psi};
use crate::process::{CgroupLine, Missing};
use crate::{parse_err, DevNum, Error, Result, Root};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupMode {
    /// Only v1 hierarchies (controllers each on their own mount).
    V1,
    /// One unified v2 hierarchy with the controllers.
    V2,
    /// v1 controllers plus a v2 mount (systemd's `unified`, usually without controllers).
    Hybrid,
    /// No cgroup filesystem mounted.
    None,
}

/// A limit as the kernel states it: a byte (or count) value, or no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Limit {
    Value(u64),
    #[serde(serialize_with = "ser_max")]
    Max,
}

fn ser_max<S: serde::Serializer>(s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str("max")
}

impl Limit {
    pub fn value(self) -> Option<u64> {
        match self {
            Limit::Value(v) => Some(v),
            Limit::Max => None,
        }
    }

    pub fn min(self, other: Limit) -> Limit {
        match (self, other) {
            (Limit::Value(a), Limit::Value(b)) => Limit::Value(a.min(b)),
            (Limit::Value(a), Limit::Max) | (Limit::Max, Limit::Value(a)) => Limit::Value(a),
            (Limit::Max, Limit::Max) => Limit::Max,
        }
    }
}

/// v1 reports "no limit" as LONG_MAX rounded down to the page size (9223372036854771712 with
/// 4 KiB pages, a little less with 64 KiB pages); some kernels print 2^64-1.
const V1_UNLIMITED_FLOOR: u64 = 0x7FFF_FFFF_FFF0_0000;

/// Parse a limit file's text: `max`, a v1 sentinel, or a number.
pub(crate) fn parse_limit(path: &Path, text: &str) -> Result<Limit> {
    let t = text.trim();
    if t == "max" || t == "-1" {
        return Ok(Limit::Max);
    }
    let v: u64 = t
        .parse()
        .map_err(|_| parse_err(path, 1, "a number or `max`", t))?;
    Ok(if v >= V1_UNLIMITED_FLOOR {
        Limit::Max
    } else {
        Limit::Value(v)
    })
}

/// Where the cgroup filesystems are mounted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CgroupMounts {
    pub mode: CgroupMode,
    /// v1 hierarchies: (controllers, mount).
    pub v1: Vec<(Vec<String>, MountEntry)>,
    pub v2: Option<MountEntry>,
}

impl CgroupMounts {
    pub fn from_mounts(mounts: &[MountEntry]) -> CgroupMounts {
        let mut v1 = Vec::new();
        let mut v2 = None;
        for m in mounts {
            match m.fs_type.as_str() {
                "cgroup" => {
                    let ctl: Vec<String> = m
                        .super_options
                        .iter()
                        .filter(|o| {
                            !matches!(
                                o.as_str(),
                                "rw" | "ro"
                                    | "noprefix"
                                    | "xattr"
                                    | "clone_children"
                                    | "cpuset_v2_mode"
                                    | "favordynmods"
                            )
                        })
                        .filter(|o| !o.starts_with("release_agent="))
                        .cloned()
                        .collect();
                    v1.push((ctl, m.clone()));
                }
                // The first cgroup2 mount is the one systemd and container runtimes set up.
                "cgroup2" if v2.is_none() => v2 = Some(m.clone()),
                _ => {}
            }
        }
        let v1_has_controllers = v1
            .iter()
            .any(|(c, _)| c.iter().any(|x| !x.starts_with("name=")));
        let mode = match (v1_has_controllers, v2.is_some()) {
            (true, true) => CgroupMode::Hybrid,
            (true, false) => CgroupMode::V1,
            (false, true) => CgroupMode::V2,
            (false, false) => CgroupMode::None,
        };
        CgroupMounts { mode, v1, v2 }
    }

    /// Where the memory controller's hierarchy is mounted: a v1 `memory` mount, else the v2 one
    /// when it offers `memory`.
    pub fn memory_mount(&self) -> Option<PathBuf> {
        if let Some(m) = self.v1_mount("memory") {
            return Some(PathBuf::from(&m.mount_point));
        }
        let v2 = self.v2.as_ref()?;
        let ctl =
            std::fs::read_to_string(Path::new(&v2.mount_point).join("cgroup.controllers")).ok()?;
        ctl.split_whitespace()
            .any(|c| c == "memory")
            .then(|| PathBuf::from(&v2.mount_point))
    }

    fn v1_mount(&self, controller: &str) -> Option<&MountEntry> {
        self.v1
            .iter()
            .find(|(c, _)| c.iter().any(|x| x == controller))
            .map(|(_, m)| m)
    }
}

/// A process's cgroup for one hierarchy, located in plumb's mount namespace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CgroupDir {
    pub version: u8,
    /// As /proc/PID/cgroup names it.
    pub cgroup_path: String,
    /// The directory under the cgroup mount (a host path).
    pub dir: PathBuf,
    /// The mount point: limits are looked up from `dir` up to here.
    #[serde(skip)]
    mount_point: PathBuf,
}

fn locate(
    root: &Root,
    mount: &MountEntry,
    line: &CgroupLine,
    version: u8,
) -> std::result::Result<CgroupDir, Missing> {
    let p = line.path.as_str();
    let not_visible = |why: &str| Missing {
        source: format!("cgroup {p}"),
        reason: why.to_string(),
    };
    // A cgroup outside plumb's cgroup namespace shows as `/../..`: not reachable from here.
    if p.split('/').any(|c| c == "..") {
        return Err(not_visible("outside plumb's cgroup namespace"));
    }
    let rel = if mount.root == "/" {
        p
    } else if let Some(r) = p.strip_prefix(mount.root.as_str()) {
        r
    } else {
        p
    };
    let dir = normalize(&Path::new(&mount.mount_point).join(rel.trim_start_matches('/')));
    if !root.path(&dir).is_dir() {
        return Err(not_visible(&format!(
            "{} is not visible from plumb's mount namespace",
            dir.display()
        )));
    }
    Ok(CgroupDir {
        version,
        cgroup_path: p.to_string(),
        dir,
        mount_point: PathBuf::from(&mount.mount_point),
    })
}

impl CgroupDir {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read_opt(&self, root: &Root, name: &str) -> Result<Option<String>> {
        root.read_optional(self.file(name))
    }

    fn read_limit(&self, root: &Root, name: &str) -> Result<Option<Limit>> {
        match self.read_opt(root, name)? {
            None => Ok(None),
            Some(t) => parse_limit(&root.path(self.file(name)), &t).map(Some),
        }
    }

    fn read_u64(&self, root: &Root, name: &str) -> Result<Option<u64>> {
        match self.read_opt(root, name)? {
            None => Ok(None),
            Some(t) => crate::parse_u64(&root.path(self.file(name)), 1, "a number", &t).map(Some),
        }
    }

    /// Directories from this cgroup up to the mount point, nearest first.
    fn ancestors(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut d = self.dir.clone();
        loop {
            out.push(d.clone());
            if d == self.mount_point || !d.pop() || !d.starts_with(&self.mount_point) {
                break;
            }
        }
        out
    }

    /// The tightest limit in `name` from here up to the mount, and the directory that sets it.
    fn effective_limit(&self, root: &Root, name: &str) -> Result<Option<(Limit, PathBuf)>> {
        let mut best: Option<(Limit, PathBuf)> = None;
        for d in self.ancestors() {
            let f = d.join(name);
            let Some(t) = root.read_optional(&f)? else {
                continue;
            };
            let l = parse_limit(&root.path(&f), &t)?;
            best = match best {
                None => Some((l, d)),
                Some((b, bd)) => {
                    if l.min(b) != b {
                        Some((l, d))
                    } else {
                        Some((b, bd))
                    }
                }
            };
        }
        Ok(best)
    }
}

/// Parse `key value` flat-keyed files (memory.stat, memory.events, cpu.stat).
pub(crate) fn parse_flat_keyed(path: &Path, text: &str) -> Result<BTreeMap<String, u64>> {
    let mut m = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(k), Some(v), None) = (it.next(), it.next(), it.next()) else {
            return Err(parse_err(path, i + 1, "`key value`", line));
        };
        let v = v
            .parse()
            .map_err(|_| parse_err(path, i + 1, "`key value` with a numeric value", line))?;
        m.insert(k.to_string(), v);
    }
    Ok(m)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryCgroup {
    #[serde(flatten)]
    pub at: CgroupDir,
    /// The limit set on this cgroup itself (v1 memory.limit_in_bytes, v2 memory.max).
    pub limit: Option<Limit>,
    /// The tightest limit from this cgroup up to the hierarchy's root: what really applies.
    pub effective_limit: Option<Limit>,
    /// The cgroup directory that sets `effective_limit`.
    pub effective_limit_set_at: Option<PathBuf>,
    /// v2 memory.high: the throttling threshold.
    pub high: Option<Limit>,
    /// v1 memory.soft_limit_in_bytes.
    pub soft_limit: Option<Limit>,
    /// v2 memory.swap.max: swap alone. v1 has no such file; see `memsw_limit`.
    pub swap_limit: Option<Limit>,
    /// v1 memory.memsw.limit_in_bytes: memory plus swap (present only with swap accounting).
    pub memsw_limit: Option<Limit>,
    pub usage_bytes: Option<u64>,
    /// v1 memory.max_usage_in_bytes, v2 memory.peak.
    pub peak_usage_bytes: Option<u64>,
    pub anon_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    /// v1 memory.stat `swap`, v2 memory.swap.current. Counts swapped shared memory too.
    pub swap_bytes: Option<u64>,
    /// v1 memory.failcnt: times usage hit the limit.
    pub failcnt: Option<u64>,
    /// v2 memory.events `max`: times usage hit memory.max.
    pub max_events: Option<u64>,
    pub high_events: Option<u64>,
    pub oom_events: Option<u64>,
    pub oom_kill_events: Option<u64>,
    /// v1 memory.oom_control `under_oom`.
    pub under_oom: Option<bool>,
    pub swappiness: Option<u64>,
}

fn read_memory(root: &Root, at: CgroupDir) -> Result<MemoryCgroup> {
    let v1 = at.version == 1;
    let (limit_file, usage_file, peak_file) = if v1 {
        (
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
            "memory.max_usage_in_bytes",
        )
    } else {
        ("memory.max", "memory.current", "memory.peak")
    };
    let stat = match at.read_opt(root, "memory.stat")? {
        Some(t) => parse_flat_keyed(&root.path(at.file("memory.stat")), &t)?,
        None => BTreeMap::new(),
    };
    // v1: the total_* keys include child cgroups, matching usage_in_bytes.
    let st = |k: &str| -> Option<u64> {
        if v1 {
            stat.get(&format!("total_{k}"))
                .or_else(|| stat.get(k))
                .copied()
        } else {
            stat.get(k).copied()
        }
    };
    let events = if v1 {
        match at.read_opt(root, "memory.oom_control")? {
            Some(t) => parse_flat_keyed(&root.path(at.file("memory.oom_control")), &t)?,
            None => BTreeMap::new(),
        }
    } else {
        match at.read_opt(root, "memory.events")? {
            Some(t) => parse_flat_keyed(&root.path(at.file("memory.events")), &t)?,
            None => BTreeMap::new(),
        }
    };
    let eff = at.effective_limit(root, limit_file)?;
    Ok(MemoryCgroup {
        limit: at.read_limit(root, limit_file)?,
        effective_limit: eff.as_ref().map(|e| e.0),
        effective_limit_set_at: eff.map(|e| e.1),
        high: if v1 {
            None
        } else {
            at.read_limit(root, "memory.high")?
        },
        soft_limit: if v1 {
            at.read_limit(root, "memory.soft_limit_in_bytes")?
        } else {
            None
        },
        swap_limit: if v1 {
            None
        } else {
            at.read_limit(root, "memory.swap.max")?
        },
        memsw_limit: if v1 {
            at.read_limit(root, "memory.memsw.limit_in_bytes")?
        } else {
            None
        },
        usage_bytes: at.read_u64(root, usage_file)?,
        peak_usage_bytes: at.read_u64(root, peak_file)?,
        anon_bytes: st(if v1 { "rss" } else { "anon" }),
        file_bytes: st(if v1 { "cache" } else { "file" }),
        shmem_bytes: st("shmem"),
        swap_bytes: if v1 {
            st("swap")
        } else {
            at.read_u64(root, "memory.swap.current")?
        },
        failcnt: if v1 {
            at.read_u64(root, "memory.failcnt")?
        } else {
            None
        },
        max_events: if v1 { None } else { events.get("max").copied() },
        high_events: if v1 {
            None
        } else {
            events.get("high").copied()
        },
        oom_events: if v1 { None } else { events.get("oom").copied() },
        oom_kill_events: events.get("oom_kill").copied(),
        under_oom: if v1 {
            events.get("under_oom").map(|v| *v != 0)
        } else {
            None
        },
        swappiness: if v1 {
            at.read_u64(root, "memory.swappiness")?
        } else {
            None
        },
        at,
    })
}

/// One device's throttle. `None` in a field means no limit on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoThrottle {
    pub dev: DevNum,
    pub read_bytes_per_s: Option<u64>,
    pub write_bytes_per_s: Option<u64>,
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoCgroup {
    #[serde(flatten)]
    pub at: CgroupDir,
    pub throttles: Vec<IoThrottle>,
}

/// v2 io.max: `8:16 rbps=2097152 wbps=max riops=max wiops=120`.
pub(crate) fn parse_io_max(path: &Path, text: &str) -> Result<Vec<IoThrottle>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let Some(dev) = it.next() else { continue };
        let bad = |what| parse_err(path, i + 1, what, line);
        let mut t = IoThrottle {
            dev: DevNum::parse(dev).ok_or_else(|| bad("`major:minor` first"))?,
            read_bytes_per_s: None,
            write_bytes_per_s: None,
            read_iops: None,
            write_iops: None,
        };
        for kv in it {
            let (k, v) = kv.split_once('=').ok_or_else(|| bad("`key=value` pairs"))?;
            let v = if v == "max" {
                None
            } else {
                Some(v.parse().map_err(|_| bad("a number or `max`"))?)
            };
            match k {
                "rbps" => t.read_bytes_per_s = v,
                "wbps" => t.write_bytes_per_s = v,
                "riops" => t.read_iops = v,
                "wiops" => t.write_iops = v,
                _ => {}
            }
        }
        out.push(t);
    }
    Ok(out)
}

/// v1 blkio.throttle.*_device: `8:0 1048576` per line.
fn parse_v1_throttle(path: &Path, text: &str) -> Result<Vec<(DevNum, u64)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        let bad = || parse_err(path, i + 1, "`major:minor value`", line);
        if f.len() != 2 {
            return Err(bad());
        }
        out.push((
            DevNum::parse(f[0]).ok_or_else(bad)?,
            f[1].parse().map_err(|_| bad())?,
        ));
    }
    Ok(out)
}

fn read_io(root: &Root, at: CgroupDir) -> Result<IoCgroup> {
    let mut throttles: Vec<IoThrottle> = Vec::new();
    if at.version == 2 {
        if let Some(t) = at.read_opt(root, "io.max")? {
            throttles = parse_io_max(&root.path(at.file("io.max")), &t)?;
        }
    } else {
        for (file, which) in [
            ("blkio.throttle.read_bps_device", 0),
            ("blkio.throttle.write_bps_device", 1),
            ("blkio.throttle.read_iops_device", 2),
            ("blkio.throttle.write_iops_device", 3),
        ] {
            let Some(t) = at.read_opt(root, file)? else {
                continue;
            };
            for (dev, v) in parse_v1_throttle(&root.path(at.file(file)), &t)? {
                let idx = match throttles.iter().position(|x| x.dev == dev) {
                    Some(i) => i,
                    None => {
                        throttles.push(IoThrottle {
                            dev,
                            read_bytes_per_s: None,
                            write_bytes_per_s: None,
                            read_iops: None,
                            write_iops: None,
                        });
                        throttles.len() - 1
                    }
                };
                let slot = match which {
                    0 => &mut throttles[idx].read_bytes_per_s,
                    1 => &mut throttles[idx].write_bytes_per_s,
                    2 => &mut throttles[idx].read_iops,
                    _ => &mut throttles[idx].write_iops,
                };
                *slot = Some(v);
            }
        }
    }
    Ok(IoCgroup { at, throttles })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuCgroup {
    #[serde(flatten)]
    pub at: CgroupDir,
    /// CPU time allowed per period; `Max` is no quota (written in seconds, as `quota_s`).
    #[serde(rename = "quota_s", serialize_with = "quota_as_s")]
    pub quota_us: Option<Limit>,
    #[serde(rename = "period_s", serialize_with = "crate::json::opt_us_as_s")]
    pub period_us: Option<u64>,
    /// The tightest quota/period from here to the root, as a number of CPUs.
    pub effective_cpus: Option<f64>,
    /// v1 cpu.shares or v2 cpu.weight.
    pub weight: Option<u64>,
    /// Times the group was throttled (cpu.stat nr_throttled) and for how long.
    pub nr_throttled: Option<u64>,
    #[serde(rename = "throttled_s", serialize_with = "crate::json::opt_ns_as_s")]
    pub throttled_ns: Option<u64>,
}

fn quota_as_s<S: serde::Serializer>(
    v: &Option<Limit>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match v {
        Some(Limit::Value(us)) => crate::json::us_as_s(us, s),
        Some(Limit::Max) => s.serialize_str("max"),
        None => s.serialize_none(),
    }
}

fn read_quota(root: &Root, dir: &Path, v1: bool) -> Result<Option<(Limit, u64)>> {
    if v1 {
        let (q, p) = (dir.join("cpu.cfs_quota_us"), dir.join("cpu.cfs_period_us"));
        let (Some(qt), Some(pt)) = (root.read_optional(&q)?, root.read_optional(&p)?) else {
            return Ok(None);
        };
        let quota = parse_limit(&root.path(&q), &qt)?;
        let period = crate::parse_u64(&root.path(&p), 1, "a period in microseconds", &pt)?;
        Ok(Some((quota, period)))
    } else {
        let f = dir.join("cpu.max");
        let Some(t) = root.read_optional(&f)? else {
            return Ok(None);
        };
        let mut it = t.split_whitespace();
        let bad = || {
            parse_err(
                &root.path(&f),
                1,
                "`quota period` or `max period`",
                t.trim(),
            )
        };
        let quota = parse_limit(&root.path(&f), it.next().ok_or_else(bad)?)?;
        let period = it
            .next()
            .map(|p| p.parse().map_err(|_| bad()))
            .transpose()?
            .unwrap_or(100_000);
        Ok(Some((quota, period)))
    }
}

fn read_cpu(root: &Root, at: CgroupDir) -> Result<CpuCgroup> {
    let v1 = at.version == 1;
    let own = read_quota(root, &at.dir, v1)?;
    let mut eff: Option<f64> = None;
    for d in at.ancestors() {
        if let Some((Limit::Value(q), p)) = read_quota(root, &d, v1)? {
            if p > 0 {
                let c = q as f64 / p as f64;
                eff = Some(eff.map_or(c, |e: f64| e.min(c)));
            }
        }
    }
    let stat = match at.read_opt(root, "cpu.stat")? {
        Some(t) => parse_flat_keyed(&root.path(at.file("cpu.stat")), &t)?,
        None => BTreeMap::new(),
    };
    Ok(CpuCgroup {
        quota_us: own.map(|o| o.0),
        period_us: own.map(|o| o.1),
        effective_cpus: eff,
        weight: at.read_u64(root, if v1 { "cpu.shares" } else { "cpu.weight" })?,
        nr_throttled: stat.get("nr_throttled").copied(),
        throttled_ns: stat
            .get("throttled_time")
            .copied()
            .or_else(|| stat.get("throttled_usec").map(|u| u * 1000)),
        at,
    })
}

/// Where a process's CPU quota can throttle it: its cpu controller's directory and every
/// ancestor up to the mount, each with its cpu.stat. Read at both ends of a window, the
/// difference says how long the process's group (or a parent, such as a pod's) was held off the
/// CPUs by a quota, time a latency measured inside the window includes.
#[derive(Debug, Clone, Default)]
pub struct Throttling {
    stats: Vec<PathBuf>,
}

/// One reading of [`Throttling`]: per directory, throttled periods and nanoseconds.
pub type ThrottleReading = Vec<Option<(u64, u64)>>;

impl Throttling {
    /// `pid`'s directories; none where the cpu controller is not mounted or not visible.
    pub fn of(root: &Root, pid: u32) -> Throttling {
        let Ok(mounts) = crate::mount::read_mountinfo(root, None) else {
            return Throttling::default();
        };
        let cgm = CgroupMounts::from_mounts(&mounts);
        let lines = crate::process::cgroups(root, pid);
        let stats = read_for_process(root, &cgm, &lines)
            .cpu
            .map(|c| {
                c.at.ancestors()
                    .into_iter()
                    .map(|d| d.join("cpu.stat"))
                    .collect()
            })
            .unwrap_or_default();
        Throttling { stats }
    }

    pub fn read(&self, root: &Root) -> ThrottleReading {
        self.stats
            .iter()
            .map(|f| {
                let t = root.read_optional(f).ok()??;
                let m = parse_flat_keyed(&root.path(f), &t).ok()?;
                let ns = m
                    .get("throttled_time")
                    .copied()
                    .or_else(|| m.get("throttled_usec").map(|u| u * 1000))?;
                Some((m.get("nr_throttled").copied().unwrap_or(0), ns))
            })
            .collect()
    }

    /// The most any one directory was throttled between two readings: (periods, nanoseconds).
    /// None when nothing could be read at both ends.
    pub fn between(before: &ThrottleReading, after: &ThrottleReading) -> Option<(u64, u64)> {
        before
            .iter()
            .zip(after)
            .filter_map(|(b, a)| {
                let ((bp, bn), (ap, an)) = ((*b)?, (*a)?);
                Some((ap.saturating_sub(bp), an.saturating_sub(bn)))
            })
            .max_by_key(|d| d.1)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CgroupPressure {
    /// The v2 directory the pressure files come from (the unified mount on hybrid hosts).
    pub dir: PathBuf,
    pub cpu: Option<Psi>,
    pub memory: Option<Psi>,
    pub io: Option<Psi>,
}

/// Everything cgroup-related that applies to one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessCgroups {
    pub mode: CgroupMode,
    pub memory: Option<MemoryCgroup>,
    pub io: Option<IoCgroup>,
    pub cpu: Option<CpuCgroup>,
    /// cpuset CPUs the cgroup may run on.
    pub cpuset_cpus: Option<String>,
    pub pressure: Option<CgroupPressure>,
    pub missing: Vec<Missing>,
}

/// Read the cgroup picture for a process from its /proc/PID/cgroup lines.
pub fn read_for_process(
    root: &Root,
    mounts: &CgroupMounts,
    lines: &[CgroupLine],
) -> ProcessCgroups {
    let mut out = ProcessCgroups {
        mode: mounts.mode,
        memory: None,
        io: None,
        cpu: None,
        cpuset_cpus: None,
        pressure: None,
        missing: Vec::new(),
    };
    let v2_line = lines
        .iter()
        .find(|l| l.hierarchy_id == 0 && l.controllers.is_empty());
    let v2_dir = match (&mounts.v2, v2_line) {
        (Some(m), Some(l)) => match locate(root, m, l, 2) {
            Ok(d) => Some(d),
            Err(miss) => {
                out.missing.push(miss);
                None
            }
        },
        _ => None,
    };
    let v2_controllers: Vec<String> = mounts
        .v2
        .as_ref()
        .and_then(|m| {
            root.read_optional(Path::new(&m.mount_point).join("cgroup.controllers"))
                .ok()
                .flatten()
        })
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();

    // Find a controller's directory: v1 if a v1 hierarchy carries it, else v2 if enabled there.
    let mut find = |ctl: &str| -> Option<CgroupDir> {
        if let Some(m) = mounts.v1_mount(ctl) {
            let line = lines
                .iter()
                .find(|l| l.controllers.iter().any(|c| c == ctl))?;
            return match locate(root, m, line, 1) {
                Ok(d) => Some(d),
                Err(miss) => {
                    out.missing.push(miss);
                    None
                }
            };
        }
        if v2_controllers.iter().any(|c| c == ctl) {
            return v2_dir.clone();
        }
        None
    };
    let mem_at = find("memory");
    let io_at = find("blkio").or_else(|| find("io"));
    let cpu_at = find("cpu");
    let cpuset_at = find("cpuset");

    let mut note = |source: &str, e: Error| {
        out.missing.push(Missing {
            source: source.to_string(),
            reason: e.to_string(),
        })
    };
    let memory = mem_at
        .map(|a| read_memory(root, a))
        .and_then(|r| r.map_err(|e| note("memory cgroup", e)).ok());
    let io = io_at
        .map(|a| read_io(root, a))
        .and_then(|r| r.map_err(|e| note("io cgroup", e)).ok());
    let cpu = cpu_at
        .map(|a| read_cpu(root, a))
        .and_then(|r| r.map_err(|e| note("cpu cgroup", e)).ok());
    let cpuset_cpus = cpuset_at.and_then(|a| {
        let name = if a.version == 1 {
            "cpuset.cpus"
        } else {
            "cpuset.cpus.effective"
        };
        a.read_opt(root, name)
            .ok()
            .flatten()
            .map(|s| s.trim().to_string())
    });
    let pressure = v2_dir.as_ref().and_then(|d| {
        let one = |name: &str| -> std::result::Result<Option<Psi>, Error> {
            match d.read_opt(root, name)? {
                Some(t) => pressure::parse(&root.path(d.file(name)), &t).map(Some),
                None => Ok(None),
            }
        };
        let mut any_err = None;
        let mut get = |n: &str| one(n).map_err(|e| any_err = Some(e)).ok().flatten();
        let p = CgroupPressure {
            dir: d.dir.clone(),
            cpu: get("cpu.pressure"),
            memory: get("memory.pressure"),
            io: get("io.pressure"),
        };
        if let Some(e) = any_err {
            note("cgroup pressure", e);
        }
        (p.cpu.is_some() || p.memory.is_some() || p.io.is_some()).then_some(p)
    });
    out.memory = memory;
    out.io = io;
    out.cpu = cpu;
    out.cpuset_cpus = cpuset_cpus;
    out.pressure = pressure;
    out
}

/// This process's cgroup path in a v1 hierarchy with `v1_controller`, or in v2 (None).
pub fn own_path(v1_controller: Option<&str>) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        match v1_controller {
            Some(c) => ctl.split(',').any(|x| x == c).then(|| path.to_string()),
            None => ctl.is_empty().then(|| path.to_string()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::parse_mountinfo;
    use crate::process::parse_cgroup_file;
    use crate::testutil::put;

    #[test]
    fn limit_sentinels() {
        let p = Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        assert_eq!(parse_limit(p, "9223372036854771712\n").unwrap(), Limit::Max);
        assert_eq!(parse_limit(p, "9223372036854710272\n").unwrap(), Limit::Max);
        assert_eq!(parse_limit(p, "18446744073709551615").unwrap(), Limit::Max);
        assert_eq!(parse_limit(p, "max\n").unwrap(), Limit::Max);
        assert_eq!(
            parse_limit(p, "268435456").unwrap(),
            Limit::Value(268435456)
        );
        assert!(parse_limit(p, "lots").is_err());
        assert_eq!(Limit::Max.min(Limit::Value(3)), Limit::Value(3));
        assert_eq!(serde_json_like(Limit::Max), "\"max\"");
    }

    fn serde_json_like(l: Limit) -> String {
        // serde's untagged output without pulling serde_json into this crate.
        match l {
            Limit::Max => "\"max\"".into(),
            Limit::Value(v) => v.to_string(),
        }
    }

    #[test]
    fn mode_detection() {
        let v1 = "1 0 0:1 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n2 0 0:2 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n";
        let v2 = "1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let hy = format!("{v1}3 0 0:3 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
        let p = Path::new("/proc/self/mountinfo");
        let mode = |t: &str| CgroupMounts::from_mounts(&parse_mountinfo(p, t).unwrap()).mode;
        assert_eq!(mode(v1), CgroupMode::V1);
        assert_eq!(mode(v2), CgroupMode::V2);
        assert_eq!(mode(&hy), CgroupMode::Hybrid);
        assert_eq!(
            mode("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"),
            CgroupMode::None
        );
        let m = CgroupMounts::from_mounts(&parse_mountinfo(p, v1).unwrap());
        assert_eq!(m.v1[1].0, vec!["name=systemd"]);
    }

    #[test]
    fn throttling_is_read_up_the_tree_and_the_most_throttled_directory_counts() {
        // A v1 cpu hierarchy: the pod's quota throttles, the container's own is unlimited.
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(
            r,
            "proc/self/mountinfo",
            "30 20 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
        );
        put(r, "proc/42/cgroup", "3:cpu:/pod1/ctr\n");
        let (pod, ctr) = ("sys/fs/cgroup/cpu/pod1", "sys/fs/cgroup/cpu/pod1/ctr");
        put(
            r,
            "sys/fs/cgroup/cpu/cpu.stat",
            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
        );
        put(
            r,
            &format!("{pod}/cpu.stat"),
            "nr_periods 90\nnr_throttled 5\nthrottled_time 400000000\n",
        );
        put(
            r,
            &format!("{ctr}/cpu.stat"),
            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
        );
        let root = Root::new(r);
        let t = Throttling::of(&root, 42);
        let before = t.read(&root);
        assert_eq!(before.len(), 3, "{before:?}");
        put(
            r,
            &format!("{pod}/cpu.stat"),
            "nr_periods 99\nnr_throttled 8\nthrottled_time 650000000\n",
        );
        assert_eq!(
            Throttling::between(&before, &t.read(&root)),
            Some((3, 250_000_000))
        );
        // v2 says microseconds.
        put(
            r,
            &format!("{pod}/cpu.stat"),
            "usage_usec 1\nnr_throttled 9\nthrottled_usec 700000\n",
        );
        assert_eq!(
            Throttling::between(&before, &t.read(&root)),
            Some((4, 300_000_000))
        );
        // No cpu controller: nothing to read, no claim.
        put(r, "proc/43/cgroup", "4:memory:/x\n");
        let none = Throttling::of(&root, 43);
        assert_eq!(
            Throttling::between(&none.read(&root), &none.read(&root)),
            None
        );
    }

    #[test]
    fn v2_memory_limit_is_found_up_the_tree() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(
            r,
            "sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory pids\n",
        );
        let pod = "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice";
        let ctr = format!("{pod}/cri-containerd-abc.scope");
        put(r, &format!("{pod}/memory.max"), "3221225472\n");
        put(r, &format!("{ctr}/memory.max"), "max\n");
        put(r, &format!("{ctr}/memory.high"), "max\n");
        put(r, &format!("{ctr}/memory.current"), "1048576000\n");
        put(r, &format!("{ctr}/memory.swap.current"), "4096\n");
        put(
            r,
            &format!("{ctr}/memory.stat"),
            "anon 900000000\nfile 100000000\nshmem 5000\n",
        );
        put(
            r,
            &format!("{ctr}/memory.events"),
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n",
        );
        put(r, &format!("{ctr}/memory.pressure"), "some avg10=1.50 avg60=0.50 avg300=0.10 total=99\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
        put(
            r,
            &format!("{ctr}/io.max"),
            "8:0 rbps=max wbps=10485760 riops=max wiops=max\n",
        );
        put(r, &format!("{ctr}/cpu.max"), "200000 100000\n");
        put(
            r,
            &format!("{ctr}/cpu.stat"),
            "usage_usec 10\nnr_throttled 4\nthrottled_usec 30\n",
        );
        put(r, &format!("{ctr}/cpuset.cpus.effective"), "0-1\n");
        let mounts = CgroupMounts::from_mounts(
            &parse_mountinfo(
                Path::new("mi"),
                "1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            )
            .unwrap(),
        );
        let lines = parse_cgroup_file(
            Path::new("c"),
            "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope\n",
        )
        .unwrap();
        let pc = read_for_process(&Root::new(r), &mounts, &lines);
        assert!(pc.missing.is_empty(), "{:?}", pc.missing);
        let m = pc.memory.unwrap();
        assert_eq!(m.limit, Some(Limit::Max));
        assert_eq!(m.effective_limit, Some(Limit::Value(3221225472)));
        assert_eq!(
            m.effective_limit_set_at.unwrap(),
            Path::new("/sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice")
        );
        assert_eq!(m.usage_bytes, Some(1048576000));
        assert_eq!(m.anon_bytes, Some(900000000));
        assert_eq!(m.swap_bytes, Some(4096));
        assert_eq!(m.oom_kill_events, Some(1));
        assert_eq!(m.max_events, Some(12));
        assert_eq!(m.failcnt, None);
        let io = pc.io.unwrap();
        assert_eq!(io.throttles[0].write_bytes_per_s, Some(10485760));
        assert_eq!(io.throttles[0].read_bytes_per_s, None);
        let cpu = pc.cpu.unwrap();
        assert_eq!(cpu.effective_cpus, Some(2.0));
        assert_eq!(cpu.throttled_ns, Some(30_000));
        assert_eq!(pc.cpuset_cpus.as_deref(), Some("0-1"));
        assert!((pc.pressure.unwrap().memory.unwrap().some.unwrap().avg10_pct - 1.5).abs() < 1e-9);
    }

    #[test]
    fn v1_memory_in_container_with_mount_root() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        // Inside a container the memory hierarchy's root is the container's own cgroup.
        let dir = "sys/fs/cgroup/memory";
        put(r, &format!("{dir}/memory.limit_in_bytes"), "268435456\n");
        put(r, &format!("{dir}/memory.usage_in_bytes"), "210288640\n");
        put(
            r,
            &format!("{dir}/memory.memsw.limit_in_bytes"),
            "9223372036854771712\n",
        );
        put(r, &format!("{dir}/memory.failcnt"), "83\n");
        put(r, &format!("{dir}/memory.stat"), "cache 4096\nrss 209817600\nswap 0\ntotal_cache 4096\ntotal_rss 209817600\ntotal_swap 152043520\n");
        put(
            r,
            &format!("{dir}/memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        );
        put(
            r,
            "sys/fs/cgroup/blkio/blkio.throttle.write_bps_device",
            "254:0 209715200\n",
        );
        put(
            r,
            "sys/fs/cgroup/blkio/blkio.throttle.read_iops_device",
            "254:0 1000\n8:0 50\n",
        );
        let mi = "1 0 0:1 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n2 0 0:2 /docker/abc /sys/fs/cgroup/blkio ro - cgroup cgroup rw,blkio\n";
        let mounts = CgroupMounts::from_mounts(&parse_mountinfo(Path::new("mi"), mi).unwrap());
        let lines = parse_cgroup_file(
            Path::new("c"),
            "5:memory:/docker/abc\n3:blkio:/docker/abc\n",
        )
        .unwrap();
        let pc = read_for_process(&Root::new(r), &mounts, &lines);
        let m = pc.memory.unwrap();
        assert_eq!(m.at.dir, Path::new("/sys/fs/cgroup/memory"));
        assert_eq!(m.limit, Some(Limit::Value(268435456)));
        assert_eq!(m.effective_limit, Some(Limit::Value(268435456)));
        assert_eq!(m.memsw_limit, Some(Limit::Max));
        assert_eq!(m.failcnt, Some(83));
        assert_eq!(m.swap_bytes, Some(152043520));
        assert_eq!(m.oom_kill_events, Some(1));
        assert_eq!(m.under_oom, Some(false));
        let io = pc.io.unwrap();
        assert_eq!(io.throttles.len(), 2);
        assert_eq!(io.throttles[0].write_bytes_per_s, Some(209715200));
        assert_eq!(io.throttles[0].read_iops, Some(1000));
        assert_eq!(io.throttles[1].read_iops, Some(50));
    }

    #[test]
    fn invisible_cgroup_and_garbage_files_are_reported_not_fatal() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(
            r,
            "sys/fs/cgroup/memory/memory.limit_in_bytes",
            "12 apples\n",
        );
        let mi = "1 0 0:1 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n2 0 0:2 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        let mounts = CgroupMounts::from_mounts(&parse_mountinfo(Path::new("mi"), mi).unwrap());
        let lines =
            parse_cgroup_file(Path::new("c"), "5:memory:/\n4:cpu:/../../elsewhere\n").unwrap();
        let pc = read_for_process(&Root::new(r), &mounts, &lines);
        assert!(pc.memory.is_none());
        assert!(pc.cpu.is_none());
        let text = format!("{:?}", pc.missing);
        assert!(text.contains("memory.limit_in_bytes:1"), "{text}");
        assert!(text.contains("outside plumb's cgroup namespace"), "{text}");
    }

    #[test]
    fn flat_keyed_rejects_truncated_lines() {
        let e = parse_flat_keyed(Path::new("/x/memory.stat"), "anon 1\nfile\n").unwrap_err();
        assert!(e.to_string().starts_with("/x/memory.stat:2:"), "{e}");
    }
}
