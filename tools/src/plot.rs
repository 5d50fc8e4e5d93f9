//! Line charts as PNG and SVG (plotters), shared by `xoff experiment` and `xoff repro`.

use anyhow::{anyhow, Result};
use std::path::Path;

pub fn load_font() -> bool {
    use std::sync::OnceLock;
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let paths = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
            "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
        ];
        for p in paths {
            if let Ok(b) = std::fs::read(p) {
                let b: &'static [u8] = Box::leak(b.into_boxed_slice());
                if plotters::style::register_font(
                    "sans-serif",
                    plotters::style::FontStyle::Normal,
                    b,
                )
                .is_ok()
                {
                    return true;
                }
            }
        }
        false
    })
}

/// How an axis's values read on its tick labels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unit {
    /// A number, without a trailing `.0`.
    #[default]
    Plain,
    /// A time given in microseconds: `800 µs`, `2.5 ms`, `1.2 s`.
    Micros,
    /// A size in bytes: `3 KB`, `1.2 MB` (decimal, as the papers' flow sizes).
    Bytes,
}

/// Scale and unit of one axis.
#[derive(Debug, Clone, Copy, Default)]
pub struct Axis {
    pub log: bool,
    pub unit: Unit,
}

impl Axis {
    pub fn log(unit: Unit) -> Axis {
        Axis { log: true, unit }
    }
}

#[derive(Default)]
pub struct Chart<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    pub step: bool,
    pub xaxis: Axis,
    pub yaxis: Axis,
}

/// `v` with at most 3 significant digits and no trailing zeros.
fn short(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A tick label for `v` in `unit`.
pub fn tick(v: f64, unit: Unit) -> String {
    let scaled = |steps: &[(f64, &str)]| {
        let (div, name) = steps
            .iter()
            .rev()
            .find(|(d, _)| v.abs() >= *d)
            .unwrap_or(&steps[0]);
        format!("{} {name}", short(v / div))
    };
    match unit {
        Unit::Plain => short(v),
        Unit::Micros => scaled(&[(1e-3, "ns"), (1.0, "µs"), (1e3, "ms"), (1e6, "s")]),
        Unit::Bytes => scaled(&[(1.0, "B"), (1e3, "KB"), (1e6, "MB"), (1e9, "GB")]),
    }
}

/// Smallest and largest x and y over all series (positive values only on log axes), padded
/// so a flat or single-point chart still has a range.
fn bounds(c: &Chart<'_>) -> ((f64, f64), (f64, f64)) {
    let pts = c
        .series
        .iter()
        .flat_map(|(_, v)| v.iter())
        .filter(|&&(x, y)| {
            x.is_finite() && y.is_finite() && (!c.xaxis.log || x > 0.0) && (!c.yaxis.log || y > 0.0)
        });
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
    }
    if !c.yaxis.log {
        y0 = y0.min(0.0);
    }
    let pad = |lo: f64, hi: f64, log: bool| {
        if log {
            (lo / 1.2, if hi > lo { hi * 1.2 } else { lo * 10.0 })
        } else if hi > lo {
            (lo, if lo == 0.0 { hi * 1.05 } else { hi })
        } else {
            (lo, lo + 1.0)
        }
    };
    (pad(x0, x1, c.xaxis.log), pad(y0, y1, c.yaxis.log))
}

/// The frame every figure shares: margin, title, and room for tick labels (none without a
/// font).
fn builder<'a, 'b, DB: plotters::prelude::DrawingBackend>(
    root: &'a plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    title: &'b str,
    text: bool,
) -> plotters::prelude::ChartBuilder<'a, 'b, DB> {
    let mut b = plotters::prelude::ChartBuilder::on(root);
    b.margin(15);
    if text {
        b.caption(title, ("sans-serif", 22))
            .x_label_area_size(45)
            .y_label_area_size(75);
    } else {
        b.x_label_area_size(5).y_label_area_size(5);
    }
    b
}

