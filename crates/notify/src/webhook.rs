//! The webhook sender: an HTTP(S) POST of each record (`Content-Type: application/json`,
//! `Authorization: Bearer TOKEN` when a token is configured), delivered when the endpoint
//! answers 2xx. A redirect is a refusal, never followed: a webhook must not send the gateway's
//! records, or its token, elsewhere. HTTPS checks the endpoint's certificate against the
//! Mozilla roots ureq carries (webpki-roots); no proxy from the environment is used.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::destination::{DeliveryError, Outgoing, Sender, Sent};

/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one whole request may take (connecting, sending, the answer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of an answer's body is read (for the error message).
const BODY_LIMIT: u64 = 4096;

/// Posts records to one endpoint.
pub struct Webhook {
    agent: ureq::Agent,
    endpoint: String,
    auth_token: Option<String>,
}

impl Webhook {
    /// A sender to `endpoint` (`http://` or `https://`) with the default timeouts.
    pub fn new(endpoint: &str, auth_token: Option<&str>) -> Result<Self, DeliveryError> {
        Self::with_timeouts(endpoint, auth_token, CONNECT_TIMEOUT, REQUEST_TIMEOUT)
    }

    pub fn with_timeouts(
        endpoint: &str,
        auth_token: Option<&str>,
        connect: Duration,
        overall: Duration,
    ) -> Result<Self, DeliveryError> {
        let scheme = endpoint.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Err(DeliveryError::Refused(format!(
                "a webhook endpoint must be http:// or https://, not {endpoint:?}"
            )));
        }
        let config = ureq::Agent::config_builder()
            .timeout_connect(Some(connect))
            .timeout_global(Some(overall))
            .max_redirects(0)
            .http_status_as_error(false)
            .proxy(None)
            .user_agent("isthmus-notify")
            .build();
        let agent = ureq::Agent::with_parts(config, DefaultConnector::new(), LiteralFirst);
        Ok(Webhook { agent, endpoint: endpoint.to_string(), auth_token: auth_token.map(str::to_string) })
    }
}

