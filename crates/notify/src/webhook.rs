//! The webhook sender: an HTTP(S) POST of each record (`Content-Type: application/json`,
//! `Authorization: Bearer TOKEN` when a token is configured), delivered when the endpoint
//! answers 2xx. A redirect is a refusal, never followed: a webhook must not send the gateway's
//! records, or its token, elsewhere. HTTPS checks the endpoint's certificate against the
//! Mozilla roots ureq carries (webpki-roots); no proxy from the environment is used.

use std::io::Read;
use std::time::Duration;

use crate::destination::{DeliveryError, Sender};

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
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(connect))
            .timeout_global(Some(overall))
            .max_redirects(0)
            .http_status_as_error(false)
            .proxy(None)
            .user_agent("isthmus-notify")
            .build()
            .into();
        Ok(Webhook { agent, endpoint: endpoint.to_string(), auth_token: auth_token.map(str::to_string) })
    }
}

impl Sender for Webhook {
    fn send(&mut self, _key: &str, record: &[u8]) -> Result<(), DeliveryError> {
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
}
