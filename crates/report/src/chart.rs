//! Small SVG charts, drawn as text: line charts (linear or log axes, nice
//! ticks with units, legend, title) and range charts (one box-and-whisker
//! row per item on a log axis).
//!
//! ```text
//!  LineChart { axes, series } ─► svg() ─► <svg class="chart" data-chart=ID>
//!                                           <polyline class="line" data-points=N …>
//!  RangeChart { axis, rows }  ─► svg() ─► <svg class="chart" data-chart=ID>
//!                                           <g class="range" data-row=LABEL …>
//! ```
//!
//! Every chart carries `data-*` attributes naming it and counting its
//! points, so tests (and scripts) can find them in a rendered page. The
//! output is self-contained: no fonts, images or scripts are referenced.
//! Every piece of text is escaped with [`escape`].

use std::fmt::Write as _;

/// Distinct colours for series (and for the sides of a comparison).
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Dash patterns telling apart several series of one colour.
pub const DASHES: [&str; 4] = ["", "6 3", "2 3", "8 3 2 3"];

/// Escapes text for HTML, SVG and XML content and attribute values, and
/// drops the control characters XML 1.0 cannot carry.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

/// What an axis' values are, for its tick labels.
#[derive(Clone, Debug, PartialEq)]
pub enum Unit {
    /// Whole numbers (counts): `0`, `500`, `1.5k`, `2M`; ticks never fall
    /// between two whole numbers.
    Count,
    /// Any numbers: `0.25`, `12`, `1.5k`.
    Number,
    /// Seconds: `0s`, `30s`.
    Seconds,
    /// Microseconds, shown as `µs`, `ms` or `s`.
    Micros,
    /// Bytes: `512 B`, `1.5 kB`.
    Bytes,
    /// HdrHistogram's percentile axis: the value is `1/(1-q)`, shown as the
    /// percentile `q` (`0%`, `90%`, `99%`, `99.9%`); use with [`Scale::Log`].
    Percentile,
    /// Names at whole-number positions (0, 1, 2, …).
    Categories(Vec<String>),
}

impl Unit {
    /// A short tick label for `v`.
    pub fn label(&self, v: f64) -> String {
        match self {
            Unit::Count | Unit::Number => short_number(v),
            Unit::Seconds => format!("{}s", trim(v, 1)),
            Unit::Micros => short_micros(v),
            Unit::Bytes => {
                let (d, s) = [(1e9, " GB"), (1e6, " MB"), (1e3, " kB")]
                    .into_iter()
                    .find(|(d, _)| v.abs() >= *d)
                    .unwrap_or((1.0, " B"));
                format!("{}{s}", trim(v / d, 1))
            }
            Unit::Percentile => {
                if v <= 1.0 {
                    return "0%".to_string();
                }
                let decimals = (v.log10().ceil() as i32 - 2).clamp(0, 6) as usize;
                format!("{:.*}%", decimals, 100.0 * (1.0 - 1.0 / v))
            }
            Unit::Categories(names) => {
                let i = v.round();
                if (v - i).abs() > 1e-9 || i < 0.0 {
                    String::new()
                } else {
                    names.get(i as usize).cloned().unwrap_or_default()
                }
            }
        }
    }

    /// Whether the values are whole numbers (no ticks between them).
    fn whole(&self) -> bool {
        matches!(self, Unit::Count | Unit::Seconds | Unit::Categories(_))
    }
}

fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn short_number(v: f64) -> String {
    match v.abs() {
        a if a >= 1e9 => format!("{}G", trim(v / 1e9, 1)),
        a if a >= 1e6 => format!("{}M", trim(v / 1e6, 1)),
        a if a >= 1e3 => format!("{}k", trim(v / 1e3, 1)),
        _ => trim(v, 2),
    }
}

fn short_micros(v: f64) -> String {
    match v.abs() {
        a if a >= 1e6 => format!("{}s", trim(v / 1e6, 2)),
        a if a >= 1e3 => format!("{}ms", trim(v / 1e3, 2)),
        _ => format!("{}µs", trim(v, 1)),
    }
}

/// How values map onto an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Evenly spaced, starting at zero for the y axis.
    Linear,
    /// Base-10 logarithmic (values ≤ 0 are drawn at the lower end).
    Log,
}

/// One axis: its title, unit and scale.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Shown beside the axis.
    pub title: String,
    /// How tick labels read.
    pub unit: Unit,
    /// Linear or logarithmic.
    pub scale: Scale,
}

