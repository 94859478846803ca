//! Horizontal bar charts (SVG): one labelled bar per figure, with an optional reference line
//! (100 % of POSIX in `compare`). For reports whose figures are single values per system.

use std::path::Path;

use plotters::prelude::*;

/// Draws `bars` (label, value) into `path` under `title`, the value axis named `axis`, with a
/// vertical line at `reference` when given.
pub fn write_svg(
    path: &Path,
    title: &str,
    axis: &str,
    bars: &[(String, f64)],
    reference: Option<f64>,
) -> Result<(), String> {
    let height = 80 + 22 * bars.len().max(1) as u32;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    let top = bars.iter().map(|b| b.1).chain(reference).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let max = if top > 0.0 { top * 1.1 } else { 1.0 };
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(30)
            .y_label_area_size(420)
            .build_cartesian_2d(0f64..max, 0usize..bars.len().max(1))?;
        let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(bars.len().max(1))
            .y_label_formatter(&|i| labels.get(*i).cloned().unwrap_or_default())
            .x_desc(axis)
            .draw()?;
        chart.draw_series(
            bars.iter().enumerate().map(|(i, (_, v))| Rectangle::new([(0.0, i), (*v, i + 1)], BLUE.mix(0.6).filled())),
        )?;
        if let Some(line) = reference {
            chart.draw_series(LineSeries::new([(line, 0), (line, bars.len().max(1))], BLACK.stroke_width(1)))?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bar_is_labelled() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("b.svg");
        let bars = vec![("read Isthmus".to_string(), 120.0), ("read POSIX".to_string(), 300.5)];
        write_svg(&svg, "op/s", "operations per second", &bars, None).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg") && text.contains("read Isthmus") && text.contains("read POSIX"));
        // No bars still draws a chart.
        write_svg(&svg, "empty", "x", &[], Some(100.0)).unwrap();
    }
}
