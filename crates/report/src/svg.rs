//! A small SVG plotting kit: axes (linear or log), ticks, grid, legend and a
//! few mark types, written as plain SVG text.
//!
//! Every figure of the report is built with it, so they share one look. The
//! SVG is standalone (it opens in a browser, Inkscape or a LaTeX toolchain
//! through rsvg) and carries what the report's script needs for interaction:
//! the axis mapping on the `<svg>` (`data-ax`, `data-ay`), a series index on
//! every mark (`data-s`) and the data values of marks that can be hovered or
//! zoomed (`data-v`).

use std::fmt::Write as _;

/// Colours of series, in order (colour-blind safe: Okabe–Ito, then greys).
pub const COLORS: [&str; 10] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
    "#777777", "#8C564B",
];

/// Colour of series `i`.
pub fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

/// Escape text for HTML/SVG.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Axis scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// Linear.
    Lin,
    /// Base-10 logarithmic; the domain must be positive.
    Log,
}

/// How tick labels are written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fmt {
    /// A duration in ns, written with its unit (ns, µs, ms, s).
    Ns,
    /// A time in seconds since the start of the run.
    Secs,
    /// A plain number (k, M suffixes).
    Num,
    /// Packets per second (kpps, Mpps).
    Pps,
    /// A ratio written as a percentage.
    Percent,
    /// `v = 1/(1−p)` written as the percentile p.
    Nines,
    /// A probability or fraction: decimals down to 0.01, then powers of ten.
    Prob,
}

/// One axis.
#[derive(Debug, Clone)]
pub struct Axis {
    /// Axis title, with its unit.
    pub label: String,
    /// Scale.
    pub scale: Scale,
    /// Lower end of the domain.
    pub min: f64,
    /// Upper end of the domain.
    pub max: f64,
    /// Tick label format.
    pub fmt: Fmt,
}

impl Axis {
    /// An axis over `[min, max]`, widened when empty or (log) non-positive.
    pub fn new(label: &str, scale: Scale, min: f64, max: f64, fmt: Fmt) -> Axis {
        let (mut lo, mut hi) = if min.is_finite() && max.is_finite() && min <= max {
            (min, max)
        } else {
            (0.0, 1.0)
        };
        if scale == Scale::Log {
            lo = lo.max(1e-12);
            hi = hi.max(lo);
            if hi / lo < 10.0 {
                // Show at least one decade, centred on the data.
                let mid = (lo * hi).sqrt();
                lo = lo.min(mid / 10f64.sqrt());
                hi = hi.max(mid * 10f64.sqrt());
            }
        } else if hi - lo <= 0.0 {
            let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            lo -= d;
            hi += d;
        }
        Axis {
            label: label.to_string(),
            scale,
            min: lo,
            max: hi,
            fmt,
        }
    }

    /// A log axis snapped out to whole decades.
    pub fn log_decades(label: &str, min: f64, max: f64, fmt: Fmt) -> Axis {
        let lo = 10f64.powf(min.max(1e-12).log10().floor());
        let mut hi = 10f64.powf(max.max(lo).log10().ceil());
        if hi <= lo {
            hi = lo * 10.0;
        }
        Axis::new(label, Scale::Log, lo, hi, fmt)
    }

    /// A linear axis snapped out to nice tick values, starting at 0 if `zero`.
    pub fn lin_nice(label: &str, min: f64, max: f64, fmt: Fmt, zero: bool) -> Axis {
        let lo = if zero { min.min(0.0) } else { min };
        let a = Axis::new(label, Scale::Lin, lo, max, fmt);
        let step = nice_step((a.max - a.min) / 5.0);
        let lo = (a.min / step).floor() * step;
        let hi = (a.max / step).ceil() * step;
        Axis::new(label, Scale::Lin, lo, hi, fmt)
    }