impl Axis {
    /// A linear axis.
    pub fn linear(title: impl Into<String>, unit: Unit) -> Axis {
        Axis {
            title: title.into(),
            unit,
            scale: Scale::Linear,
        }
    }

    /// A logarithmic axis.
    pub fn log(title: impl Into<String>, unit: Unit) -> Axis {
        Axis {
            title: title.into(),
            unit,
            scale: Scale::Log,
        }
    }
}

/// A mapping from values to pixels along one axis, with its ticks.
#[derive(Clone, Debug)]
struct Mapped {
    scale: Scale,
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Mapped {
    /// Covers `[min, max]` with nice ticks; linear axes include zero when
    /// `from_zero`.
    fn new(axis: &Axis, min: f64, max: f64, from_zero: bool, target_ticks: usize) -> Mapped {
        match axis.scale {
            Scale::Linear => {
                let (mut lo, mut hi) = (if from_zero { min.min(0.0) } else { min }, max);
                if hi <= lo {
                    hi = lo + 1.0;
                    if !from_zero {
                        lo -= 1.0;
                    }
                }
                let mut step = nice_step((hi - lo) / target_ticks.max(1) as f64);
                if axis.unit.whole() {
                    step = step.max(1.0);
                }
                let lo = (lo / step).floor() * step;
                let hi = (hi / step).ceil() * step;
                let n = ((hi - lo) / step).round() as usize;
                let ticks = (0..=n).map(|i| lo + i as f64 * step).collect();
                Mapped {
                    scale: Scale::Linear,
                    lo,
                    hi,
                    ticks,
                }
            }
            Scale::Log => {
                let min = min.max(f64::MIN_POSITIVE);
                let lo_e = min.max(1e-9).log10().floor() as i32;
                let mut hi_e = max.max(min).log10().ceil() as i32;
                if hi_e <= lo_e {
                    hi_e = lo_e + 1;
                }
                let decades = hi_e - lo_e;
                let mut ticks = Vec::new();
                for e in lo_e..=hi_e {
                    let base = 10f64.powi(e);
                    ticks.push(base);
                    // Few decades: 2 and 5 too, so the axis is readable.
                    if decades <= 2 && e < hi_e && axis.unit != Unit::Percentile {
                        ticks.push(2.0 * base);
                        ticks.push(5.0 * base);
                    }
                }
                Mapped {
                    scale: Scale::Log,
                    lo: 10f64.powi(lo_e),
                    hi: 10f64.powi(hi_e),
                    ticks,
                }
            }
        }
    }

    /// Where `v` falls, 0.0 (low end) to 1.0 (high end).
    fn frac(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => {
                let v = v.max(self.lo);
                (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
            }
        };
        if f.is_finite() { f.clamp(0.0, 1.0) } else { 0.0 }
    }
}

/// A step of 1, 2 or 5 × 10^k near `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let nice = if n <= 1.0 {
        1.0
    } else if n <= 2.0 {
        2.0
    } else if n <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// In the legend and in `data-series`.
    pub label: String,
    /// (x, y) in axis units; drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Stroke colour (CSS colour).
    pub color: String,
    /// Stroke dash pattern (`""`: solid).
    pub dash: String,
}

impl Series {
    /// A solid line.
    pub fn new(label: impl Into<String>, color: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            color: color.to_string(),
            dash: String::new(),
        }
    }

    /// The same line, dashed.
    pub fn dashed(mut self, dash: &str) -> Series {
        self.dash = dash.to_string();
        self
    }
}

/// Chart size in pixels (the SVG scales with its container).
const WIDTH: f64 = 880.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 46.0;
/// Series with at most this many points also get a marker (with a tooltip)
/// per point.
const MARKERS_UP_TO: usize = 90;

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// `data-chart`: how tests and scripts find it.
    pub id: String,
    /// Shown above the plot.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis (linear axes start at zero).
    pub y: Axis,
    /// The lines.
    pub series: Vec<Series>,
}

impl LineChart {
    /// An empty chart.
    pub fn new(id: &str, title: impl Into<String>, x: Axis, y: Axis) -> LineChart {
        LineChart {
            id: id.to_string(),
            title: title.into(),
            x,
            y,
            series: Vec::new(),
        }
    }

    /// Adds a line.
    pub fn with(mut self, s: Series) -> LineChart {
        self.series.push(s);
        self
    }

