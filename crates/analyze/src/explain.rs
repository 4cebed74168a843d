//! Where a transaction type's time went on the server (`plumb load --explain`), as figures: per
//! transaction on average and over the slowest 1% (what p99 is made of), each part of the
//! server thread's time (on a CPU, waiting for one, storage reads, durable writes, lock and
//! latch waits…), the client's share between statements, and what the kernel saw it do (fsyncs,
//! cache flushes, FUA writes, block reads) per transaction. The parts come from the kernel's
//! per-thread clocks ([`plumb_sys::threadtime`]), which add up to the wall time by construction
//! when no event is missed: the share of transactions whose parts close within 5% says so.

use plumb_engine::oltp::explain::{Explained, Matched, Slow};
use plumb_sys::threadtime::{Counts, Part, PARTS};
use serde::Serialize;

/// One part's time per transaction (ms).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartMs {
    /// Its key: cpu_user, cpu_system, run_queue, storage_read, durable_write, file_write,
    /// futex, latch, client, sleep, other.
    pub part: &'static str,
    pub ms: f64,
    /// Of the server's time (the wall time less the client's part); None for the client.
    pub share: Option<f64>,
}

/// A set of transactions' time, per transaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Split {
    pub transactions: u64,
    /// From the first statement sent to the commit's reply received (ms).
    pub wall_ms: f64,
    /// The wall time less the client's part: the server's own.
    pub server_ms: f64,
    /// The parts, largest first, the client's last.
    pub parts: Vec<PartMs>,
    /// The wall time the parts do not account for (ms; never folded into a part).
    pub unexplained_ms: f64,
    pub syncs: f64,
    pub flushes: f64,
    pub fua: f64,
    pub read_bios: f64,
    pub write_bios: f64,
    /// Requests (statements or round trips) the server received.
    pub requests: f64,
}

/// One transaction type taken apart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TypeSplit {
    pub mean: Split,
    /// The slowest 1% (by latency at the client), at least one transaction.
    pub slowest: Split,
    /// The share of transactions whose parts add up to their wall time within 5%.
    pub closed: f64,
    /// What the engine said its sessions were doing meanwhile (sampled).
    pub engine: Option<EngineView>,
    /// Each part's ms per transaction in each tenth of the timed window ("server": the
    /// server's whole), where every tenth had one: `plumb compare`'s samples inside one run.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tenths_ms: std::collections::BTreeMap<&'static str, Vec<f64>>,
    /// The engine's samples beside the kernel's parts of the same transactions (for
    /// [`EngineView::checks`]).
    #[serde(skip)]
    pub matched: Matched,
}

/// Each part's (and the server's) ms per transaction, tenth by tenth; empty unless every tenth
/// counted a transaction.
fn tenths_ms(e: &Explained) -> std::collections::BTreeMap<&'static str, Vec<f64>> {
    let mut out = std::collections::BTreeMap::new();
    if e.tenths.iter().any(|(n, _)| *n == 0) {
        return out;
    }
    for (i, p) in Part::ALL.iter().enumerate() {
        let v: Vec<f64> = e
            .tenths
            .iter()
            .map(|(n, parts)| parts[i] as f64 / 1e6 / *n as f64)
            .collect();
        out.insert(p.key(), v);
    }
    let client = Part::ALL
        .iter()
        .position(|p| *p == Part::Client)
        .expect("a client part");
    let server: Vec<f64> = e
        .tenths
        .iter()
        .map(|(n, parts)| {
            let s: u128 = parts
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != client)
                .map(|(_, v)| v)
                .sum();
            s as f64 / 1e6 / *n as f64
        })
        .collect();
    out.insert("server", server);
    out
}

/// A name and its share of the samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Share {
    pub name: String,
    pub share: f64,
}

/// The engine's own view of a type's transactions: its wait events, sampled, beside the
/// kernel's parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineView {
    /// What was read, and how often ("pg_stat_activity every 100 ms"), or why nothing was
    /// ("not sampled on SQL Server").
    pub source: String,
    pub samples: u64,
    /// Wait events (`Lock:transactionid`, `CPU` for active and waiting for nothing), by share
    /// of the samples, largest first.
    pub events: Vec<Share>,
    /// Who held the locks waited for, by share of the samples.
    pub holders: Vec<Share>,
    /// Each kind of wait both saw in the transactions the engine sampled, the engine's share
    /// beside the kernel's (where either is at least 10% and there were 20 samples or more).
    pub checks: Vec<Agreement>,
}

