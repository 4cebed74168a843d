use super::*;
use plumb_analyze::lab::{Disturbed, Severity};
use plumb_analyze::{Level, WithFacts};
use std::path::Path;

/// The codes given to `Note::new`, `Finding::new` and `Said::new` as literals in a source tree.
fn literal_codes(dir: &Path, ctor: &str, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            literal_codes(&p, ctor, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let s = std::fs::read_to_string(&p).unwrap();
            for (at, _) in s.match_indices(ctor) {
                let rest = &s[at + ctor.len()..];
                let call = &rest[..rest.find(')').unwrap_or(rest.len())];
                let mut q = call.split('"');
                if let (Some(_), Some(code)) = (q.next(), q.next()) {
                    out.push((code.to_string(), p.display().to_string()));
                }
            }
        }
    }
}

fn crates_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Codes chosen at run time from literals outside the constructor call.
const CHOSEN: [&str; 19] = [
    "container-without-memory-limit",
    "container-marker-without-runtime",
    "runs-differ",
    "runs-not-distinguishable",
    "wal-sync-not-distinguishable",
    "wal-sync-open-datasync-faster",
    "wal-sync-fdatasync-faster",
    "candidates-compared",
    "candidates-not-distinguishable",
    "standby-commit-wait",
    "standby-commit-no-wait",
    "standby-commit-follows-standby",
    "standby-commit-unaffected",
    "standby-commit-not-measured",
    "pgbench-compared",
    "pgbench-not-distinguishable",
    "loops-faster",
    "loops-too-few",
    "loops-disturbed",
];

#[test]
fn every_code_analysis_gives_has_its_sentence() {
    let (mut notes, mut findings, mut said_codes) = (Vec::new(), Vec::new(), Vec::new());
    for c in ["analyze", "lab", "record", "cli"] {
        let src = crates_dir().join(c).join("src");
        literal_codes(&src, "Note::new(", &mut notes);
        literal_codes(&src, "Finding::new(", &mut findings);
        literal_codes(&src, "Said::new(", &mut said_codes);
        // The manifest lint's statements about one container (its `said` closure).
        literal_codes(&src, "said(", &mut said_codes);
    }
    notes.extend(CHOSEN.iter().map(|c| (c.to_string(), "CHOSEN".to_string())));
    // Statements whose code is chosen at run time: where a cache belief comes from.
    said_codes.extend(
        [
            "belief-innodb-data",
            "belief-mssql-database-cache",
            "belief-pg-buffercache",
        ]
        .map(|c| (c.to_string(), "chosen".to_string())),
    );
    assert!(notes.len() > 70, "the scan found too few notes: {notes:?}");
    assert!(
        said_codes.iter().any(|(c, _)| c == "lint-privileged"),
        "the scan missed the lint's statements: {said_codes:?}"
    );
    let mut missing = Vec::new();
    for (code, at) in &notes {
        let code: &'static str = Box::leak(code.clone().into_boxed_str());
        if note(&Note::new(Level::Info, code)) == code {
            missing.push(format!("note {code} ({at})"));
        }
    }
    for (rule, at) in &findings {
        if statement(&Finding::new(Severity::Info, rule)) == *rule {
            missing.push(format!("finding {rule} ({at})"));
        }
    }
    for (code, at) in &said_codes {
        if said(&Said::new(code.clone())) == *code {
            missing.push(format!("said {code} ({at})"));
        }
    }
    assert!(missing.is_empty(), "no sentence for: {missing:#?}");
}

#[test]
fn a_code_without_a_sentence_reads_as_its_code_and_numbers() {
    let n = Note::new(Level::Info, "from-a-newer-plumb").bytes("size_bytes", 2048.0);
    assert_eq!(note(&n), "from-a-newer-plumb (size_bytes=2048)");
}

#[test]
fn numbers_are_worded_in_their_units() {
    let n = Note::new(Level::Warn, "swap-hides-shared-memory")
        .count("pid", 4242.0)
        .bytes("smaps_swap_bytes", 300.0 * 1048576.0)
        .bytes("vm_swap_bytes", 2.0 * 1048576.0);
    let s = note(&n);
    assert!(s.starts_with("PID 4242: 300 MiB in swap"), "{s}");
    assert!(s.contains("VmSwap shows 2.00 MiB"), "{s}");
    let plumb = Note::new(Level::Info, "cgroup-oom-kills")
        .text("who", "plumb")
        .count("oom_kills", 3.0);
    assert_eq!(
        note(&plumb),
        "plumb: its memory cgroup has had 3 OOM kill(s)"
    );
}

#[test]
fn a_disturbed_run_names_its_neighbour() {
    let neighbour = Note::new(Level::Info, "neighbour")
        .count("pid", 77.0)
        .text("comm", "fio")
        .bytes("read_bytes", 304.0 * 1048576.0)
        .bytes("write_bytes", 0.0);
    let io = Note::new(Level::Warn, "neighbour-io")
        .pct("share_pct", 76.0)
        .pct("disturbing_share_pct", 10.0)
        .list("devices", vec!["vda".into()])
        .bytes("device_read_bytes", 400.0 * 1048576.0)
        .bytes("device_write_bytes", 0.0)
        .bytes("own_read_bytes", 96.0 * 1048576.0)
        .bytes("own_write_bytes", 0.0)
        .notes("neighbours", vec![neighbour]);
    let run = Note::new(Level::Warn, "run-disturbed")
        .text("mode", "warm")
        .count("run", 1.0)
        .notes("evidence", vec![io]);
    assert_eq!(
        note(&run),
        "warm run 1: measured while other work used the host — vda read 400 MiB and wrote 0 B in the window; plumb read 96.0 MiB and wrote 0 B; PID 77 (fio) read 304 MiB and wrote 0 B: 76% of the device's bytes (disturbing from 10%)"
    );
}