    /// Position of `v` in `[0, 1]` along the axis (not clamped).
    pub fn frac(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Lin => (v - self.min) / (self.max - self.min),
            Scale::Log => {
                (v.max(1e-300).log10() - self.min.log10()) / (self.max.log10() - self.min.log10())
            }
        }
    }

    /// Tick values.
    pub fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Lin => {
                let step = nice_step((self.max - self.min) / 5.0);
                let mut t = (self.min / step).ceil() * step;
                let mut out = Vec::new();
                while t <= self.max + step * 1e-9 && out.len() < 50 {
                    out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
                    t += step;
                }
                out
            }
            Scale::Log => {
                let d0 = self.min.log10().ceil() as i32;
                let d1 = self.max.log10().floor() as i32;
                let decades: Vec<f64> = (d0..=d1).map(|d| 10f64.powi(d)).collect();
                if decades.len() >= 3 || self.fmt == Fmt::Nines {
                    return decades;
                }
                // Few decades: add 2 and 5.
                let mut out = Vec::new();
                for d in (d0 - 1)..=d1 {
                    for m in [1.0, 2.0, 5.0] {
                        let v = m * 10f64.powi(d);
                        if v >= self.min * (1.0 - 1e-9) && v <= self.max * (1.0 + 1e-9) {
                            out.push(v);
                        }
                    }
                }
                out
            }
        }
    }

    /// `data-a*` attribute value: scale, domain and pixel range, for the script.
    fn attr(&self, p0: f64, p1: f64) -> String {
        let s = match self.scale {
            Scale::Lin => "lin",
            Scale::Log => "log",
        };
        format!(
            "{s},{},{},{p0:.1},{p1:.1},{}",
            self.min,
            self.max,
            fmt_name(self.fmt)
        )
    }
}

fn fmt_name(f: Fmt) -> &'static str {
    match f {
        Fmt::Ns => "ns",
        Fmt::Secs => "s",
        Fmt::Num => "num",
        Fmt::Pps => "pps",
        Fmt::Percent => "pct",
        Fmt::Nines => "nines",
        Fmt::Prob => "prob",
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
pub fn nice_step(raw: f64) -> f64 {
    if raw.is_nan() || raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= raw * 0.999 {
            return m * p;
        }
    }
    10.0 * p
}

/// Format a value for a tick label or a table.
pub fn fmt_value(v: f64, f: Fmt) -> String {
    match f {
        Fmt::Ns => fmt_ns(v),
        Fmt::Secs => trim(format!("{v:.3}")) + " s",
        Fmt::Num => fmt_num(v),
        Fmt::Pps => fmt_pps(v),
        Fmt::Percent => {
            let p = v * 100.0;
            if p == 0.0 {
                "0%".into()
            } else if p.abs() < 0.01 {
                format!("{p:.0e}%")
            } else {
                trim(format!("{p:.2}")) + "%"
            }
        }
        Fmt::Prob => {
            if v >= 0.01 || v <= 0.0 {
                trim(format!("{v:.2}"))
            } else {
                let e = v.log10().round() as i32;
                if (v - 10f64.powi(e)).abs() < v * 1e-6 {
                    format!("10{}", superscript(e))
                } else {
                    format!("{v:.1e}")
                }
            }
        }
        Fmt::Nines => {
            // v = 1/(1-p)  =>  p = 1 - 1/v
            let p = (1.0 - 1.0 / v.max(1.0)) * 100.0;
            let digits = (v.log10().round() as i32 - 2).max(0) as usize;
            trim(format!("{p:.digits$}")) + "%"
        }
    }
}