/// One POST per record, one after the other on the kept-alive connection: webhook consumers
/// written for AWS or MinIO expect one record per request.
impl Sender for Webhook {
    fn send_all(&mut self, batch: &[Outgoing<'_>]) -> Sent {
        for (taken, outgoing) in batch.iter().enumerate() {
            if let Err(error) = self.post(outgoing.record) {
                return (taken, Some(error));
            }
        }
        (batch.len(), None)
    }
}

impl Webhook {
    fn post(&mut self, record: &[u8]) -> Result<(), DeliveryError> {
        let mut request = self.agent.post(&self.endpoint).header("Content-Type", "application/json");
        if let Some(token) = &self.auth_token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.send(record).map_err(|err| match err {
            ureq::Error::StatusCode(status) => DeliveryError::Refused(format!("HTTP {status}")),
            other => DeliveryError::Unreachable(other.to_string()),
        })?;
        let status = response.status();
        let mut body = Vec::new();
        let _ = response.body_mut().as_reader().take(BODY_LIMIT).read_to_end(&mut body);
        if status.is_success() {
            return Ok(());
        }
        if status.is_redirection() {
            let location = response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("nowhere");
            return Err(DeliveryError::Refused(format!(
                "HTTP {status}: a redirect to {location:?}, which a webhook never follows"
            )));
        }
        let body = String::from_utf8_lossy(&body);
        let body: String = body.chars().filter(|c| !c.is_control()).take(200).collect();
        Err(DeliveryError::Refused(format!("HTTP {status}: {body}")))
    }
}

/// Resolves an endpoint's host: an IP literal (what webhook endpoints on a site network
/// usually are) as itself, a name through ureq's default resolver. ureq resolves before every
/// request, pooled connection or not, and with a timeout set its default resolver looks the
/// host up on a thread of its own each time: a thread made and joined per record was a fifth of
/// a delivery thread's time in a profile.
#[derive(Debug)]
struct LiteralFirst;

impl Resolver for LiteralFirst {
    fn resolve(&self, uri: &Uri, config: &Config, timeout: NextTimeout) -> Result<ResolvedSocketAddrs, ureq::Error> {
        match literal_address(uri) {
            Some(address) => {
                let mut resolved = self.empty();
                resolved.push(address);
                Ok(resolved)
            }
            None => DefaultResolver::default().resolve(uri, config, timeout),
        }
    }
}

/// The address of a URI whose host is an IP literal (`127.0.0.1`, `[::1]`), with its port or
/// its scheme's.
fn literal_address(uri: &Uri) -> Option<SocketAddr> {
    let host = uri.host()?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let ip = host.parse::<IpAddr>().ok()?;
    let port = uri.port_u16().or(match uri.scheme_str()? {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    })?;
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    /// What a test webhook received.
    #[derive(Debug, Clone)]
    pub(crate) struct Received {
        pub authorization: Option<String>,
        pub content_type: Option<String>,
        pub body: Vec<u8>,
    }

    /// A local HTTP server answering the `n`th request (from 0) with `answer(n)`, a raw HTTP
    /// response (`None`: read the request and never answer).
    pub(crate) struct HookServer {
        pub url: String,
        pub received: Arc<Mutex<Vec<Received>>>,
        pub connections: Arc<AtomicUsize>,
    }

    pub(crate) fn serve(answer: impl Fn(usize) -> Option<String> + Send + 'static) -> HookServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (log, count) = (received.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let n = count.fetch_add(1, Ordering::SeqCst);
                stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let Some(request) = read_request(&mut stream) else { continue };
                log.lock().unwrap().push(request);
                match answer(n) {
                    Some(response) => {
                        let _ = stream.write_all(response.as_bytes());
                    }
                    // Hold the connection open, unanswered, until the client gives up.
                    None => {
                        let _ = stream.read(&mut [0u8; 1]);
                    }
                }
            }
        });
        HookServer { url, received, connections }
    }

    fn read_request(stream: &mut std::net::TcpStream) -> Option<Received> {
        let mut reader = BufReader::new(stream);
        let (mut length, mut authorization, mut content_type) = (0usize, None, None);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                let value = value.trim().to_string();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.parse().ok()?,
                    "authorization" => authorization = Some(value),
                    "content-type" => content_type = Some(value),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length.min(1 << 20)];
        reader.read_exact(&mut body).ok()?;
        Some(Received { authorization, content_type, body })
    }

    pub(crate) fn status(code: u16, extra: &str) -> Option<String> {
        Some(format!("HTTP/1.1 {code} X\r\nContent-Length: 2\r\nConnection: close\r\n{extra}\r\nok"))
    }

    #[test]
    fn a_hanging_endpoint_times_out() {
        let server = serve(|_| None);
        let mut hook =
            Webhook::with_timeouts(&server.url, None, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
        let started = Instant::now();
        let err = hook.send("k", b"{}").unwrap_err();
        assert!(matches!(err, DeliveryError::Unreachable(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn garbage_and_errors_are_refusals_with_a_bounded_message() {
        let server = serve(|n| match n {
            0 => Some("this is not HTTP\r\n\r\n".into()),
            _ => Some(format!(
                "HTTP/1.1 500 X\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n{}",
                "e".repeat(100_000)
            )),
        });
        let mut hook = Webhook::new(&server.url, Some("t")).unwrap();
        assert!(hook.send("k", b"{}").is_err());
        let err = hook.send("k", b"{}").unwrap_err().to_string();
        assert!(err.contains("500") && err.len() < 400, "{err}");
    }

    #[test]
    fn only_http_and_https_endpoints() {
        assert!(Webhook::new("file:///etc/passwd", None).is_err());
        assert!(Webhook::new("localhost:80", None).is_err());
        assert!(Webhook::new("HTTPS://example.com/x", None).is_ok());
        assert!(Webhook::new("http://127.0.0.1:9/", None).is_ok());
    }

    #[test]
    fn an_unreachable_endpoint_is_unreachable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut hook = Webhook::new(&format!("http://127.0.0.1:{port}/"), None).unwrap();
        assert!(matches!(hook.send("k", b"{}"), Err(DeliveryError::Unreachable(_))));
    }

    #[test]
    fn ip_literals_are_their_own_address_and_names_are_looked_up() {
        let address = |url: &str| literal_address(&url.parse::<Uri>().unwrap());
        assert_eq!(address("http://127.0.0.1:8080/hook"), Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(address("http://10.1.2.3/hook"), Some("10.1.2.3:80".parse().unwrap()));
        assert_eq!(address("https://[::1]/hook"), Some("[::1]:443".parse().unwrap()));
        assert_eq!(address("https://[fd00::7]:9443/"), Some("[fd00::7]:9443".parse().unwrap()));
        assert_eq!(address("http://localhost:8080/"), None);
        assert_eq!(address("http://127.0.0.1.example.com/"), None);
        // A name still reaches its server (through the default resolver).
        let server = serve(|_| status(200, ""));
        let by_name = server.url.replace("127.0.0.1", "localhost");
        Webhook::new(&by_name, None).unwrap().send("k", b"{}").unwrap();
    }

    #[test]
    fn a_batch_stops_at_the_first_refusal_and_says_how_many_were_taken() {
        let server = serve(|n| status(if n == 2 { 500 } else { 200 }, ""));
        let mut hook = Webhook::new(&server.url, None).unwrap();
        let records: Vec<Vec<u8>> = (0..4).map(|i| format!("{{\"n\":{i}}}").into_bytes()).collect();
        let batch: Vec<Outgoing<'_>> = records.iter().map(|record| Outgoing { key: "k", record }).collect();
        let (taken, failure) = hook.send_all(&batch);
        assert_eq!(taken, 2);
        assert!(matches!(failure, Some(DeliveryError::Refused(ref text)) if text.contains("500")), "{failure:?}");
        assert_eq!(server.received.lock().unwrap().len(), 3, "nothing sent after the refusal");
    }
}