    /// The chart as an `<svg>` element for inline HTML (see [`standalone`]
    /// for an SVG file).
    pub fn svg(&self) -> String {
        let pts = || self.series.iter().flat_map(|s| s.points.iter().copied());
        let finite = |v: f64| v.is_finite();
        let xs: Vec<f64> = pts().map(|p| p.0).filter(|v| finite(*v)).collect();
        let ys: Vec<f64> = pts().map(|p| p.1).filter(|v| finite(*v)).collect();
        let (x0, x1) = min_max(&xs).unwrap_or((0.0, 1.0));
        let (y0, y1) = min_max(&ys).unwrap_or((0.0, 1.0));
        let (x0, x1) = match &self.x.unit {
            Unit::Categories(names) => (0.0, names.len().saturating_sub(1).max(1) as f64),
            _ => (x0, x1),
        };
        let x = Mapped::new(&self.x, x0, x1, false, 10);
        let y = Mapped::new(&self.y, y0, y1, true, 5);
        let legend = legend_rows(&self.series);
        let height = HEIGHT + legend.len() as f64 * 18.0;
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let px = |v: f64| LEFT + x.frac(v) * plot_w;
        let py = |v: f64| TOP + (1.0 - y.frac(v)) * plot_h;

        let mut out = open_svg(&self.id, &self.title, height, self.series.len());
        // Grid and ticks.
        for &t in &y.ticks {
            let yy = py(t);
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"##,
                LEFT + plot_w,
                LEFT - 6.0,
                yy + 4.0,
                escape(&self.y.unit.label(t))
            );
        }
        for &t in &x.ticks {
            let xx = px(t);
            let label = self.x.unit.label(t);
            let _ = write!(
                out,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{TOP}" y2="{:.1}" stroke="#f0f0f0"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 15.0,
                escape(&label)
            );
        }
        let _ = write!(
            out,
            r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="#999"/>"##
        );
        axis_titles(&mut out, &self.x.title, &self.y.title, plot_w, plot_h);
        // Lines, then markers on top.
        for s in &self.series {
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|p| finite(p.0) && finite(p.1))
                .collect();
            let coords: Vec<String> = points
                .iter()
                .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
                .collect();
            let _ = write!(
                out,
                r#"<polyline class="line" data-series="{}" data-points="{}" fill="none" stroke="{}" stroke-width="2"{} stroke-linejoin="round" points="{}"/>"#,
                escape(&s.label),
                points.len(),
                escape(&s.color),
                dash_attr(&s.dash),
                coords.join(" ")
            );
            if points.len() <= MARKERS_UP_TO {
                out.push_str(r#"<g class="markers">"#);
                for p in &points {
                    let _ = write!(
                        out,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"><title>{}: {} at {}</title></circle>"#,
                        px(p.0),
                        py(p.1),
                        escape(&s.color),
                        escape(&s.label),
                        escape(&self.y.unit.label(p.1)),
                        escape(&self.x.unit.label(p.0))
                    );
                }
                out.push_str("</g>");
            }
        }
        draw_legend(&mut out, &legend, HEIGHT);
        out.push_str("</svg>");
        out
    }
}

/// An inline `<svg>` element as a standalone SVG file (adds the namespace
/// that a file needs and inline HTML does not).
pub fn standalone(svg: &str) -> String {
    let body = svg.strip_prefix("<svg").unwrap_or(svg);
    format!("<svg xmlns=\"http://www.w3.org/2000/svg\"{body}\n")
}

fn min_max(v: &[f64]) -> Option<(f64, f64)> {
    let mut it = v.iter().copied();
    let first = it.next()?;
    Some(it.fold((first, first), |(a, b), x| (a.min(x), b.max(x))))
}

fn dash_attr(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(r#" stroke-dasharray="{}""#, escape(dash))
    }
}

fn open_svg(id: &str, title: &str, height: f64, series: usize) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg class="chart" data-chart="{id}" data-series="{series}" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{t}" font-family="system-ui, sans-serif" fill="#222"><title>{t}</title><rect width="100%" height="100%" fill="#fff"/><text x="{LEFT}" y="20" font-size="14" font-weight="600">{t}</text>"##,
        id = escape(id),
        t = escape(title),
    );
    out
}

fn axis_titles(out: &mut String, x_title: &str, y_title: &str, plot_w: f64, plot_h: f64) {
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle" font-size="12">{}</text>"#,
        LEFT + plot_w / 2.0,
        TOP + plot_h + 34.0,
        escape(x_title),
        TOP + plot_h / 2.0,
        escape(y_title)
    );
}