fn superscript(e: i32) -> String {
    e.to_string()
        .chars()
        .map(|c| match c {
            '-' => '⁻',
            '0' => '⁰',
            '1' => '¹',
            '2' => '²',
            '3' => '³',
            '4' => '⁴',
            '5' => '⁵',
            '6' => '⁶',
            '7' => '⁷',
            '8' => '⁸',
            _ => '⁹',
        })
        .collect()
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A latency in ns with a unit that keeps 1–3 integer digits.
pub fn fmt_ns(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "—".into()
    } else if a < 1e3 {
        trim(format!("{v:.1}")) + " ns"
    } else if a < 1e6 {
        trim(format!("{:.2}", v / 1e3)) + " µs"
    } else if a < 1e9 {
        trim(format!("{:.2}", v / 1e6)) + " ms"
    } else {
        trim(format!("{:.2}", v / 1e9)) + " s"
    }
}

/// A number with k/M/G suffix.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        trim(format!("{:.2}", v / 1e9)) + "G"
    } else if a >= 1e6 {
        trim(format!("{:.2}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.1}", v / 1e3)) + "k"
    } else if a >= 100.0 || a == a.round() {
        format!("{v:.0}")
    } else {
        trim(format!("{v:.3}"))
    }
}

/// Packets per second.
pub fn fmt_pps(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        trim(format!("{:.2}", v / 1e6)) + " Mpps"
    } else if a >= 1e3 {
        trim(format!("{:.1}", v / 1e3)) + " kpps"
    } else {
        trim(format!("{v:.0}")) + " pps"
    }
}

/// Line style of a series.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Stroke colour.
    pub color: &'static str,
    /// Stroke width, px.
    pub width: f64,
    /// Dash pattern (`""` for solid).
    pub dash: &'static str,
}

impl Style {
    /// Solid line of series `i`.
    pub fn solid(i: usize) -> Style {
        Style {
            color: color(i),
            width: 1.6,
            dash: "",
        }
    }
    /// Dashed line of series `i`.
    pub fn dashed(i: usize) -> Style {
        Style {
            color: color(i),
            width: 1.4,
            dash: "5 3",
        }
    }
}

/// A plot under construction: one panel with x and y axes (and optionally a
/// second y axis on the right).
pub struct Plot {
    /// Total width, px.
    pub w: f64,
    /// Total height, px.
    pub h: f64,
    /// Left margin.
    pub ml: f64,
    /// Right margin (legend goes here).
    pub mr: f64,
    /// Top margin.
    pub mt: f64,
    /// Bottom margin.
    pub mb: f64,
    /// x axis.
    pub x: Axis,
    /// y axis.
    pub y: Axis,
    /// Optional right-hand y axis.
    pub y2: Option<Axis>,
    body: String,
    legend: Vec<(usize, String, Style, bool)>,
    title: Option<String>,
    zoom: bool,
}

impl Plot {
    /// A plot of `w`×`h` px with room for a legend on the right.
    pub fn new(w: f64, h: f64, x: Axis, y: Axis) -> Plot {
        Plot {
            w,
            h,
            ml: 72.0,
            mr: 200.0,
            mt: 14.0,
            mb: 44.0,
            x,
            y,
            y2: None,
            body: String::new(),
            legend: Vec::new(),
            title: None,
            zoom: false,
        }
    }

    /// Panel title, drawn above the plot area.
    pub fn title(&mut self, t: &str) {
        self.title = Some(t.to_string());
        self.mt = self.mt.max(22.0);
    }

    /// Let the script zoom the x axis (drag to zoom, double-click to reset).
    pub fn zoomable(&mut self) {
        self.zoom = true;
    }

    /// Width of the plot area.
    pub fn pw(&self) -> f64 {
        self.w - self.ml - self.mr
    }
    /// Height of the plot area.
    pub fn ph(&self) -> f64 {
        self.h - self.mt - self.mb
    }
    /// Pixel x of data value `v`.
    pub fn px(&self, v: f64) -> f64 {
        self.ml + self.x.frac(v) * self.pw()
    }
    /// Pixel y of data value `v` on the left axis.
    pub fn py(&self, v: f64) -> f64 {
        self.mt + self.ph() * (1.0 - self.y.frac(v))
    }
    /// Pixel y of data value `v` on the right axis.
    pub fn py2(&self, v: f64) -> f64 {
        match &self.y2 {
            Some(a) => self.mt + self.ph() * (1.0 - a.frac(v)),
            None => self.py(v),
        }
    }

