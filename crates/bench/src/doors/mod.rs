//! The doors report (`isthmus bench doors`): the same objects reached through every door in one
//! run (POSIX, the engine in-process, the local socket, HTTP signed and anonymous) beside the
//! physical ceiling of each transport on this machine: `stat` and open+read for the file
//! system, a bare Unix-socket echo for the local socket, nginx serving the same files for HTTP.
//! Latencies go into histograms in nanoseconds: an in-process HEAD takes about a microsecond,
//! below the resolution of the other workloads' histograms.

pub mod run;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::target::{BenchError, BenchResult, Target};

/// One operation a worker repeats; `n` counts its calls. Returns the bytes moved.
pub type Operation = Box<dyn FnMut(usize) -> BenchResult<u64> + Send>;

/// Opens worker `w`'s operation (its own connection, file handle or socket).
pub type OpenOperation = Box<dyn Fn(usize) -> BenchResult<Operation> + Sync>;

/// One row to measure: an operation through one door.
pub struct Probe {
    /// `head`, `get`, `put`, `echo`.
    pub op: String,
    /// `stat`, `open+read`, `in-process`, `local socket`, `HTTP signed`, ...
    pub door: String,
    /// Object size (message size for the echo).
    pub size: u64,
    /// The door of the same op this one is compared with (its ceiling), if any.
    pub ceiling: Option<String>,
    pub open: OpenOperation,
}

/// What one probe measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DoorRow {
    pub op: String,
    pub door: String,
    pub size: u64,
    pub workers: usize,
    pub ops: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub seconds: f64,
    pub ops_per_s: f64,
    pub mib_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub ceiling: Option<String>,
    /// ops/s as a percentage of the ceiling's row (same op, size and workers).
    pub percent_of_ceiling: Option<f64>,
}

/// One worker's latencies, operations, bytes, errors and first error.
type Tally = (Histogram<u64>, u64, u64, u64, Option<String>);

/// A worker stops after this many failed operations.
const MAX_ERRORS: u64 = 100;