/// Legend entries laid out in rows that fit the chart's width.
fn legend_rows(series: &[Series]) -> Vec<Vec<(f64, &Series)>> {
    if series.len() < 2 {
        return Vec::new();
    }
    let mut rows: Vec<Vec<(f64, &Series)>> = vec![Vec::new()];
    let mut x = LEFT;
    for s in series {
        let w = 34.0 + 7.0 * s.label.chars().count() as f64 + 18.0;
        if x + w > WIDTH - RIGHT && x > LEFT {
            rows.push(Vec::new());
            x = LEFT;
        }
        if let Some(row) = rows.last_mut() {
            row.push((x, s));
        }
        x += w;
    }
    rows
}

fn draw_legend(out: &mut String, rows: &[Vec<(f64, &Series)>], top: f64) {
    if rows.is_empty() {
        return;
    }
    out.push_str(r#"<g class="legend">"#);
    for (i, row) in rows.iter().enumerate() {
        let y = top + 4.0 + i as f64 * 18.0;
        for (x, s) in row {
            let _ = write!(
                out,
                r#"<line x1="{x:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{}" stroke-width="3"{}/><text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
                x + 26.0,
                escape(&s.color),
                dash_attr(&s.dash),
                x + 32.0,
                y + 4.0,
                escape(&s.label)
            );
        }
    }
    out.push_str("</g>");
}

/// One row of a [`RangeChart`]: a distribution summarised as a box
/// (p25–p75) with the median marked, whiskers from min to p99, and a dot
/// at the max. Values in the chart axis' unit.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeRow {
    /// Row label (`data-row`).
    pub label: String,
    /// Which side of a comparison (`data-side`; empty for one run).
    pub side: String,
    /// Fill colour.
    pub color: String,
    /// Smallest.
    pub min: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// Box-and-whisker rows on one (usually logarithmic) horizontal axis.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeChart {
    /// `data-chart`.
    pub id: String,
    /// Shown above the plot.
    pub title: String,
    /// The value axis (horizontal).
    pub axis: Axis,
    /// One per item, top to bottom.
    pub rows: Vec<RangeRow>,
}

const ROW_H: f64 = 26.0;
const LABEL_W: f64 = 150.0;