/// Something `write_chart` can draw on a bitmap and an SVG alike.
pub trait Figure {
    fn draw_on<DB: plotters::prelude::DrawingBackend>(
        &self,
        root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
        text: bool,
    ) -> Result<(), Box<dyn std::error::Error>>
    where
        DB::ErrorType: 'static;
}

impl Figure for Chart<'_> {
    fn draw_on<DB: plotters::prelude::DrawingBackend>(
        &self,
        root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
        text: bool,
    ) -> Result<(), Box<dyn std::error::Error>>
    where
        DB::ErrorType: 'static,
    {
        draw(root, self, text)
    }
}

impl Figure for Bars<'_> {
    fn draw_on<DB: plotters::prelude::DrawingBackend>(
        &self,
        root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
        text: bool,
    ) -> Result<(), Box<dyn std::error::Error>>
    where
        DB::ErrorType: 'static,
    {
        draw_bars(root, self, text)
    }
}

pub fn draw<DB: plotters::prelude::DrawingBackend>(
    root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    c: &Chart<'_>,
    text: bool,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    use plotters::prelude::*;
    let ((x0, x1), (y0, y1)) = bounds(c);
    match (c.xaxis.log, c.yaxis.log) {
        (false, false) => draw_in(root, c, text, x0..x1, y0..y1),
        (true, false) => draw_in(root, c, text, (x0..x1).log_scale(), y0..y1),
        (false, true) => draw_in(root, c, text, x0..x1, (y0..y1).log_scale()),
        (true, true) => draw_in(root, c, text, (x0..x1).log_scale(), (y0..y1).log_scale()),
    }
}

fn draw_in<DB, X, Y>(
    root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    c: &Chart<'_>,
    text: bool,
    xr: X,
    yr: Y,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB: plotters::prelude::DrawingBackend,
    DB::ErrorType: 'static,
    X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    X::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    use plotters::prelude::*;
    root.fill(&WHITE)?;
    let mut b = builder(&root, c.title, text);
    let mut ch = b.build_cartesian_2d(xr, yr)?;
    let (xu, yu) = (c.xaxis.unit, c.yaxis.unit);
    let xf = move |v: &f64| tick(*v, xu);
    let yf = move |v: &f64| tick(*v, yu);
    if text {
        ch.configure_mesh()
            .x_desc(c.x)
            .y_desc(c.y)
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .draw()?;
    } else {
        ch.configure_mesh().x_labels(0).y_labels(0).draw()?;
    }
    let keep = |&(x, y): &(f64, f64)| (!c.xaxis.log || x > 0.0) && (!c.yaxis.log || y > 0.0);
    for (i, (name, v)) in c.series.iter().enumerate() {
        let col = Palette99::pick(i).to_rgba();
        let mut v: Vec<(f64, f64)> = v.iter().copied().filter(keep).collect();
        if c.step {
            let mut s = Vec::with_capacity(v.len() * 2);
            for w in v.windows(2) {
                s.push(w[0]);
                s.push((w[1].0, w[0].1));
            }
            if let Some(&l) = v.last() {
                s.push(l);
            }
            v = s;
        }
        let series = ch.draw_series(LineSeries::new(v, col.stroke_width(2)))?;
        if text {
            series.label(name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2))
            });
        }
    }
    if text && !c.series.is_empty() {
        ch.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Writes `stem.png` and `stem.svg` of a figure and lists them in `files`.
pub fn write_chart(out: &Path, stem: &str, c: &impl Figure, files: &mut Vec<String>) -> Result<()> {
    use plotters::prelude::*;
    let text = load_font();
    let png = out.join(format!("{stem}.png"));
    let svg = out.join(format!("{stem}.svg"));
    c.draw_on(
        BitMapBackend::new(&png, (900, 600)).into_drawing_area(),
        text,
    )
    .map_err(|e| anyhow!("{}: {e}", png.display()))?;
    c.draw_on(SVGBackend::new(&svg, (900, 600)).into_drawing_area(), text)
        .map_err(|e| anyhow!("{}: {e}", svg.display()))?;
    files.push(png.display().to_string());
    files.push(svg.display().to_string());
    Ok(())
}

/// A bar's two values: the solid part (e.g. p50) and the light part above it (p99).
pub type LowHigh = (f64, f64);

/// Grouped bars: for each category (a flow-size bucket) one bar per group (an experiment
/// cell), a light bar up to the high value (p99) with a solid one up to the low value (p50).
pub struct Bars<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    pub categories: Vec<String>,
    /// Per group: its name and, per category, (low, high) if it has flows there.
    pub groups: Vec<(String, Vec<Option<LowHigh>>)>,
    pub ylog: bool,
}