/// Runs `probe` on `workers` threads for `duration`.
pub fn measure(probe: &Probe, workers: usize, duration: Duration) -> BenchResult<DoorRow> {
    let workers = workers.max(1);
    let mut operations = (0..workers).map(|w| (probe.open)(w)).collect::<BenchResult<Vec<_>>>()?;
    let start = Instant::now();
    let deadline = start + duration;
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let handles: Vec<_> = operations
            .iter_mut()
            .map(|operation| {
                scope.spawn(move || {
                    let mut latency = Histogram::<u64>::new(3).expect("valid precision");
                    let (mut ops, mut bytes, mut errors, mut first_error) = (0u64, 0u64, 0u64, None);
                    let mut n = 0usize;
                    while Instant::now() < deadline && errors < MAX_ERRORS {
                        let started = Instant::now();
                        match operation(n) {
                            Ok(moved) => {
                                let _ = latency.record(started.elapsed().as_nanos().max(1) as u64);
                                ops += 1;
                                bytes += moved;
                            }
                            Err(err) => {
                                errors += 1;
                                first_error.get_or_insert_with(|| err.to_string());
                            }
                        }
                        n += 1;
                    }
                    crate::workload::count_done(n as u64);
                    (latency, ops, bytes, errors, first_error)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("benchmark worker panicked")).collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut latency = Histogram::<u64>::new(3).expect("valid precision");
    let (mut ops, mut bytes, mut errors, mut first_error) = (0u64, 0u64, 0u64, None);
    for (h, o, b, e, f) in tallies {
        let _ = latency.add(&h);
        ops += o;
        bytes += b;
        errors += e;
        if first_error.is_none() {
            first_error = f;
        }
    }
    let micros = |q: f64| if ops == 0 { 0.0 } else { latency.value_at_quantile(q) as f64 / 1000.0 };
    Ok(DoorRow {
        op: probe.op.clone(),
        door: probe.door.clone(),
        size: probe.size,
        workers,
        ops,
        errors,
        first_error,
        seconds,
        ops_per_s: ops as f64 / seconds,
        mib_per_s: bytes as f64 / seconds / f64::from(1 << 20),
        p50_us: micros(0.5),
        p99_us: micros(0.99),
        ceiling: probe.ceiling.clone(),
        percent_of_ceiling: None,
    })
}

/// Fills in each row's percentage of its ceiling's row (same op, size and workers).
pub fn relate(rows: &mut [DoorRow]) {
    let figures: Vec<(String, String, u64, usize, f64)> =
        rows.iter().map(|r| (r.op.clone(), r.door.clone(), r.size, r.workers, r.ops_per_s)).collect();
    for row in rows.iter_mut() {
        row.percent_of_ceiling = row.ceiling.as_ref().and_then(|ceiling| {
            figures
                .iter()
                .find(|(op, door, size, workers, _)| {
                    op == &row.op && door == ceiling && *size == row.size && *workers == row.workers
                })
                .filter(|figure| figure.4 > 0.0)
                .map(|figure| 100.0 * row.ops_per_s / figure.4)
        });
    }
}

/// The local socket's latency bound, per worker count: its HEAD p50 against the in-process
/// HEAD p50 plus 1.5 echo round trips (p50), all from this run.
pub fn socket_bounds(rows: &[DoorRow]) -> Vec<String> {
    let find = |op: &str, door: &str, workers: usize| {
        rows.iter().find(|r| r.op == op && r.door == door && r.workers == workers && r.ops > 0)
    };
    let mut lines = Vec::new();
    let mut worker_counts: Vec<usize> = rows.iter().map(|r| r.workers).collect();
    worker_counts.sort_unstable();
    worker_counts.dedup();
    for workers in worker_counts {
        let echo = find("echo", ECHO, workers);
        for op in ["head", "get"] {
            if let (Some(socket), Some(engine), Some(echo)) =
                (find(op, LOCAL_SOCKET, workers), find(op, IN_PROCESS, workers), echo)
            {
                let bound = engine.p50_us + 1.5 * echo.p50_us;
                lines.push(format!(
                    "{op} {workers}w: local socket p50 {:.1} µs; in-process p50 {:.1} µs + 1.5 x echo p50 {:.1} µs = {bound:.1} µs: {}",
                    socket.p50_us,
                    engine.p50_us,
                    echo.p50_us,
                    if socket.p50_us <= bound { "within" } else { "over" }
                ));
            }
        }
    }
    lines
}

/// The rows as a table.
pub fn table(rows: &[DoorRow]) -> String {
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_header(["op", "size", "workers", "door", "ops/s", "MiB/s", "p50 µs", "p99 µs", "errors", "% of"]);
    for r in rows {
        let percent = match (&r.ceiling, r.percent_of_ceiling) {
            (Some(ceiling), Some(p)) => format!("{p:.1} % of {ceiling}"),
            _ => "-".into(),
        };
        table.add_row([
            r.op.clone(),
            crate::units::format_size(r.size),
            r.workers.to_string(),
            r.door.clone(),
            format!("{:.0}", r.ops_per_s),
            format!("{:.1}", r.mib_per_s),
            format!("{:.1}", r.p50_us),
            format!("{:.1}", r.p99_us),
            r.errors.to_string(),
            percent,
        ]);
    }
    table.to_string()
}

/// A horizontal bar per row: p50 and p99 latency (µs, logarithmic), ceilings included.
pub fn write_svg(rows: &[DoorRow], path: &Path) -> Result<(), String> {
    let shown: Vec<&DoorRow> = rows.iter().filter(|r| r.ops > 0).collect();
    let height = 90 + 22 * shown.len().max(1) as u32;
    let root = SVGBackend::new(path, (1100, height)).into_drawing_area();
    let max = shown.iter().map(|r| r.p99_us).fold(10.0, f64::max) * 1.5;
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Latency per door: p50 (bar) and p99 (line), same objects, same run", ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(30)
            .y_label_area_size(330)
            .build_cartesian_2d((0.1f64..max).log_scale(), 0usize..shown.len().max(1))?;
        let labels: Vec<String> = shown
            .iter()
            .map(|r| format!("{} {} {}w {}", r.op, crate::units::format_size(r.size), r.workers, r.door))
            .collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(shown.len().max(1))
            .y_label_formatter(&|i| labels.get(*i).cloned().unwrap_or_default())
            .x_desc("µs (log scale)")
            .draw()?;
        let is_ceiling = |r: &DoorRow| r.ceiling.is_none();
        chart.draw_series(shown.iter().enumerate().map(|(i, r)| {
            let color = if is_ceiling(r) { BLACK.mix(0.35) } else { BLUE.mix(0.6) };
            Rectangle::new([(0.1, i), (r.p50_us.max(0.1), i + 1)], color.filled())
        }))?;
        chart.draw_series(shown.iter().enumerate().map(|(i, r)| {
            PathElement::new(vec![(r.p50_us.max(0.1), i), (r.p99_us.max(0.1), i)], RED.stroke_width(2))
        }))?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

/// Door names the report relates.
pub const STAT: &str = "stat";
pub const OPEN_READ: &str = "open+read";
pub const WRITE_RENAME: &str = "write+rename";
pub const IN_PROCESS: &str = "in-process";
pub const LOCAL_SOCKET: &str = "local socket";
pub const HTTP_SIGNED: &str = "HTTP signed";
pub const HTTP_ANONYMOUS: &str = "HTTP anonymous";
pub const NGINX: &str = "nginx";
pub const ECHO: &str = "unix echo";

/// Worker `w`'s `n`th key: each worker walks the keys from its own starting point.
fn pick(keys: &[String], w: usize, n: usize) -> &str {
    &keys[(w * 131 + n) % keys.len()]
}

/// What a target's operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetOp {
    Head,
    Get,
    Put,
}

/// Worker `w`'s operation on `target`: HEAD or GET of `keys` in turn (worker-interleaved, as
/// the ops workload does), or PUT of `data` under `put/w{w}` (replaced each time).
pub fn target_operation(
    target: Arc<dyn Target>,
    op: TargetOp,
    keys: Arc<Vec<String>>,
    data: Arc<Vec<u8>>,
) -> OpenOperation {
    Box::new(move |w| {
        let mut connection = target.connect()?;
        let (keys, data) = (keys.clone(), data.clone());
        let workers_key = format!("put/w{w}");
        Ok(Box::new(move |n| {
            let key = pick(&keys, w, n);
            match op {
                TargetOp::Head => connection.head(key).map(|()| 0),
                TargetOp::Get => connection.get(key),
                TargetOp::Put => connection.put(&workers_key, &data).map(|()| data.len() as u64),
            }
        }) as Operation)
    })
}

/// An HTTP/1.1 client that sends unsigned requests over one keep-alive connection: the same
/// load for the gateway's anonymous door and for nginx.
pub struct RawHttp {
    address: SocketAddr,
    reader: Option<BufReader<TcpStream>>,
    line: String,
    sink: Vec<u8>,
}

impl RawHttp {
    pub fn new(address: SocketAddr) -> Self {
        Self { address, reader: None, line: String::new(), sink: vec![0; 64 << 10] }
    }

    /// Sends `method path` and reads the whole answer; the body's length, which must be 200.
    pub fn request(&mut self, method: &str, path: &str) -> BenchResult<u64> {
        if self.reader.is_none() {
            let stream = TcpStream::connect(self.address)?;
            stream.set_nodelay(true)?;
            self.reader = Some(BufReader::with_capacity(64 << 10, stream));
        }
        let result = self.exchange(method, path);
        if result.is_err() {
            self.reader = None;
        }
        result
    }

    fn exchange(&mut self, method: &str, path: &str) -> BenchResult<u64> {
        let reader = self.reader.as_mut().expect("connected");
        let request =
            format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: isthmus-bench\r\n\r\n", self.address);
        reader.get_mut().write_all(request.as_bytes())?;
        self.line.clear();
        reader.read_line(&mut self.line)?;
        let status = self.line.split(' ').nth(1).and_then(|s| s.parse::<u16>().ok()).unwrap_or(0);
        let (mut length, mut close) = (0u64, false);
        loop {
            self.line.clear();
            if reader.read_line(&mut self.line)? == 0 {
                return Err(BenchError::Http(format!("{method} {path}: the connection closed mid-answer")));
            }
            let header = self.line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                } else if name.eq_ignore_ascii_case("connection") && value.trim().eq_ignore_ascii_case("close") {
                    close = true;
                }
            }
        }
        let body = if method == "HEAD" { 0 } else { length };
        let mut left = body;
        while left > 0 {
            let want = self.sink.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            reader.read_exact(&mut self.sink[..want])?;
            left -= want as u64;
        }
        if close {
            self.reader = None;
        }
        if status != 200 {
            return Err(BenchError::Http(format!("{method} {path}: HTTP {status}")));
        }
        Ok(body)
    }
}

/// Worker `w`'s unsigned `method` of `/{bucket}/{key}` for `keys` in turn, at `address`.
pub fn http_operation(
    address: SocketAddr,
    method: &'static str,
    bucket: String,
    keys: Arc<Vec<String>>,
) -> OpenOperation {
    Box::new(move |w| {
        let mut client = RawHttp::new(address);
        let (keys, bucket) = (keys.clone(), bucket.clone());
        Ok(Box::new(move |n| client.request(method, &format!("/{bucket}/{}", pick(&keys, w, n)))) as Operation)
    })
}

/// A Unix-socket echo server (a thread per connection), the local socket's transport alone.
pub struct EchoServer {
    path: PathBuf,
}

impl EchoServer {
    /// Listens on `path`; answers each message of `size` bytes with the same bytes.
    pub fn start(path: &Path, size: usize) -> BenchResult<Self> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        std::thread::Builder::new().name("bench-echo".into()).spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut message = vec![0u8; size];
                    while stream.read_exact(&mut message).is_ok() {
                        if stream.write_all(&message).is_err() {
                            return;
                        }
                    }
                });
            }
        })?;
        Ok(Self { path: path.to_path_buf() })
    }

    /// Worker `w`'s round trip: one message of `size` bytes there and back.
    pub fn operation(&self, size: usize) -> OpenOperation {
        let path = self.path.clone();
        Box::new(move |_| {
            let mut stream = UnixStream::connect(&path)?;
            let mut message = vec![7u8; size];
            Ok(Box::new(move |_| {
                stream.write_all(&message)?;
                stream.read_exact(&mut message)?;
                Ok(0u64)
            }) as Operation)
        })
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(op: &str, door: &str, workers: usize, ops_per_s: f64, p50_us: f64, ceiling: Option<&str>) -> DoorRow {
        DoorRow {
            op: op.into(),
            door: door.into(),
            size: 4096,
            workers,
            ops: 10,
            errors: 0,
            first_error: None,
            seconds: 1.0,
            ops_per_s,
            mib_per_s: 0.0,
            p50_us,
            p99_us: p50_us * 2.0,
            ceiling: ceiling.map(str::to_string),
            percent_of_ceiling: None,
        }
    }

    #[test]
    fn rows_relate_to_the_ceiling_of_their_own_op_and_workers() {
        let mut rows = vec![
            row("head", STAT, 1, 1000.0, 1.0, None),
            row("head", STAT, 8, 4000.0, 2.0, None),
            row("head", IN_PROCESS, 1, 800.0, 1.2, Some(STAT)),
            row("head", IN_PROCESS, 8, 1000.0, 8.0, Some(STAT)),
            row("get", IN_PROCESS, 1, 500.0, 2.0, Some(OPEN_READ)),
        ];
        relate(&mut rows);
        assert_eq!(rows[2].percent_of_ceiling, Some(80.0));
        assert_eq!(rows[3].percent_of_ceiling, Some(25.0));
        // No open+read row in this run: no percentage rather than a wrong one.
        assert_eq!(rows[4].percent_of_ceiling, None);
        assert_eq!(rows[0].percent_of_ceiling, None);
    }

    #[test]
    fn the_socket_bound_is_in_process_plus_one_and_a_half_echoes() {
        let rows = vec![
            row("head", IN_PROCESS, 1, 1.0, 4.0, Some(STAT)),
            row("echo", ECHO, 1, 1.0, 10.0, None),
            row("head", LOCAL_SOCKET, 1, 1.0, 19.0, Some(STAT)),
            row("get", IN_PROCESS, 1, 1.0, 6.0, Some(OPEN_READ)),
            row("get", LOCAL_SOCKET, 1, 1.0, 22.0, Some(OPEN_READ)),
        ];
        let lines = socket_bounds(&rows);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains("= 19.0 µs: within"), "{}", lines[0]);
        assert!(lines[1].contains("= 21.0 µs: over"), "{}", lines[1]);
    }

    #[test]
    fn raw_http_reads_answers_on_one_connection_and_reports_errors() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            let mut line = String::new();
            loop {
                let mut request = String::new();
                if reader.read_line(&mut request).unwrap_or(0) == 0 {
                    return;
                }
                loop {
                    line.clear();
                    reader.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                }
                let answer = if request.contains("/missing") {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno!".to_string()
                } else if request.starts_with("HEAD") {
                    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_string()
                } else {
                    "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello".to_string()
                };
                writer.write_all(answer.as_bytes()).unwrap();
            }
        });
        let mut client = RawHttp::new(address);
        assert_eq!(client.request("GET", "/b/k").unwrap(), 5);
        assert_eq!(client.request("HEAD", "/b/k").unwrap(), 0);
        assert!(client.request("GET", "/b/missing").is_err());
    }

    #[test]
    fn the_echo_server_answers_each_message() {
        let dir = tempfile::tempdir().unwrap();
        let server = EchoServer::start(&dir.path().join("echo.sock"), 64).unwrap();
        let probe = Probe { op: "echo".into(), door: ECHO.into(), size: 64, ceiling: None, open: server.operation(64) };
        let row = measure(&probe, 2, Duration::from_millis(50)).unwrap();
        assert!(row.ops > 0 && row.errors == 0, "{row:?}");
        assert!(row.p50_us > 0.0 && row.p99_us >= row.p50_us);
    }
}
