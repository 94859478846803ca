//! Radar charts as SVG, the form of Figure 10 in Gadban & Kunkel (2021): one spoke per phase,
//! one closed polygon per series (a target's figures as % of POSIX), on a logarithmic radius
//! with rings at 1, 3, 10, 30, 100 % ... and a bold ring at 100 % (parity with POSIX).
//!
//! Decision: the radius is logarithmic. Shares of POSIX span three decades in one run (a page-
//! cached read at 600 %, a small-object stat at 2 %); on a linear radius everything below 100 %
//! crowds the centre and the chart shows one spike.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The series' colours, in order (the palette of the project's other charts).
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The centre of the chart, in percent: smaller values sit on it.
const CENTRE: f64 = 1.0;

/// The outer ring: the decade at or above the largest value, 100 % at least.
fn scale_of(series: &[(String, Vec<f64>)]) -> f64 {
    let max = series.iter().flat_map(|(_, v)| v.iter().copied()).filter(|v| v.is_finite()).fold(100.0, f64::max);
    10f64.powf(max.log10().ceil())
}

/// The rings up to `scale`: 1, 3, 10, 30, ... percent.
fn rings(scale: f64) -> Vec<f64> {
    let mut rings = Vec::new();
    let mut decade = CENTRE;
    while decade <= scale * 1.000_001 {
        rings.push(decade);
        if decade * 3.0 < scale {
            rings.push(decade * 3.0);
        }
        decade *= 10.0;
    }
    rings
}

/// Draws `series` (name, one value per axis, in percent) on `axes` into an SVG file at `path`.
pub fn write_svg(path: &Path, title: &str, axes: &[String], series: &[(String, Vec<f64>)]) -> Result<(), String> {
    if axes.len() < 3 {
        return Err(format!("a radar chart needs at least 3 axes, got {}", axes.len()));
    }
    if let Some((name, values)) = series.iter().find(|(_, v)| v.len() != axes.len()) {
        return Err(format!("series {name:?} has {} values for {} axes", values.len(), axes.len()));
    }
    let (width, height) = (900u32, 760u32);
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    let (cx, cy, radius) = (f64::from(width) / 2.0 - 80.0, f64::from(height) / 2.0 + 10.0, 270.0);
    let scale = scale_of(series);
    // The point at `value` percent on spoke `i`, the first spoke pointing up, clockwise.
    let point = |i: usize, value: f64| {
        let angle = std::f64::consts::TAU * i as f64 / axes.len() as f64 - std::f64::consts::FRAC_PI_2;
        let fraction = (value.max(CENTRE) / CENTRE).log10() / (scale / CENTRE).log10();
        let r = radius * fraction.clamp(0.0, 1.0);
        ((cx + r * angle.cos()).round() as i32, (cy + r * angle.sin()).round() as i32)
    };
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let centred =
            |size| ("sans-serif", size).into_font().into_text_style(&root).pos(Pos::new(HPos::Center, VPos::Center));
        root.draw(&Text::new(format!("{title} (log scale)"), ((width / 2) as i32, 22), centred(20)))?;
        for ring in rings(scale) {
            let mut outline: Vec<(i32, i32)> = (0..axes.len()).map(|i| point(i, ring)).collect();
            outline.push(outline[0]);
            let style = if (ring - 100.0).abs() < 1e-9 {
                BLACK.stroke_width(2)
            } else {
                RGBColor(200, 200, 200).stroke_width(1)
            };
            root.draw(&PathElement::new(outline, style))?;
            let (x, y) = point(0, ring);
            let grey = ("sans-serif", 11).into_font().color(&RGBColor(110, 110, 110));
            root.draw(&Text::new(format!("{ring:.0} %"), (x + 4, y + 2), grey))?;
        }
        for (i, axis) in axes.iter().enumerate() {
            root.draw(&PathElement::new(
                vec![point(i, 0.0), point(i, scale)],
                RGBColor(180, 180, 180).stroke_width(1),
            ))?;
            // Labels sit beyond the outer ring (`point` stops at the scale, so place by hand).
            let angle = std::f64::consts::TAU * i as f64 / axes.len() as f64 - std::f64::consts::FRAC_PI_2;
            let (x, y) = ((cx + radius * 1.14 * angle.cos()) as i32, (cy + radius * 1.08 * angle.sin()) as i32);
            root.draw(&Text::new(axis.clone(), (x, y), centred(13)))?;
        }
        for (k, (name, values)) in series.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            let mut outline: Vec<(i32, i32)> = values.iter().enumerate().map(|(i, v)| point(i, *v)).collect();
            outline.push(outline[0]);
            root.draw(&Polygon::new(outline.clone(), colour.mix(0.15).filled()))?;
            root.draw(&PathElement::new(outline, colour.stroke_width(2)))?;
            for (i, v) in values.iter().enumerate() {
                root.draw(&Circle::new(point(i, *v), 3, colour.filled()))?;
            }
            let y = 60 + 22 * k as i32;
            root.draw(&Rectangle::new([(width as i32 - 170, y - 6), (width as i32 - 156, y + 6)], colour.filled()))?;
            root.draw(&Text::new(name.clone(), (width as i32 - 150, y - 7), ("sans-serif", 14)))?;
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
    fn one_polygon_per_series_and_a_label_per_axis() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("radar.svg");
        let axes: Vec<String> =
            ["ior-easy-write", "ior-easy-read", "mdtest-easy-write", "find"].map(String::from).into();
        let series = vec![
            ("s3".to_string(), vec![10.0, 20.0, 30.0, 40.0]),
            ("embedded".to_string(), vec![90.0, 80.0, 130.0, 60.0]),
        ];
        write_svg(&path, "IO500 phases, % of POSIX", &axes, &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<polygon").count(), 2, "{svg}");
        for label in axes.iter().chain([&"s3".to_string(), &"embedded".to_string()]) {
            assert!(svg.contains(label.as_str()), "{label}");
        }
        // 130 % widens the scale to the next decade: rings at 1, 3, 10, 30, 100, 300, 1000 %.
        assert!(svg.contains("\n300 %\n") && svg.contains("\n1000 %\n") && !svg.contains("3000 %"), "{svg}");
        assert_eq!(rings(100.0), [1.0, 3.0, 10.0, 30.0, 100.0]);
        assert!(write_svg(&path, "t", &axes[..2], &[]).is_err());
        assert!(write_svg(&path, "t", &axes, &[("x".into(), vec![1.0])]).is_err());
    }
}
