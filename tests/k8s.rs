//! `plumb k8s`: the seed's numbers, the Kubernetes documentation's example, lint on the seed's
//! manifests, and generated manifests that lint clean.

mod common;
use common::plumb;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn run(args: &[&str]) -> Output {
    plumb().args(args).output().expect("run plumb")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

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
        "--engine",
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
        "--engine",
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
                "k8s", "manifest", "--engine", engine, "--memory", "4Gi", "--kind", kind, "--cpu",
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
        String::from_utf8(run(&["k8s", "manifest", "--engine", "mssql", "--memory", "4Gi"]).stdout)
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
            vec!["k8s", "manifest", "--engine", "mssql", "--memory", "1Gi"],
            "2000 MB",
        ),
        (
            vec!["k8s", "manifest", "--engine", "oracle", "--memory", "4Gi"],
            "--engine oracle",
        ),
        (
            vec!["k8s", "manifest", "--engine", "postgres", "--memory", "4XB"],
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
        let mut all = vec!["k8s", "manifest", "--engine", "postgres", "--memory", "4Gi"];
        all.extend(&args);
        let o = run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(flag), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}: YAML was written");
    }
    // 16Ei is 2^64 bytes: refused, not saturated to 16 EiB - 1.
    let o = run(&[
        "k8s", "manifest", "--engine", "postgres", "--memory", "16Ei",
    ]);
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
        "--engine",
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
