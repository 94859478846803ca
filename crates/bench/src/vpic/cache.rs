//! The transfer buffer (PDC-XF's cache) in use over a run, sampled at a fixed interval against
//! its bound (the paper's Figure 7), and drawn as an SVG line chart.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use isthmus_array::Transfers;
use plotters::prelude::*;

/// The most samples kept: past it every other sample is dropped and the interval doubled, so a
/// long run's memory stays bounded (at 10 ms, 100,000 samples is 16 minutes).
const MAX_SAMPLES: usize = 100_000;

/// One sample of the sessions' buffers.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CacheSample {
    /// Seconds since the write phase started.
    pub t_s: f64,
    /// The largest buffer in use of one session (one rank): what the bound applies to.
    pub max_session_bytes: u64,
    /// The buffers in use of every session of this process.
    pub total_bytes: u64,
}

/// The buffer in use over a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CacheUsage {
    /// The interval between two samples, ms (doubled each time the sample cap was reached).
    pub interval_ms: f64,
    /// Each session's bound (`TransferOptions::buffer_bytes`).
    pub bound_bytes: u64,
    /// Sessions sampled (this process's ranks).
    pub sessions: usize,
    /// The most one session held at once, exact (not sampled).
    pub peak_bytes: u64,
    pub samples: Vec<CacheSample>,
}

/// Samples sessions until told to stop.
pub struct CacheSampler {
    interval: Duration,
}

impl CacheSampler {
    pub fn new(interval: Duration) -> Self {
        Self { interval }
    }

    /// Samples `sessions` every interval until `stop` is set, then once more.
    pub fn run(mut self, sessions: &[Transfers], stop: &AtomicBool) -> CacheUsage {
        let began = Instant::now();
        let mut samples = Vec::new();
        loop {
            let stopping = stop.load(Ordering::Acquire);
            let in_use: Vec<u64> = sessions.iter().map(Transfers::buffer_in_use).collect();
            samples.push(CacheSample {
                t_s: began.elapsed().as_secs_f64(),
                max_session_bytes: in_use.iter().copied().max().unwrap_or(0),
                total_bytes: in_use.iter().sum(),
            });
            if samples.len() >= MAX_SAMPLES {
                samples = samples.into_iter().step_by(2).collect();
                self.interval *= 2;
            }
            if stopping {
                break;
            }
            std::thread::sleep(self.interval);
        }
        CacheUsage {
            interval_ms: self.interval.as_secs_f64() * 1e3,
            bound_bytes: sessions.first().map_or(0, |s| s.options().buffer_bytes),
            sessions: sessions.len(),
            peak_bytes: sessions.iter().map(Transfers::buffer_peak).max().unwrap_or(0),
            samples,
        }
    }
}

/// One line per run (label, usage): a session's buffer in use (MiB) over time, with the bound
/// as a dashed red line.
pub fn write_svg(title: &str, runs: &[(String, &CacheUsage)], path: &Path) -> Result<(), String> {
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    let bound = runs.iter().map(|(_, u)| mib(u.bound_bytes)).fold(0.0, f64::max);
    let end = runs.iter().flat_map(|(_, u)| u.samples.last()).map(|s| s.t_s).fold(0.001, f64::max);
    let root = SVGBackend::new(path, (1100, 500)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..end * 1.02, 0f64..(bound * 1.1).max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("seconds since the write phase started")
            .y_desc("transfer buffer in use per session, MiB")
            .draw()?;
        let dashes = (0..40).map(|i| {
            let x = end * i as f64 / 40.0;
            PathElement::new(vec![(x, bound), (x + end / 80.0, bound)], RED.stroke_width(2))
        });
        chart
            .draw_series(dashes)?
            .label(format!("bound ({bound:.0} MiB)"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(2)));
        for (i, (label, usage)) in runs.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points = usage.samples.iter().map(|s| (s.t_s, mib(s.max_session_bytes)));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use isthmus_array::TransferOptions;

    #[test]
    fn sampling_stops_when_told_and_reports_the_bound() {
        let options = TransferOptions { buffer_bytes: 1 << 20, threads: 1, ..TransferOptions::default() };
        let sessions = vec![Transfers::new(options).unwrap()];
        let stop = AtomicBool::new(false);
        let usage = std::thread::scope(|scope| {
            let sampler = scope.spawn(|| CacheSampler::new(Duration::from_millis(1)).run(&sessions, &stop));
            std::thread::sleep(Duration::from_millis(30));
            stop.store(true, Ordering::Release);
            sampler.join().unwrap()
        });
        assert_eq!(usage.bound_bytes, 1 << 20);
        assert!(usage.samples.len() >= 2, "{usage:?}");
        assert!(usage.samples.windows(2).all(|w| w[0].t_s <= w[1].t_s));
        assert!(usage.samples.iter().all(|s| s.total_bytes == 0));
        let path = std::env::temp_dir().join(format!("isthmus-cache-{}.svg", std::process::id()));
        write_svg("cache", &[("idle".into(), &usage)], &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.contains("<svg") && svg.contains("bound (1 MiB)"), "{svg}");
    }
}
