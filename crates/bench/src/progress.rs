//! What a run shows while it runs: a bar of the operations done on a terminal, one plain line
//! otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Shows what is running: on a terminal a bar of the operations done (of the expected number,
/// when the workload knows it; a count and rate otherwise) with the elapsed time, cleared when
/// the guard is dropped; otherwise one plain line.
pub(crate) struct Progress(pub(crate) Option<(indicatif::ProgressBar, Arc<AtomicBool>, std::thread::JoinHandle<()>)>);

pub(crate) fn announce(message: String, expected: Option<u64>) -> Progress {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("{message}");
        return Progress(None);
    }
    let template = match expected {
        Some(_) => "{spinner} [{elapsed_precise}] {msg}\n  [{bar:40}] {human_pos}/{human_len} ops ({rate})",
        None => "{spinner} [{elapsed_precise}] {msg}: {human_pos} ops ({rate})",
    };
    let bar = indicatif::ProgressBar::new(expected.unwrap_or(0));
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        let rate = |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.0} ops/s", state.per_sec());
        };
        bar.set_style(style.progress_chars("=> ").with_key("rate", rate));
    }
    bar.set_message(message);
    bar.enable_steady_tick(Duration::from_millis(120));
    // The workloads count finished operations in one process-wide counter; follow it.
    let done = &crate::workload::OPERATIONS_DONE;
    let base = done.load(Ordering::Relaxed);
    let (follower, stop) = (bar.clone(), Arc::new(AtomicBool::new(false)));
    let stopped = stop.clone();
    let ticker = std::thread::spawn(move || {
        while !stopped.load(Ordering::Relaxed) {
            follower.set_position(done.load(Ordering::Relaxed) - base);
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    Progress(Some((bar, stop, ticker)))
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((bar, stop, ticker)) = self.0.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = ticker.join();
            bar.finish_and_clear();
        }
    }
}