    /// Add a legend entry for series `s` (clickable to toggle it).
    pub fn legend(&mut self, s: usize, name: &str, style: Style) {
        if !self.legend.iter().any(|(i, n, _, _)| *i == s && n == name) {
            self.legend.push((s, name.to_string(), style, false));
        }
    }

    /// Add a legend entry drawn as a dot.
    pub fn legend_dot(&mut self, s: usize, name: &str, style: Style) {
        self.legend.push((s, name.to_string(), style, true));
    }

    /// A polyline through `pts` (data values; points outside a log domain
    /// are clamped). `s` is the series index used for toggling and hover.
    pub fn line(&mut self, s: usize, name: &str, pts: &[(f64, f64)], st: Style, right: bool) {
        if pts.is_empty() {
            return;
        }
        let mut p = String::new();
        let mut v = String::new();
        for (i, (x, y)) in pts.iter().enumerate() {
            let yy = if right { self.py2(*y) } else { self.py(*y) };
            let _ = write!(
                p,
                "{}{:.1},{:.1}",
                if i > 0 { " " } else { "" },
                self.px(*x),
                yy
            );
            let _ = write!(v, "{}{},{}", if i > 0 { ";" } else { "" }, num(*x), num(*y));
        }
        let dash = if st.dash.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{}\"", st.dash)
        };
        let _ = write!(
            self.body,
            "<polyline class=\"mk\" data-s=\"{s}\" data-k=\"line\"{} data-n=\"{}\" data-v=\"{v}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{dash} stroke-linejoin=\"round\" points=\"{p}\"/>",
            if right { " data-y2=\"1\"" } else { "" },
            esc(name),
            st.color,
            st.width
        );
    }

    /// Dots at `pts`, drawn as one path of zero-length round-capped segments
    /// (cheap for thousands of points).
    pub fn dots(&mut self, s: usize, name: &str, pts: &[(f64, f64)], color: &str, r: f64) {
        if pts.is_empty() {
            return;
        }
        let mut d = String::new();
        let mut v = String::new();
        for (i, (x, y)) in pts.iter().enumerate() {
            let _ = write!(d, "M{:.1} {:.1}h0", self.px(*x), self.py(*y));
            let _ = write!(v, "{}{},{}", if i > 0 { ";" } else { "" }, num(*x), num(*y));
        }
        let _ = write!(
            self.body,
            "<path class=\"mk\" data-s=\"{s}\" data-k=\"dots\" data-n=\"{}\" data-v=\"{v}\" d=\"{d}\" stroke=\"{color}\" stroke-width=\"{}\" stroke-linecap=\"round\" fill=\"none\"/>",
            esc(name),
            2.0 * r
        );
    }

    /// Vertical min–max bars, one per `(x0, x1, min, max)` column: the
    /// decimated form of a time series.
    pub fn columns(&mut self, s: usize, name: &str, cols: &[(f64, f64, f64, f64)], color: &str) {
        if cols.is_empty() {
            return;
        }
        let mut d = String::new();
        let mut v = String::new();
        for (i, (x0, x1, lo, hi)) in cols.iter().enumerate() {
            let x = (self.px(*x0) + self.px(*x1)) / 2.0;
            let (y0, y1) = (self.py(*lo), self.py(*hi));
            // At least one pixel tall so single values show.
            let y1 = if (y0 - y1).abs() < 1.0 { y0 - 1.0 } else { y1 };
            let _ = write!(d, "M{x:.1} {y0:.1}V{y1:.1}");
            let _ = write!(
                v,
                "{}{},{},{},{}",
                if i > 0 { ";" } else { "" },
                num(*x0),
                num(*x1),
                num(*lo),
                num(*hi)
            );
        }
        let _ = write!(
            self.body,
            "<path class=\"mk\" data-s=\"{s}\" data-k=\"cols\" data-n=\"{}\" data-v=\"{v}\" d=\"{d}\" stroke=\"{color}\" stroke-width=\"1\" fill=\"none\" shape-rendering=\"crispEdges\"/>",
            esc(name)
        );
    }

    /// Points with vertical error bars `(x, y, lo, hi)`.
    pub fn errorbars(&mut self, s: usize, name: &str, pts: &[(f64, f64, f64, f64)], st: Style) {
        let mut d = String::new();
        for (x, _, lo, hi) in pts {
            if lo.is_finite() && hi.is_finite() && hi > lo {
                let xx = self.px(*x);
                let (a, b) = (self.py(*lo), self.py(*hi));
                let _ = write!(
                    d,
                    "M{xx:.1} {a:.1}V{b:.1}M{:.1} {a:.1}h8M{:.1} {b:.1}h8",
                    xx - 4.0,
                    xx - 4.0
                );
            }
        }
        if !d.is_empty() {
            let _ = write!(
                self.body,
                "<path data-s=\"{s}\" d=\"{d}\" stroke=\"{}\" stroke-width=\"1.2\" fill=\"none\"/>",
                st.color
            );
        }
        let c: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
        self.dots(s, name, &c, st.color, 3.2);
    }

    /// Rectangles in data coordinates `(x0, x1, y0, y1)`, each with a tooltip,
    /// at least `min_w` px wide.
    pub fn rects(
        &mut self,
        s: usize,
        rects: &[(f64, f64, f64, f64, String)],
        color: &str,
        min_w: f64,
    ) {
        for (x0, x1, y0, y1, tip) in rects {
            let (a, b) = (self.px(*x0), self.px(*x1));
            let w = (b - a).max(min_w);
            let (c, d) = (self.py(*y1), self.py(*y0));
            let _ = write!(
                self.body,
                "<rect data-s=\"{s}\" data-x0=\"{}\" data-x1=\"{}\" data-mw=\"{min_w}\" x=\"{:.1}\" y=\"{c:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{color}\" fill-opacity=\"0.75\" stroke=\"{color}\" stroke-width=\"0.5\"><title>{}</title></rect>",
                num(*x0),
                num(*x1),
                a - if b - a < min_w { (min_w - (b - a)) / 2.0 } else { 0.0 },
                (d - c).max(1.0),
                esc(tip)
            );
        }
    }

    /// A horizontal reference line at data value `y` with a label at the right end.
    pub fn hline(&mut self, y: f64, label: &str, color: &str) {
        self.hline_at(y, label, color, false);
    }

    /// A horizontal reference line with its label at the left (`left`) or right end.
    pub fn hline_at(&mut self, y: f64, label: &str, color: &str, left: bool) {
        let yy = self.py(y);
        let (tx, anchor) = if left {
            (self.ml + 3.0, "start")
        } else {
            (self.ml + self.pw() - 3.0, "end")
        };
        let _ = write!(
            self.body,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"{color}\" stroke-dasharray=\"2 3\"/><text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"{color}\" font-size=\"10\">{}</text>",
            self.ml,
            self.ml + self.pw(),
            yy - 3.0,
            esc(label)
        );
    }

    /// A vertical reference line at data value `x` with a label.
    pub fn vline(&mut self, x: f64, label: &str, color: &str) {
        self.vline_at(x, label, color, 0);
    }

    /// A vertical reference line with its label on text row `row` (rows
    /// keep the labels of close lines apart).
    pub fn vline_at(&mut self, x: f64, label: &str, color: &str, row: usize) {
        let xx = self.px(x);
        let ty = self.mt + 10.0 + 12.0 * (row % 4) as f64;
        let _ = write!(
            self.body,
            "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-dasharray=\"2 3\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\" font-size=\"10\">{}</text>",
            self.mt,
            self.mt + self.ph(),
            xx + 3.0,
            ty,
            esc(label)
        );
    }

    /// Text at data coordinates.
    pub fn text(&mut self, x: f64, y: f64, t: &str, color: &str) {
        let _ = write!(
            self.body,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\" font-size=\"10\">{}</text>",
            self.px(x),
            self.py(y),
            esc(t)
        );
    }

    /// Raw SVG inside the plot area.
    pub fn raw(&mut self, s: &str) {
        self.body.push_str(s);
    }

    /// The finished `<svg>` element.
    pub fn finish(self) -> String {
        let (ml, mt, pw, ph) = (self.ml, self.mt, self.pw(), self.ph());
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\" data-ax=\"{}\" data-ay=\"{}\"{}{}>",
            self.x.attr(ml, ml + pw),
            self.y.attr(mt + ph, mt),
            match &self.y2 {
                Some(a) => format!(" data-ay2=\"{}\"", a.attr(mt + ph, mt)),
                None => String::new(),
            },
            if self.zoom { " data-zoom=\"x\"" } else { "" },
            w = self.w,
            h = self.h
        );
        let _ = write!(
            s,
            "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#fff\"/>",
            self.w, self.h
        );
        if let Some(t) = &self.title {
            let _ = write!(
                s,
                "<text x=\"{ml}\" y=\"{}\" font-weight=\"bold\" font-size=\"12\">{}</text>",
                mt - 7.0,
                esc(t)
            );
        }
        // Grid and ticks.
        let mut g = String::new();
        g.push_str("<g class=\"xt\">");
        for t in self.x.ticks() {
            let xx = ml + self.x.frac(t) * pw;
            let _ = write!(
                g,
                "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{mt}\" y2=\"{:.1}\" stroke=\"#e6e6e6\"/><text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                mt + ph,
                mt + ph + 14.0,
                esc(&fmt_value(t, self.x.fmt))
            );
        }
        g.push_str("</g>");
        for t in self.y.ticks() {
            let yy = mt + ph * (1.0 - self.y.frac(t));
            let _ = write!(
                g,
                "<line x1=\"{ml}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e6e6e6\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                ml + pw,
                ml - 5.0,
                yy + 4.0,
                esc(&fmt_value(t, self.y.fmt))
            );
        }
        if let Some(a) = &self.y2 {
            for t in a.ticks() {
                let yy = mt + ph * (1.0 - a.frac(t));
                let _ = write!(
                    g,
                    "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#999\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                    ml + pw,
                    ml + pw + 4.0,
                    ml + pw + 6.0,
                    yy + 4.0,
                    esc(&fmt_value(t, a.fmt))
                );
            }
            let _ = write!(
                g,
                "<text transform=\"translate({:.1},{:.1}) rotate(90)\" text-anchor=\"middle\">{}</text>",
                ml + pw + 52.0,
                mt + ph / 2.0,
                esc(&a.label)
            );
        }
        let _ = write!(s, "<g class=\"grid\">{g}</g>");
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            ml + pw / 2.0,
            self.h - 8.0,
            esc(&self.x.label)
        );
        let _ = write!(
            s,
            "<text transform=\"translate(14,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            mt + ph / 2.0,
            esc(&self.y.label)
        );
        // Marks, clipped to the plot area.
        let cid = format!("c{:x}", fxhash(&self.body) ^ fxhash(&s));
        let _ = write!(
            s,
            "<clipPath id=\"{cid}\"><rect x=\"{ml}\" y=\"{:.1}\" width=\"{pw:.1}\" height=\"{:.1}\"/></clipPath><g class=\"marks\" clip-path=\"url(#{cid})\">{}</g>",
            mt - 4.0,
            ph + 8.0,
            self.body
        );
        let _ = write!(
            s,
            "<rect class=\"frame\" x=\"{ml}\" y=\"{mt}\" width=\"{pw:.1}\" height=\"{ph:.1}\" fill=\"none\" stroke=\"#888\"/>"
        );
        // Legend.
        let lx = ml + pw + if self.y2.is_some() { 66.0 } else { 12.0 };
        for (i, (sid, name, st, dot)) in self.legend.iter().enumerate() {
            let ly = mt + 10.0 + i as f64 * 15.0;
            let mark = if *dot {
                format!(
                    "<circle cx=\"{:.1}\" cy=\"{ly:.1}\" r=\"3\" fill=\"{}\"/>",
                    lx + 9.0,
                    st.color
                )
            } else {
                format!(
                    "<line x1=\"{lx:.1}\" x2=\"{:.1}\" y1=\"{ly:.1}\" y2=\"{ly:.1}\" stroke=\"{}\" stroke-width=\"2\"{}/>",
                    lx + 18.0,
                    st.color,
                    if st.dash.is_empty() {
                        String::new()
                    } else {
                        format!(" stroke-dasharray=\"{}\"", st.dash)
                    }
                )
            };
            let _ = write!(
                s,
                "<g class=\"lg\" data-s=\"{sid}\">{mark}<text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
                lx + 22.0,
                ly + 4.0,
                esc(name)
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// A number for `data-v`: short, no exponent surprises for JS `parseFloat`.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "NaN".into();
    }
    if v == v.round() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.6e}");
        // Shorter plain form when it is exact enough.
        let p = format!("{v:.4}");
        if p.parse::<f64>()
            .map(|x| (x - v).abs() <= v.abs() * 1e-6)
            .unwrap_or(false)
        {
            trim(p)
        } else {
            s
        }
    }
}

