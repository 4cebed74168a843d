//! `plumb k8s`: the seed's numbers, the Kubernetes documentation's example, lint on the seed's
//! manifests, and generated manifests that lint clean.

mod common;
use common::{run, stderr};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/k8s")
        .join(name)
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

#[test]
fn advise_reproduces_the_seed_node() {
    // A Standard_DS2_v2 (7 GiB) on AKS before 1.29, capacity 7113152Ki: allocatable 4667840Ki.
    let o = run(&[
        "k8s",
        "advise",
        "--preset",
        "aks-pre-1.29",
        "--node-memory",
        "7Gi",
        "--capacity",
        "7113152Ki",
        "--kind",
        "mssql",
        "--limit",
        "3Gi",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["allocatable_bytes"].as_u64().unwrap(), 4667840 * 1024);
    let text = j.to_string();
    assert!(
        text.contains("Detected 2458 MB of RAM"),
        "3Gi limit without memorylimitmb"
    );
    assert!(
        text.contains("Detected 5557 MB of RAM"),
        "no limit on that node"
    );
    assert!(j["without_limit"][1]
        .as_str()
        .unwrap()
        .contains("evicts the pod"));
    let t = String::from_utf8(
        run(&[
            "k8s",
            "advise",
            "--preset",
            "aks-pre-1.29",
            "--node-memory",
            "7Gi",
            "--capacity",
            "7113152Ki",
        ])
        .stdout,
    )
    .unwrap();
    assert!(t.contains("= 4667840Ki (4.45 GiB)"), "{t}");
}

#[test]
fn advise_reproduces_the_kubernetes_documentation() {
    // 32Gi node, kube-reserved 2Gi, system-reserved 1Gi, eviction 500Mi: 28.5Gi allocatable.
    let o = run(&[
        "k8s",
        "advise",
        "--capacity",
        "32Gi",
        "--kube-reserved",
        "2Gi",
        "--system-reserved",
        "1Gi",
        "--eviction-hard",
        "500Mi",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(t.contains("= 29196Mi (28.5 GiB)"), "{t}");
}

#[test]
fn advise_settings_fit_inside_the_pod() {
    let o = run(&[
        "k8s",
        "advise",
        "--capacity",
        "16Gi",
        "--kind",
        "postgres",
        "--limit",
        "8Gi",
        "--json",
    ]);
    let j = json(&o);
    let s: Vec<(String, String)> = j["engine"]["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x[0].as_str().unwrap().to_string(),
                x[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        s.contains(&("shared_buffers".into(), "2048MB".into())),
        "{s:?}"
    );
    // A limit above what the node has left is a failed check.
    let o = run(&["k8s", "advise", "--capacity", "4Gi", "--limit", "8Gi"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("will not schedule"));
}

#[test]
fn lint_flags_the_seed_manifests() {
    let f = fixture("seed-no-limits.yaml");
    let o = run(&["k8s", "lint", f.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "errors exit 1");
    let j = json(&o);
    let fi = j["findings"].as_array().unwrap();
    let lim = fi.iter().find(|x| x["rule"] == "memory-limits").unwrap();
    assert_eq!(lim["severity"], "error");
    assert_eq!(lim["line"], 21, "the container's line in the file");
    assert!(fi.iter().any(|x| x["rule"] == "separate-volumes"));
    let o = run(&[
        "k8s",
        "lint",
        fixture("seed-three-volumes.yaml").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(
        t.contains("seed-three-volumes.yaml:66: error [plaintext-secret]"),
        "{t}"
    );
    assert!(
        !t.contains("separate-volumes"),
        "three volumes are separate: {t}"
    );
}

#[test]
fn generated_manifests_lint_clean() {
    let d = tempfile::tempdir().unwrap();
    for engine in ["mssql", "postgres", "mariadb"] {
        for kind in ["deployment", "statefulset"] {
            let o = run(&[
                "k8s",
                "manifest",
                "--kind",
                engine,
                "--memory",
                "4Gi",
                "--workload",
                kind,
                "--cpu",
                "2",
            ]);
            assert!(o.status.success(), "{engine} {kind}: {}", stderr(&o));
            let p = d.path().join(format!("{engine}-{kind}.yaml"));
            std::fs::write(&p, &o.stdout).unwrap();
            let l = run(&[
                "k8s",
                "lint",
                p.to_str().unwrap(),
                "--allocatable",
                "6Gi",
                "--json",
            ]);
            let j = json(&l);
            assert_eq!(
                l.status.code(),
                Some(0),
                "{engine} {kind}: {}",
                j["findings"]
            );
            assert_eq!(
                j["findings"].as_array().unwrap().len(),
                0,
                "{engine} {kind}: {}",
                j["findings"]
            );
            let y = String::from_utf8(o.stdout).unwrap();
            assert!(
                y.contains("memory: 4Gi") && y.contains("secretKeyRef"),
                "{y}"
            );
        }
    }
    // The seed's layout: MSSQL_DATA_DIR and MSSQL_LOG_DIR on their own volumes.
    let y =
        String::from_utf8(run(&["k8s", "manifest", "--kind", "mssql", "--memory", "4Gi"]).stdout)
            .unwrap();
    assert!(
        y.contains("MSSQL_DATA_DIR")
            && y.contains("MSSQL_LOG_DIR")
            && y.contains("MSSQL_MEMORY_LIMIT_MB")
    );
    assert_eq!(y.matches("kind: PersistentVolumeClaim").count(), 3);
}

#[test]
fn bad_input_exits_2() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Pod\nspec:\n  containers: [unclosed\n",
    )
    .unwrap();
    let o = run(&["k8s", "lint", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.yaml:"), "{}", stderr(&o));
    let o = run(&["k8s", "lint", "/nonexistent.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent.yaml"));
    for (args, needle) in [
        (vec!["k8s", "advise", "--capacity", "12XB"], "--capacity"),
        (vec!["k8s", "advise", "--capacity", "-1Gi"], "--capacity"),
        (
            vec![
                "k8s",
                "advise",
                "--capacity",
                "1Gi",
                "--kube-reserved",
                "2Gi",
            ],
            "leave nothing",
        ),
        (
            vec![
                "k8s",
                "advise",
                "--capacity",
                "8Gi",
                "--preset",
                "openshift",
            ],
            "--preset openshift",
        ),
        (
            vec!["k8s", "manifest", "--kind", "mssql", "--memory", "1Gi"],
            "2000 MB",
        ),
        (
            vec!["k8s", "manifest", "--kind", "oracle", "--memory", "4Gi"],
            "--kind oracle",
        ),
        (
            vec!["k8s", "manifest", "--kind", "postgres", "--memory", "4XB"],
            "--memory",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn issue_11_nonsense_quantities_names_and_images_are_refused() {
    // Flags: each refused with exit 2, naming the flag, and no YAML on stdout.
    for (args, flag) in [
        (vec!["--cpu", "lots"], "--cpu"),
        (vec!["--cpu", "-2"], "--cpu"),
        (vec!["--image", "postgres:16\nfoo: bar"], "--image"),
        (vec!["--image", "a b"], "--image"),
        (vec!["--secret", "x'y"], "--secret"),
        (vec!["--storage-class", "Fast SSD"], "--storage-class"),
        (vec!["--data-size", "lots"], "--data-size"),
    ] {
        let mut all = vec!["k8s", "manifest", "--kind", "postgres", "--memory", "4Gi"];
        all.extend(&args);
        let o = run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(flag), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}: YAML was written");
    }
    // 16Ei is 2^64 bytes: refused, not saturated to 16 EiB - 1.
    let o = run(&["k8s", "manifest", "--kind", "postgres", "--memory", "16Ei"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("16Ei"), "{}", stderr(&o));
    // Other pods take more than the node has: no "limit = 0" advice.
    let o = run(&[
        "k8s",
        "advise",
        "--node-memory",
        "8Gi",
        "--other-requests",
        "100Gi",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(stderr(&o).contains("--other-requests"), "{}", stderr(&o));

    // Lint catches what the generator now refuses.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bad.yaml");
    std::fs::write(
        &f,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: db\n    image: postgres:16\n    resources:\n      requests: {memory: 12, cpu: lots}\n      limits: {memory: 12, cpu: lots}\n",
    )
    .unwrap();
    let o = run(&["--json", "k8s", "lint", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    let codes: Vec<String> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(codes.iter().any(|c| c == "memory-unit"), "{codes:?}");
    assert!(codes.iter().any(|c| c == "bad-quantity"), "{codes:?}");

    // What the generator accepts still lints clean, odd but valid values included.
    let o = run(&[
        "k8s",
        "manifest",
        "--kind",
        "mssql",
        "--memory",
        "4Gi",
        "--cpu",
        "1500m",
        "--image",
        "registry.example.com:5000/mssql/server@sha256:0123abcd",
        "--secret",
        "db.pass-1",
        "--storage-class",
        "fast.ssd",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = d.path().join("m.yaml");
    std::fs::write(&m, &o.stdout).unwrap();
    let o = run(&["k8s", "lint", m.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// The lines of a YAML list under `key:` at the indentation the generator writes.
fn list_after<'a>(y: &'a str, key: &str) -> Vec<&'a str> {
    let mut it = y.lines().skip_while(|l| l.trim() != key).skip(1);
    let mut out = Vec::new();
    for l in it.by_ref() {
        match l.trim().strip_prefix("- ") {
            Some(v) => out.push(v.trim_matches('"')),
            None => break,
        }
    }
    out
}

#[test]
fn plumbs_daemonset_lints_clean_with_only_the_privileges_plumb_needs() {
    let d = tempfile::tempdir().unwrap();
    let o = run(&[
        "k8s",
        "manifest",
        "--plumb",
        "--image",
        "registry.example/plumb:1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let y = String::from_utf8(o.stdout).unwrap();
    let p = d.path().join("plumb.yaml");
    std::fs::write(&p, &y).unwrap();
    let l = run(&["k8s", "lint", p.to_str().unwrap(), "--json"]);
    let j = json(&l);
    assert_eq!(l.status.code(), Some(0), "{}", j["findings"]);
    assert_eq!(
        j["findings"].as_array().unwrap().len(),
        0,
        "{}",
        j["findings"]
    );
    for want in [
        "kind: DaemonSet",
        "hostPID: true",
        "automountServiceAccountToken: false",
        "readOnlyRootFilesystem: true",
        "allowPrivilegeEscalation: false",
        "image: registry.example/plumb:1",
        "prometheus.io/port: \"9494\"",
    ] {
        assert!(y.contains(want), "{want} missing:\n{y}");
    }
    assert_eq!(list_after(&y, "drop:"), ["ALL"]);
    assert_eq!(list_after(&y, "add:"), ["SYS_PTRACE", "DAC_READ_SEARCH"]);
    assert_eq!(
        y.matches("readOnly: true").count(),
        y.matches("mountPath:").count(),
        "every mount read-only"
    );
    // The same file, made privileged, is flagged.
    let bad = d.path().join("bad.yaml");
    std::fs::write(&bad, y.replace("privileged: false", "privileged: true")).unwrap();
    let j = json(&run(&["k8s", "lint", bad.to_str().unwrap(), "--json"]));
    assert!(
        j["findings"].to_string().contains("\"privileged\""),
        "{}",
        j["findings"]
    );
    // Bad input.
    let o = run(&["k8s", "manifest", "--plumb", "--kind", "postgres"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&[
        "k8s", "manifest", "--kind", "postgres", "--memory", "4Gi", "--port", "80",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--plumb"), "{}", stderr(&o));

    // Run the container's arguments as the pod would: the node's /proc and /sys under /host,
    // uid 0 with only the two capabilities; another user's process is read in full (its PSS),
    // and without them it is not. (Needs root, unshare and setpriv.)
    if !common::needs(
        &[common::Need::Root],
        "running the DaemonSet's arguments needs root",
    ) {
        return;
    }
    let args = list_after(&y, "args:");
    assert_eq!(args[0], "record");
    let other = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sleep",
            "60",
        ])
        .spawn()
        .expect("setpriv (util-linux)");
    let host = d.path().join("host");
    std::fs::create_dir_all(host.join("proc")).unwrap();
    std::fs::create_dir_all(host.join("sys")).unwrap();
    let pss_with = |caps: &str| -> Option<String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = format!(
            "mount --rbind /proc {h}/proc && mount --rbind /sys {h}/sys && exec setpriv --bounding-set={caps} --no-new-privs {plumb}",
            h = host.display(),
            plumb = env!("CARGO_BIN_EXE_plumb"),
        );
        for a in &args {
            let a = a
                .replace("/host", &host.display().to_string())
                .replace("$(HOST_IP):9494", &format!("127.0.0.1:{port}"));
            cmd.push_str(&format!(" '{a}'"));
        }
        cmd.push_str(&format!(" --pid {} --duration 4s", other.id()));
        let child = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &cmd])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let mut body = None;
        while t0.elapsed() < std::time::Duration::from_secs(4) {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let _ = write!(s, "GET /metrics HTTP/1.0\r\n\r\n");
                let mut b = String::new();
                let _ = s.read_to_string(&mut b);
                if b.contains("plumb_tree_processes") {
                    body = Some(b);
                    break;
                }
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let b = body.expect("no /metrics with the tree");
        assert!(b.contains("plumb_cpu_seconds_total{host="), "{b}");
        b.lines()
            .find(|l| l.starts_with("plumb_tree_pss_bytes{"))
            .map(str::to_string)
    };
    let with = pss_with("-all,+sys_ptrace,+dac_read_search");
    let without = pss_with("-all");
    let mut other = other;
    let _ = other.kill();
    let _ = other.wait();
    let with = with.expect("the tree's PSS with SYS_PTRACE and DAC_READ_SEARCH");
    let v: f64 = with.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(v > 0.0, "{with}");
    assert!(
        without.is_none(),
        "without the capabilities plumb could not read it, so it needs them: {without:?}"
    );
}
