//! Process trees for recordings: a process and everything below it (a PostgreSQL postmaster and
//! every backend it forks), summed per sample, and per PostgreSQL role from the processes'
//! titles.
//!
//! Sums over a set that changes are kept counters: what a member takes with it when it leaves is
//! kept ([`Kept`]), so a tree's CPU time never falls when a backend exits. A tree's CPU time
//! also holds the children its members have reaped (the kernel adds them to the parent's
//! `cutime`), so backends that lived and died between two samples are in it; a role's CPU time
//! is its live processes' own time plus what those that left had at their last sample.

use crate::process::{self, ProcStat, ProcessSample};
use crate::raw::{RawKind, RawValue};
use crate::Root;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Every process's /proc/PID/stat, from one pass over /proc (processes that vanish while
/// being read are left out).
pub fn table(root: &Root) -> BTreeMap<u32, ProcStat> {
    let Ok(rd) = std::fs::read_dir(root.path("/proc")) else {
        return BTreeMap::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let p = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((p, process::stat(root, p).ok()?))
        })
        .collect()
}

#[cfg(test)] // only the tests call it
/// `pid` and every process below it from the kernel's lists of each thread's children
/// (`/proc/PID/task/TID/children`), without reading every process on the host; None where the
/// kernel lacks those lists (CONFIG_PROC_CHILDREN), empty when `pid` is gone.
pub(crate) fn members_by_children(root: &Root, pid: u32) -> Option<Vec<u32>> {
    members_by_children_of(root, pid, &|_| false)
}

