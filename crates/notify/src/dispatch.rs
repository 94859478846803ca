//! The notifier: the durable queue plus one delivery thread per destination. Each thread reads
//! the queue in order from its destination's cursor, skips records meant for others, and sends
//! what is waiting (up to `BATCH` records, one per key) with its destination's `Sender`,
//! retrying what was not taken forever with exponential backoff (100 ms doubling to 30 s, with
//! jitter). Delivery per destination is sequential, batch after batch, so records reach it in
//! queue order (and so in order per key, which a batch holding one record per key keeps even
//! when a batch is sent again in part).
//! Delivery is at least once: see `queue`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use isthmus_store::state_dir::StateDir;

use crate::destination::{DeliveryError, Destination, Outgoing, Sender};
use crate::event::Event;
use crate::metrics::{DestinationMetrics, Metrics};
use crate::queue::{Entry, Queue};
pub use crate::queue::{NotifyError, QueueLimits, Target, WhenFull};

/// The first retry delay; it doubles per failure up to `BACKOFF_MAX`.
pub const BACKOFF_START: Duration = Duration::from_millis(100);
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A destination's position is saved at most this often while it delivers, and this long after it caught up.
const CURSOR_SAVE_INTERVAL: Duration = Duration::from_secs(1);
/// The most records sent at once (in one round trip for the brokers).
const BATCH: usize = 64;
/// Within this time of its last send, a destination's thread waits for more records to gather
/// before it sends again (see `Worker::run`): at most this much added latency, only while
/// events keep coming.
const LINGER: Duration = Duration::from_millis(2);
/// A caught-up thread wakes this often even if nothing arrives (a safety net, not a poll).
const IDLE_WAKE: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Counters {
    delivered: AtomicU64,
    failed: AtomicU64,
}

/// Whether the threads must stop, and whether they save their cursors when they do.
struct Stop {
    state: Mutex<Option<bool>>,
    wake: Condvar,
}

impl Stop {
    fn requested(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    fn save_on_exit(&self) -> bool {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) == Some(true)
    }

    fn request(&self, save: bool) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.get_or_insert(save);
        self.wake.notify_all();
    }

    /// Sleeps `delay` unless a stop is requested meanwhile; whether to go on.
    fn sleep(&self, delay: Duration) -> bool {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (state, _) = self.wake.wait_timeout_while(state, delay, |s| s.is_none()).unwrap_or_else(|p| p.into_inner());
        state.is_none()
    }
}