/// One kind of wait the engine and the kernel both see, side by side: the share of the engine's
/// samples that named it against the kernel's share of the same transactions' wall time in the
/// parts it is (each sampled transaction counted once a sample).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// "lock waits", "LWLock waits", "durable writes", "storage reads", "file writes", "on or
    /// waiting for a CPU", "the client's turn".
    pub wait: &'static str,
    pub engine_share: f64,
    /// The kernel's parts it is.
    pub parts: Vec<&'static str>,
    pub kernel_share: f64,
    /// Within 10 points and three standard errors of the engine's share (a sample's error).
    pub agree: bool,
}

/// The kinds of wait both see, per engine: the engine's events (a name, or a prefix ending in
/// `:`) and the kernel's parts. PostgreSQL's heavyweight lock waits sleep on its latch, its
/// LWLocks on a semaphore (a futex); InnoDB's row lock waits on a condition variable (a futex).
/// MariaDB's other states say what a thread does, not what it waits for: not compared.
fn kinds(engine: &str) -> Vec<(&'static str, &'static [&'static str], Vec<&'static str>)> {
    match engine {
        "PostgreSQL" => vec![
            ("lock waits", &["Lock:"], vec!["latch"]),
            (
                "LWLock waits",
                &["LWLock:"],
                vec!["futex", "others_durable"],
            ),
            (
                "durable writes",
                &["IO:WALSync", "IO:DataFileSync", "IO:DataFileFlush"],
                vec!["durable_write"],
            ),
            (
                "storage reads",
                &["IO:DataFileRead", "IO:WALRead", "IO:DataFilePrefetch"],
                vec!["storage_read"],
            ),
            (
                "file writes",
                &["IO:WALWrite", "IO:DataFileWrite", "IO:DataFileExtend"],
                vec!["file_write"],
            ),
            (
                "on or waiting for a CPU",
                &["CPU"],
                vec!["cpu_user", "cpu_system", "run_queue"],
            ),
            ("the client's turn", &["Client:"], vec!["client"]),
        ],
        "MariaDB" => vec![
            ("lock waits", &["Lock:"], vec!["futex"]),
            ("the client's turn", &["Client:"], vec!["client"]),
        ],
        _ => Vec::new(),
    }
}

/// The engine's samples against the kernel's parts of the very transactions sampled.
fn agreement(engine: &str, m: &Matched) -> Vec<Agreement> {
    let samples = m.samples;
    if samples < 20 {
        return Vec::new();
    }
    let named = |e: &str, names: &[&str]| {
        names.iter().any(|n| {
            if n.ends_with(':') {
                e.starts_with(n)
            } else {
                e == *n
            }
        })
    };
    kinds(engine)
        .into_iter()
        .filter_map(|(wait, names, parts)| {
            let e = m
                .events
                .iter()
                .filter(|(name, _)| named(name, names))
                .map(|(_, n)| *n as f64)
                .fold(0.0, |a, b| a + b)
                / samples as f64;
            let k = Part::ALL
                .iter()
                .zip(m.shares)
                .filter(|(p, _)| parts.contains(&p.key()))
                .map(|(_, s)| s)
                .fold(0.0, |a, b| a + b)
                / samples as f64;
            if e.max(k) < 0.1 {
                return None;
            }
            let se = (e * (1.0 - e) / samples as f64).sqrt();
            Some(Agreement {
                wait,
                engine_share: e,
                parts,
                kernel_share: k,
                agree: (e - k).abs() <= 0.1 + 3.0 * se,
            })
        })
        .collect()
}

fn shares(m: &std::collections::BTreeMap<String, u64>, of: u64) -> Vec<Share> {
    let mut v: Vec<Share> = m
        .iter()
        .map(|(k, n)| Share {
            name: k.clone(),
            share: *n as f64 / of.max(1) as f64,
        })
        .collect();
    v.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.name.cmp(&b.name)));
    v
}