/// As [`members_by_children`]; processes for which `single` says they have one thread are not
/// listed (their only thread has their PID), which spares a directory read per member.
pub(crate) fn members_by_children_of(
    root: &Root,
    pid: u32,
    single: &dyn Fn(u32) -> bool,
) -> Option<Vec<u32>> {
    let tasks = |p: u32| -> Vec<u32> {
        if single(p) {
            return vec![p];
        }
        members_by_children_tasks(root, p)
    };
    let first = members_by_children_tasks(root, pid);
    if first.is_empty() {
        return Some(Vec::new());
    }
    if !root.exists(format!("/proc/{pid}/task/{}/children", first[0])) {
        return None;
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        for t in tasks(p) {
            if let Ok(text) = root.read(format!("/proc/{p}/task/{t}/children")) {
                for c in text
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok())
                {
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
        }
        i += 1;
    }
    out.sort_unstable();
    Some(out)
}

/// The threads of process `p` (their IDs), empty when it is gone.
pub fn threads(root: &Root, p: u32) -> Vec<u32> {
    members_by_children_tasks(root, p)
}

fn members_by_children_tasks(root: &Root, p: u32) -> Vec<u32> {
    std::fs::read_dir(root.path(format!("/proc/{p}/task")))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `pid` (when it is in the table) and every process below it.
pub fn members(table: &BTreeMap<u32, ProcStat>, pid: u32) -> Vec<u32> {
    if !table.contains_key(&pid) {
        return Vec::new();
    }
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&p, st) in table {
        if p != pid {
            children.entry(st.ppid).or_default().push(p);
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c.iter().copied().filter(|c| *c != pid));
        }
        i += 1;
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A PostgreSQL process's role from its title (`postgres: checkpointer`, `postgres: main:
/// walwriter`, `postgres: app shop [local] idle`): a code for metric names, or None for a
/// title that is not a PostgreSQL child's (the postmaster's own is its command line).
pub fn pg_role(title: &str) -> Option<&'static str> {
    let rest = title.trim().strip_prefix("postgres: ")?;
    // A cluster name may come first ("postgres: 15/main: walwriter").
    let role = rest.rsplit_once(": ").map_or(rest, |(_, r)| r);
    const AUX: &[(&str, &str)] = &[
        ("checkpointer", "checkpointer"),
        ("background writer", "background_writer"),
        ("walwriter", "walwriter"),
        ("autovacuum launcher", "autovacuum_launcher"),
        ("autovacuum worker", "autovacuum_worker"),
        (
            "logical replication launcher",
            "logical_replication_launcher",
        ),
        ("logical replication", "logical_replication_worker"),
        ("archiver", "archiver"),
        ("stats collector", "stats_collector"),
        ("walsender", "walsender"),
        ("walreceiver", "walreceiver"),
        ("walsummarizer", "walsummarizer"),
        ("startup", "startup"),
        ("parallel worker", "parallel_worker"),
        ("io worker", "io_worker"),
        ("autovacuum", "autovacuum_worker"),
        ("slotsync worker", "slotsync_worker"),
    ];
    if let Some((_, code)) = AUX.iter().find(|(t, _)| role.starts_with(t)) {
        return Some(code);
    }
    // A backend: "USER DATABASE HOST STATE" (a walsender's title starts with "walsender").
    Some("backend")
}

/// A counter summed over members that come and go, kept from falling: when the sum drops (a
/// member left), what it lost is added back from then on.
#[derive(Debug, Default, Clone, Copy)]
pub struct Kept {
    last: u64,
    offset: u64,
}

impl Kept {
    pub fn next(&mut self, sum: u64) -> u64 {
        if sum < self.last {
            self.offset += self.last - sum;
        }
        self.last = sum;
        sum + self.offset
    }
}

/// Processes of a tree given series of their own (`proc.PID.*`): the root and, at any time,
/// up to this many of its members (the first seen; a slot frees when its process exits).
pub const DETAILED_MEMBERS: usize = 16;

/// CPU time a sample may spend reading the members' smaps_rollup (PSS, swap), which walks each
/// process's page tables: about a millisecond per backend per 128 MiB of shared buffers it
/// maps, so a large server's tree is refreshed a few members per sample, stalest first, and
/// its PSS sums the latest reading of each.
pub const SMAPS_BUDGET: std::time::Duration = std::time::Duration::from_millis(1);

/// How old a member's smaps_rollup reading may grow before it is read again (a member never
/// read is read first). PSS and swapped shared memory move over tens of seconds; the walk is
/// most of what following a tree costs, so it is not repeated every second.
pub const SMAPS_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// How old a member's cgroup membership may grow before it is read again: a server's processes
/// do not move between cgroups while it runs, and a move shows within this time.
pub const CGROUPS_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// One followed tree between samples.
#[derive(Debug)]
pub struct Tree {
    pub root: u32,
    known: BTreeSet<u32>,
    /// Members with series of their own, besides the root.
    detailed: BTreeSet<u32>,
    kept: HashMap<String, Kept>,
    started: u64,
    exited: u64,
    /// Titles already handed out as labels (a metric keeps the label it was defined with).
    titled: HashMap<u32, String>,
    /// Each member's last smaps_rollup, and when it was read.
    smaps: HashMap<u32, (process::SmapsRollup, std::time::Instant)>,
    /// Each member's title, read until it has lived through a sample (a process just forked
    /// still has its parent's title), then kept: what a member is does not change.
    /// (title, read after its first sample).
    titles: HashMap<u32, (String, bool)>,
    /// Each detailed member's cgroups, and when they were read.
    cgroups: HashMap<u32, (Vec<process::CgroupLine>, std::time::Instant)>,
    /// Each member's thread count in the last sample.
    threads: HashMap<u32, u64>,
    /// The members' files read every sample, held open.
    held: crate::held::Held,
}

/// What one tree gave in a sample.
#[derive(Debug, Default)]
pub struct TreeTake {
    pub values: Vec<RawValue>,
    /// Processes with series of their own now (the root first).
    pub detailed: Vec<u32>,
    /// Processes with series of their own that have gone since the last sample (worth a mark:
    /// PostgreSQL backends, which come and go with connections, are left out).
    pub gone: Vec<u32>,
    /// (object, title) for objects whose title is new or changed.
    pub labels: Vec<(String, String)>,
    /// The root itself is gone: the tree ends.
    pub root_gone: bool,
    /// What was read of the processes with series of their own (smaps from the latest reading,
    /// cgroups read now).
    pub samples: Vec<ProcessSample>,
}

/// Sums for a group of members.
#[derive(Default)]
struct Sums {
    processes: u64,
    threads: u64,
    cpu_ticks: u64,
    own_cpu_ticks: u64,
    major_faults: u64,
    read_bytes: u64,
    write_bytes: u64,
    run_delay_ns: u64,
    rss_anon_bytes: u64,
    pss_bytes: u64,
    pss_shmem_bytes: u64,
    swap_pss_bytes: u64,
    has_io: bool,
    has_smaps: bool,
    has_sched: bool,
}

impl Sums {
    fn add(&mut self, root: &Root, p: &ProcessSample) {
        self.processes += 1;
        if let Some(s) = &p.stat {
            self.threads += s.num_threads;
            let own = s.utime_ticks + s.stime_ticks;
            self.own_cpu_ticks += own;
            self.cpu_ticks += own + s.cutime_ticks.unwrap_or(0) + s.cstime_ticks.unwrap_or(0);
            self.major_faults += s.major_faults + s.cmajor_faults.unwrap_or(0);
            // Every thread's wait for a CPU (the process's schedstat is its main thread's).
            if s.num_threads > 1 {
                let t = process::thread_schedstats(root, p.pid);
                if !t.is_empty() {
                    self.has_sched = true;
                    self.run_delay_ns += t.iter().map(|t| t.run_delay_ns).sum::<u64>();
                }
            } else if let Some(ss) = &p.schedstat {
                self.has_sched = true;
                self.run_delay_ns += ss.run_delay_ns;
            }
        }
        if let Some(io) = &p.io {
            self.has_io |= io.read_bytes.is_some();
            self.read_bytes += io.read_bytes.unwrap_or(0);
            self.write_bytes += io.write_bytes.unwrap_or(0);
        }
        if let Some(st) = &p.status {
            self.rss_anon_bytes += st.rss_anon_bytes.unwrap_or(0);
        }
        if let Some(sm) = &p.smaps_rollup {
            self.has_smaps |= sm.pss_bytes.is_some();
            self.pss_bytes += sm.pss_bytes.unwrap_or(0);
            self.pss_shmem_bytes += sm.pss_shmem_bytes.unwrap_or(0);
            self.swap_pss_bytes += sm.swap_pss_bytes.unwrap_or(0);
        }
    }
}

impl Tree {
    pub fn new(root: u32) -> Tree {
        Tree {
            root,
            known: BTreeSet::new(),
            detailed: BTreeSet::new(),
            kept: HashMap::new(),
            started: 0,
            exited: 0,
            titled: HashMap::new(),
            smaps: HashMap::new(),
            titles: HashMap::new(),
            cgroups: HashMap::new(),
            threads: HashMap::new(),
            held: crate::held::Held::new(),
        }
    }

    fn kept(&mut self, name: &str, sum: u64) -> u64 {
        self.kept.entry(name.to_string()).or_default().next(sum)
    }

    /// smaps_rollup for members never read or read SMAPS_EVERY ago, stalest (never read)
    /// first, within the budget.
    fn read_smaps(&mut self, root: &Root, now: &BTreeSet<u32>) {
        self.smaps.retain(|p, _| now.contains(p));
        let mut order: Vec<u32> = now
            .iter()
            .copied()
            .filter(|p| {
                self.smaps
                    .get(p)
                    .is_none_or(|(_, at)| at.elapsed() >= SMAPS_EVERY)
            })
            .collect();
        order.sort_by_key(|p| self.smaps.get(p).map(|(_, at)| *at));
        let t0 = std::time::Instant::now();
        for p in order {
            if let Some(sm) = process::smaps_rollup(root, p) {
                self.smaps.insert(p, (sm, std::time::Instant::now()));
            }
            if t0.elapsed() >= SMAPS_BUDGET {
                break;
            }
        }
    }

    /// The detailed members' samples with their cgroups (read again each CGROUPS_EVERY).
    fn with_cgroups(
        &mut self,
        root: &Root,
        samples: &[ProcessSample],
        detailed: &[u32],
    ) -> Vec<ProcessSample> {
        self.cgroups.retain(|p, _| detailed.contains(p));
        let mut samples_out = Vec::with_capacity(detailed.len());
        for s in samples.iter().filter(|s| detailed.contains(&s.pid)) {
            let fresh = self
                .cgroups
                .get(&s.pid)
                .filter(|(_, at)| at.elapsed() < CGROUPS_EVERY);
            let cgroups = match fresh {
                Some((c, _)) => c.clone(),
                None => {
                    let c = process::cgroups(root, s.pid);
                    self.cgroups
                        .insert(s.pid, (c.clone(), std::time::Instant::now()));
                    c
                }
            };
            samples_out.push(ProcessSample {
                cgroups,
                ..s.clone()
            });
        }
        samples_out
    }

    /// The tree's and each role's figures (counters kept across restarts of their sums); a
    /// role seen before and empty now reads 0, not absent.
    fn values(&mut self, tree: &Sums, roles: &BTreeMap<&'static str, Sums>) -> Vec<RawValue> {
        let r = self.root;
        let mut values = Vec::new();
        let mut push = |name: String, kind: RawKind, value: u64| {
            values.push(RawValue { name, kind, value });
        };
        use RawKind::{Counter as C, Gauge as G};
        let pre = format!("tree.{r}");
        let cpu = self.kept(&format!("{pre}.cpu"), tree.cpu_ticks);
        let faults = self.kept(&format!("{pre}.majflt"), tree.major_faults);
        let rd = self.kept(&format!("{pre}.rd"), tree.read_bytes);
        let wr = self.kept(&format!("{pre}.wr"), tree.write_bytes);
        let delay = self.kept(&format!("{pre}.delay"), tree.run_delay_ns);
        push(format!("{pre}.processes"), G, tree.processes);
        push(format!("{pre}.threads"), G, tree.threads);
        push(format!("{pre}.cpu_ticks"), C, cpu);
        push(format!("{pre}.major_faults"), C, faults);
        if tree.has_io {
            push(format!("{pre}.read_bytes"), C, rd);
            push(format!("{pre}.write_bytes"), C, wr);
        }
        if tree.has_sched {
            push(format!("{pre}.run_delay_ns"), C, delay);
        }
        push(format!("{pre}.rss_anon_bytes"), G, tree.rss_anon_bytes);
        if tree.has_smaps {
            push(format!("{pre}.pss_bytes"), G, tree.pss_bytes);
            push(format!("{pre}.pss_shmem_bytes"), G, tree.pss_shmem_bytes);
            push(format!("{pre}.swap_pss_bytes"), G, tree.swap_pss_bytes);
        }
        push(format!("{pre}.started"), C, self.started);
        push(format!("{pre}.exited"), C, self.exited);
        for (role, s) in roles {
            let pre = format!("role.{r}-{role}");
            let cpu = self.kept(&format!("{pre}.cpu"), s.own_cpu_ticks);
            let delay = self.kept(&format!("{pre}.delay"), s.run_delay_ns);
            values.push(RawValue {
                name: format!("{pre}.processes"),
                kind: G,
                value: s.processes,
            });
            values.push(RawValue {
                name: format!("{pre}.cpu_ticks"),
                kind: C,
                value: cpu,
            });
            if s.has_sched {
                values.push(RawValue {
                    name: format!("{pre}.run_delay_ns"),
                    kind: C,
                    value: delay,
                });
            }
            values.push(RawValue {
                name: format!("{pre}.rss_anon_bytes"),
                kind: G,
                value: s.rss_anon_bytes,
            });
            if s.has_smaps {
                values.push(RawValue {
                    name: format!("{pre}.pss_bytes"),
                    kind: G,
                    value: s.pss_bytes,
                });
            }
        }
        // Roles seen before and empty now (the last autovacuum worker gone) read 0, not absent.
        let seen: Vec<String> = self
            .kept
            .keys()
            .filter_map(|k| k.strip_prefix(&format!("role.{r}-")))
            .filter_map(|k| k.strip_suffix(".cpu"))
            .filter(|role| !roles.contains_key(role))
            .map(str::to_string)
            .collect();
        for role in seen {
            let pre = format!("role.{r}-{role}");
            let cpu = self.kept(&format!("{pre}.cpu"), 0);
            values.push(RawValue {
                name: format!("{pre}.processes"),
                kind: G,
                value: 0,
            });
            values.push(RawValue {
                name: format!("{pre}.cpu_ticks"),
                kind: C,
                value: cpu,
            });
            values.push(RawValue {
                name: format!("{pre}.rss_anon_bytes"),
                kind: G,
                value: 0,
            });
        }
        values
    }

    /// Read the tree now; `left_out` are processes that are not the workload (plumb's own
    /// connection to the engine).
    pub fn take(&mut self, root: &Root, left_out: &[u32]) -> TreeTake {
        let mut out = TreeTake::default();
        let threads = &self.threads;
        let single = |p: u32| threads.get(&p) == Some(&1);
        let list = members_by_children_of(root, self.root, &single)
            .unwrap_or_else(|| members(&table(root), self.root));
        let now: BTreeSet<u32> = list
            .into_iter()
            .filter(|p| *p == self.root || !left_out.contains(p))
            .collect();
        if !now.contains(&self.root) {
            out.root_gone = true;
            out.gone = self.detailed.iter().copied().collect();
            return out;
        }
        let first = self.known.is_empty();
        if !first {
            self.started += now.difference(&self.known).count() as u64;
            self.exited += self.known.difference(&now).count() as u64;
        }
        out.gone = self
            .detailed
            .iter()
            .copied()
            .filter(|p| !now.contains(p))
            .filter(|p| {
                self.titled
                    .get(p)
                    .is_none_or(|t| pg_role(t) != Some("backend"))
            })
            .collect();
        self.detailed.retain(|p| now.contains(p));
        self.titled.retain(|p, _| now.contains(p));
        let mut samples: Vec<ProcessSample> = Vec::with_capacity(now.len());
        self.titles.retain(|p, _| now.contains(p));
        for &p in &now {
            let settled = self.titles.get(&p).is_some_and(|t| t.1);
            if let Ok(s) = process::read_member(root, p, !settled, &mut self.held) {
                if let Some(c) = &s.cmdline {
                    self.titles
                        .insert(p, (c.join(" "), self.known.contains(&p)));
                }
                samples.push(s);
            }
        }
        self.read_smaps(root, &now);
        for s in &mut samples {
            s.smaps_rollup = self.smaps.get(&s.pid).map(|(sm, _)| sm.clone());
        }
        let titles = &self.titles;
        let title_of =
            |s: &ProcessSample| titles.get(&s.pid).map(|t| t.0.clone()).unwrap_or_default();
        let mut tree = Sums::default();
        let mut roles: BTreeMap<&'static str, Sums> = BTreeMap::new();
        for s in &samples {
            tree.add(root, s);
            let title = title_of(s);
            if s.pid != self.root {
                if let Some(role) = pg_role(&title) {
                    roles.entry(role).or_default().add(root, s);
                }
                // A series of its own once it has lived through a sample: a connection that
                // comes and goes between two samples (pgbench -C) is counted in the tree
                // without defining metrics of its own, and by then it has its own title (a
                // process just forked still has its parent's).
                if self.detailed.len() < DETAILED_MEMBERS && self.known.contains(&s.pid) {
                    self.detailed.insert(s.pid);
                }
            }
            let show = s.pid == self.root || self.detailed.contains(&s.pid);
            if show && !title.is_empty() && !self.titled.contains_key(&s.pid) {
                out.labels.push((format!("proc.{}", s.pid), title.clone()));
                self.titled.insert(s.pid, title);
            }
        }
        self.held.retain_pids(|p| now.contains(&p));
        self.known = now;
        self.threads = samples
            .iter()
            .filter_map(|s| Some((s.pid, s.stat.as_ref()?.num_threads)))
            .collect();
        out.detailed = std::iter::once(self.root)
            .chain(self.detailed.iter().copied())
            .filter(|p| samples.iter().any(|s| s.pid == *p))
            .collect();
        out.samples = self.with_cgroups(root, &samples, &out.detailed);
        out.values = self.values(&tree, &roles);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(ppid: u32) -> ProcStat {
        ProcStat {
            ppid,
            ..Default::default()
        }
    }

    #[test]
    fn members_are_the_root_and_everything_below_it() {
        let t: BTreeMap<u32, ProcStat> = [
            (1, st(0)),
            (10, st(1)),
            (11, st(10)),
            (12, st(10)),
            (13, st(12)),
            (20, st(1)),
            (21, st(20)),
        ]
        .into_iter()
        .collect();
        assert_eq!(members(&t, 10), vec![10, 11, 12, 13]);
        assert_eq!(members(&t, 20), vec![20, 21]);
        assert_eq!(members(&t, 13), vec![13]);
        assert!(members(&t, 99).is_empty());
    }

    #[test]
    fn the_kernels_children_lists_give_the_same_tree_as_a_pass_over_proc() {
        let root = Root::host();
        let mut kids: Vec<std::process::Child> = (0..3)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let me = std::process::id();
        if let Some(by_children) = members_by_children(&root, me) {
            let by_table = members(&table(&root), me);
            for k in &kids {
                assert!(by_children.contains(&k.id()) && by_table.contains(&k.id()));
            }
        }
        for k in &mut kids {
            k.kill().unwrap();
            k.wait().unwrap();
        }
        assert_eq!(members_by_children(&root, 999_999_999), Some(Vec::new()));
    }

    #[test]
    fn postgres_titles_give_roles() {
        assert_eq!(pg_role("postgres: checkpointer "), Some("checkpointer"));
        assert_eq!(pg_role("postgres: 15/main: walwriter"), Some("walwriter"));
        assert_eq!(
            pg_role("postgres: autovacuum worker shop"),
            Some("autovacuum_worker")
        );
        assert_eq!(
            pg_role("postgres: autovacuum launcher"),
            Some("autovacuum_launcher")
        );
        assert_eq!(
            pg_role("postgres: plumb postgres [local] idle"),
            Some("backend")
        );
        assert_eq!(
            pg_role("postgres: walsender rep 127.0.0.1(5544) streaming 0/3000148"),
            Some("walsender")
        );
        assert_eq!(pg_role("/usr/lib/postgresql/15/bin/postgres -D /x"), None);
        assert_eq!(pg_role("pgbench -c 2"), None);
    }

    #[test]
    fn a_kept_counter_never_falls_when_members_leave() {
        let mut k = Kept::default();
        assert_eq!(k.next(100), 100);
        assert_eq!(k.next(150), 150);
        // A member with 60 left: the sum falls to 90, the counter keeps its 60.
        assert_eq!(k.next(90), 150);
        assert_eq!(k.next(100), 160);
    }

    #[test]
    fn this_process_tree_is_summed_and_its_children_counted() {
        let root = Root::host();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let me = std::process::id();
        let mut t = Tree::new(me);
        let first = t.take(&root, &[]);
        assert!(!first.root_gone);
        // The child gets series of its own once it has lived through a sample.
        assert!(first.detailed.contains(&me) && !first.detailed.contains(&child.id()));
        let first = t.take(&root, &[]);
        assert!(first.detailed.contains(&child.id()));
        let get = |v: &[RawValue], n: &str| v.iter().find(|x| x.name == n).map(|x| x.value);
        let procs = get(&first.values, &format!("tree.{me}.processes")).unwrap();
        assert!(procs >= 2, "{procs}");
        assert!(get(&first.values, &format!("tree.{me}.rss_anon_bytes")).unwrap() > 0);
        let cpu0 = get(&first.values, &format!("tree.{me}.cpu_ticks")).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let second = t.take(&root, &[]);
        // (Other tests may start and end processes of their own meanwhile.)
        assert!(second.gone.contains(&child.id()), "{:?}", second.gone);
        assert!(!second.detailed.contains(&child.id()));
        assert!(
            get(&second.values, &format!("tree.{me}.exited")).unwrap() >= 1,
            "{:?}",
            second.values
        );
        assert!(get(&second.values, &format!("tree.{me}.cpu_ticks")).unwrap() >= cpu0);
    }
}
