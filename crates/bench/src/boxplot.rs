//! Box plots of per-stream times, as CERN's erasure-coding study drew them (its Figures 7 and
//! 9): for each group the quartile box, the median, whiskers from minimum to maximum and a mark
//! at the 99th percentile, written as SVG.

use std::path::Path;

use plotters::prelude::*;

/// Minimum, quartiles, median, 99th percentile and maximum of `values`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no values.
    pub fn of(values: &[f64]) -> Option<Self> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        // Linear interpolation between closest ranks.
        let at = |q: f64| {
            let pos = q * (sorted.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
        };
        Some(Self {
            min: sorted[0],
            q1: at(0.25),
            median: at(0.5),
            q3: at(0.75),
            p99: at(0.99),
            max: sorted[sorted.len() - 1],
        })
    }
}

/// One horizontal box per group (label, values in seconds), on a shared linear axis.
pub fn write_svg(title: &str, groups: &[(String, Vec<f64>)], path: &Path) -> Result<(), String> {
    let spreads: Vec<(&str, Spread)> =
        groups.iter().filter_map(|(label, values)| Spread::of(values).map(|s| (label.as_str(), s))).collect();
    let height = 90 + 24 * spreads.len().max(1) as u32;
    let root = SVGBackend::new(path, (1100, height)).into_drawing_area();
    let max = spreads.iter().map(|(_, s)| s.max).fold(0.001, f64::max) * 1.05;
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(30)
            .y_label_area_size(300)
            .build_cartesian_2d(0f64..max, 0f64..spreads.len().max(1) as f64)?;
        let labels: Vec<&str> = spreads.iter().map(|(label, _)| *label).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(spreads.len().max(1) + 1)
            .y_label_formatter(&|y| labels.get(y.floor() as usize).map(|l| l.to_string()).unwrap_or_default())
            .x_desc("seconds per stream (box: quartiles, bar: median, whiskers: min..max, red: p99)")
            .draw()?;
        for (i, (_, s)) in spreads.iter().enumerate() {
            let (lo, mid, hi) = (i as f64 + 0.2, i as f64 + 0.5, i as f64 + 0.8);
            chart.draw_series(std::iter::once(Rectangle::new([(s.q1, lo), (s.q3, hi)], BLUE.mix(0.35).filled())))?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(s.median, lo), (s.median, hi)],
                BLACK.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(PathElement::new(vec![(s.min, mid), (s.q1, mid)], BLACK)))?;
            chart.draw_series(std::iter::once(PathElement::new(vec![(s.q3, mid), (s.max, mid)], BLACK)))?;
            chart
                .draw_series(std::iter::once(PathElement::new(vec![(s.p99, lo), (s.p99, hi)], RED.stroke_width(2))))?;
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
    fn spread_of_known_values() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!((s.min, s.q1, s.median, s.q3, s.max), (1.0, 2.0, 3.0, 4.0, 5.0));
        assert!((s.p99 - 4.96).abs() < 1e-9, "{}", s.p99);
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN]), None);
    }

    #[test]
    fn the_svg_names_every_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("box.svg");
        let groups = vec![("ec4p2 write".to_string(), vec![1.0, 2.0, 3.5]), ("raw write".to_string(), vec![0.5, 0.7])];
        write_svg("streams", &groups, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("ec4p2 write") && svg.contains("raw write"), "{svg}");
    }
}
