//! How long a drive's I/O takes: the means reads are hedged and drives judged slow by, what a
//! drive has under way (to find it stalled), and the probes of a drive reads go around.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a drive's I/O takes, per MiB (exponentially weighted means, microseconds): what a
/// reader waits, queue included (hedging compares a late answer with it), and what the drive
/// takes once an I/O starts (its service time: a drive is judged slow on it, so a busy queue
/// is no slowness, and reads going around a slow drive, which empties its queue, do not make
/// it look fast again). Also the I/O under way (a drive that has I/O running and has neither
/// started nor finished one for `STALLED_AFTER` is stalled) and when it was last probed.
#[derive(Default)]
pub(crate) struct Latency {
    service_us: AtomicU64,
    wait_us: AtomicU64,
    samples: AtomicU64,
    /// Shard reads asked of the drive (queued on its lane).
    asked: AtomicU64,
    running: AtomicU64,
    /// When an I/O last started or finished (`now_us`).
    last_event_us: AtomicU64,
    /// When a read last probed the drive while it was slow (`now_us`), and whether that
    /// probe is still unanswered.
    probed_us: AtomicU64,
    probing: AtomicBool,
}

/// An I/O under way on a drive (`Latency::begin`).
pub(crate) struct Running<'a>(&'a Latency);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
        self.0.last_event_us.store(now_us(), Ordering::Relaxed);
    }
}

/// A drive with I/O under way that has neither started nor finished one for this long is
/// stalled (taken for slow).
const STALLED_AFTER: Duration = Duration::from_millis(500);
/// The longest I/O a mean counts: a drive back from a stall of minutes is judged again within
/// seconds of probes.
const LONGEST_SAMPLE: Duration = Duration::from_secs(10);

/// Microseconds since the first call in this process: the clock of the drives' timestamps.
fn now_us() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64 + 1
}

impl Latency {
    /// Counts one I/O: `service` from its start, `waited` from when it was asked for.
    pub(crate) fn record(&self, service: Duration, waited: Duration) {
        let micros = |d: Duration| d.min(LONGEST_SAMPLE).as_micros() as u64;
        let first = self.samples.fetch_add(1, Ordering::Relaxed) == 0;
        for (mean, sample) in [(&self.service_us, micros(service)), (&self.wait_us, micros(waited))] {
            let _ = mean.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |mean| {
                Some(if first { sample } else { (mean * 7 + sample) / 8 })
            });
        }
    }

    /// The mean service time per MiB, once measured.
    pub(crate) fn mean_us(&self) -> Option<u64> {
        (self.samples.load(Ordering::Relaxed) > 0).then(|| self.service_us.load(Ordering::Relaxed))
    }

    /// The mean wait per MiB (queue included), once measured.
    pub(crate) fn wait_us(&self) -> Option<u64> {
        (self.samples.load(Ordering::Relaxed) > 0).then(|| self.wait_us.load(Ordering::Relaxed))
    }

    pub(crate) fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    /// Counts a shard read asked of the drive.
    pub(crate) fn ask(&self) {
        self.asked.fetch_add(1, Ordering::Relaxed);
    }

    /// Shard reads asked of the drive since the pool opened.
    #[cfg(test)]
    pub(crate) fn asks(&self) -> u64 {
        self.asked.load(Ordering::Relaxed)
    }

    /// Whether the drive has I/O under way and has neither started nor finished any for
    /// `STALLED_AFTER`.
    pub(crate) fn stalled(&self) -> bool {
        self.running.load(Ordering::Relaxed) > 0
            && now_us().saturating_sub(self.last_event_us.load(Ordering::Relaxed)) > STALLED_AFTER.as_micros() as u64
    }

    /// Counts an I/O under way until the guard is dropped.
    pub(crate) fn begin(&self) -> Running<'_> {
        self.last_event_us.store(now_us(), Ordering::Relaxed);
        self.running.fetch_add(1, Ordering::Relaxed);
        Running(self)
    }

    /// Claims a probe of the drive (a read of it while reads go around it, so its latency is
    /// known again when it recovers): true at most once per `every`, and never while the
    /// last probe is unanswered. `probed` reports the answer.
    pub(crate) fn claim_probe(&self, every: Duration) -> bool {
        let now = now_us();
        let last = self.probed_us.load(Ordering::Relaxed);
        // (0: never probed.)
        if self.probing.load(Ordering::Relaxed) || (last != 0 && now.saturating_sub(last) < every.as_micros() as u64) {
            return false;
        }
        if self.probed_us.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return false;
        }
        self.probing.store(true, Ordering::Relaxed);
        true
    }

    pub(crate) fn probed(&self) {
        self.probing.store(false, Ordering::Relaxed);
    }
}
