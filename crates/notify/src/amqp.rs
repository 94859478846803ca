//! The AMQP 0-9-1 sender (RabbitMQ): each record is published to the destination's exchange
//! with its routing key, persistent, as `application/json`, on a channel in confirm mode, and
//! counts as delivered once the broker confirmed it (a batch is published whole before its
//! confirms are awaited). The publish is mandatory: a record that no
//! queue would receive comes back, and is a refusal rather than a silent loss.

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::uri::AMQPUri;
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind};

use crate::broker::{self, Runtime};
use crate::destination::{DeliveryError, Outgoing, Sender, Sent};

/// AMQP's persistent delivery mode: the broker writes the message to disk (in a durable queue).
const PERSISTENT: u8 = 2;

/// Delivers records to `exchange` with `routing_key`. Connects on the first record, and again
/// after the connection failed; opens a new channel after the broker closed one (an exchange
/// that does not exist closes the channel, not the connection).
pub struct AmqpSender {
    uri: AMQPUri,
    exchange: String,
    routing_key: String,
    /// `scheme://host:port`, for errors and logs.
    endpoint: String,
    runtime: Runtime,
    connection: Option<Connection>,
    channel: Option<Channel>,
}

impl AmqpSender {
    /// A sender for `url` (`amqp://user:password@host:port/vhost`, or `amqps://`), `exchange`
    /// (empty: the default exchange, where the routing key names a queue) and `routing_key`.
    /// Does not connect: a broker that is down does not stop the gateway from starting. Fails
    /// only on a malformed URL, or a name longer than AMQP allows (255 bytes).
    pub fn new(url: &str, exchange: &str, routing_key: &str) -> Result<Self, DeliveryError> {
        let endpoint = broker::endpoint(url);
        let uri = url.parse::<AMQPUri>().map_err(|_| DeliveryError::Refused(format!("not an AMQP URL: {endpoint}")))?;
        for (what, name) in [("exchange", exchange), ("routing key", routing_key)] {
            if name.len() > 255 {
                return Err(DeliveryError::Refused(format!("the AMQP {what} is longer than 255 bytes")));
            }
        }
        Ok(AmqpSender {
            uri,
            exchange: exchange.to_string(),
            routing_key: routing_key.to_string(),
            endpoint,
            runtime: Runtime::new("amqp")?,
            connection: None,
            channel: None,
        })
    }

    /// The channel to publish on, connecting and opening it as needed.
    fn channel(&mut self) -> Result<Channel, DeliveryError> {
        if let Some(channel) = self.channel.as_ref().filter(|channel| channel.status().connected()) {
            return Ok(channel.clone());
        }
        self.channel = None;
        if !self.connection.as_ref().is_some_and(|connection| connection.status().connected()) {
            self.connection = None;
            let what = format!("connecting to AMQP at {}", self.endpoint);
            let connect = Connection::connect_uri(
                self.uri.clone(),
                ConnectionProperties::default().with_connection_name("isthmus-notify".into()),
            );
            let connection =
                self.runtime.run(&what, async { connect.await.map_err(|error| failure_of(&what, &error)) })?;
            tracing::info!(endpoint = %self.endpoint, "notifications: connected to AMQP");
            self.connection = Some(connection);
        }
        let connection = self.connection.as_ref().expect("connected above");
        let what = format!("opening a channel at {}", self.endpoint);
        let channel = self.runtime.run(&what, async {
            let channel = connection.create_channel().await.map_err(|error| failure_of(&what, &error))?;
            channel.confirm_select(ConfirmSelectOptions::default()).await.map_err(|error| failure_of(&what, &error))?;
            Ok(channel)
        })?;
        self.channel = Some(channel.clone());
        Ok(channel)
    }

