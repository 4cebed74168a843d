//! The OpenMetrics text format (and Prometheus's older text format, for scrapers that do not
//! ask for OpenMetrics): the live figures `plumb record --serve` exposes on `/metrics`, and a
//! whole recording with timestamps for `promtool tsdb create-blocks-from openmetrics`.
//! Names, units and labels come from `plumb_analyze::openmetrics`.

use plumb_analyze::openmetrics::{escape_label, series_of, Family, Scale, Series};
use plumb_store::{Recording, MISSING};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The Content-Type of each format.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Labels every series of a host carries (host first, then the object's, then these).
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub host: Option<String>,
    /// The engine's kind (`postgresql`, `mariadb`, `sqlserver`), on the engine's families.
    pub engine: Option<String>,
    /// The recording's run name (exports only: tells a lab run from the live series).
    pub run: Option<String>,
    /// The engine's server (`HOST:PORT`) on the engine's and the statements' families, and
    /// its database on the per-database ones (`plumb_engine_db_…`).
    pub server: Option<String>,
    pub database: Option<String>,
    pub scale: Scale,
    /// Leave out the series labelled with a PID (`plumb_proc_…{pid=…}`): a server's backends
    /// come and go, and each would be a new series for good. `/metrics` does unless asked.
    pub drop_pids: bool,
}

