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

pub struct Chart<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    pub step: bool,
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
    root.fill(&WHITE)?;
    let pts = c.series.iter().flat_map(|(_, v)| v.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y1) = (0.0, 1.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let mut b = ChartBuilder::on(&root);
    b.margin(15);
    if text {
        b.caption(c.title, ("sans-serif", 22))
            .x_label_area_size(45)
            .y_label_area_size(70);
    } else {
        b.x_label_area_size(5).y_label_area_size(5);
    }
    let mut ch = b.build_cartesian_2d(x0..x1, y0..y1 * 1.05)?;
    if text {
        ch.configure_mesh().x_desc(c.x).y_desc(c.y).draw()?;
    } else {
        ch.configure_mesh().x_labels(0).y_labels(0).draw()?;
    }
    for (i, (name, v)) in c.series.iter().enumerate() {
        let col = Palette99::pick(i).to_rgba();
        let mut v = v.clone();
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
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

pub fn write_chart(out: &Path, stem: &str, c: &Chart<'_>, files: &mut Vec<String>) -> Result<()> {
    use plotters::prelude::*;
    let text = load_font();
    let png = out.join(format!("{stem}.png"));
    let svg = out.join(format!("{stem}.svg"));
    draw(
        BitMapBackend::new(&png, (900, 600)).into_drawing_area(),
        c,
        text,
    )
    .map_err(|e| anyhow!("{}: {e}", png.display()))?;
    draw(
        SVGBackend::new(&svg, (900, 600)).into_drawing_area(),
        c,
        text,
    )
    .map_err(|e| anyhow!("{}: {e}", svg.display()))?;
    files.push(png.display().to_string());
    files.push(svg.display().to_string());
    Ok(())
}