    /// Publishes the whole batch, then waits for the broker's confirms in order: one round trip
    /// per batch.
    fn publish_all(&self, channel: &Channel, batch: &[Outgoing<'_>]) -> Result<Sent, DeliveryError> {
        let what = format!(
            "publishing to exchange {:?} with routing key {:?} at {}",
            self.exchange, self.routing_key, self.endpoint
        );
        let properties =
            BasicProperties::default().with_delivery_mode(PERSISTENT).with_content_type("application/json".into());
        let options = BasicPublishOptions { mandatory: true, ..BasicPublishOptions::default() };
        self.runtime.run(&what, async {
            let mut confirms = Vec::with_capacity(batch.len());
            let mut failure = None;
            for outgoing in batch {
                let published = channel
                    .basic_publish(
                        self.exchange.as_str().into(),
                        self.routing_key.as_str().into(),
                        options,
                        outgoing.record,
                        properties.clone(),
                    )
                    .await;
                match published {
                    Ok(confirm) => confirms.push(confirm),
                    Err(error) => {
                        failure = Some(failure_of(&what, &error));
                        break;
                    }
                }
            }
            let mut taken = 0;
            for confirm in confirms {
                let answer = confirm.await.map_err(|error| failure_of(&what, &error));
                if let Err(error) = answer.and_then(|confirmation| confirmed(&what, confirmation)) {
                    return Ok((taken, Some(error)));
                }
                taken += 1;
            }
            Ok((taken, failure))
        })
    }
}

/// What the broker's confirm of one record means for it.
fn confirmed(what: &str, confirmation: Confirmation) -> Result<(), DeliveryError> {
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => Err(DeliveryError::Refused(format!(
            "{what}: returned by the broker ({} {}): no queue is bound for it",
            returned.reply_code, returned.reply_text
        ))),
        Confirmation::Nack(None) => Err(DeliveryError::Refused(format!("{what}: the broker did not take it (nack)"))),
        Confirmation::NotRequested => {
            Err(DeliveryError::Refused(format!("{what}: the channel is not in confirm mode")))
        }
    }
}

impl Sender for AmqpSender {
    fn send_all(&mut self, batch: &[Outgoing<'_>]) -> Sent {
        let (taken, failure) = match self.channel().and_then(|channel| self.publish_all(&channel, batch)) {
            Ok(sent) => sent,
            Err(error) => (0, Some(error)),
        };
        // A broker that closed the channel (an exchange that does not exist, an access refused)
        // keeps the connection, and the next batch opens a new channel (`channel()` checks).
        // After a timeout or a broken connection, the next batch starts over.
        if let Some(DeliveryError::Unreachable(_)) = failure {
            self.channel = None;
            self.connection = None;
        }
        (taken, failure)
    }
}

/// A broker's answer (an AMQP error: access refused, no such exchange) is a refusal; anything
/// else (a refused TCP connection, a reset, a missed heartbeat) means unreachable.
fn failure_of(what: &str, error: &lapin::Error) -> DeliveryError {
    match error.kind() {
        ErrorKind::ProtocolError(answer) => DeliveryError::Refused(format!("{what}: {answer}")),
        _ => DeliveryError::Unreachable(format!("{what}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_settings_are_refused_without_a_broker() {
        assert!(AmqpSender::new("amqp://guest:guest@127.0.0.1:1/%2f", "events", "bucket").is_ok());
        let Err(DeliveryError::Refused(text)) = AmqpSender::new("amqp://user:s3cret@host:port/", "x", "y") else {
            panic!("a broken URL was taken")
        };
        assert!(!text.contains("s3cret"), "{text}");
        assert!(matches!(AmqpSender::new("amqp://127.0.0.1:1", &"x".repeat(256), "y"), Err(DeliveryError::Refused(_))));
    }

    #[test]
    fn an_unreachable_broker_is_named_without_its_credentials() {
        let mut sender = AmqpSender::new("amqp://user:s3cret@127.0.0.1:1/%2f", "events", "bucket").unwrap();
        let Err(DeliveryError::Unreachable(text)) = sender.send("k", b"{}") else { panic!("port 1 answered") };
        assert!(text.contains("amqp://127.0.0.1:1") && !text.contains("s3cret"), "{text}");
    }
}
