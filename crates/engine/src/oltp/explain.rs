//! Where each transaction type's time went on the server (`plumb load --explain`): the driver
//! reads its connection's server thread's clocks ([`plumb_sys::threadtime`]) as a transaction
//! starts and as it ends, and adds the difference here, per type. Memory stays small: sums for
//! the mean, and the slowest 1% of transactions (at least one) kept whole for what p99 is made
//! of.

use plumb_sys::threadtime::{Counts, Spent, ThreadTimes, PARTS};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::{Arc, Mutex};

/// What `--explain` hands the driver: the kernel's clocks, and where the driver says which
/// transaction type each server thread runs now.
#[derive(Debug, Clone)]
pub struct Explain {
    pub clocks: Arc<ThreadTimes>,
    pub in_flight: Arc<InFlight>,
}

/// The transaction each watched server thread runs now: its type (an index in the mix), a
/// number that changes with every transaction, and what the engine's wait sampler said of it.
/// Set by the driver as a transaction starts and cleared as it ends, read by the sampler before
/// and after each read (a sample counts only where the same transaction ran at both), which
/// hands the transaction its sample: the driver, at the end, puts the kernel's parts of that
/// very transaction beside what the engine said of it.
#[derive(Debug, Default)]
pub struct InFlight(Mutex<(u64, BTreeMap<u32, (usize, u64, Vec<Sample>)>)>);

/// What the sampler said of a transaction once: the event, and how long the read took (ns).
pub type Sample = (String, u64);

impl InFlight {
    /// Thread `tid` starts a transaction of type `kind` (None: its transaction ended); what the
    /// sampler said of the one that ended.
    pub fn set(&self, tid: u32, kind: Option<usize>) -> Vec<Sample> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.0 += 1;
        let n = g.0;
        let old = match kind {
            Some(k) => g.1.insert(tid, (k, n, Vec::new())),
            None => g.1.remove(&tid),
        };
        old.map(|(_, _, samples)| samples).unwrap_or_default()
    }

    /// The threads in a transaction now: its type and number.
    pub fn now(&self) -> BTreeMap<u32, (usize, u64)> {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.1.iter().map(|(t, (k, n, _))| (*t, (*k, *n))).collect()
    }

    /// The sampler saw `event` on thread `tid` during transaction `n`, in a read that took
    /// `read_ns`: kept with it, if it still runs.
    pub fn sampled(&self, tid: u32, n: u64, event: &str, read_ns: u64) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, m, samples)) = g.1.get_mut(&tid) {
            if *m == n {
                samples.push((event.to_string(), read_ns));
            }
        }
    }
}

/// The engine's samples of a type's transactions beside the kernel's parts of the very same
/// transactions: each sample's event counted, and the part shares (of its transaction's wall
/// time) summed once a sample, so that the share of the samples naming a wait and the kernel's
/// share of the time in its parts have the same expectation, however the sampling leans
/// towards longer transactions. Only transactions at least [`LONG_NEXT_TO_A_READ`] times as
/// long as the read that sampled them count: a sample must fall inside the transaction from
/// the read's start to its end, so in one hardly longer than a read it can only fall in its
/// middle, never on its first statements or its commit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matched {
    pub samples: u64,
    pub events: BTreeMap<String, u64>,
    /// Per part (in [`plumb_sys::threadtime::Part::ALL`]'s order): its share of the sampled
    /// transaction's wall time, summed over the samples.
    pub shares: [f64; PARTS],
}

/// How much longer than the read that sampled it a transaction must be for its sample to be
/// put beside its parts.
pub const LONG_NEXT_TO_A_READ: u64 = 20;

impl Matched {
    /// One transaction's samples, and its parts.
    pub fn add(&mut self, samples: &[Sample], s: &Spent) {
        if s.wall_ns == 0 {
            return;
        }
        for (e, read_ns) in samples {
            if s.wall_ns < LONG_NEXT_TO_A_READ * read_ns {
                continue;
            }
            self.samples += 1;
            *self.events.entry(e.clone()).or_default() += 1;
            for (sum, p) in self.shares.iter_mut().zip(s.parts) {
                *sum += p as f64 / s.wall_ns as f64;
            }
        }
    }
}

/// How far a transaction's parts may fall short of (or exceed) its wall time and still count
/// as closed: 5%.
pub const CLOSE_WITHIN: f64 = 0.05;

/// One transaction's time on the server and its latency at the client (µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slow {
    pub latency_us: u64,
    pub spent: Spent,
}

impl PartialOrd for Slow {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Slow {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.latency_us, self.spent.wall_ns).cmp(&(o.latency_us, o.spent.wall_ns))
    }
}

/// A type's transactions' time, summed, and its slowest.
#[derive(Debug, Clone, Default)]
pub struct Explained {
    /// Transactions counted.
    pub n: u64,
    /// Their wall time (ns) and each part's, summed.
    pub wall_ns: u128,
    pub parts_ns: [u128; PARTS],
    pub counts: Counts,
    /// Transactions whose parts add up to their wall time within [`CLOSE_WITHIN`].
    pub closed: u64,
    /// Per tenth of the timed window (by when each transaction ended): transactions and each
    /// part's time, summed: the samples a comparison of two single runs tests.
    pub tenths: [(u64, [u128; PARTS]); 10],
    /// The engine's samples of these transactions beside their parts.
    pub matched: Matched,
    slowest: BinaryHeap<Reverse<Slow>>,
}

