//! Container evidence. plumb reports what it saw and where, and leaves the verdict to the
//! evidence: a marker file, an environment variable, a cgroup path a runtime is known to use.

use crate::mount::MountEntry;
use crate::process::CgroupLine;
use crate::Root;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// The runtime or orchestrator the evidence points at (`docker`, `kubernetes`, ...).
    pub points_to: String,
    /// Where it was seen (a file, variable or cgroup line).
    pub source: String,
    pub detail: String,
}

/// Known cgroup path fragments and what they mean.
const CGROUP_MARKERS: &[(&str, &str)] = &[
    ("kubepods", "kubernetes"),
    ("docker-", "docker"),
    ("/docker/", "docker"),
    ("libpod-", "podman"),
    ("/libpod", "podman"),
    ("cri-containerd-", "containerd"),
    ("/containerd/", "containerd"),
    ("crio-", "cri-o"),
    ("/lxc/", "lxc"),
    ("lxc.payload", "lxc"),
    ("/machine.slice/", "systemd-nspawn or libvirt"),
    ("/actions_job/", "github-actions"),
];

/// Kubernetes QoS class from a kubepods cgroup path, where the path tells it.
pub(crate) fn k8s_qos_from_cgroup(path: &str) -> Option<&'static str> {
    if !path.contains("kubepods") {
        return None;
    }
    if path.contains("besteffort") {
        Some("BestEffort")
    } else if path.contains("burstable") {
        Some("Burstable")
    } else {
        // Guaranteed pods sit directly under kubepods.
        Some("Guaranteed")
    }
}

/// Gather evidence for the process `pid` (None: plumb itself). `env` is that process's
/// environment when readable.
pub fn evidence(
    root: &Root,
    cgroups: &[CgroupLine],
    mounts: &[MountEntry],
    env: Option<&[(String, String)]>,
) -> Vec<Evidence> {
    let mut ev = Vec::new();
    let mut add = |p: &str, s: String, d: String| {
        let e = Evidence {
            points_to: p.to_string(),
            source: s,
            detail: d,
        };
        // One line per finding: a cgroup path repeated on every v1 hierarchy is one fact.
        if !ev
            .iter()
            .any(|x: &Evidence| x.points_to == e.points_to && x.detail == e.detail)
        {
            ev.push(e);
        }
    };
    for (file, who) in [
        ("/.dockerenv", "docker"),
        ("/run/.containerenv", "podman"),
        (
            "/var/run/secrets/kubernetes.io/serviceaccount",
            "kubernetes",
        ),
    ] {
        if root.exists(file) {
            add(who, file.to_string(), "exists".to_string());
        }
    }
    if let Ok(Some(c)) = root.read_optional("/run/systemd/container") {
        let c = c.trim();
        if !c.is_empty() {
            add(c, "/run/systemd/container".into(), c.to_string());
        }
    }
    if let Some(env) = env {
        for (k, v) in env {
            match k.as_str() {
                "KUBERNETES_SERVICE_HOST" => {
                    add("kubernetes", format!("environment {k}"), v.clone())
                }
                "container" => add(v, format!("environment {k}"), v.clone()),
                _ => {}
            }
        }
    }
    for l in cgroups {
        for (frag, who) in CGROUP_MARKERS {
            if l.path.contains(frag) {
                let mut d = format!("cgroup path {}", l.path);
                if let Some(q) = k8s_qos_from_cgroup(&l.path) {
                    d.push_str(&format!(" (QoS class {q})"));
                }
                add(who, "/proc/PID/cgroup".to_string(), d);
            }
        }
    }
    if let Some(rootfs) = mounts.iter().rev().find(|m| m.mount_point == "/") {
        if rootfs.fs_type == "overlay" {
            add(
                "container image",
                "/proc/self/mountinfo".into(),
                "the root filesystem is an overlay mount".into(),
            );
        }
    }
    ev
}

/// Parse a NUL-separated /proc/PID/environ.
pub(crate) fn parse_environ(text: &str) -> Vec<(String, String)> {
    text.split('\0')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::parse_cgroup_file;
    use crate::testutil::put;
    use std::path::Path;

    #[test]
    fn kubernetes_pod_evidence_and_qos() {
        let d = tempfile::tempdir().unwrap();
        put(d.path(), ".dockerenv", "");
        let l = parse_cgroup_file(
            Path::new("c"),
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-ab.scope\n",
        )
        .unwrap();
        let env = parse_environ("PATH=/bin\0KUBERNETES_SERVICE_HOST=10.0.0.1\0");
        let ev = evidence(&Root::new(d.path()), &l, &[], Some(&env));
        let who: Vec<&str> = ev.iter().map(|e| e.points_to.as_str()).collect();
        assert!(who.contains(&"kubernetes"));
        assert!(who.contains(&"containerd"));
        assert!(who.contains(&"docker"));
        assert!(
            ev.iter().any(|e| e.detail.contains("QoS class Burstable")),
            "{ev:?}"
        );
    }

    #[test]
    fn plain_host_has_no_evidence() {
        let d = tempfile::tempdir().unwrap();
        let l = parse_cgroup_file(
            Path::new("c"),
            "0::/user.slice/user-1000.slice/session-2.scope\n",
        )
        .unwrap();
        assert!(evidence(&Root::new(d.path()), &l, &[], Some(&[])).is_empty());
        assert_eq!(
            k8s_qos_from_cgroup("/kubepods/podabc/123"),
            Some("Guaranteed")
        );
        assert_eq!(k8s_qos_from_cgroup("/system.slice"), None);
    }
}
