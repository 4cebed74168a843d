//! A window being watched for interference: the host's activity read at its start and judged at
//! its end against plumb's own processes (this one and its descendants, and any other roots the
//! caller names, such as the private server's postmaster, which is not plumb's child).

use plumb_analyze::interference::{accepted_set, judge, own_throttled, Accept, Interference, Own};
use plumb_sys::activity::{read, Activity};
use plumb_sys::cgroup::{ThrottleReading, Throttling};
use plumb_sys::Root;

/// What to watch: the host, the devices under the test, and whose processes are plumb's own.
#[derive(Debug, Clone)]
pub struct Scope {
    pub root: Root,
    /// Devices compared with plumb's own I/O (names as in /proc/diskstats).
    pub devices: Vec<String>,
    /// Other processes whose trees count as plumb's (the server it started or measures).
    pub also_own: Vec<u32>,
    /// Neighbours the DBA accepted (`--accept-neighbour`): noted, not held against a figure.
    pub accept: Vec<Accept>,
}

impl Scope {
    pub fn new(root: Root, devices: Vec<String>) -> Scope {
        Scope {
            root,
            devices,
            also_own: Vec::new(),
            accept: Vec::new(),
        }
    }
}

/// A process's cgroup v2 path (`0::/system.slice/x.service`), through the scope's root.
fn cgroup_of(root: &Root, pid: u32) -> Option<String> {
    plumb_sys::process::cgroups(root, pid)
        .into_iter()
        .find(|l| l.hierarchy_id == 0 && l.controllers.is_empty())
        .map(|l| l.path)
}

pub struct Watch {
    scope: Scope,
    before: Activity,
    throttling: Throttling,
    throttled_before: ThrottleReading,
}

impl Watch {
    pub fn start(scope: &Scope) -> Watch {
        let me = plumb_sys::activity::own_pid(&scope.root);
        let throttling = Throttling::of(&scope.root, me);
        Watch {
            scope: scope.clone(),
            throttled_before: throttling.read(&scope.root),
            throttling,
            before: read(&scope.root),
        }
    }

    pub fn finish(self) -> Interference {
        let after = read(&self.scope.root);
        let throttled = Throttling::between(
            &self.throttled_before,
            &self.throttling.read(&self.scope.root),
        );
        let mut roots = vec![plumb_sys::activity::own_pid(&self.scope.root)];
        roots.extend(&self.scope.also_own);
        let root = &self.scope.root;
        let accepted = accepted_set(&self.before, &after, &self.scope.accept, &|pid| {
            cgroup_of(root, pid)
        });
        let mut judged = judge(
            &self.before,
            &after,
            &Own { roots, accepted },
            &self.scope.devices,
        );
        if let Some(n) = throttled
            .and_then(|(periods, ns)| own_throttled(periods, ns as f64 / 1e9, judged.window_s))
        {
            judged.add(n);
        }
        judged
    }
}
