//! Fuzzing the Kubernetes YAML reader behind `plumb k8s lint` (issue 11): real manifests cut
//! and changed, and YAML-shaped text made of manifest fragments, give findings or a YAML error
//! with a line number, never a panic. A bounded number of cases runs with every `cargo test`;
//! `PLUMB_FUZZ_CASES` raises it.

use crate::k8s::{lint, LintOptions};
use proptest::prelude::*;

fn cases(default: u32) -> u32 {
    std::env::var("PLUMB_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn manifests() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/k8s");
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no manifests in {}", dir.display());
    v
}

const FRAGMENTS: &[&str] = &[
    "apiVersion: apps/v1\n",
    "kind: StatefulSet\n",
    "kind: Pod\n",
    "kind: List\n",
    "---\n",
    "metadata:\n",
    "  name: db\n",
    "spec:\n",
    "  template:\n",
    "    spec:\n",
    "  containers:\n",
    "  - name: x\n",
    "    image: mcr.microsoft.com/mssql/server:2022-latest\n",
    "    image: postgres:16\n",
    "    resources:\n",
    "      limits:\n",
    "        memory: 3Gi\n",
    "        memory: 12\n",
    "        memory: 16Ei\n",
    "        memory: -1\n",
    "        cpu: lots\n",
    "        cpu: 500m\n",
    "      requests: {memory: 1e400, cpu: 2}\n",
    "    env:\n",
    "    - name: MSSQL_MEMORY_LIMIT_MB\n",
    "      value: \"99999999999999999999\"\n",
    "    - name: MSSQL_SA_PASSWORD\n",
    "      value: x\n",
    "    args: [\"-c\", \"shared_buffers=1TB\"]\n",
    "  volumes: ~\n",
    "  - &a {name: v}\n",
    "  - *a\n",
    "  - *nowhere\n",
    "  <<: *a\n",
    "\t",
    "  ",
    "- ",
    "? ",
    ": ",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    "|\n",
    ">\n",
    "#\n",
    "%YAML 1.2\n",
    "!!binary x\n",
    "\u{feff}",
    "\0",
    "é",
    "\u{1F4BE}",
    "\r\n",
];

#[derive(Debug, Clone)]
enum Edit {
    Cut(usize),
    Drop(usize, usize),
    Insert(usize, &'static str),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Cut),
        (any::<usize>(), 1usize..40).prop_map(|(i, n)| Edit::Drop(i, n)),
        (any::<usize>(), proptest::sample::select(FRAGMENTS)).prop_map(|(i, f)| Edit::Insert(i, f)),
    ]
}

/// Apply an edit at character positions (the text stays valid UTF-8).
fn apply(text: &str, e: &Edit) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| i % (chars.len() + 1);
    match e {
        Edit::Cut(i) => chars[..at(*i)].iter().collect(),
        Edit::Drop(i, n) => {
            let a = at(*i);
            let b = (a + n).min(chars.len());
            chars[..a].iter().chain(chars[b..].iter()).collect()
        }
        Edit::Insert(i, f) => {
            let a = at(*i);
            let mut s: String = chars[..a].iter().collect();
            s.push_str(f);
            s.extend(chars[a..].iter());
            s
        }
    }
}

fn check(text: &str) {
    let opts = LintOptions {
        allocatable: Some(4 << 30),
    };
    if let Ok(findings) = lint("fuzz.yaml", text, &opts) {
        let lines = text.lines().count().max(1);
        for f in findings {
            assert!(f.line <= lines + 1, "line {} of {lines}", f.line);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(1500), ..ProptestConfig::default() })]

    #[test]
    fn edited_manifests_never_panic(
        which in any::<usize>(),
        edits in proptest::collection::vec(edit(), 1..8),
    ) {
        let all = manifests();
        let mut text = all[which % all.len()].clone();
        for e in &edits {
            text = apply(&text, e);
        }
        check(&text);
    }

    #[test]
    fn yaml_made_of_fragments_never_panics(
        parts in proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..40)
    ) {
        check(&parts.concat());
    }
}
