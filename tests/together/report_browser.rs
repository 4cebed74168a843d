//! The report's charts in a real browser: a 24-hour recording (one sample a second, a burst of
//! disk writes at 13:00 UTC, three marks a few seconds apart) rendered by `plumb report` and
//! driven in headless Chromium by Selenium (tests/browser/charts.py): hover shows the time and
//! the values, dragging zooms every chart to the same window at full resolution, the legend hides
//! a series, the axes are wall-clock time in the computer's zone (or UTC), mark labels do not
//! overlap, and the page asks the network for nothing.
//!
//! `PLUMB_SCREENSHOTS=DIR` keeps the screenshots (docs/img has the ones the docs show).

use std::path::Path;
use std::process::Command;

use crate::common;
use crate::common::{plumb, selenium_missing, skip};

use plumb_analyze::series::{How, RULES};
use plumb_store::{Header, Kind, Mark, Writer};

/// 2026-11-23 00:00:00 UTC.
const START_MS: u64 = 1_795_392_000_000;
const DAY_S: u64 = 86_400;
/// 13:00:00 UTC: twenty seconds of heavy writes start here.
const BURST_S: u64 = 13 * 3600;

fn raw_name(family: &str, per_object: bool, raw: &str) -> String {
    if !per_object {
        return format!("{family}.{raw}");
    }
    let object = match family {
        "cpu" => "all",
        "disk" => "vda",
        _ => "memory",
    };
    format!("{family}.{object}.{raw}")
}

/// A day of host metrics (CPU, scheduler, memory, one disk, memory pressure), one sample a
/// second: the values follow slow waves, the disk writes 300 MiB a second for twenty seconds at
/// 13:00.
fn day_recording(path: &Path) {
    let header = Header {
        format_version: plumb_store::FORMAT_VERSION,
        plumb_version: "0.0.0-test".into(),
        started_unix_ms: START_MS,
        interval_ms: 1000,
        slow_interval_ms: None,
        hostname: Some("db1".into()),
        kernel: Some("6.1.0".into()),
        cpus: Some(2),
        clock_ticks_per_s: Some(100),
        page_size_bytes: Some(4096),
        command_line: "plumb record --interval 1s".into(),
        labels: [("run".to_string(), "a day".to_string())]
            .into_iter()
            .collect(),
    };
    let mut w = Writer::create(path, &header).unwrap();
    let names: Vec<(String, Kind, bool)> = RULES
        .iter()
        .filter(|r| ["cpu", "sched", "mem", "disk", "psi"].contains(&r.family))
        .map(|r| {
            let kind = match r.how {
                How::Gauge(_) => Kind::Gauge,
                _ => Kind::Counter,
            };
            let name = raw_name(r.family, r.per_object, r.raw);
            let bursty = r.family == "disk" && r.raw.contains("write");
            (name, kind, bursty)
        })
        .collect();
    let mut totals = vec![0u64; names.len()];
    for i in 0..DAY_S {
        let burst = (BURST_S..BURST_S + 20).contains(&i);
        let rows: Vec<(&str, Kind, u64)> = names
            .iter()
            .enumerate()
            .map(|(k, (n, kind, bursty))| {
                let wave = 10 + ((i / 60 * 7 + k as u64 * 13) % 81);
                let v = match kind {
                    Kind::Gauge if n.ends_with("_bytes") => wave << 24,
                    Kind::Gauge => wave,
                    Kind::Counter => {
                        totals[k] += match (burst && *bursty, n.ends_with("write_bytes")) {
                            (true, true) => 300 << 20,
                            (true, false) => wave * 100,
                            _ => wave,
                        };
                        totals[k]
                    }
                };
                (n.as_str(), *kind, v)
            })
            .collect();
        w.sample(i * 1000, &rows).unwrap();
    }
    drop(w);
    for (t, name) in [
        (BURST_S - 2, "checkpoint starting"),
        (BURST_S, "checkpoint"),
        (BURST_S + 6, "checkpoint complete"),
    ] {
        plumb_store::append_mark(
            path,
            &Mark {
                t_ms: t * 1000,
                name: name.into(),
                detail: None,
            },
        )
        .unwrap();
    }
}

