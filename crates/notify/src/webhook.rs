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
            return Err(DeliveryError::Refused(format!("a webhook endpoint must be http:// or https://, not {endpoint:?}")));
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
            return Err(DeliveryError::Refused(format!("HTTP {status}: a redirect to {location:?}, which a webhook never follows")));
        }
        let body = String::from_utf8_lossy(&body);
        let body: String = body.chars().filter(|c| !c.is_control()).take(200).collect();
        Err(DeliveryError::Refused(format!("HTTP {status}: {body}")))
    }
}