fn labels(s: &Series, cx: &Context) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(h) = &cx.host {
        parts.push(format!("host=\"{}\"", escape_label(h)));
    }
    for (k, v) in &s.labels {
        parts.push(format!("{k}=\"{}\"", escape_label(v)));
    }
    let prefix = plumb_analyze::openmetrics::PREFIX;
    let engine_family = s.family.name.starts_with(&format!("{prefix}engine_"))
        || s.family.name.starts_with(&format!("{prefix}stmt_"));
    if let (Some(e), true) = (&cx.engine, engine_family) {
        parts.push(format!("engine=\"{}\"", escape_label(e)));
    }
    // The server and database plumb reads.
    if let (Some(v), true) = (&cx.server, engine_family) {
        parts.push(format!("server=\"{}\"", escape_label(v)));
    }
    if let (Some(d), true) = (
        &cx.database,
        s.family.name.starts_with(&format!("{prefix}engine_db_")),
    ) {
        parts.push(format!("database=\"{}\"", escape_label(d)));
    }
    if let Some(r) = &cx.run {
        parts.push(format!("run=\"{}\"", escape_label(r)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

fn help_text(h: &str) -> String {
    h.replace('\\', "\\\\").replace('\n', "\\n")
}

fn write_family_header<W: Write>(out: &mut W, f: &Family, openmetrics: bool) -> io::Result<()> {
    // The older text format names a counter's family by its samples' name.
    let name = if openmetrics {
        f.name.clone()
    } else {
        f.sample_name()
    };
    writeln!(out, "# HELP {name} {}", help_text(f.help))?;
    writeln!(out, "# TYPE {name} {}", f.kind.as_str())?;
    if openmetrics && !f.unit.is_empty() {
        writeln!(out, "# UNIT {name} {}", f.unit)?;
    }
    Ok(())
}

/// Group series by family, keeping the families sorted and each family's series together (the
/// format requires it). The key of each series is what the caller uses to find its values.
fn group<K>(series: Vec<(Series, K)>) -> BTreeMap<String, (Family, Vec<(Series, K)>)> {
    let mut fams: BTreeMap<String, (Family, Vec<(Series, K)>)> = BTreeMap::new();
    for (s, k) in series {
        fams.entry(s.family.name.clone())
            .or_insert_with(|| (s.family.clone(), Vec::new()))
            .1
            .push((s, k));
    }
    for (_, members) in fams.values_mut() {
        members.sort_by(|a, b| a.0.labels.cmp(&b.0.labels));
    }
    fams
}

/// A value as the format writes it (Rust's shortest round-trip form).
fn value(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// What `plumb record --serve` answers on /metrics for a recording with this header: the
/// live figures, OpenMetrics or Prometheus text as the scraper asked, labelled with the host
/// and the engine's kind.
#[allow(clippy::type_complexity)]
pub fn live_render(
    h: &plumb_store::Header,
) -> Box<dyn Fn(&[(String, u64)], u64, bool) -> (Vec<u8>, &'static str) + Send + Sync> {
    render_live(h, true)
}

/// `live_render` with a series for each recorded process, labelled with its PID
/// (`plumb record --serve-pids`).
#[allow(clippy::type_complexity)]
pub fn live_render_per_pid(
    h: &plumb_store::Header,
) -> Box<dyn Fn(&[(String, u64)], u64, bool) -> (Vec<u8>, &'static str) + Send + Sync> {
    render_live(h, false)
}

#[allow(clippy::type_complexity)]
fn render_live(
    h: &plumb_store::Header,
    drop_pids: bool,
) -> Box<dyn Fn(&[(String, u64)], u64, bool) -> (Vec<u8>, &'static str) + Send + Sync> {
    let cx = Context {
        host: h.hostname.clone(),
        engine: h.labels.get("engine").cloned(),
        run: None,
        server: h.labels.get("server").cloned(),
        database: h.labels.get("database").cloned(),
        drop_pids,
        scale: plumb_analyze::openmetrics::Scale {
            clock_ticks_per_s: h.clock_ticks_per_s.unwrap_or(100) as f64,
            page_size_bytes: h.page_size_bytes.unwrap_or(4096) as f64,
        },
    };
    Box::new(move |values, _samples, openmetrics| {
        let mut body = Vec::with_capacity(64 << 10);
        // Writing into memory does not fail.
        let _ = write_live(&mut body, values, &cx, openmetrics);
        let ct = if openmetrics {
            OPENMETRICS_CONTENT_TYPE
        } else {
            TEXT_CONTENT_TYPE
        };
        (body, ct)
    })
}

/// The live figures: one value per raw metric (`disk.vda.reads` → its latest raw value);
/// metrics plumb's list does not know are left out.
pub(crate) fn write_live<W: Write>(
    out: &mut W,
    values: &[(String, u64)],
    cx: &Context,
    openmetrics: bool,
) -> io::Result<()> {
    let series: Vec<(Series, u64)> = values
        .iter()
        .filter_map(|(name, v)| series_of(name, &cx.scale).map(|s| (s, *v)))
        .filter(|(s, _)| !(cx.drop_pids && s.labels.iter().any(|(k, _)| *k == "pid")))
        .collect();
    for (_, (fam, members)) in group(series) {
        write_family_header(out, &fam, openmetrics)?;
        let sample = fam.sample_name();
        let mut seen = std::collections::HashSet::new();
        for (s, raw) in members {
            let l = labels(&s, cx);
            if seen.insert(l.clone()) {
                writeln!(out, "{sample}{l} {}", value(s.apply(raw)))?;
            }
        }
    }
    // Which plumb answers, as node_exporter's node_exporter_build_info: always 1.
    writeln!(
        out,
        "# HELP plumb_build_info the plumb that serves these metrics: its version"
    )?;
    writeln!(out, "# TYPE plumb_build_info gauge")?;
    let host = cx
        .host
        .as_ref()
        .map(|h| format!("host=\"{}\",", escape_label(h)))
        .unwrap_or_default();
    writeln!(
        out,
        "plumb_build_info{{{host}version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    )?;
    if openmetrics {
        writeln!(out, "# EOF")?;
    }
    Ok(())
}

/// How many series and samples an export wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub series: usize,
    pub samples: usize,
}

/// A whole recording in OpenMetrics with timestamps (seconds since the epoch), every family's
/// series together and each series in time order, ended by `# EOF`: what `promtool tsdb
/// create-blocks-from openmetrics` reads. A slow metric (read about once a second in a faster
/// recording) is written at the samples that read it. `keep` chooses raw metrics by their
/// plumb name (`disk.vda.read_iops`) or raw name.
pub fn write_recording<W: Write>(
    out: &mut W,
    rec: &Recording,
    cx: &Context,
    keep: &dyn Fn(&str, &Series) -> bool,
) -> io::Result<Written> {
    let series: Vec<(Series, usize)> = rec
        .metrics
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let s = series_of(&m.name, &cx.scale)?;
            keep(&m.name, &s).then_some((s, i))
        })
        .collect();
    let slow_rows = rec.slow_rows();
    let start = rec.header.started_unix_ms;
    let mut w = Written::default();
    for (_, (fam, members)) in group(series) {
        write_family_header(out, &fam, true)?;
        let sample = fam.sample_name();
        let mut seen = std::collections::HashSet::new();
        for (s, i) in members {
            let l = labels(&s, cx);
            if !seen.insert(l.clone()) {
                continue;
            }
            let def = &rec.metrics[i];
            let Some(col) = rec.column(&def.name) else {
                continue;
            };
            w.series += 1;
            for (row, &raw) in col.iter().enumerate() {
                if raw == MISSING {
                    continue;
                }
                if def.slow && slow_rows.as_ref().is_some_and(|m| !m[row]) {
                    continue;
                }
                let t = start + rec.times_ms[row];
                writeln!(
                    out,
                    "{sample}{l} {} {}.{:03}",
                    value(s.apply(raw)),
                    t / 1000,
                    t % 1000
                )?;
                w.samples += 1;
            }
        }
    }
    writeln!(out, "# EOF")?;
    Ok(w)
}

/// The context a recording's header gives.
pub fn context_of(rec: &Recording) -> Context {
    Context {
        host: rec.header.hostname.clone(),
        engine: rec.header.labels.get("engine").cloned(),
        run: rec.header.labels.get("run").cloned(),
        server: rec.header.labels.get("server").cloned(),
        database: rec.header.labels.get("database").cloned(),
        scale: Scale {
            clock_ticks_per_s: rec.header.clock_ticks_per_s.unwrap_or(100) as f64,
            page_size_bytes: rec.header.page_size_bytes.unwrap_or(4096) as f64,
        },
        drop_pids: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_store::{Header, Kind, Writer};

    fn header() -> Header {
        Header {
            format_version: 1,
            plumb_version: "t".into(),
            started_unix_ms: 1_700_000_000_000,
            interval_ms: 1000,
            slow_interval_ms: None,
            hostname: Some("db1".into()),
            kernel: None,
            cpus: Some(2),
            clock_ticks_per_s: Some(100),
            page_size_bytes: Some(4096),
            command_line: String::new(),
            labels: [("run".to_string(), "lab".to_string())].into(),
        }
    }

    #[test]
    fn live_figures_in_both_formats() {
        let cx = Context {
            host: Some("db\"1".into()),
            engine: Some("postgresql".into()),
            ..Default::default()
        };
        let v = vec![
            ("disk.vda.reads".to_string(), 300),
            ("disk.sda.reads".to_string(), 7),
            ("cpu.all.user_ticks".to_string(), 250),
            ("cpu.cpu0.user_ticks".to_string(), 150),
            ("cpu.cpu0.idle_ticks".to_string(), 900),
            ("proc.4242.rss_bytes".to_string(), 1 << 20),
            ("mem.free_bytes".to_string(), 1 << 30),
            ("engine.db.xact_commit".to_string(), 42),
            ("slow.samples".to_string(), 3),
        ];
        let mut om = Vec::new();
        write_live(&mut om, &v, &cx, true).unwrap();
        let om = String::from_utf8(om).unwrap();
        assert!(
            om.contains("# TYPE plumb_disk_reads counter\n"),
            "OpenMetrics names a counter's family without _total:\n{om}"
        );
        assert!(om.contains("plumb_disk_reads_total{host=\"db\\\"1\",device=\"sda\"} 7\n"));
        assert!(om.contains("plumb_disk_reads_total{host=\"db\\\"1\",device=\"vda\"} 300\n"));
        // node_exporter's shape: one family, mode a label, no all-CPUs series.
        assert!(om.contains("# UNIT plumb_cpu_seconds seconds\n"));
        assert!(om.contains(
            "plumb_cpu_seconds_total{host=\"db\\\"1\",cpu=\"cpu0\",mode=\"user\"} 1.5\n"
        ));
        assert!(
            om.contains("plumb_cpu_seconds_total{host=\"db\\\"1\",cpu=\"cpu0\",mode=\"idle\"} 9\n")
        );
        assert!(!om.contains("cpu=\"all\""), "{om}");
        assert_eq!(om.matches("# TYPE plumb_cpu_seconds ").count(), 1);
        assert!(om.contains("plumb_build_info{host=\"db\\\"1\",version=\""));
        assert!(om.contains("plumb_mem_free_bytes{host=\"db\\\"1\"} 1073741824\n"));
        assert!(om.contains(
            "plumb_engine_db_commits_total{host=\"db\\\"1\",engine=\"postgresql\"} 42\n"
        ));
        assert!(!om.contains("slow"), "{om}");
        assert!(om.ends_with("# EOF\n"));
        // Each family's samples follow its header, families in order.
        let sda = om.find("device=\"sda\"").unwrap();
        let vda = om.find("device=\"vda\"").unwrap();
        let hdr = om.find("# TYPE plumb_disk_reads").unwrap();
        assert!(hdr < sda && sda < vda);
        let mut text = Vec::new();
        write_live(&mut text, &v, &cx, false).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("# TYPE plumb_disk_reads_total counter\n"));
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"));
        assert!(om.contains("pid=\"4242\""), "asked for: every process");
        // /metrics by default: no series labelled with a PID.
        let mut lean = Vec::new();
        let cx = Context {
            drop_pids: true,
            ..cx
        };
        write_live(&mut lean, &v, &cx, true).unwrap();
        let lean = String::from_utf8(lean).unwrap();
        assert!(!lean.contains("pid="), "{lean}");
        assert!(lean.contains("plumb_disk_reads_total"));
    }

    #[test]
    fn a_recording_with_timestamps_each_series_in_time_order() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.plumb");
        let mut w = Writer::create(&p, &header()).unwrap();
        for t in 0..3u64 {
            w.sample(
                t * 1000,
                &[
                    ("disk.vda.reads", Kind::Counter, 100 + t * 10),
                    ("mem.free_bytes", Kind::Gauge, 5000),
                    ("cpu.all.user_ticks", Kind::Counter, t * 50),
                    ("cpu.cpu0.user_ticks", Kind::Counter, t * 50),
                ],
            )
            .unwrap();
        }
        drop(w);
        let rec = plumb_store::read(&p).unwrap();
        let mut out = Vec::new();
        let n = write_recording(&mut out, &rec, &context_of(&rec), &|_, _| true).unwrap();
        assert_eq!(
            n,
            Written {
                series: 3,
                samples: 9
            }
        );
        let s = String::from_utf8(out).unwrap();
        let reads: Vec<&str> = s
            .lines()
            .filter(|l| l.starts_with("plumb_disk_reads_total"))
            .collect();
        assert_eq!(
            reads,
            [
                "plumb_disk_reads_total{host=\"db1\",device=\"vda\",run=\"lab\"} 100 1700000000.000",
                "plumb_disk_reads_total{host=\"db1\",device=\"vda\",run=\"lab\"} 110 1700000001.000",
                "plumb_disk_reads_total{host=\"db1\",device=\"vda\",run=\"lab\"} 120 1700000002.000",
            ]
        );
        assert!(s.contains(
            "plumb_cpu_seconds_total{host=\"db1\",cpu=\"cpu0\",mode=\"user\",run=\"lab\"} 0.5 1700000001.000"
        ));
        assert!(!s.contains("cpu=\"all\""));
        assert!(s.ends_with("# EOF\n"));
        // Filtered by plumb name.
        let mut out = Vec::new();
        let n = write_recording(&mut out, &rec, &context_of(&rec), &|raw, _| {
            raw.starts_with("mem.")
        })
        .unwrap();
        assert_eq!(n.series, 1);
        assert!(!String::from_utf8(out).unwrap().contains("disk"));
    }
}

/// A filter for `plumb export --metric PREFIX…`: a series is kept when its plumb name, raw
/// name or Prometheus name starts with one of the prefixes (all with none).
pub fn starting_with(
    prefixes: &[String],
) -> impl Fn(&str, &plumb_analyze::openmetrics::Series) -> bool + '_ {
    move |raw, s| {
        prefixes.is_empty()
            || prefixes.iter().any(|p| {
                s.plumb_name.starts_with(p.as_str())
                    || raw.starts_with(p.as_str())
                    || s.family.sample_name().starts_with(p.as_str())
            })
    }
}

