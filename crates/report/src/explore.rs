//! The charts of the HTML pages, explorable: every point of every series goes into the page as
//! data, and the page draws it with uPlot (embedded at build time, so the file opens offline)
//! and `plumb.js` (wall-clock axes in a chosen time zone, hover values, zoom, legend toggles, a
//! cursor and zoom shared by the charts, marks whose labels do not collide).
//!
//! The SVG renderer (`svg::render_time`) stays for single pictures (`plumb plot`).

use crate::html::Html;
use crate::svg::{Draw, TimeChart};
use serde_json::{json, Value};

const UPLOT_JS: &str = include_str!("../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/uplot/uPlot.min.css");
const PLUMB_JS: &str = include_str!("../assets/plumb.js");
/// The id of the page's chart data; `page` adds the scripts when a body has it.
pub const DATA_ID: &str = "plumb-charts";

/// A chart of the page: over time (drawn by the page's script), or a finished SVG (the XY
/// charts: IOPS against latency).
pub enum PageChart {
    Time(TimeChart),
    Svg(String),
}

/// What the page needs of a run: its name, when it started and its sample times.
pub struct RunTimes<'a> {
    pub label: &'a str,
    pub started_unix_ms: u64,
    pub times_ms: &'a [u64],
}

/// A value kept to five significant digits: the page's numbers stay short and nothing a chart
/// or a tooltip shows changes.
fn compact(v: f64) -> Value {
    if !v.is_finite() {
        return Value::Null;
    }
    if v == v.trunc() && v.abs() < 9.0e15 {
        return json!(v as i64);
    }
    let mag = v.abs().log10().floor() as i32;
    let scale = 10f64.powi(4 - mag);
    let r = (v * scale).round() / scale;
    if r == r.trunc() && r.abs() < 9.0e15 {
        json!(r as i64)
    } else {
        json!(r)
    }
}

/// The series' values at each of its run's sample times (null where it has no point: a slow
/// metric between the samples that read it, or a gap).
fn aligned(times_ms: &[u64], points: &[(f64, f64)]) -> Vec<Value> {
    let mut out = Vec::with_capacity(times_ms.len());
    let mut k = 0;
    for t in times_ms {
        let ts = *t as f64 / 1000.0;
        // Points are a subsequence of the run's times, in order.
        while k < points.len() && points[k].0 < ts - 1e-6 {
            k += 1;
        }
        if k < points.len() && (points[k].0 - ts).abs() <= 1e-6 {
            out.push(compact(points[k].1));
            k += 1;
        } else {
            out.push(Value::Null);
        }
    }
    out
}

fn chart_json(id: &str, c: &TimeChart, runs: &[RunTimes]) -> Value {
    let series: Vec<Value> = c
        .series
        .iter()
        .filter(|s| s.run < runs.len())
        .map(|s| {
            let times = runs[s.run].times_ms;
            json!({
                "name": s.name,
                "color": s.color,
                "dashed": s.dashed,
                "area": s.draw == Draw::Area,
                "right": s.right,
                "run": s.run,
                // Drawn through the samples that read it (a slow metric), not broken.
                "span": s.points.len() < times.len(),
                "v": aligned(times, &s.points),
            })
        })
        .collect();
    let marks: Vec<Value> = c
        .marks
        .iter()
        .map(|m| json!({"run": m.run, "t": compact(m.t_s), "label": m.label}))
        .collect();
    json!({
        "id": id,
        "title": c.title,
        "subtitle": c.subtitle,
        "y_label": c.y_label,
        "y2_label": c.y2_label,
        "y_log": c.y_log,
        "y_fmt": c.y_fmt.code(),
        "y2_fmt": c.y2_fmt.code(),
        "marks": marks,
        "series": series,
    })
}

/// Ids that are unique on the page: the second chart called `cpu` becomes `cpu-2`.
fn unique_ids(ids: &[&str]) -> Vec<String> {
    let mut seen: std::collections::HashMap<&str, usize> = Default::default();
    ids.iter()
        .map(|id| {
            let n = seen.entry(id).or_insert(0);
            *n += 1;
            if *n == 1 {
                id.to_string()
            } else {
                format!("{id}-{n}")
            }
        })
        .collect()
}