/// The queue and its delivery threads (see the module comment).
pub struct Notifier {
    queue: Arc<Queue>,
    counters: Vec<Arc<Counters>>,
    stop: Arc<Stop>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Notifier {
    /// Opens the queue in `dir` (the gateway passes `.isthmus/notify`) and starts a delivery
    /// thread per destination, each resuming at its saved cursor.
    pub fn start(
        dir: StateDir,
        destinations: Vec<Destination>,
        limits: QueueLimits,
    ) -> Result<Arc<Notifier>, NotifyError> {
        let arns: Vec<String> = destinations.iter().map(Destination::arn).collect();
        if let Some(twice) = arns.iter().enumerate().find(|(i, arn)| arns[..*i].contains(arn)).map(|(_, arn)| arn) {
            return Err(NotifyError::UnknownDestination(format!("{twice} (configured twice)")));
        }
        let queue = Queue::open(dir, arns, limits)?;
        let stop = Arc::new(Stop { state: Mutex::new(None), wake: Condvar::new() });
        let counters: Vec<Arc<Counters>> = destinations.iter().map(|_| Arc::default()).collect();
        let notifier = Arc::new(Notifier {
            queue: queue.clone(),
            counters: counters.clone(),
            stop: stop.clone(),
            threads: Mutex::new(Vec::new()),
        });
        for (index, destination) in destinations.into_iter().enumerate() {
            let name = format!("isthmus-notify-{}-{}", destination.kind().as_str(), destination.id);
            let worker = Worker {
                queue: queue.clone(),
                index,
                destination,
                counters: counters[index].clone(),
                stop: stop.clone(),
            };
            match isthmus_store::identity::spawn_gateway_thread(&name, move || {
                crate::background::yield_to_requests();
                worker.run()
            }) {
                Ok(handle) => notifier.threads.lock().unwrap_or_else(|p| p.into_inner()).push(handle),
                Err(err) => {
                    notifier.shutdown();
                    return Err(NotifyError::Thread(err));
                }
            }
        }
        Ok(notifier)
    }

    /// Queues `event` for `targets`; written to the queue's file before this returns. Errors:
    /// `Full` (the caller answers 503 SlowDown), `UnknownDestination` (an ARN no destination
    /// has), `TooLarge`, `Closed`, `Io`.
    pub fn enqueue(&self, event: Event, targets: Vec<Target>) -> Result<(), NotifyError> {
        self.queue.enqueue(event, targets).map(|_| ())
    }

    /// Whether an event would find room in the queue now (with `DropOldest` or `Refuse` the
    /// gateway need not ask: `enqueue` drops or fails by itself).
    pub fn has_room(&self) -> bool {
        self.queue.has_room()
    }

    /// Waits up to `timeout` for room in the queue; whether there is room. A gateway whose
    /// queue blocks when full calls it before the write it will announce.
    pub fn wait_for_room(&self, timeout: Duration) -> bool {
        self.queue.wait_for_room(timeout)
    }

    /// The figures now.
    pub fn metrics(&self) -> Metrics {
        let stats = self.queue.stats();
        let destinations = self
            .queue
            .arns()
            .iter()
            .zip(&self.counters)
            .zip(stats.pending)
            .map(|((arn, counters), (pending, lag_seconds))| DestinationMetrics {
                arn: arn.clone(),
                delivered: counters.delivered.load(Ordering::Relaxed),
                failed: counters.failed.load(Ordering::Relaxed),
                pending,
                lag_seconds,
            })
            .collect();
        Metrics::new(stats.queued, stats.dropped, stats.bytes, destinations)
    }

    /// The figures in the Prometheus text format (see `Metrics::prometheus`).
    pub fn prometheus(&self) -> String {
        self.metrics().prometheus()
    }

    /// Stops the threads (a send in flight ends first, within its timeout), saves every
    /// cursor and syncs the queue. Later `enqueue`s fail with `Closed`.
    pub fn shutdown(&self) {
        self.stop_threads(true);
        if let Err(err) = self.queue.save_cursors() {
            tracing::warn!(error = %err, "cannot save the notification cursors: records delivered since the last save will be sent again");
        }
    }

    fn stop_threads(&self, save: bool) {
        self.stop.request(save);
        if let Err(err) = self.queue.close() {
            tracing::warn!(error = %err, "cannot sync the notification queue");
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for thread in threads {
            let _ = thread.join();
        }
    }
}

impl Drop for Notifier {
    /// Without `shutdown`, the threads stop without saving their cursors, as a crash would
    /// leave them: the next start sends again what was delivered since the last save.
    fn drop(&mut self) {
        self.stop_threads(false);
    }
}

/// One destination's delivery thread.
struct Worker {
    queue: Arc<Queue>,
    index: usize,
    destination: Destination,
    counters: Arc<Counters>,
    stop: Arc<Stop>,
}

impl Worker {
    fn run(self) {
        let arn = self.destination.arn();
        let mut sender: Option<Box<dyn Sender>> = None;
        let mut last_save = Instant::now();
        // When the last batch went and whether it was full (a backlog: no lingering then).
        let mut last_sent = (Instant::now().checked_sub(LINGER).unwrap_or_else(Instant::now), false);
        while !self.stop.requested() {
            // Records arriving one after the other, each waking this thread and each sent on
            // its own, cost a round of wakes and a round trip apiece: within LINGER of the
            // last send, the thread lets the next ones gather first. An event after a quiet
            // spell goes at once.
            let since = last_sent.0.elapsed();
            if since < LINGER && !last_sent.1 {
                std::thread::sleep(LINGER - since);
            }
            let batch = match self.queue.next_batch(self.index, BATCH) {
                Ok(batch) => batch,
                Err(err) => {
                    tracing::error!(destination = %arn, error = %err, "cannot read the notification queue");
                    self.stop.sleep(BACKOFF_MAX);
                    continue;
                }
            };
            if batch.is_empty() {
                // Caught up: the position is saved at most once a CURSOR_SAVE_INTERVAL (each
                // save is a replaced file with its fsyncs; saving whenever the queue emptied
                // cost two fsyncs per event under a trickle of writes).
                if last_save.elapsed() >= CURSOR_SAVE_INTERVAL {
                    self.save_cursor(&arn);
                    last_save = Instant::now();
                    self.queue.wait(self.index, IDLE_WAKE);
                } else {
                    self.queue.wait(self.index, CURSOR_SAVE_INTERVAL);
                }
                continue;
            }
            let batch = one_per_key(batch);
            let records: Vec<(u64, &str, Vec<u8>)> = batch
                .iter()
                .map(|(seq, entry)| {
                    let configuration_id =
                        entry.targets.iter().find(|t| t.arn == arn).map_or("", |t| t.configuration_id.as_str());
                    (*seq, entry.event.key.as_str(), entry.event.record(*seq, configuration_id))
                })
                .collect();
            if !self.send(&arn, &mut sender, &records) {
                break;
            }
            last_sent = (Instant::now(), records.len() == BATCH);
            if last_save.elapsed() >= CURSOR_SAVE_INTERVAL {
                self.save_cursor(&arn);
                last_save = Instant::now();
            }
        }
        if self.stop.save_on_exit() {
            self.save_cursor(&arn);
        }
    }

    /// Sends `records` (sequencer, key, record) until the destination took them all (`true`),
    /// acknowledging each in the queue as it is taken, or until a stop is requested.
    fn send(&self, arn: &str, sender: &mut Option<Box<dyn Sender>>, records: &[(u64, &str, Vec<u8>)]) -> bool {
        let outgoing: Vec<Outgoing<'_>> =
            records.iter().map(|(_, key, record)| Outgoing { key, record: record.as_slice() }).collect();
        let mut backoff = BACKOFF_START;
        let mut failures = 0u64;
        let mut done = 0;
        loop {
            let made = match sender {
                Some(sender) => Ok(sender),
                None => crate::senders::sender(&self.destination).map(|made| sender.insert(made)),
            };
            let (taken, failure) = match made {
                Ok(sender) => sender.send_all(&outgoing[done..]),
                Err(error) => (0, Some(error)),
            };
            self.queue.ack_all(self.index, records[done..done + taken].iter().map(|(seq, _, _)| *seq));
            self.counters.delivered.fetch_add(taken as u64, Ordering::Relaxed);
            done += taken;
            let Some(err) = failure else {
                if failures > 0 {
                    tracing::info!(destination = %arn, failed_attempts = failures, "the destination takes notifications again");
                }
                return true;
            };
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
            if failures == 0 {
                log_failure(arn, &err);
            }
            failures += 1;
            if !self.stop.sleep(jitter(backoff)) {
                return false;
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    fn save_cursor(&self, arn: &str) {
        if let Err(err) = self.queue.save_cursor(self.index) {
            tracing::warn!(destination = %arn, error = %err, "cannot save a notification cursor");
        }
    }
}

/// The longest prefix of `batch` with no two records of one key (bucket and key): a record
/// sent again after a failure then never lands after a later record of its key.
fn one_per_key(mut batch: Vec<(u64, Arc<Entry>)>) -> Vec<(u64, Arc<Entry>)> {
    let mut keys = std::collections::HashSet::with_capacity(batch.len());
    let distinct = batch.iter().take_while(|(_, entry)| keys.insert((&entry.event.bucket, &entry.event.key))).count();
    batch.truncate(distinct);
    batch
}

/// The first failure of a streak (the next ones are counted, not logged).
fn log_failure(arn: &str, err: &DeliveryError) {
    tracing::warn!(destination = %arn, error = %err, "cannot deliver a notification: retrying with backoff until it is taken");
}

/// Between half and all of `delay`, at random, so that destinations coming back are not hit
/// by every retry at once.
fn jitter(delay: Duration) -> Duration {
    let mut bytes = [0u8; 4];
    let fraction = match getrandom::fill(&mut bytes) {
        Ok(()) => u32::from_le_bytes(bytes) as f64 / u32::MAX as f64,
        Err(_) => 1.0,
    };
    delay.mul_f64(0.5 + fraction / 2.0)
}

#[cfg(test)]
mod tests;
