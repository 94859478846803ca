//! The NATS JetStream sender: each record is published to the destination's subject and counts
//! as delivered once the stream that captures the subject acknowledged it (a `PublishAck`). A
//! batch is published whole before its acknowledgements are awaited.
//! Each publish carries a `Nats-Msg-Id` derived from the record, so a record sent again after
//! a lost acknowledgement is stored once (within the stream's duplicate window, two minutes by
//! default).

use async_nats::jetstream::{self, context::PublishErrorKind, message::PublishMessage};
use async_nats::{ConnectErrorKind, ConnectOptions, ServerAddr};
use sha2::{Digest, Sha256};

use crate::broker::{self, Runtime, TIMEOUT};
use crate::destination::{DeliveryError, Outgoing, Sender, Sent};

/// Delivers records to a JetStream stream through `subject`. Connects on the first record, and
/// again on the next record after the connection failed; the NATS client also reconnects by
/// itself while it lives.
pub struct NatsSender {
    servers: Vec<ServerAddr>,
    subject: String,
    /// `scheme://host:port` of each server, for errors and logs.
    endpoint: String,
    runtime: Runtime,
    context: Option<jetstream::Context>,
}

impl NatsSender {
    /// A sender for `url` (one NATS URL, or several separated by commas, each possibly with
    /// `user:password@` or a token) and `subject`. Does not connect: a server that is down does
    /// not stop the gateway from starting. Fails only on a malformed URL or subject.
    pub fn new(url: &str, subject: &str) -> Result<Self, DeliveryError> {
        let endpoint = broker::endpoint(url);
        let servers = url
            .split(',')
            .map(|one| one.trim().parse::<ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| DeliveryError::Refused(format!("not a NATS URL (list): {endpoint}")))?;
        if !valid_subject(subject) {
            return Err(DeliveryError::Refused(format!(
                "not a NATS subject to publish to: {subject:?} (dot-separated tokens, no spaces, no wildcards)"
            )));
        }
        Ok(NatsSender {
            servers,
            subject: subject.to_string(),
            endpoint,
            runtime: Runtime::new("nats")?,
            context: None,
        })
    }

    fn connect(&self) -> Result<jetstream::Context, DeliveryError> {
        let options =
            ConnectOptions::new().name("isthmus-notify").connection_timeout(TIMEOUT).request_timeout(Some(TIMEOUT));
        let what = format!("connecting to NATS at {}", self.endpoint);
        let context = self.runtime.run(&what, async {
            let client = options.connect(self.servers.clone()).await.map_err(|error| {
                let text = format!("{what}: {error}");
                match error.kind() {
                    ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                        DeliveryError::Refused(text)
                    }
                    _ => DeliveryError::Unreachable(text),
                }
            })?;
            // Inside the runtime: the context starts a task of its own.
            Ok(jetstream::ContextBuilder::new().timeout(TIMEOUT).build(client))
        })?;
        tracing::info!(endpoint = %self.endpoint, "notifications: connected to NATS");
        Ok(context)
    }

    /// Publishes the whole batch, then waits for the acknowledgements in order: one round trip
    /// per batch.
    fn publish_all(&self, context: &jetstream::Context, batch: &[Outgoing<'_>]) -> Result<Sent, DeliveryError> {
        let what = format!("publishing to {} at {}", self.subject, self.endpoint);
        self.runtime.run(&what, async {
            let mut acks = Vec::with_capacity(batch.len());
            let mut failure = None;
            for outgoing in batch {
                let message = PublishMessage::build()
                    .payload(outgoing.record.to_vec().into())
                    .message_id(message_id(outgoing.key, outgoing.record));
                match context.send_publish(self.subject.clone(), message).await {
                    Ok(ack) => acks.push(ack),
                    Err(error) => {
                        failure = Some(self.publish_error(error.kind(), &error));
                        break;
                    }
                }
            }
            let mut taken = 0;
            for ack in acks {
                if let Err(error) = ack.await {
                    return Ok((taken, Some(self.publish_error(error.kind(), &error))));
                }
                taken += 1;
            }
            Ok((taken, failure))
        })
    }

    fn publish_error(&self, kind: PublishErrorKind, error: &dyn std::fmt::Display) -> DeliveryError {
        match kind {
            PublishErrorKind::StreamNotFound => DeliveryError::Refused(format!(
                "no stream captures subject {} at {}: create one, e.g. `nats stream add --subjects {}`",
                self.subject, self.endpoint, self.subject
            )),
            PublishErrorKind::TimedOut | PublishErrorKind::BrokenPipe => {
                DeliveryError::Unreachable(format!("publishing to {} at {}: {error}", self.subject, self.endpoint))
            }
            _ => DeliveryError::Refused(format!("publishing to {} at {}: {error}", self.subject, self.endpoint)),
        }
    }
}

