//! The gateway's metrics, in the Prometheus text format (served by the admin listener at
//! `/metrics`): requests by S3 operation and status, latency histograms by operation, bytes in
//! and out, open connections, engine errors by S3 code, and the process's memory, file
//! descriptors and start time. One set per process (a gateway is one process); counters are
//! atomics or short critical sections, so recording costs little on the request path.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Latency bucket bounds, seconds.
const BUCKETS: [f64; 14] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bound, count) in BUCKETS.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// Requests by status, and their latency, of one operation.
#[derive(Default)]
struct OperationCounts {
    by_status: BTreeMap<u16, u64>,
    latency: Histogram,
}

/// By operation name (looked up by `&str`: a name is allocated once, when first seen).
#[derive(Default)]
struct PerOperation(BTreeMap<String, OperationCounts>);

/// Everything counted.
pub struct Metrics {
    operations: Mutex<PerOperation>,
    engine_errors: Mutex<BTreeMap<&'static str, u64>>,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    open_connections: AtomicI64,
    started: SystemTime,
}

/// The process's metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// Where the access hook writes the S3 operation a request turned out to be, for the metrics
/// and the access log (the protocol layer knows it; the server around it does not).
#[derive(Clone, Default)]
pub struct OperationSlot(pub Arc<OnceLock<Cow<'static, str>>>);

impl OperationSlot {
    pub fn name(&self) -> &str {
        self.0.get().map_or("Unknown", |name| name)
    }

    /// Names the operation (the first name given stays).
    pub fn set(&self, name: &str) {
        let _ = self.0.set(Cow::Owned(name.to_string()));
    }

    /// `set`, with a name that needs no copy.
    pub fn set_static(&self, name: &'static str) {
        let _ = self.0.set(Cow::Borrowed(name));
    }
}

/// Counts an open connection for as long as it lives.
pub struct ConnectionGuard;

impl ConnectionGuard {
    pub fn open() -> Self {
        METRICS.open_connections.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        METRICS.open_connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Nothing counted yet.
    fn new() -> Self {
        Self {
            operations: Mutex::default(),
            engine_errors: Mutex::default(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            open_connections: AtomicI64::new(0),
            started: SystemTime::now(),
        }
    }

    /// One finished request.
    pub fn request(&self, operation: &str, status: u16, elapsed: Duration, bytes_in: u64, bytes_out: u64) {
        let mut ops = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let counts = match ops.0.get_mut(operation) {
            Some(counts) => counts,
            None => ops.0.entry(operation.to_string()).or_default(),
        };
        *counts.by_status.entry(status).or_default() += 1;
        counts.latency.observe(elapsed.as_secs_f64());
        drop(ops);
        self.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
    }

    /// The totals a status page shows: requests, of which answered 5xx, bytes in and out,
    /// open connections, seconds since start.
    pub fn summary(&self) -> serde_json::Value {
        let ops = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let statuses = || ops.0.values().flat_map(|counts| counts.by_status.iter());
        let requests: u64 = statuses().map(|(_, n)| n).sum();
        let server_errors: u64 = statuses().filter(|(status, _)| **status >= 500).map(|(_, n)| n).sum();
        drop(ops);
        serde_json::json!({
            "requests": requests,
            "server_errors": server_errors,
            "bytes_in": self.bytes_in.load(Ordering::Relaxed),
            "bytes_out": self.bytes_out.load(Ordering::Relaxed),
            "open_connections": self.open_connections.load(Ordering::Relaxed),
            "uptime_seconds": self.started.elapsed().map_or(0, |d| d.as_secs()),
        })
    }

    /// An engine error answered with S3 code `code`.
    pub fn engine_error(&self, code: &'static str) {
        *self.engine_errors.lock().unwrap_or_else(|e| e.into_inner()).entry(code).or_default() += 1;
    }

    /// The exposition, with `extra` lines (families another part of the gateway adds).
    pub fn render(&self, extra: &str) -> String {
        let mut out = String::new();
        let ops = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        out.push_str("# HELP isthmus_http_requests_total Requests answered, by S3 operation and HTTP status.\n");
        out.push_str("# TYPE isthmus_http_requests_total counter\n");
        for (operation, counts) in &ops.0 {
            for (status, count) in &counts.by_status {
                let _ = writeln!(
                    out,
                    "isthmus_http_requests_total{{operation=\"{operation}\",status=\"{status}\"}} {count}"
                );
            }
        }
        out.push_str(
            "# HELP isthmus_http_request_duration_seconds Time from request to response headers, by S3 operation.\n",
        );
        out.push_str("# TYPE isthmus_http_request_duration_seconds histogram\n");
        for (operation, OperationCounts { latency: histogram, .. }) in &ops.0 {
            for (bound, count) in BUCKETS.iter().zip(histogram.counts) {
                let _ = writeln!(
                    out,
                    "isthmus_http_request_duration_seconds_bucket{{operation=\"{operation}\",le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "isthmus_http_request_duration_seconds_bucket{{operation=\"{operation}\",le=\"+Inf\"}} {}",
                histogram.count
            );
            let _ = writeln!(
                out,
                "isthmus_http_request_duration_seconds_sum{{operation=\"{operation}\"}} {}",
                histogram.sum
            );
            let _ = writeln!(
                out,
                "isthmus_http_request_duration_seconds_count{{operation=\"{operation}\"}} {}",
                histogram.count
            );
        }
        drop(ops);
        let counter = |out: &mut String, name: &str, help: &str, value: u64| {
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n");
        };
        counter(
            &mut out,
            "isthmus_http_request_bytes_total",
            "Request body bytes declared (Content-Length).",
            self.bytes_in.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "isthmus_http_response_bytes_total",
            "Response body bytes sent (Content-Length).",
            self.bytes_out.load(Ordering::Relaxed),
        );
        out.push_str("# HELP isthmus_http_open_connections Client connections open now.\n");
        out.push_str("# TYPE isthmus_http_open_connections gauge\n");
        let _ = writeln!(out, "isthmus_http_open_connections {}", self.open_connections.load(Ordering::Relaxed));
        out.push_str("# HELP isthmus_engine_errors_total Engine errors answered, by S3 error code.\n");
        out.push_str("# TYPE isthmus_engine_errors_total counter\n");
        for (code, count) in self.engine_errors.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(out, "isthmus_engine_errors_total{{code=\"{code}\"}} {count}");
        }
        process_metrics(&mut out, self.started);
        out.push_str(extra);
        out
    }
}

/// `process_*` families as Prometheus client libraries name them.
fn process_metrics(out: &mut String, started: SystemTime) {
    let page = rustix::param::page_size() as u64;
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        let mut fields = statm.split_whitespace().map(|f| f.parse::<u64>().unwrap_or(0));
        let (virtual_pages, resident_pages) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
        let _ = write!(
            out,
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}\n",
            resident_pages * page
        );
        let _ = write!(
            out,
            "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes {}\n",
            virtual_pages * page
        );
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        let _ = write!(
            out,
            "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\nprocess_open_fds {}\n",
            entries.count()
        );
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let Some(max) = limit.current {
        let _ = write!(
            out,
            "# HELP process_max_fds Maximum number of open file descriptors.\n# TYPE process_max_fds gauge\nprocess_max_fds {max}\n"
        );
    }
    let start = started.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let _ = write!(
        out,
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {start}\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_families_are_typed() {
        let metrics = Metrics::new();
        metrics.request("GetObject", 200, Duration::from_millis(3), 0, 100);
        metrics.request("GetObject", 404, Duration::from_millis(30), 0, 10);
        metrics.engine_error("NoSuchKey");
        let text = metrics.render("");
        assert!(text.contains("isthmus_http_requests_total{operation=\"GetObject\",status=\"404\"} 1"));
        assert!(text.contains("isthmus_http_request_duration_seconds_bucket{operation=\"GetObject\",le=\"0.005\"} 1"));
        assert!(text.contains("isthmus_http_request_duration_seconds_bucket{operation=\"GetObject\",le=\"0.05\"} 2"));
        assert!(text.contains("isthmus_http_request_duration_seconds_count{operation=\"GetObject\"} 2"));
        assert!(text.contains("isthmus_http_response_bytes_total 110"));
        assert!(text.contains("isthmus_engine_errors_total{code=\"NoSuchKey\"} 1"));
        assert!(text.contains("process_resident_memory_bytes "));
    }
}