fn add_counts(a: &mut Counts, b: &Counts) {
    a.syncs += b.syncs;
    a.requests += b.requests;
    a.flushes += b.flushes;
    a.fua += b.fua;
    a.read_bios += b.read_bios;
    a.write_bios += b.write_bios;
}

impl Explained {
    /// Count one transaction, which ended in `tenth` of the timed window.
    pub fn add(&mut self, latency_us: u64, s: &Spent, tenth: usize) {
        if let Some((n, parts)) = self.tenths.get_mut(tenth) {
            *n += 1;
            for (sum, p) in parts.iter_mut().zip(s.parts) {
                *sum += p as u128;
            }
        }
        self.n += 1;
        self.wall_ns += s.wall_ns as u128;
        for (sum, p) in self.parts_ns.iter_mut().zip(s.parts) {
            *sum += p as u128;
        }
        add_counts(&mut self.counts, &s.counts);
        let gap = s.wall_ns.abs_diff(s.accounted_ns()) as f64;
        self.closed += (gap <= CLOSE_WITHIN * s.wall_ns as f64) as u64;
        self.keep(Slow {
            latency_us,
            spent: *s,
        });
    }

    /// How many of the slowest are kept: 1% of those counted, at least one.
    fn room(&self) -> usize {
        (self.n.div_ceil(100) as usize).max(1)
    }

    fn keep(&mut self, s: Slow) {
        self.slowest.push(Reverse(s));
        while self.slowest.len() > self.room() {
            self.slowest.pop();
        }
    }

    /// Another client's figures for the same type.
    pub fn merge(&mut self, o: &Explained) {
        self.n += o.n;
        self.wall_ns += o.wall_ns;
        for (a, b) in self.parts_ns.iter_mut().zip(o.parts_ns) {
            *a += b;
        }
        add_counts(&mut self.counts, &o.counts);
        self.closed += o.closed;
        for ((n, parts), (m, more)) in self.tenths.iter_mut().zip(&o.tenths) {
            *n += m;
            for (a, b) in parts.iter_mut().zip(more) {
                *a += b;
            }
        }
        for Reverse(s) in o.slowest.iter() {
            self.keep(*s);
        }
        let m = &mut self.matched;
        m.samples += o.matched.samples;
        for (e, n) in &o.matched.events {
            *m.events.entry(e.clone()).or_default() += n;
        }
        for (a, b) in m.shares.iter_mut().zip(o.matched.shares) {
            *a += b;
        }
    }

    /// The slowest 1% (by latency at the client), slowest first.
    pub fn slowest(&self) -> Vec<Slow> {
        let mut v: Vec<Slow> = self.slowest.iter().map(|Reverse(s)| *s).collect();
        v.sort_by(|a, b| b.cmp(a));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_sys::threadtime::Part;

    fn spent(wall: u64, user: u64, client: u64) -> Spent {
        let mut parts = [0; PARTS];
        parts[Part::ALL.iter().position(|p| *p == Part::User).unwrap()] = user;
        parts[Part::ALL.iter().position(|p| *p == Part::Client).unwrap()] = client;
        Spent {
            wall_ns: wall,
            parts,
            counts: Counts {
                syncs: 1,
                ..Default::default()
            },
        }
    }

    #[test]
    fn sums_count_every_transaction_and_the_slowest_percent_is_kept_whole() {
        let mut e = Explained::default();
        for i in 1..=1000u64 {
            e.add(
                i,
                &spent(1000 * i, 900 * i, 100 * i),
                (i as usize - 1) / 100,
            );
        }
        assert_eq!(e.n, 1000);
        assert_eq!(e.closed, 1000);
        assert_eq!(e.counts.syncs, 1000);
        assert_eq!(e.wall_ns, 1000 * 500_500);
        let slow = e.slowest();
        assert_eq!(slow.len(), 10);
        assert_eq!(slow[0].latency_us, 1000);
        assert_eq!(slow[9].latency_us, 991);
        // Parts short of the wall time by more than 5%: not closed.
        e.add(5, &spent(1000, 800, 100), 0);
        assert_eq!(e.closed, 1000);
        // Two clients' figures together: the slowest of both.
        let mut other = Explained::default();
        other.add(5000, &spent(5000, 5000, 0), 9);
        e.merge(&other);
        assert_eq!(e.n, 1002);
        assert_eq!(e.slowest()[0].latency_us, 5000);
        assert_eq!(e.slowest().len(), 11);
        // Each tenth holds its hundred, plus what was added to it after.
        assert_eq!(e.tenths[1].0, 100);
        assert_eq!((e.tenths[0].0, e.tenths[9].0), (101, 101));
    }
}