impl Sender for NatsSender {
    fn send_all(&mut self, batch: &[Outgoing<'_>]) -> Sent {
        let context = match self.context.take() {
            Some(context) => context,
            None => match self.connect() {
                Ok(context) => context,
                Err(error) => return (0, Some(error)),
            },
        };
        // A timeout of the whole batch: nothing counts as taken (what was stored is stored
        // once more within the stream's duplicate window, by its message id).
        let (taken, failure) = self.publish_all(&context, batch).unwrap_or_else(|error| (0, Some(error)));
        // A refusal leaves the connection usable; after anything else the next batch starts
        // from a new connection.
        if !matches!(failure, Some(DeliveryError::Unreachable(_))) {
            self.context = Some(context);
        }
        (taken, failure)
    }
}

/// `isthmus-` and the SHA-256 of the key and the record (hex, 128 bits): the same record sent
/// again gets the same id, two records never share one (the record carries its sequencer).
fn message_id(key: &str, record: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update((key.len() as u64).to_be_bytes());
    hash.update(key.as_bytes());
    hash.update(record);
    format!("isthmus-{}", hex::encode(&hash.finalize()[..16]))
}

/// A subject to publish to: dot-separated non-empty tokens of printable characters other than
/// the wildcards `*` and `>`.
fn valid_subject(subject: &str) -> bool {
    !subject.is_empty()
        && subject.len() <= 255
        && subject.split('.').all(|token| {
            !token.is_empty() && token != "*" && token != ">" && token.bytes().all(|b| b.is_ascii_graphic())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_follow_the_record() {
        assert_eq!(message_id("a", b"{}"), message_id("a", b"{}"));
        assert_ne!(message_id("a", b"{}"), message_id("b", b"{}"));
        assert_ne!(message_id("a", b"{}"), message_id("a", b"{ }"));
        // The key's length is hashed: moving bytes between key and record changes the id.
        assert_ne!(message_id("ab", b"c"), message_id("a", b"bc"));
        assert!(message_id("a", b"").starts_with("isthmus-") && message_id("a", b"").len() == 8 + 32);
    }

    #[test]
    fn malformed_settings_are_refused_without_a_server() {
        assert!(NatsSender::new("nats://127.0.0.1:1", "bucket.events").is_ok());
        for subject in ["", "a..b", "a.*", ">", "with space", "a.b."] {
            assert!(
                matches!(NatsSender::new("nats://127.0.0.1:1", subject), Err(DeliveryError::Refused(_))),
                "{subject:?}"
            );
        }
        let Err(DeliveryError::Refused(text)) = NatsSender::new("nats://user:s3cret@[::1", "s") else {
            panic!("a broken URL was taken")
        };
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn an_unreachable_server_is_named_without_its_credentials() {
        let mut sender = NatsSender::new("nats://user:s3cret@127.0.0.1:1", "bucket.events").unwrap();
        let Err(DeliveryError::Unreachable(text)) = sender.send("k", b"{}") else { panic!("port 1 answered") };
        assert!(text.contains("nats://127.0.0.1:1") && !text.contains("s3cret"), "{text}");
    }
}
