//! Self-contained SVG charts: no fonts to load, no scripts, nothing fetched. An XY chart with
//! several series, optional log axes, min–max whiskers and labelled marks.

use std::fmt::Write;

#[derive(Debug, Clone)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Whisker for the spread of repetitions.
    pub y_lo: Option<f64>,
    pub y_hi: Option<f64>,
    pub label: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub color: &'static str,
    pub dashed: bool,
    /// Join the points with a line (false: a scatter plot).
    pub line: bool,
    pub points: Vec<Point>,
}

/// A point to call out (the knee).
#[derive(Debug, Clone)]
pub struct Mark {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

pub struct Chart {
    pub title: String,
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    pub x_log: bool,
    pub y_log: bool,
    pub series: Vec<Series>,
    pub marks: Vec<Mark>,
    pub x_fmt: fn(f64) -> String,
    pub y_fmt: fn(f64) -> String,
}

pub const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];

const W: f64 = 820.0;
const H: f64 = 500.0;
const L: f64 = 80.0;
const R: f64 = 30.0;
const T: f64 = 70.0;
const B: f64 = 60.0;

/// The chart's frame, the same for every chart: the SVG element, a white background, the title
/// and the subtitle.
fn frame(title: &str, subtitle: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"##
    );
    let _ = write!(s, r##"<rect width="{W}" height="{H}" fill="#ffffff"/>"##);
    let _ = write!(
        s,
        r##"<text x="{L}" y="24" font-size="16" font-weight="bold">{}</text>"##,
        esc(title)
    );
    let _ = write!(
        s,
        r##"<text x="{L}" y="44" fill="#555">{}</text>"##,
        esc(subtitle)
    );
    s
}

/// A vertical grid line at `x` down the plot, and its label under the axis.
fn x_gridline(s: &mut String, x: f64, ph: f64, stroke: &str, label: &str) {
    let _ = write!(
        s,
        r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{:.1}" stroke="{stroke}"/>"##,
        T + ph
    );
    let _ = write!(
        s,
        r##"<text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
        T + ph + 18.0,
        esc(label)
    );
}

/// A horizontal grid line at `y` across the plot, and its label on the left axis.
fn y_gridline(s: &mut String, y: f64, pw: f64, label: &str) {
    let _ = write!(
        s,
        r##"<line x1="{L}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/>"##,
        L + pw
    );
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
        L - 8.0,
        y + 4.0,
        esc(label)
    );
}

/// The plot area's border and the two axis titles, the same for every chart.
fn plot_box(s: &mut String, pw: f64, ph: f64, x_label: &str, y_label: &str) {
    let _ = write!(
        s,
        r##"<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
    );
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
        L + pw / 2.0,
        H - 14.0,
        esc(x_label)
    );
    let _ = write!(
        s,
        r##"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
        T + ph / 2.0,
        esc(y_label)
    );
}

/// The stroke attribute of a dashed series (nothing for a solid one).
fn dash(dashed: bool) -> &'static str {
    if dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Round numbers for ticks: 1, 2 or 5 times a power of ten.
pub fn nice_ticks(lo: f64, hi: f64, want: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater)
        || !lo.is_finite()
        || !hi.is_finite()
    {
        return vec![lo];
    }
    let raw = (hi - lo) / want.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).ceil() * step;
    let mut v = Vec::new();
    let mut x = start;
    // Bounded: where the step is lost in the magnitude (1e15 + 1e-3), x would not move.
    while x <= hi + step * 1e-9 && v.len() < 4 * want.max(1) + 4 {
        v.push(if x.abs() < step * 1e-9 { 0.0 } else { x });
        let next = x + step;
        if next <= x {
            break;
        }
        x = next;
    }
    v
}

fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    // 1-2-5 steps while they fit; only powers of ten over many decades.
    let mults: &[f64] = if b - a > 3 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    let mut v = Vec::new();
    for e in a..=b {
        for &m in mults {
            let x = m * 10f64.powi(e);
            if x >= lo * 0.999 && x <= hi * 1.001 {
                v.push(x);
            }
        }
    }
    v
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn new(mut lo: f64, mut hi: f64, log: bool) -> Axis {
        if log {
            lo = lo.max(1e-12);
            hi = hi.max(lo * 10.0);
            Axis {
                lo: 10f64.powf(lo.log10().floor()),
                hi: 10f64.powf(hi.log10().ceil()),
                log,
            }
        } else {
            if hi <= lo {
                hi = lo + 1.0;
            }
            // Start linear axes at zero when the data is not far from it: honest proportions.
            if lo > 0.0 && lo < hi * 0.5 {
                lo = 0.0;
            }
            let pad = (hi - lo) * 0.05;
            Axis {
                lo: if lo == 0.0 { 0.0 } else { lo - pad },
                hi: hi + pad,
                log,
            }
        }
    }

    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            log_ticks(self.lo, self.hi)
        } else {
            nice_ticks(self.lo, self.hi, 6)
        }
    }
}

pub fn render(c: &Chart) -> String {
    let pts = c.series.iter().flat_map(|s| s.points.iter());
    let xs: Vec<f64> = pts.clone().map(|p| p.x).filter(|v| v.is_finite()).collect();
    let ys: Vec<f64> = pts
        .flat_map(|p| [Some(p.y), p.y_lo, p.y_hi])
        .flatten()
        .filter(|v| v.is_finite())
        .collect();
    let min = |v: &[f64]| v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = |v: &[f64]| v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let (xa, ya) = if xs.is_empty() || ys.is_empty() {
        (Axis::new(0.0, 1.0, false), Axis::new(0.0, 1.0, false))
    } else {
        (
            Axis::new(min(&xs), max(&xs), c.x_log),
            Axis::new(min(&ys), max(&ys), c.y_log),
        )
    };
    let pw = W - L - R;
    let ph = H - T - B;
    let px = |v: f64| L + xa.frac(v) * pw;
    let py = |v: f64| T + ph - ya.frac(v) * ph;

    let mut s = frame(&c.title, &c.subtitle);
    // Grid and ticks.
    for t in xa.ticks() {
        x_gridline(&mut s, px(t), ph, "#e5e5e5", &(c.x_fmt)(t));
    }
    for t in ya.ticks() {
        let y = py(t);
        y_gridline(&mut s, y, pw, &(c.y_fmt)(t));
    }
    plot_box(&mut s, pw, ph, &c.x_label, &c.y_label);
    // Series.
    for (i, se) in c.series.iter().enumerate() {
        let path: Vec<String> = se
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.x), py(p.y)))
            .collect();
        if path.len() > 1 && se.line {
            let _ = write!(
                s,
                r##"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{}/>"##,
                path.join(" "),
                se.color,
                dash(se.dashed)
            );
        }
        for p in &se.points {
            let (x, y) = (px(p.x), py(p.y));
            if let (Some(lo), Some(hi)) = (p.y_lo, p.y_hi) {
                let _ = write!(
                    s,
                    r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{}" stroke-width="1"/>"##,
                    py(lo),
                    py(hi),
                    se.color
                );
            }
            // Hovering a point shows its values (the browser's own tooltip).
            let _ = write!(
                s,
                r##"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{}"><title>{}: {} {}, {} {}</title></circle>"##,
                se.color,
                esc(&se.name),
                esc(&c.x_label),
                esc(&(c.x_fmt)(p.x)),
                esc(&c.y_label),
                esc(&(c.y_fmt)(p.y)),
            );
            if let Some(l) = &p.label {
                if i == 0 {
                    let _ = write!(
                        s,
                        r##"<text x="{:.1}" y="{:.1}" fill="#333" font-size="11">{}</text>"##,
                        x + 6.0,
                        y - 6.0,
                        esc(l)
                    );
                }
            }
        }
        // Legend.
        let ly = T + 14.0 + i as f64 * 18.0;
        let lx = L + 12.0;
        let _ = write!(
            s,
            r##"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{}" stroke-width="2"{}/><text x="{:.1}" y="{:.1}">{}</text>"##,
            lx + 24.0,
            se.color,
            dash(se.dashed),
            lx + 30.0,
            ly + 4.0,
            esc(&se.name)
        );
    }
    for m in &c.marks {
        let (x, y) = (px(m.x), py(m.y));
        let _ = write!(
            s,
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="8" fill="none" stroke="#000" stroke-width="2"/>"##
        );
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-weight="bold">{}</text>"##,
            x + 10.0,
            y + 18.0,
            esc(&m.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(
            nice_ticks(0.0, 47000.0, 6),
            vec![0.0, 10000.0, 20000.0, 30000.0, 40000.0]
        );
        assert_eq!(
            log_ticks(1.0, 100.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
    }

    #[test]
    fn renders_valid_looking_svg_with_escaped_text() {
        let c = Chart {
            title: "Latency vs <throughput>".into(),
            subtitle: "a & b".into(),
            x_label: "IOPS".into(),
            y_label: "ms".into(),
            x_log: false,
            y_log: true,
            series: vec![Series {
                name: "mean".into(),
                color: PALETTE[0],
                dashed: false,
                line: true,
                points: (1..=4)
                    .map(|i| Point {
                        x: i as f64 * 1000.0,
                        y: i as f64 * 0.5,
                        y_lo: Some(i as f64 * 0.4),
                        y_hi: Some(i as f64 * 0.6),
                        label: Some(format!("QD {i}")),
                    })
                    .collect(),
            }],
            marks: vec![Mark {
                x: 2000.0,
                y: 1.0,
                label: "knee".into(),
            }],
            x_fmt: |v| format!("{v:.0}"),
            y_fmt: |v| format!("{v}"),
        };
        let s = render(&c);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(s.contains("Latency vs &lt;throughput&gt;") && s.contains("a &amp; b"));
        assert_eq!(s.matches("<circle").count(), 5);
        assert!(s.contains("QD 4") && s.contains("knee"));
        assert!(!s.contains("NaN"));
    }

    #[test]
    fn a_long_legend_wraps_under_the_plot_and_names_every_series() {
        let series = |n: usize| -> Vec<TimeSeries> {
            (0..n)
                .map(|i| TimeSeries {
                    name: format!("PID {} postgres: walwriter: fdatasync/s", 1000 + i),
                    color: PALETTE[i % PALETTE.len()],
                    dashed: i % 2 == 1,
                    draw: Draw::Line,
                    right: false,
                    run: 0,
                    points: vec![(0.0, i as f64), (1.0, i as f64 + 1.0)],
                })
                .collect()
        };
        let chart = |n| {
            render_time(&TimeChart {
                title: "t".into(),
                subtitle: String::new(),
                y_label: "per second".into(),
                y2_label: None,
                y_log: false,
                series: series(n),
                marks: Vec::new(),
                y_fmt: Fmt::Count,
                y2_fmt: Fmt::Count,
            })
        };
        let one = chart(1);
        assert!(one.contains(&format!(r#"height="{H}""#)));
        let many = chart(8);
        for i in 0..8 {
            assert!(
                many.contains(&format!("PID {}", 1000 + i)),
                "series {i} named"
            );
        }
        assert!(!many.contains(&format!(r#"height="{H}""#)), "taller");
    }
}

// ---------------------------------------------------------------------------------------------
// Time charts: lines and stacked areas over time, an optional second axis, marks.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    Line,
    /// Stacked on the areas before it (same axis).
    Area,
}

#[derive(Debug, Clone)]
pub struct TimeSeries {
    pub name: String,
    pub color: &'static str,
    pub dashed: bool,
    pub draw: Draw,
    /// On the right-hand axis.
    pub right: bool,
    /// Which run of the page the points come from (its sample times are the x values).
    pub run: usize,
    /// (seconds from the run's start, value) at full resolution; NaN values are gaps. A slow
    /// metric has points only at the samples that read it, and is drawn through them.
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub struct TimeMark {
    pub t_s: f64,
    pub run: usize,
    pub label: String,
}

/// How a time chart's axis and hover values are written (the same rule in the SVG and in the
/// page's script, `plumb.js`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fmt {
    /// Percent, 0–100.
    Pct,
    /// A plain count or level (k, M for thousands, millions).
    Count,
    /// Per second (k above a thousand).
    PerS,
    /// Bytes, in binary units.
    Bytes,
    /// Bytes per second.
    ByteRate,
    /// Milliseconds.
    Ms,
}

impl Fmt {
    pub fn apply(self, v: f64) -> String {
        match self {
            Fmt::Pct => format!("{v:.0}%"),
            Fmt::Count => {
                if v.abs() >= 1e6 {
                    format!("{:.1}M", v / 1e6)
                } else if v.abs() >= 1e3 {
                    format!("{:.1}k", v / 1e3)
                } else {
                    format!("{v:.1}")
                }
            }
            Fmt::PerS => {
                if v >= 10_000.0 {
                    format!("{:.0}k", v / 1000.0)
                } else if v >= 1000.0 {
                    format!("{:.1}k", v / 1000.0)
                } else {
                    format!("{v:.0}")
                }
            }
            Fmt::Bytes => crate::fmt::bytes(v.max(0.0) as u64),
            Fmt::ByteRate => format!("{}/s", crate::fmt::bytes(v.max(0.0) as u64)),
            Fmt::Ms => crate::fmt::latency_ms(v),
        }
    }

    /// The name the page's script knows this format by.
    pub fn code(self) -> &'static str {
        match self {
            Fmt::Pct => "pct",
            Fmt::Count => "count",
            Fmt::PerS => "per_s",
            Fmt::Bytes => "bytes",
            Fmt::ByteRate => "byte_rate",
            Fmt::Ms => "ms",
        }
    }
}

pub struct TimeChart {
    pub title: String,
    pub subtitle: String,
    pub y_label: String,
    pub y2_label: Option<String>,
    pub y_log: bool,
    pub series: Vec<TimeSeries>,
    pub marks: Vec<TimeMark>,
    pub y_fmt: Fmt,
    pub y2_fmt: Fmt,
}

/// Average points into at most `buckets` time buckets (NaNs ignored), keeping charts of long
/// recordings light.
pub(crate) fn downsample(points: &[(f64, f64)], buckets: usize) -> Vec<(f64, f64)> {
    if points.len() <= buckets * 2 || buckets == 0 {
        return points.to_vec();
    }
    let (t0, t1) = (points[0].0, points[points.len() - 1].0);
    let w = ((t1 - t0) / buckets as f64).max(1e-9);
    let mut out = Vec::with_capacity(buckets);
    let mut i = 0;
    for b in 0..buckets {
        let end = t0 + w * (b + 1) as f64;
        let (mut sum, mut n, mut tsum, mut cnt) = (0.0, 0usize, 0.0, 0usize);
        while i < points.len() && (points[i].0 < end || b == buckets - 1) {
            tsum += points[i].0;
            cnt += 1;
            if points[i].1.is_finite() {
                sum += points[i].1;
                n += 1;
            }
            i += 1;
        }
        if cnt > 0 {
            out.push((
                tsum / cnt as f64,
                if n > 0 { sum / n as f64 } else { f64::NAN },
            ));
        }
    }
    out
}

pub(crate) fn fmt_clock(t: f64) -> String {
    crate::fmt::clock(t.max(0.0) as u64)
}

fn time_ticks(t0: f64, t1: f64) -> Vec<f64> {
    let span = (t1 - t0).max(1.0);
    let steps = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        10800.0, 21600.0, 43200.0,
    ];
    // Past half a day: whole days, 1-2-5 times a power of ten of them, at most about 8 ticks
    // however long the span (a damaged recording can claim centuries).
    let step = steps
        .iter()
        .copied()
        .find(|s| span / s <= 8.0)
        .unwrap_or_else(|| {
            let days = span / 86400.0 / 8.0;
            let mag = 10f64.powf(days.log10().floor().max(0.0));
            [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|m| m * mag * 86400.0)
                .find(|s| span / s <= 8.0)
                .unwrap_or(10.0 * mag * 86400.0)
        });
    let mut v = Vec::new();
    let mut t = (t0 / step).ceil() * step;
    while t <= t1 + 1e-9 && v.len() < 16 {
        v.push(t);
        let next = t + step;
        if next <= t {
            break;
        }
        t = next;
    }
    v
}

/// The chart as one SVG picture (for `plumb plot`): long series are averaged into 800 time
/// buckets, the page's charts carry every point instead.
pub(crate) fn render_time(c: &TimeChart) -> String {
    let series: Vec<TimeSeries> = c
        .series
        .iter()
        .map(|s| TimeSeries {
            points: downsample(&s.points, 800),
            ..s.clone()
        })
        .collect();
    render_time_points(c, &series)
}

fn render_time_points(c: &TimeChart, series: &[TimeSeries]) -> String {
    // Stack areas first (cumulative sums on their own timestamps: all series of a chart share them).
    let mut drawn: Vec<(usize, Vec<(f64, f64)>, Vec<(f64, f64)>)> = Vec::new(); // (series, top, bottom)
    let mut base: Vec<(f64, f64)> = Vec::new();
    for (i, s) in series.iter().enumerate() {
        if s.draw == Draw::Area {
            let bottom: Vec<(f64, f64)> = if base.len() == s.points.len() {
                base.clone()
            } else {
                s.points.iter().map(|p| (p.0, 0.0)).collect()
            };
            let top: Vec<(f64, f64)> = s
                .points
                .iter()
                .zip(bottom.iter())
                .map(|(p, b)| (p.0, if p.1.is_finite() { b.1 + p.1 } else { b.1 }))
                .collect();
            base = top.clone();
            drawn.push((i, top, bottom));
        } else {
            drawn.push((i, s.points.clone(), Vec::new()));
        }
    }
    let all_t: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let t0 = all_t
        .iter()
        .cloned()
        .fold(f64::INFINITY, f64::min)
        .min(c.marks.iter().map(|m| m.t_s).fold(f64::INFINITY, f64::min));
    let t1 = all_t.iter().cloned().fold(f64::NEG_INFINITY, f64::max).max(
        c.marks
            .iter()
            .map(|m| m.t_s)
            .fold(f64::NEG_INFINITY, f64::max),
    );
    let (t0, t1) = if t0.is_finite() && t1.is_finite() && t1 > t0 {
        (t0, t1)
    } else {
        (0.0, 1.0)
    };
    let vals = |right: bool| -> Vec<f64> {
        drawn
            .iter()
            .filter(|(i, _, _)| series[*i].right == right)
            .flat_map(|(_, top, _)| top.iter().map(|p| p.1))
            .filter(|v| v.is_finite() && (!c.y_log || right || *v > 0.0))
            .collect()
    };
    let (l, r) = (vals(false), vals(true));
    let range = |v: &[f64]| {
        (
            v.iter().cloned().fold(f64::INFINITY, f64::min),
            v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        )
    };
    let ya = if l.is_empty() {
        Axis::new(0.0, 1.0, false)
    } else {
        let (a, b) = range(&l);
        Axis::new(if c.y_log { a } else { a.min(0.0) }, b, c.y_log)
    };
    let y2 = if r.is_empty() {
        None
    } else {
        let (a, b) = range(&r);
        Some(Axis::new(a.min(0.0), b, false))
    };
    let right_pad = if y2.is_some() { 90.0 } else { R };
    let pw = W - L - right_pad;
    let ph = H - T - B;
    let px = |t: f64| L + (t - t0) / (t1 - t0) * pw;
    let py = |a: &Axis, v: f64| T + ph - a.frac(v).clamp(-0.02, 1.02) * ph;

    let mut s = frame(&c.title, &c.subtitle);
    for t in time_ticks(t0, t1) {
        x_gridline(&mut s, px(t), ph, "#eeeeee", &fmt_clock(t));
    }
    for t in ya.ticks() {
        let y = py(&ya, t);
        y_gridline(&mut s, y, pw, &c.y_fmt.apply(t));
    }
    if let Some(a2) = &y2 {
        for t in a2.ticks() {
            let y = py(a2, t);
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
                L + pw + 6.0,
                y + 4.0,
                esc(&c.y2_fmt.apply(t))
            );
        }
        if let Some(lbl) = &c.y2_label {
            let _ = write!(
                s,
                r##"<text transform="translate({:.1},{:.1}) rotate(90)" text-anchor="middle">{}</text>"##,
                W - 8.0,
                T + ph / 2.0,
                esc(lbl)
            );
        }
    }
    plot_box(&mut s, pw, ph, "time since start (m:ss)", &c.y_label);
    // Areas first (bottom to top), then lines over them.
    for pass in [Draw::Area, Draw::Line] {
        for (i, top, bottom) in &drawn {
            let se = &series[*i];
            if se.draw != pass {
                continue;
            }
            let axis = if se.right {
                y2.as_ref().unwrap_or(&ya)
            } else {
                &ya
            };
            if pass == Draw::Area {
                let mut d = String::new();
                for (k, p) in top.iter().enumerate() {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1} ",
                        if k == 0 { "M" } else { "L" },
                        px(p.0),
                        py(axis, p.1)
                    );
                }
                for p in bottom.iter().rev() {
                    let _ = write!(d, "L{:.1},{:.1} ", px(p.0), py(axis, p.1));
                }
                d.push('Z');
                let _ = write!(
                    s,
                    r##"<path d="{d}" fill="{}" fill-opacity="0.75" stroke="none"/>"##,
                    se.color
                );
            } else {
                // Break the line at gaps.
                let mut d = String::new();
                let mut pen_up = true;
                for p in top {
                    if !p.1.is_finite() || (c.y_log && !se.right && p.1 <= 0.0) {
                        pen_up = true;
                        continue;
                    }
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1} ",
                        if pen_up { "M" } else { "L" },
                        px(p.0),
                        py(axis, p.1)
                    );
                    pen_up = false;
                }
                let _ = write!(
                    s,
                    r##"<path d="{d}" fill="none" stroke="{}" stroke-width="1.6"{}/>"##,
                    se.color,
                    dash(se.dashed)
                );
            }
        }
    }
    for m in &c.marks {
        let x = px(m.t_s);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{:.1}" stroke="#000" stroke-dasharray="3 3"/>"##,
            T + ph
        );
        let _ = write!(
            s,
            r##"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="end" font-size="11">{}</text>"##,
            x + 4.0,
            T + 4.0,
            esc(&m.label)
        );
    }
    // Legend along the top; what does not fit there goes in rows under the plot, and the
    // picture grows to hold them (no series goes unnamed).
    let mut lx = L;
    let mut ly = T - 10.0;
    let mut below = 0usize;
    for se in series {
        let label = format!("{}{}", se.name, if se.right { " (right)" } else { "" });
        let w = 34.0 + label.chars().count() as f64 * 6.4;
        if lx > L && lx + w > W - 10.0 {
            below += 1;
            lx = L;
            ly = H + 2.0 + 16.0 * below as f64;
        }
        if se.draw == Draw::Area {
            let _ = write!(
                s,
                r##"<rect x="{lx:.1}" y="{:.1}" width="18" height="10" fill="{}"/>"##,
                ly - 8.0,
                se.color
            );
        } else {
            let _ = write!(
                s,
                r##"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="2"{}/>"##,
                ly - 3.0,
                lx + 18.0,
                ly - 3.0,
                se.color,
                dash(se.dashed)
            );
        }
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{ly:.1}">{}</text>"##,
            lx + 22.0,
            esc(&label)
        );
        lx += w;
    }
    if below > 0 {
        let h = H + 16.0 * below as f64 + 10.0;
        s = s.replacen(
            &format!(r##"height="{H}" viewBox="0 0 {W} {H}""##),
            &format!(r##"height="{h}" viewBox="0 0 {W} {h}""##),
            1,
        );
        s = s.replacen(
            &format!(r##"<rect width="{W}" height="{H}""##),
            &format!(r##"<rect width="{W}" height="{h}""##),
            1,
        );
    }
    s.push_str("</svg>\n");
    s
}
