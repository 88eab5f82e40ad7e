//! SVG line charts for docs/SIMULATION.md (plotters, SVG backend only).

use plotters::prelude::*;
use std::path::Path;

/// One named series of (x, y) points.
pub type Series = (String, Vec<(f64, f64)>);

/// Draws `series` as lines with point markers into an SVG file at `path` (800×480);
/// `log_x` / `log_y` put that axis on a log scale (every value must then be > 0).
///
/// # Errors
/// The file cannot be written, or the data has no finite range.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    log_x: bool,
    log_y: bool,
    series: &[Series],
) -> anyhow::Result<()> {
    let pts = series.iter().flat_map(|s| s.1.iter().copied());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    anyhow::ensure!(x0.is_finite() && x1.is_finite() && y0.is_finite() && y1.is_finite(), "no data for {title}");
    if log_y {
        y0 /= 2.0;
        y1 *= 2.0;
    } else {
        let pad = ((y1 - y0) * 0.05).max(1e-9);
        y0 = (y0 - pad).min(0.0);
        y1 += pad;
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let colors =
        [RGBColor(31, 119, 180), RGBColor(214, 39, 40), RGBColor(44, 160, 44), RGBColor(148, 103, 189), RGBColor(255, 127, 14), BLACK];
    macro_rules! draw {
        ($xr:expr, $yr:expr) => {{
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(80)
                .build_cartesian_2d($xr, $yr)
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .y_label_formatter(&|v| format!("{v:.1e}"))
                .draw()
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            for (i, (name, data)) in series.iter().enumerate() {
                let c = colors[i % colors.len()];
                chart
                    .draw_series(LineSeries::new(data.iter().copied(), c.stroke_width(2)))
                    .map_err(|e| anyhow::anyhow!("{e:?}"))?
                    .label(name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
                chart.draw_series(data.iter().map(|p| Circle::new(*p, 3, c.filled()))).map_err(|e| anyhow::anyhow!("{e:?}"))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        }};
    }
    match (log_x, log_y) {
        (false, false) => draw!(x0..x1, y0..y1),
        (false, true) => draw!(x0..x1, (y0..y1).log_scale()),
        (true, false) => draw!((x0..x1).log_scale(), y0..y1),
        (true, true) => draw!((x0..x1).log_scale(), (y0..y1).log_scale()),
    }
    root.present().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(())
}