/// `plumb export --list --format openmetrics`: the Prometheus names the recording's metrics
/// get, with their labels, types, units and the plumb figure each comes from. Returns how many
/// were listed.
pub fn write_list(
    out: &mut dyn Write,
    rec: &plumb_store::Recording,
    cx: &Context,
    keep: &dyn Fn(&str, &plumb_analyze::openmetrics::Series) -> bool,
) -> io::Result<usize> {
    let mut rows: Vec<(String, String, &str, &str, String)> = rec
        .metrics
        .iter()
        .filter_map(|m| {
            let s = plumb_analyze::openmetrics::series_of(&m.name, &cx.scale)?;
            keep(&m.name, &s).then(|| {
                let labels: Vec<&str> = s.labels.iter().map(|(k, _)| *k).collect();
                (
                    s.family.sample_name(),
                    labels.join(","),
                    s.family.kind.as_str(),
                    s.family.unit,
                    s.plumb_name
                        .split('.')
                        .next_back()
                        .unwrap_or("")
                        .to_string(),
                )
            })
        })
        .collect();
    rows.sort();
    rows.dedup();
    for (name, labels, kind, unit, derived) in &rows {
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        writeln!(
            out,
            "{:<56} {:<8} {:<8} (plumb: {derived})",
            format!("{name}{labels}"),
            kind,
            unit
        )?;
    }
    Ok(rows.len())
}