fn draw_bars<DB: plotters::prelude::DrawingBackend>(
    root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    c: &Bars<'_>,
    text: bool,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    use plotters::prelude::*;
    let vals = c
        .groups
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .flat_map(|&(a, b)| [a, b])
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = vals.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    let (lo, hi) = if lo > hi { (1.0, 10.0) } else { (lo, hi) };
    let n = c.categories.len().max(1);
    let xr = -0.5..(n as f64 - 0.5);
    if c.ylog {
        let base = (lo / 1.5).min(1.0);
        draw_bars_in(root, c, text, xr, (base..hi * 1.5).log_scale(), base)
    } else {
        draw_bars_in(root, c, text, xr, 0.0..hi * 1.05, 0.0)
    }
}

fn draw_bars_in<DB, Y>(
    root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    c: &Bars<'_>,
    text: bool,
    xr: std::ops::Range<f64>,
    yr: Y,
    base: f64,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB: plotters::prelude::DrawingBackend,
    DB::ErrorType: 'static,
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    use plotters::prelude::*;
    root.fill(&WHITE)?;
    let mut b = builder(&root, c.title, text);
    let mut ch = b.build_cartesian_2d(xr, yr)?;
    let n = c.categories.len();
    // Ticks at the category centres (integers) carry the category names.
    let xf = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < n {
            c.categories[i as usize].clone()
        } else {
            String::new()
        }
    };
    let yf = |v: &f64| tick(*v, Unit::Plain);
    if text {
        ch.configure_mesh()
            .disable_x_mesh()
            .x_labels(n.max(1))
            .x_desc(c.x)
            .y_desc(c.y)
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .draw()?;
    } else {
        ch.configure_mesh().x_labels(0).y_labels(0).draw()?;
    }
    let g = c.groups.len().max(1) as f64;
    let w = 0.8 / g;
    for (j, (name, v)) in c.groups.iter().enumerate() {
        let col = Palette99::pick(j).to_rgba();
        let x0 = |i: usize| i as f64 - 0.4 + j as f64 * w;
        ch.draw_series(v.iter().enumerate().filter_map(|(i, p)| {
            let (_, high) = (*p)?;
            Some(Rectangle::new(
                [(x0(i), base), (x0(i) + w * 0.9, high)],
                col.mix(0.35).filled(),
            ))
        }))?;
        let s = ch.draw_series(v.iter().enumerate().filter_map(|(i, p)| {
            let (low, _) = (*p)?;
            Some(Rectangle::new(
                [(x0(i), base), (x0(i) + w * 0.9, low)],
                col.filled(),
            ))
        }))?;
        if text {
            s.label(name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], col.filled()));
        }
    }
    if text && !c.groups.is_empty() {
        ch.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_read_like_a_person_writes_them() {
        assert_eq!(tick(2000.0, Unit::Plain), "2000");
        assert_eq!(tick(0.25, Unit::Plain), "0.25");
        assert_eq!(tick(12.5, Unit::Plain), "12.5");
        assert_eq!(tick(800.0, Unit::Micros), "800 µs");
        assert_eq!(tick(2500.0, Unit::Micros), "2.5 ms");
        assert_eq!(tick(1.2e6, Unit::Micros), "1.2 s");
        assert_eq!(tick(0.5, Unit::Micros), "500 ns");
        assert_eq!(tick(3000.0, Unit::Bytes), "3 KB");
        assert_eq!(tick(1e8, Unit::Bytes), "100 MB");
    }
}
