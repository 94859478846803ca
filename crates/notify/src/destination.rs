//! Where events go: the destinations the operator declares in the configuration file (one
//! table array per kind, each entry with an `id`), named in a bucket's rules by their ARN,
//! `arn:isthmus:sqs::ID:KIND`, as MinIO's ARNs name its targets. A `Sender` delivers batches
//! of records, blocking, on its destination's own thread.

use std::fmt;

/// The kinds of destination, as ARNs and the configuration file name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Webhook,
    Nats,
    Amqp,
    Redis,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Webhook => "webhook",
            Kind::Nats => "nats",
            Kind::Amqp => "amqp",
            Kind::Redis => "redis",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Kind::Webhook, Kind::Nats, Kind::Amqp, Kind::Redis].into_iter().find(|kind| kind.as_str() == text)
    }
}

/// How to reach a destination, with its credentials (they stay in the configuration file;
/// the S3 API only ever names the destination by its ARN).
#[derive(Clone, PartialEq, Eq)]
pub enum Settings {
    /// An HTTP(S) POST of each record to `endpoint`, with `Authorization: Bearer TOKEN` when a
    /// token is set.
    Webhook { endpoint: String, auth_token: Option<String> },
    /// A JetStream publish to `subject`, acknowledged by the stream that holds it.
    Nats { url: String, subject: String },
    /// A publish to `exchange` with `routing_key`, confirmed by the broker (publisher confirms).
    Amqp { url: String, exchange: String, routing_key: String },
    /// An `XADD` to the stream `stream`.
    Redis { url: String, stream: String },
}

impl Settings {
    pub fn kind(&self) -> Kind {
        match self {
            Settings::Webhook { .. } => Kind::Webhook,
            Settings::Nats { .. } => Kind::Nats,
            Settings::Amqp { .. } => Kind::Amqp,
            Settings::Redis { .. } => Kind::Redis,
        }
    }
}

/// The credentials (a token, a password inside a URL) never reach a log line.
impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} destination", self.kind().as_str())
    }
}

/// One configured destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The operator's name for it, unique per kind (letters, digits, `-` and `_`).
    pub id: String,
    pub settings: Settings,
}

impl Destination {
    pub fn kind(&self) -> Kind {
        self.settings.kind()
    }

    /// The ARN a bucket's rule names it by.
    pub fn arn(&self) -> String {
        arn(&self.id, self.kind())
    }
}

/// `arn:isthmus:sqs::ID:KIND`.
pub fn arn(id: &str, kind: Kind) -> String {
    format!("arn:isthmus:sqs::{id}:{}", kind.as_str())
}

/// The id and kind an ARN names, if it is one of ours and well formed.
pub fn parse_arn(text: &str) -> Option<(String, Kind)> {
    let rest = text.strip_prefix("arn:isthmus:sqs::")?;
    let (id, kind) = rest.split_once(':')?;
    let kind = Kind::parse(kind)?;
    valid_id(id).then(|| (id.to_string(), kind))
}

/// An id is 1 to 64 of letters, digits, `-` and `_`.
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Why one delivery attempt failed. Every failure is retried (with backoff) until the record
/// is delivered: the queue keeps it meanwhile.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The destination could not be reached or the connection broke.
    #[error("cannot reach the destination: {0}")]
    Unreachable(String),
    /// The destination answered but did not take the record (an HTTP status other than 2xx, a
    /// negative acknowledgement, a stream error).
    #[error("the destination refused the record: {0}")]
    Refused(String),
}

/// One record on its way: the object key (for destinations that partition by it) and the JSON
/// document `{"Records":[...]}`.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub key: &'a str,
    pub record: &'a [u8],
}

/// What a `Sender` did with a batch: how many of its first records the destination took (in
/// order), and why the next one failed (`None`: all were taken).
pub type Sent = (usize, Option<DeliveryError>);

/// Delivers records to one destination. Called from that destination's own thread, in queue
/// order, with a batch of records of distinct keys; a record counts as taken once the
/// destination acknowledged it (an HTTP 2xx, a JetStream ack, a publisher confirm, an XADD
/// reply). The broker senders put a whole batch on the wire before they wait for the
/// acknowledgements (one round trip per batch, not per record). Reconnects by itself after a
/// failure.
pub trait Sender: Send {
    /// Sends `batch` in order (see `Sent`). Records after the first failure may have reached
    /// the destination too: they are sent again (delivery is at least once), and since a batch
    /// holds one record per key, no key's records are ever reordered.
    fn send_all(&mut self, batch: &[Outgoing<'_>]) -> Sent;

    /// Sends one record.
    fn send(&mut self, key: &str, record: &[u8]) -> Result<(), DeliveryError> {
        match self.send_all(&[Outgoing { key, record }]) {
            (_, Some(error)) => Err(error),
            (_, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_round_trip_and_refuse_strangers() {
        assert_eq!(arn("hook", Kind::Webhook), "arn:isthmus:sqs::hook:webhook");
        assert_eq!(parse_arn("arn:isthmus:sqs::hook:webhook"), Some(("hook".into(), Kind::Webhook)));
        assert_eq!(parse_arn("arn:isthmus:sqs::a_b-1:redis"), Some(("a_b-1".into(), Kind::Redis)));
        for bad in [
            "arn:aws:sqs:us-east-1:1:q",
            "arn:isthmus:sqs::hook:kafka",
            "arn:isthmus:sqs:::webhook",
            "arn:isthmus:sqs::a/b:nats",
            "arn:isthmus:sqs::hook",
        ] {
            assert_eq!(parse_arn(bad), None, "{bad}");
        }
    }
}
