//! The sender of each kind of destination, chosen by its settings: the one place that knows
//! every sender (each sender knows only the `Sender` trait).

use crate::destination::{DeliveryError, Destination, Sender, Settings};

/// The sender for a destination (connecting lazily: a destination that is down when the
/// gateway starts fails its first sends, which are retried).
pub fn sender(destination: &Destination) -> Result<Box<dyn Sender>, DeliveryError> {
    Ok(match &destination.settings {
        Settings::Webhook { endpoint, auth_token } => {
            Box::new(crate::webhook::Webhook::new(endpoint, auth_token.as_deref())?)
        }
        Settings::Nats { url, subject } => Box::new(crate::nats::NatsSender::new(url, subject)?),
        Settings::Amqp { url, exchange, routing_key } => {
            Box::new(crate::amqp::AmqpSender::new(url, exchange, routing_key)?)
        }
        Settings::Redis { url, stream } => Box::new(crate::redis_stream::RedisSender::new(url, stream)?),
    })
}
