//! `isthmus bench compare`: several result files side by side, every figure next to the raw
//! POSIX baseline measured in the same run ("% of POSIX"), as a table, CSV and an SVG chart.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use plotters::prelude::*;

use crate::report::{Report, figure, phase_name, ratio_to_posix};
use crate::units::format_size;

/// One compared figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub file: String,
    pub phase: String,
    pub size: String,
    pub workers: usize,
    pub kind: String,
    pub figure: f64,
    pub unit: &'static str,
    pub percent_of_posix: Option<f64>,
}

/// Every non-POSIX result of every file, with its ratio to the POSIX result of its own file.
pub fn rows(files: &[(String, Report)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (file, report) in files {
        for r in report.results.iter().filter(|r| r.kind != "posix") {
            rows.push(Row {
                file: file.clone(),
                phase: phase_name(r),
                size: format_size(r.object_size),
                workers: r.workers,
                kind: r.kind.clone(),
                figure: figure(r),
                unit: if r.op == crate::Op::List { "keys/s" } else { "ops/s" },
                percent_of_posix: ratio_to_posix(&report.results, r).map(|x| x * 100.0),
            });
        }
    }
    rows
}

pub fn table(rows: &[Row]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["file", "phase", "size", "workers", "target", "figure", "% of POSIX"]);
    for r in rows {
        t.add_row([
            r.file.clone(),
            r.phase.clone(),
            r.size.clone(),
            r.workers.to_string(),
            r.kind.clone(),
            format!("{:.0} {}", r.figure, r.unit),
            r.percent_of_posix.map_or("-".into(), |p| format!("{p:.1} %")),
        ]);
    }
    t.to_string()
}

pub fn csv(rows: &[Row]) -> String {
    let quote =
        |s: &str| if s.contains([',', '"']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() };
    let mut out = String::from("file,phase,size,workers,target,figure,unit,percent_of_posix\n");
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{:.3},{},{}\n",
            quote(&r.file),
            quote(&r.phase),
            r.size,
            r.workers,
            r.kind,
            r.figure,
            r.unit,
            r.percent_of_posix.map_or(String::new(), |p| format!("{p:.2}"))
        ));
    }
    out
}

/// A horizontal bar per figure: its percentage of the POSIX baseline.
pub fn write_svg(rows: &[Row], path: &std::path::Path) -> Result<(), String> {
    let bars: Vec<(String, f64)> = rows
        .iter()
        .filter_map(|r| {
            r.percent_of_posix.map(|p| (format!("{} {} {} {}w {}", r.file, r.phase, r.size, r.workers, r.kind), p))
        })
        .collect();
    let height = 80 + 22 * bars.len().max(1) as u32;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    let max = bars.iter().map(|b| b.1).fold(100.0, f64::max) * 1.1;
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("% of the POSIX baseline of the same run", ("sans-serif", 20))
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
            .x_desc("% of POSIX")
            .draw()?;
        chart.draw_series(
            bars.iter().enumerate().map(|(i, (_, p))| Rectangle::new([(0.0, i), (*p, i + 1)], BLUE.mix(0.6).filled())),
        )?;
        chart.draw_series(LineSeries::new([(100.0, 0), (100.0, bars.len().max(1))], BLACK.stroke_width(1)))?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Op, OpResult};

    fn result(kind: &str, op: Op, ops_per_s: f64) -> OpResult {
        crate::workload::sample_result(kind, "ops", op, ops_per_s, 0.0, 0.0)
    }

    use crate::report::sample_report as report;

    #[test]
    fn each_file_is_compared_with_its_own_baseline() {
        let files = vec![
            ("a.json".to_string(), report(vec![result("posix", Op::Put, 1000.0), result("s3", Op::Put, 500.0)])),
            (
                "b.json".to_string(),
                report(vec![
                    result("posix", Op::Put, 2000.0),
                    result("s3", Op::Put, 500.0),
                    result("embedded", Op::Get, 1.0),
                ]),
            ),
        ];
        let rows = rows(&files);
        assert_eq!(rows.iter().map(|r| r.percent_of_posix).collect::<Vec<_>>(), [Some(50.0), Some(25.0), None]);
        let csv = csv(&rows);
        assert!(csv.starts_with("file,phase,size,workers,target,figure,unit,percent_of_posix\n"));
        assert!(csv.contains("a.json,put,4KiB,4,s3,500.000,ops/s,50.00\n"));
        assert!(table(&rows).contains("25.0 %"));
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("c.svg");
        write_svg(&rows, &svg).unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    }
}