/// Put the sampler's view beside each type taken apart (`splits`: each type's, in the mix's
/// order, as `w`'s); `w` None: the engine was not sampled (`engine` names it).
pub fn add_engine_view<'a>(
    splits: impl Iterator<Item = &'a mut Option<TypeSplit>>,
    w: Option<&plumb_engine::oltp::waits::Waits>,
    engine: &str,
) {
    for (i, t) in splits.enumerate() {
        let Some(e) = t.as_mut() else {
            continue;
        };
        e.engine = Some(match w.and_then(|w| Some((w, w.types.get(i)?))) {
            Some((w, tw)) => {
                let events = shares(&tw.events, tw.samples);
                EngineView {
                    source: w.source.clone(),
                    samples: tw.samples,
                    checks: agreement(engine, &e.matched),
                    events,
                    holders: shares(&tw.holders, tw.samples),
                }
            }
            None => EngineView {
                source: format!("not sampled on {engine}"),
                samples: 0,
                events: Vec::new(),
                holders: Vec::new(),
                checks: Vec::new(),
            },
        });
    }
}

fn split(n: u64, wall_ns: u128, parts_ns: &[u128; PARTS], c: [u64; 6]) -> Split {
    let per = |v: f64| if n == 0 { 0.0 } else { v / n as f64 };
    let ms = |ns: u128| per(ns as f64 / 1e6);
    let client = parts_ns[Part::ALL
        .iter()
        .position(|p| *p == Part::Client)
        .expect("a client part")];
    let server = wall_ns.saturating_sub(client);
    let mut parts: Vec<PartMs> = Part::ALL
        .iter()
        .zip(parts_ns)
        .filter(|(p, _)| **p != Part::Client)
        .map(|(p, ns)| PartMs {
            part: p.key(),
            ms: ms(*ns),
            share: (server > 0).then(|| *ns as f64 / server as f64),
        })
        .collect();
    parts.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    parts.push(PartMs {
        part: Part::Client.key(),
        ms: ms(client),
        share: None,
    });
    let accounted: u128 = parts_ns.iter().sum();
    Split {
        transactions: n,
        wall_ms: ms(wall_ns),
        server_ms: ms(server),
        parts,
        unexplained_ms: ms(wall_ns.abs_diff(accounted)),
        syncs: per(c[0] as f64),
        flushes: per(c[1] as f64),
        fua: per(c[2] as f64),
        read_bios: per(c[3] as f64),
        write_bios: per(c[4] as f64),
        requests: per(c[5] as f64),
    }
}

fn counts(c: &Counts) -> [u64; 6] {
    [
        c.syncs,
        c.flushes,
        c.fua,
        c.read_bios,
        c.write_bios,
        c.requests,
    ]
}