/// A small non-cryptographic hash for ids.
fn fxhash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(23.0), 25.0);
        assert_eq!(nice_step(60.0), 100.0);
    }

    #[test]
    fn log_ticks_are_decades() {
        let a = Axis::log_decades("x", 1234.0, 5.6e6, Fmt::Ns);
        assert_eq!(a.min, 1000.0);
        assert_eq!(a.max, 1e7);
        assert_eq!(a.ticks(), vec![1e3, 1e4, 1e5, 1e6, 1e7]);
        assert!((a.frac(1e5) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_ns(1500.0), "1.5 µs");
        assert_eq!(fmt_ns(250_000.0), "250 µs");
        assert_eq!(fmt_ns(4_280_000.0), "4.28 ms");
        assert_eq!(fmt_value(100.0, Fmt::Nines), "99%");
        assert_eq!(fmt_value(1000.0, Fmt::Nines), "99.9%");
        assert_eq!(fmt_value(1.0, Fmt::Nines), "0%");
        assert_eq!(fmt_value(10.0, Fmt::Nines), "90%");
        assert_eq!(fmt_pps(50_000.0), "50 kpps");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(fmt_value(0.001, Fmt::Prob), "10⁻³");
        assert_eq!(fmt_value(0.1, Fmt::Prob), "0.1");
        assert_eq!(fmt_value(1.0, Fmt::Prob), "1");
        assert_eq!(num(12.0), "12");
    }

    #[test]
    fn plot_has_marks_and_axis_data() {
        let mut p = Plot::new(
            400.0,
            200.0,
            Axis::lin_nice("t", 0.0, 10.0, Fmt::Secs, true),
            Axis::log_decades("lat", 1e3, 1e5, Fmt::Ns),
        );
        p.line(0, "a", &[(0.0, 1e3), (10.0, 1e5)], Style::solid(0), false);
        p.legend(0, "a", Style::solid(0));
        let s = p.finish();
        assert!(s.contains("data-ax=\"lin,0,10,"));
        assert!(s.contains("data-v=\"0,1000;10,100000\""));
        assert!(s.contains("class=\"lg\""));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
    }
}