impl RangeChart {
    /// The chart as an `<svg>` element.
    pub fn svg(&self) -> String {
        let all: Vec<f64> = self
            .rows
            .iter()
            .flat_map(|r| [r.min, r.max])
            .filter(|v| v.is_finite())
            .collect();
        let (lo, hi) = min_max(&all).unwrap_or((1.0, 10.0));
        let lo = if self.axis.scale == Scale::Log { lo.max(1.0) } else { lo };
        let x = Mapped::new(&self.axis, lo, hi, false, 8);
        let plot_w = WIDTH - LABEL_W - RIGHT;
        let plot_h = ROW_H * self.rows.len().max(1) as f64;
        let height = TOP + plot_h + BOTTOM;
        let px = |v: f64| LABEL_W + x.frac(v) * plot_w;
        let mut out = open_svg(&self.id, &self.title, height, self.rows.len());
        for &t in &x.ticks {
            let xx = px(t);
            let _ = write!(
                out,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{TOP}" y2="{:.1}" stroke="#e3e3e3"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 15.0,
                escape(&self.axis.unit.label(t))
            );
        }
        let _ = write!(
            out,
            r##"<rect x="{LABEL_W}" y="{TOP}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="#999"/><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text>"##,
            LABEL_W + plot_w / 2.0,
            TOP + plot_h + 34.0,
            escape(&self.axis.title)
        );
        let unit = &self.axis.unit;
        for (i, r) in self.rows.iter().enumerate() {
            let mid = TOP + ROW_H * i as f64 + ROW_H / 2.0;
            let label = if r.side.is_empty() {
                r.label.clone()
            } else {
                format!("{} · {}", r.label, r.side)
            };
            let (b0, b1) = (px(r.p25), px(r.p75));
            let _ = write!(
                out,
                r##"<g class="range" data-row="{row}" data-side="{side}"><title>{label}: min {min}, p25 {p25}, median {p50}, p75 {p75}, p99 {p99}, max {max}</title><text x="{lx:.1}" y="{ty:.1}" text-anchor="end" font-size="12">{label}</text><line x1="{w0:.1}" x2="{w1:.1}" y1="{mid:.1}" y2="{mid:.1}" stroke="{c}" stroke-width="1.5"/><rect x="{b0:.1}" y="{by:.1}" width="{bw:.1}" height="{bh:.1}" fill="{c}" fill-opacity="0.35" stroke="{c}"/><line x1="{m:.1}" x2="{m:.1}" y1="{by:.1}" y2="{be:.1}" stroke="{c}" stroke-width="3"/><circle cx="{xm:.1}" cy="{mid:.1}" r="3" fill="{c}"/></g>"##,
                row = escape(&r.label),
                side = escape(&r.side),
                label = escape(&label),
                min = escape(&unit.label(r.min)),
                p25 = escape(&unit.label(r.p25)),
                p50 = escape(&unit.label(r.p50)),
                p75 = escape(&unit.label(r.p75)),
                p99 = escape(&unit.label(r.p99)),
                max = escape(&unit.label(r.max)),
                lx = LABEL_W - 8.0,
                ty = mid + 4.0,
                w0 = px(r.min),
                w1 = px(r.p99),
                c = escape(&r.color),
                by = mid - ROW_H * 0.3,
                bw = (b1 - b0).max(1.0),
                bh = ROW_H * 0.6,
                m = px(r.p50),
                be = mid + ROW_H * 0.3,
                xm = px(r.max),
            );
        }
        out.push_str("</svg>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn tick_labels_read_in_units() {
        assert_eq!(Unit::Micros.label(500.0), "500µs");
        assert_eq!(Unit::Micros.label(1500.0), "1.5ms");
        assert_eq!(Unit::Micros.label(2_000_000.0), "2s");
        assert_eq!(Unit::Count.label(1500.0), "1.5k");
        assert_eq!(Unit::Number.label(0.25), "0.25");
        assert_eq!(Unit::Bytes.label(2_500_000.0), "2.5 MB");
        assert_eq!(Unit::Seconds.label(30.0), "30s");
        let p: Vec<String> = [1.0, 10.0, 100.0, 1000.0, 10_000.0]
            .iter()
            .map(|v| Unit::Percentile.label(*v))
            .collect();
        assert_eq!(p, ["0%", "90%", "99%", "99.9%", "99.99%"]);
    }

    #[test]
    fn linear_ticks_are_nice_and_cover_the_data() {
        let m = Mapped::new(&Axis::linear("", Unit::Count), 0.0, 973.0, true, 5);
        assert_eq!(m.ticks, [0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        // Whole-number units never get fractional steps.
        let m = Mapped::new(&Axis::linear("", Unit::Seconds), 0.0, 2.0, false, 10);
        assert_eq!(m.ticks, [0.0, 1.0, 2.0]);
        let m = Mapped::new(&Axis::linear("", Unit::Number), 0.0, 0.4, true, 5);
        assert_eq!(m.ticks.len(), 5, "{:?}", m.ticks);
        // Nothing but zeros still gives an axis.
        let m = Mapped::new(&Axis::linear("", Unit::Count), 0.0, 0.0, true, 5);
        assert!(m.hi > m.lo);
    }

    #[test]
    fn log_ticks_are_decades() {
        let m = Mapped::new(&Axis::log("", Unit::Percentile), 1.0, 12_345.0, false, 5);
        assert_eq!(m.ticks, [1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0]);
        assert!((m.frac(100.0) - 0.4).abs() < 1e-9);
    }

    #[test]
    fn line_chart_counts_its_points_and_escapes_labels() {
        let svg = LineChart::new(
            "t",
            "A <b> chart",
            Axis::linear("time", Unit::Seconds),
            Axis::linear("n", Unit::Count),
        )
        .with(Series::new("x<y", PALETTE[0], vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)]))
        .with(Series::new("two", PALETTE[1], vec![(0.0, 0.0)]).dashed(DASHES[1]))
        .svg();
        assert!(svg.starts_with(r#"<svg class="chart" data-chart="t" data-series="2""#));
        assert!(svg.contains(r#"data-series="x&lt;y" data-points="3""#));
        assert!(svg.contains(r#"data-points="1""#));
        assert!(svg.contains("A &lt;b&gt; chart"));
        assert!(!svg.contains("<b>"));
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains(r#"class="legend""#));
    }

    #[test]
    fn range_chart_has_a_group_per_row() {
        let row = |label: &str| RangeRow {
            label: label.to_string(),
            side: String::new(),
            color: PALETTE[0].to_string(),
            min: 10.0,
            p25: 20.0,
            p50: 30.0,
            p75: 40.0,
            p99: 90.0,
            max: 1000.0,
        };
        let svg = RangeChart {
            id: "phases".into(),
            title: "Phases".into(),
            axis: Axis::log("time", Unit::Micros),
            rows: vec![row("connect"), row("wait")],
        }
        .svg();
        assert_eq!(svg.matches(r#"<g class="range""#).count(), 2);
        assert!(svg.contains(r#"data-row="wait""#));
    }
}