impl TypeSplit {
    pub fn of(e: &Explained) -> TypeSplit {
        let mean = split(e.n, e.wall_ns, &e.parts_ns, counts(&e.counts));
        let slow: Vec<Slow> = e.slowest();
        let mut parts = [0u128; PARTS];
        let mut cs = [0u64; 6];
        let mut wall = 0u128;
        for s in &slow {
            wall += s.spent.wall_ns as u128;
            for (a, b) in parts.iter_mut().zip(s.spent.parts) {
                *a += b as u128;
            }
            for (a, b) in cs.iter_mut().zip(counts(&s.spent.counts)) {
                *a += b;
            }
        }
        TypeSplit {
            mean,
            slowest: split(slow.len() as u64, wall, &parts, cs),
            engine: None,
            tenths_ms: tenths_ms(e),
            matched: e.matched.clone(),
            closed: if e.n == 0 {
                0.0
            } else {
                e.closed as f64 / e.n as f64
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_sys::threadtime::Spent;

    fn spent(wall_ms: u64, parts: &[(Part, u64)], syncs: u64) -> Spent {
        let mut p = [0; PARTS];
        for (part, ms) in parts {
            p[Part::ALL.iter().position(|x| x == part).unwrap()] = ms * 1_000_000;
        }
        Spent {
            wall_ns: wall_ms * 1_000_000,
            parts: p,
            counts: Counts {
                syncs,
                flushes: syncs,
                ..Default::default()
            },
        }
    }

    #[test]
    fn the_mean_and_the_slowest_percent_split_the_servers_time_and_leave_the_clients_apart() {
        let mut e = Explained::default();
        // 99 quick transactions on a CPU, one slow one waiting for a durable write.
        for _ in 0..99 {
            let s = spent(2, &[(Part::User, 1), (Part::Client, 1)], 1);
            e.add(2000, &s, 0);
        }
        let slow = spent(
            40,
            &[
                (Part::User, 1),
                (Part::DurableWrite, 30),
                (Part::Futex, 8),
                (Part::Client, 1),
            ],
            1,
        );
        e.add(40_000, &slow, 1);
        let t = TypeSplit::of(&e);
        assert_eq!(t.closed, 1.0);
        assert_eq!(t.mean.transactions, 100);
        assert!((t.mean.wall_ms - 2.38).abs() < 1e-9, "{}", t.mean.wall_ms);
        assert!((t.mean.syncs - 1.0).abs() < 1e-9);
        assert_eq!(t.slowest.transactions, 1);
        assert_eq!(t.slowest.server_ms, 39.0);
        let top = &t.slowest.parts[0];
        assert_eq!(top.part, "durable_write");
        assert!((top.share.unwrap() - 30.0 / 39.0).abs() < 1e-9);
        // The client's part is last and has no share of the server's time.
        let last = t.slowest.parts.last().unwrap();
        assert_eq!((last.part, last.share), ("client", None));
        assert_eq!(t.slowest.unexplained_ms, 0.0);
        // Parts that fall short of the wall time: the rest is unexplained, not another part.
        let mut e = Explained::default();
        e.add(10_000, &spent(10, &[(Part::User, 6)], 0), 0);
        let t = TypeSplit::of(&e);
        assert_eq!(t.closed, 0.0);
        assert_eq!(t.mean.unexplained_ms, 4.0);
        assert_eq!(t.mean.parts[0].part, "cpu_user");
        // A tenth with no transaction: no samples inside the run.
        assert!(t.tenths_ms.is_empty());
        let mut e = Explained::default();
        for i in 0..10 {
            let ms = if i < 5 { 1 } else { 3 };
            e.add(
                1000,
                &spent(ms + 1, &[(Part::User, ms), (Part::Client, 1)], 0),
                i,
            );
        }
        let t = TypeSplit::of(&e);
        assert_eq!(
            t.tenths_ms["cpu_user"],
            [1.0, 1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 3.0]
        );
        assert_eq!(t.tenths_ms["server"], t.tenths_ms["cpu_user"]);
        assert_eq!(t.tenths_ms["client"], [1.0; 10]);
    }

    #[test]
    fn the_engine_and_the_kernel_agree_within_the_sampling_error_and_say_where_not() {
        // 100 samples of transactions of 10 ms: 4 on the latch (a lock wait), 5 on a CPU, 1
        // the client's.
        let t = spent(
            10,
            &[(Part::Latch, 4), (Part::User, 5), (Part::Client, 1)],
            0,
        );
        let sampled = |events: &[(&str, usize)]| -> Matched {
            let mut m = Matched::default();
            for (e, n) in events {
                for _ in 0..*n {
                    // A read of 0.1 ms: the 10 ms transaction is long enough beside it.
                    m.add(&[(e.to_string(), 100_000)], &t);
                }
            }
            m
        };
        // The engine said Lock in 38 of 100: they agree; CPU in 10 (the kernel saw 50%): they
        // do not; the client's 10 against 10%.
        let m = sampled(&[
            ("Lock:transactionid on pgbench_branches", 30),
            ("Lock:tuple", 8),
            ("CPU", 10),
            ("Client:ClientRead", 10),
            ("LWLock:WALWrite", 42),
        ]);
        let a = agreement("PostgreSQL", &m);
        let get = |w: &str| a.iter().find(|x| x.wait == w).unwrap();
        assert!(get("lock waits").agree);
        assert!((get("lock waits").engine_share - 0.38).abs() < 1e-9);
        assert!((get("lock waits").kernel_share - 0.4).abs() < 1e-9);
        assert!(!get("on or waiting for a CPU").agree);
        assert!(get("the client's turn").agree);
        // The engine's LWLock waits where the kernel saw no futex: they disagree.
        assert!(!get("LWLock waits").agree);
        // Kinds neither saw (storage reads) are left out.
        assert!(a.iter().all(|x| x.wait != "storage reads"));
        // Too few samples to say anything; MariaDB compares its lock waits to the futex part.
        assert!(agreement("PostgreSQL", &sampled(&[("CPU", 19)])).is_empty());
        let m = agreement(
            "MariaDB",
            &sampled(&[("Lock:InnoDB row lock", 40), ("CPU", 60)]),
        );
        assert_eq!(m[0].parts, ["futex"]);
        assert!(!m[0].agree);
        // A read of 1 ms beside a 10 ms transaction: not put beside its parts.
        let mut short = Matched::default();
        for _ in 0..50 {
            short.add(&[("CPU".to_string(), 1_000_000)], &t);
        }
        assert_eq!(short.samples, 0);
    }
}