#[test]
fn a_finding_from_a_disturbed_phase_says_so_in_its_statement_and_evidence() {
    let mut f = Finding::new(Severity::Info, "run-queue-above-cpus")
        .text("phase", "pgbench")
        .count("runnable_mean", 3.5)
        .count("cpus", 2.0);
    f.disturbed = Some(Disturbed {
        phases: vec!["pgbench".into()],
        neighbour: Some((99, "stress".into())),
        lowered: true,
    });
    let s = statement(&f);
    assert!(
        s.starts_with("during pgbench 3.5 tasks were runnable on average for 2 CPUs"),
        "{s}"
    );
    assert!(
        s.ends_with("lowered to info until a clean run shows it)"),
        "{s}"
    );
    let e = evidence(&f);
    assert_eq!(
        e.last().unwrap(),
        "measured while other work used the host, in: pgbench; the busiest other process: PID 99 (stress) (the phases table gives each phase's evidence)"
    );
}

#[test]
fn json_carries_the_code_the_sentence_and_the_numbers() {
    let f = Finding::new(Severity::Warn, "commit-latency")
        .text("configuration", "fdatasync")
        .text("cause", "flush")
        .secs("p99_s", 0.0125)
        .secs("threshold_s", 0.01)
        .count("commits", 200.0)
        .evidence(vec![Evidence::Said(
            Said::new("flushes-per-commit")
                .ratio("flushes_per_commit", 1.0)
                .text("disk", "vda"),
        )]);
    let v: serde_json::Value = speaking(|| serde_json::to_value(&f)).unwrap();
    assert_eq!(v["rule"], "commit-latency");
    assert_eq!(
        v["statement"],
        "commit latency p99 is 12.50 ms with wal_sync_method=fdatasync (above 10 ms): each commit waited for a cache FLUSH (the device has a volatile write cache and no FUA path was used)"
    );
    assert_eq!(v["numbers"]["p99_s"], 0.0125);
    assert_eq!(v["numbers"]["commits"], 200);
    assert!(
        v["numbers"].get("configuration").is_none(),
        "names are not numbers"
    );
    assert_eq!(
        v["evidence"][0],
        "1.00 cache FLUSH requests per commit on vda"
    );
    // Written without report's words (a library user's own serde), the sentence is the code.
    let bare = serde_json::to_value(&f).unwrap();
    assert_eq!(bare["statement"], "commit-latency");
}

#[test]
fn how_a_durable_write_reaches_the_device_in_one_line() {
    let path = |wc: &str, fua: Option<&str>| {
        let s = Said::new("durable-path").text("write_cache", wc);
        said(&match fua {
            Some(f) => s.text("fua", f),
            None => s,
        })
    };
    assert!(path("write back", Some("not supported")).contains("full cache FLUSH"));
    assert!(path("write back", Some("supported")).contains("FUA writes"));
    assert!(path("write through", None).contains("no volatile write cache"));
    let dax = said(&Said::new("durable-pmem").text("dax", "dax=always"));
    assert!(
        dax.contains("bypassing the page cache") && dax.contains("no FLUSH or FUA"),
        "{dax}"
    );
    assert!(said(&Said::new("durable-pmem")).contains("no DAX"));
}

#[test]
fn a_small_neighbour_is_noted_after_clean() {
    let io = Note::new(Level::Info, "neighbour-io")
        .pct("share_pct", 0.4)
        .pct("disturbing_share_pct", 10.0)
        .list("devices", vec!["vda".into()])
        .bytes("device_read_bytes", 33.0 * 1048576.0)
        .bytes("device_write_bytes", 8192.0 * 1048576.0)
        .bytes("own_read_bytes", 0.0)
        .bytes("own_write_bytes", 8192.0 * 1048576.0)
        .notes(
            "neighbours",
            vec![Note::new(Level::Info, "neighbour")
                .count("pid", 55.0)
                .text("comm", "backup")
                .bytes("read_bytes", 33.0 * 1048576.0)
                .bytes("write_bytes", 0.0)],
        );
    let i = plumb_analyze::interference::Interference {
        accepted: vec![],
        verdict: plumb_analyze::interference::Verdict::Clean,
        window_s: 10.0,
        devices: vec!["vda".into()],
        device_read_bytes: 33 << 20,
        device_write_bytes: 8 << 30,
        device_flushes: 0,
        own_read_bytes: 0,
        own_write_bytes: 8 << 30,
        own_cpu_s: 1.0,
        others_cpu_s: 0.0,
        neighbours: vec![],
        steal_pct: None,
        idle_pct: None,
        io_share: Some(0.004),
        cpu_share: None,
        notes: vec![io],
    };
    let line = super::interference(&i);
    assert!(
        line.starts_with("clean; noted: vda read 33.0 MiB"),
        "{line}"
    );
    assert!(
        line.ends_with("0.4% of the device's bytes (noted, disturbing from 10%)"),
        "{line}"
    );
}

#[test]
fn modes_with_no_clean_run_say_whose_the_disturbance_was() {
    let which = vec![Note::new(Level::Info, "mode-at-size")
        .text("mode", "fdatasync")
        .bytes("block_size_bytes", 8192.0)];
    let said = |held_off: f64| {
        note(
            &Note::new(Level::Warn, "modes-disturbed")
                .count("modes", 1.0)
                .count("held_off_modes", held_off)
                .notes("which", which.clone()),
        )
    };
    assert!(
        said(1.0)
            .starts_with("No clean run for fdatasync (8 KiB): plumb itself was held off the CPUs"),
        "{}",
        said(1.0)
    );
    assert!(
        said(0.0).contains("while something else used the device or the CPUs, and no comparison"),
        "{}",
        said(0.0)
    );
}
