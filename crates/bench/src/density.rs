//! Latency density, the form of Figure 8 in Gadban & Kunkel (2021): for each target a smoothed
//! histogram of its per-operation times (a Gaussian kernel density on log10 of the time),
//! drawn as SVG. The operation times come from the results' latency histograms (HdrHistogram,
//! 3 significant digits), so memory is bounded whatever the number of operations.

use std::path::Path;

use hdrhistogram::Histogram;
use plotters::prelude::*;

use crate::workload::OpResult;

/// The benchmark phase's operations of MD-Workbench (stat, read, delete, create), per target in
/// the order they appear (named as the paper's systems: POSIX, HTTP gateway, in-process, local
/// socket), their histograms added up.
pub fn md_workbench_series(results: &[OpResult]) -> Vec<(String, Histogram<u64>)> {
    let mut series: Vec<(String, Histogram<u64>)> = Vec::new();
    for r in results.iter().filter(|r| r.workload == "md-workbench") {
        let Some(h) = r.latency_histogram.as_deref().and_then(crate::latency::decode) else { continue };
        match series.iter_mut().find(|(name, _)| name == crate::io500::door_name(&r.kind)) {
            Some((_, total)) => {
                let _ = total.add(&h);
            }
            None => {
                // A fresh histogram resizes itself to take every rank's range.
                let mut total = Histogram::<u64>::new(3).expect("valid precision");
                let _ = total.add(&h);
                series.push((crate::io500::door_name(&r.kind).to_string(), total));
            }
        }
    }
    series
}

/// The density of log10(time in µs) at `points` evenly spaced values from `from` to `to`
/// (log10 µs), integrating to 1 over log10 time. The bandwidth is Silverman's rule of thumb on
/// the weighted log times, at least 0.02 decades so a histogram of one value is a bump.
pub fn log_density(histogram: &Histogram<u64>, from: f64, to: f64, points: usize) -> Vec<(f64, f64)> {
    let buckets: Vec<(f64, f64)> = histogram
        .iter_recorded()
        .map(|v| {
            ((histogram.median_equivalent(v.value_iterated_to()).max(1) as f64).log10(), v.count_at_value() as f64)
        })
        .collect();
    let n: f64 = buckets.iter().map(|(_, w)| w).sum();
    if n == 0.0 || points < 2 {
        return Vec::new();
    }
    let mean = buckets.iter().map(|(x, w)| x * w).sum::<f64>() / n;
    let sd = (buckets.iter().map(|(x, w)| w * (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    let bandwidth = (1.06 * sd * n.powf(-0.2)).max(0.02);
    let norm = 1.0 / (n * bandwidth * (2.0 * std::f64::consts::PI).sqrt());
    (0..points)
        .map(|i| {
            let x = from + (to - from) * i as f64 / (points - 1) as f64;
            let y = buckets.iter().map(|(xi, w)| w * (-0.5 * ((x - xi) / bandwidth).powi(2)).exp()).sum::<f64>();
            (x, y * norm)
        })
        .collect()
}

/// A time given as log10 µs, for the axis: 12µs, 3.4ms, 1.2s.
fn time_label(log_us: f64) -> String {
    let us = 10f64.powf(log_us);
    if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 1e6 {
        format!("{:.1}ms", us / 1000.0)
    } else {
        format!("{:.1}s", us / 1e6)
    }
}

/// The density of each series' operation times as one curve on a log time axis, into an SVG
/// file at `path`.
pub fn write_svg(path: &Path, title: &str, series: &[(String, Histogram<u64>)]) -> Result<(), String> {
    let series: Vec<&(String, Histogram<u64>)> = series.iter().filter(|(_, h)| !h.is_empty()).collect();
    if series.is_empty() {
        return Err("no operation times to draw".into());
    }
    let low = series.iter().map(|(_, h)| h.min().max(1)).min().unwrap_or(1) as f64;
    let high = series.iter().map(|(_, h)| h.max().max(1)).max().unwrap_or(1) as f64;
    let (from, to) = (low.log10() - 0.3, high.log10() + 0.3);
    let curves: Vec<(&str, Vec<(f64, f64)>)> =
        series.iter().map(|(name, h)| (name.as_str(), log_density(h, from, to, 300))).collect();
    let top = curves.iter().flat_map(|(_, c)| c.iter().map(|p| p.1)).fold(0.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (1000, 560)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(from..to, 0f64..top.max(1e-9))?;
        chart
            .configure_mesh()
            .x_desc("time per operation (log scale)")
            .y_desc("density")
            .x_label_formatter(&|x| time_label(*x))
            .draw()?;
        for (k, (name, curve)) in curves.iter().enumerate() {
            let colour = Palette99::pick(k).to_rgba();
            chart
                .draw_series(LineSeries::new(curve.iter().copied(), colour.stroke_width(2)))?
                .label(name.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
        }
        chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(3).unwrap();
        values.into_iter().for_each(|v| h.record(v).unwrap());
        h
    }

    #[test]
    fn density_peaks_where_the_times_are_and_integrates_to_one() {
        // Most operations near 100 µs, a few near 10 ms.
        let h = histogram((0..900).map(|i| 90 + i % 20).chain((0..100).map(|i| 9_000 + i * 20)));
        let curve = log_density(&h, 0.0, 6.0, 601);
        let peak = curve.iter().copied().fold((0.0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
        assert!((peak.0 - 2.0).abs() < 0.1, "{peak:?}"); // log10(100 µs)
        let step = 6.0 / 600.0;
        let area: f64 = curve.iter().map(|p| p.1 * step).sum();
        assert!((area - 1.0).abs() < 0.02, "{area}");
        // The second mode: more density near 10 ms than between the two.
        let at = |x: f64| curve.iter().min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs())).unwrap().1;
        assert!(at(4.0) > at(3.0));
        assert!(log_density(&Histogram::<u64>::new(3).unwrap(), 0.0, 1.0, 10).is_empty());
    }

    #[test]
    fn one_curve_per_target_with_its_histograms_added() {
        let result = |kind: &str, op, values: std::ops::Range<u64>| OpResult {
            latency_histogram: crate::latency::encode(&histogram(values)),
            ..crate::workload::sample_result(kind, "md-workbench", op, 1.0, 0.0, 0.0)
        };
        let results = vec![
            result("posix", crate::Op::Head, 10..20),
            result("posix", crate::Op::Get, 20..40),
            result("s3", crate::Op::Head, 500..600),
            OpResult { workload: "md-workbench-precreate".into(), ..result("s3", crate::Op::Put, 1..1000) },
        ];
        let series = md_workbench_series(&results);
        assert_eq!(
            series.iter().map(|(k, h)| (k.as_str(), h.len())).collect::<Vec<_>>(),
            [("POSIX", 30), ("HTTP gateway", 100)]
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("density.svg");
        write_svg(&path, "MD-Workbench", &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("POSIX") && svg.contains("HTTP gateway"));
        // Two curves of 300 points each (the mesh and legend lines have a few points).
        let long_lines = svg
            .split("<polyline")
            .filter_map(|p| p.split("points=\"").nth(1)?.split('"').next())
            .filter(|points| points.split_whitespace().count() >= 300)
            .count();
        assert_eq!(long_lines, 2);
        assert!(write_svg(&path, "empty", &[]).is_err());
    }
}
