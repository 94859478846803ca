//! What the notifier counts (queued, delivered, failed attempts, dropped, pending, lag), per
//! destination and in total, and its Prometheus text exposition.

use std::fmt::Write;

/// One destination's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationMetrics {
    pub arn: String,
    /// Records it acknowledged (since the gateway started).
    pub delivered: u64,
    /// Attempts that failed (each is retried).
    pub failed: u64,
    /// Records queued for it and not yet delivered.
    pub pending: u64,
    /// The age of its oldest undelivered record, in seconds (0 when none).
    pub lag_seconds: f64,
}

/// The notifier's figures: counters since the gateway started, `pending` and `lag_seconds`
/// as now (`lag_seconds`: the largest of the destinations').
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    pub queued: u64,
    pub delivered: u64,
    pub failed: u64,
    pub dropped: u64,
    pub pending: u64,
    pub lag_seconds: f64,
    /// Bytes of queued records (the bound is `max_bytes`).
    pub queue_bytes: u64,
    pub destinations: Vec<DestinationMetrics>,
}

impl Metrics {
    /// Sums the destinations' figures into the totals.
    pub fn new(queued: u64, dropped: u64, queue_bytes: u64, destinations: Vec<DestinationMetrics>) -> Self {
        Metrics {
            queued,
            dropped,
            queue_bytes,
            delivered: destinations.iter().map(|d| d.delivered).sum(),
            failed: destinations.iter().map(|d| d.failed).sum(),
            pending: destinations.iter().map(|d| d.pending).sum(),
            lag_seconds: destinations.iter().map(|d| d.lag_seconds).fold(0.0, f64::max),
            destinations,
        }
    }

    /// The Prometheus text format: `isthmus_notify_queued_total`, `_dropped_total`,
    /// `_queue_bytes`, and per destination (label `destination`, its ARN) `_delivered_total`,
    /// `_failed_total`, `_pending` and `_lag_seconds`.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        family(&mut out, "queued_total", "counter", "Events queued for delivery.");
        let _ = writeln!(out, "isthmus_notify_queued_total {}", self.queued);
        family(&mut out, "dropped_total", "counter", "Queued events dropped because the queue was full (drop_oldest).");
        let _ = writeln!(out, "isthmus_notify_dropped_total {}", self.dropped);
        family(&mut out, "queue_bytes", "gauge", "Bytes of queued events.");
        let _ = writeln!(out, "isthmus_notify_queue_bytes {}", self.queue_bytes);
        let per: [(&str, &str, &str, Field); 4] = [
            ("delivered_total", "counter", "Events a destination acknowledged.", |d| d.delivered.to_string()),
            ("failed_total", "counter", "Delivery attempts that failed (each is retried).", |d| d.failed.to_string()),
            ("pending", "gauge", "Events queued for a destination and not yet delivered.", |d| d.pending.to_string()),
            ("lag_seconds", "gauge", "Age of a destination's oldest undelivered event.", |d| {
                format!("{:.3}", d.lag_seconds)
            }),
        ];
        for (name, kind, help, value) in per {
            family(&mut out, name, kind, help);
            for destination in &self.destinations {
                let _ = writeln!(
                    out,
                    "isthmus_notify_{name}{{destination=\"{}\"}} {}",
                    escape_label(&destination.arn),
                    value(destination)
                );
            }
        }
        out
    }
}

/// How one per-destination family reads its value.
type Field = fn(&DestinationMetrics) -> String;

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP isthmus_notify_{name} {help}");
    let _ = writeln!(out, "# TYPE isthmus_notify_{name} {kind}");
}

fn escape_label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_exposition() {
        let d = |arn: &str, delivered, failed, pending, lag_seconds| DestinationMetrics {
            arn: arn.into(),
            delivered,
            failed,
            pending,
            lag_seconds,
        };
        let m = Metrics::new(
            9,
            1,
            4096,
            vec![d("arn:isthmus:sqs::a:webhook", 5, 2, 3, 1.5), d("arn:isthmus:sqs::b:nats", 4, 0, 0, 0.0)],
        );
        assert_eq!((m.delivered, m.failed, m.pending, m.lag_seconds), (9, 2, 3, 1.5));
        let text = m.prometheus();
        for line in [
            "isthmus_notify_queued_total 9",
            "isthmus_notify_dropped_total 1",
            "isthmus_notify_delivered_total{destination=\"arn:isthmus:sqs::a:webhook\"} 5",
            "isthmus_notify_failed_total{destination=\"arn:isthmus:sqs::a:webhook\"} 2",
            "isthmus_notify_pending{destination=\"arn:isthmus:sqs::a:webhook\"} 3",
            "isthmus_notify_lag_seconds{destination=\"arn:isthmus:sqs::a:webhook\"} 1.500",
            "isthmus_notify_delivered_total{destination=\"arn:isthmus:sqs::b:nats\"} 4",
            "# TYPE isthmus_notify_lag_seconds gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