#[test]
fn a_day_of_charts_explored_in_chromium() {
    let _group = common::beside();
    if let Some(why) = selenium_missing() {
        skip(format!(
            "skipped: {why}; scripts/setup --test installs chromium, chromium-driver and python3-selenium"
        ));
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rec = d.path().join("day.plumb");
    day_recording(&rec);
    let out = d.path().join("rep");
    let o = plumb()
        .args([
            "report",
            rec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = out.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    eprintln!("report of a day at 1 s: {} bytes", html.len());
    assert!(html.contains("from 2026-11-23 00:00:00 UTC to 2026-11-23 23:59:59 UTC"));

    let shots = std::env::var_os("PLUMB_SCREENSHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| d.path().to_path_buf());
    std::fs::create_dir_all(&shots).unwrap();
    let burst = START_MS / 1000 + BURST_S + 10;
    let o = Command::new("/usr/bin/python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/charts.py"))
        .arg(&page)
        .arg(&shots)
        .arg(burst.to_string())
        // "This computer's zone" in the browser.
        .env("TZ", "Europe/Berlin")
        .env("HOME", d.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    eprintln!(
        "page ready in {} s (charts built in {:.0} ms); zoom drags took {} s and {} s",
        r["ready_s"], r["build_ms"], r["zoom1_s"], r["zoom2_s"]
    );

    let ids: Vec<&str> = r["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for want in ["cpu", "memory", "disk-vda", "psi"] {
        assert!(ids.contains(&want), "{want} chart missing: {ids:?}");
    }
    assert_eq!(r["points"], DAY_S, "every sample is on the page");

    // Wall-clock axes in the computer's zone, and UTC on request.
    let label = r["x_label"].as_str().unwrap();
    assert!(
        label.contains("Europe/Berlin") && label.contains("UTC+01:00"),
        "{label}"
    );
    assert!(r["x_label_utc"].as_str().unwrap().contains("UTC"), "{r}");

    // Two drags: every chart shows the same ninety seconds, at one point a second.
    let ranges = r["ranges"].as_array().unwrap();
    let (lo, hi) = (
        ranges[0][0].as_f64().unwrap(),
        ranges[0][1].as_f64().unwrap(),
    );
    assert!(
        (40.0..200.0).contains(&(hi - lo)) && lo < burst as f64 && hi > burst as f64,
        "zoomed to {lo}..{hi}, wanted about 90 s around {burst}"
    );
    for x in ranges {
        assert_eq!(x, &ranges[0], "charts zoom together: {ranges:?}");
    }
    let visible = r["visible_points"].as_u64().unwrap();
    assert!(
        visible as f64 >= (hi - lo) - 2.0,
        "{visible} points in {} s: not full resolution",
        hi - lo
    );

    // Hover: one tooltip, on the chart under the mouse, with the local time and the burst.
    let tips = r["tooltips"].as_array().unwrap();
    assert_eq!(tips.len(), 1, "{tips:?}");
    let tip = tips[0].as_str().unwrap();
    assert!(
        tip.contains("2026-11-23 14:00:"),
        "local time (UTC+1): {tip}"
    );
    assert!(
        tip.contains("write: 300 MiB/s"),
        "the burst at full resolution: {tip}"
    );
    let idx = r["cursor_idx"].as_array().unwrap();
    assert!(idx[0].is_u64(), "{idx:?}");
    assert!(
        idx.iter().all(|i| i == &idx[0]),
        "one cursor across the charts: {idx:?}"
    );

    // Marks two and six seconds apart: every label drawn, none over another.
    let k = r["disk_chart"].as_u64().unwrap() as usize;
    let labels = r["mark_labels"][k].as_array().unwrap();
    assert_eq!(labels.len(), 3, "{labels:?}");
    for (i, a) in labels.iter().enumerate() {
        for b in &labels[i + 1..] {
            let overlap = a["row"] == b["row"]
                && a["left"].as_f64() < b["right"].as_f64()
                && b["left"].as_f64() < a["right"].as_f64();
            assert!(!overlap, "{a} and {b} collide");
        }
    }

    // The legend hides a series: it leaves the tooltip too.
    let hidden = r["hidden"][0].as_str().unwrap();
    assert_eq!(r["hidden"][1], false, "{r}");
    let after = r["tooltip_after_hide"][0].as_str().unwrap_or_default();
    assert!(
        !after.contains(&format!("{hidden}:")),
        "{hidden} hidden, still in {after}"
    );

    // Double-click: the whole day again.
    let reset = &r["range_after_reset"];
    assert!(reset[1].as_f64().unwrap() - reset[0].as_f64().unwrap() > (DAY_S - 10) as f64);

    // Offline: the page asked for nothing.
    let log = r["log"].to_string();
    assert!(!log.contains("net::ERR"), "{log}");
    assert!(
        shots.join("hover-zoomed.png").exists() && shots.join("day.png").exists(),
        "screenshots"
    );
}