/// The charts as HTML: a box per chart (the SVG ones drawn, the time ones filled by the page's
/// script) and one block of data for all of them.
pub(crate) fn charts_block(runs: &[RunTimes], charts: &[(String, PageChart)]) -> String {
    let ids = unique_ids(&charts.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>());
    let mut h = Html::new();
    let mut data = Vec::new();
    let any_time = charts.iter().any(|(_, c)| matches!(c, PageChart::Time(_)));
    if any_time {
        h.with("div", &[("class", "pc-controls")], |h| {
            h.raw("<label>Times in <select id=\"pc-tz\"></select></label> ")
                .el(
                    "span",
                    &[("class", "sub")],
                    "Hover to read values; drag across a chart to zoom (all charts follow), \
                     double-click to zoom out; click a legend entry to hide or show its series.",
                );
        });
    }
    for ((_, c), id) in charts.iter().zip(&ids) {
        match c {
            PageChart::Svg(svg) => {
                h.with("div", &[("class", "chart"), ("id", id)], |h| {
                    h.raw(svg);
                });
            }
            PageChart::Time(tc) => {
                h.with("div", &[("class", "chart pc"), ("id", id)], |h| {
                    h.el("h3", &[], &tc.title)
                        .el("p", &[("class", "sub")], &tc.subtitle)
                        .with("div", &[("class", "pc-plot")], |h| {
                            h.raw("<noscript>This chart is drawn by the page's script.</noscript>");
                        });
                });
                data.push(chart_json(id, tc, runs));
            }
        }
    }
    if any_time {
        let doc = json!({
            "runs": runs.iter().map(|r| json!({
                "label": r.label,
                "start_ms": r.started_unix_ms,
                "t": r.times_ms,
            })).collect::<Vec<_>>(),
            "charts": data,
        });
        // Inside a script element: no "</script>" may appear, and "<" never does in JSON
        // outside strings.
        let text = doc.to_string().replace('<', "\\u003c");
        h.raw(&format!(
            "<script type=\"application/json\" id=\"{DATA_ID}\">{text}</script>"
        ));
    }
    h.finish()
}

/// What a page with explorable charts carries in its head and at the end of its body.
pub fn head_style() -> String {
    format!("<style>{UPLOT_CSS}{STYLE}</style>")
}

pub fn scripts() -> String {
    // Neither script contains "</script>": checked by a test.
    format!("<script>{UPLOT_JS}</script><script>{PLUMB_JS}</script>")
}

const STYLE: &str = ".pc h3{margin:0;font-size:15px}.pc .sub{margin:2px 0 4px;font-size:12px}\
.pc-controls{position:sticky;top:0;background:#fff;padding:6px 0;z-index:5;font-size:13px;border-bottom:1px solid #eee}\
.pc-plot{position:relative;min-height:330px}.pc-tip{position:absolute;pointer-events:none;background:rgba(255,255,255,.95);\
border:1px solid #888;padding:4px 6px;font:12px sans-serif;z-index:10;white-space:nowrap;display:none}\
.pc-tip i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}\
.pc-tip .mk{color:#555;font-style:italic}.u-legend{font-size:12px}";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svg::{Fmt, TimeMark, TimeSeries};

    #[test]
    fn values_are_short_and_exact_enough() {
        assert_eq!(compact(0.015493116999999997).to_string(), "0.015493");
        assert_eq!(compact(1234567.891).to_string(), "1234600");
        assert_eq!(
            compact(1234567.0).to_string(),
            "1234567",
            "whole numbers stay exact"
        );
        assert_eq!(compact(42.0).to_string(), "42");
        assert_eq!(compact(f64::NAN), Value::Null);
        assert_eq!(compact(-3.14159).to_string(), "-3.1416");
    }

    #[test]
    fn slow_series_line_up_with_their_runs_times() {
        let times = [0, 1000, 2000, 3000];
        let v = aligned(&times, &[(0.0, 1.0), (2.0, 3.0)]);
        assert_eq!(Value::Array(v).to_string(), "[1,null,3,null]");
    }

    #[test]
    fn ids_are_unique_and_scripts_cannot_close_early() {
        assert_eq!(
            unique_ids(&["cpu", "memory", "cpu"]),
            ["cpu", "memory", "cpu-2"]
        );
        assert!(!UPLOT_JS.contains("</script"));
        assert!(!PLUMB_JS.contains("</script"));
        let times = [0u64, 1000];
        let runs = [RunTimes {
            label: "a</script><b>",
            started_unix_ms: 1,
            times_ms: &times,
        }];
        let c = TimeChart {
            title: "t".into(),
            subtitle: String::new(),
            y_label: String::new(),
            y2_label: None,
            y_log: false,
            series: vec![TimeSeries {
                name: "</script>".into(),
                color: "#000",
                dashed: false,
                draw: Draw::Line,
                right: false,
                run: 0,
                points: vec![(0.0, 1.0), (1.0, 2.0)],
            }],
            marks: vec![TimeMark {
                t_s: 0.5,
                run: 0,
                label: "<m>".into(),
            }],
            y_fmt: Fmt::Count,
            y2_fmt: Fmt::Count,
        };
        let html = charts_block(&runs, &[("x".into(), PageChart::Time(c))]);
        assert_eq!(html.matches("</script>").count(), 1, "{html}");
    }
}
