//! The AMQP sender against a real rabbitmq-server: one broker start (the slow part) for all of
//! the cases, in sequence.

use isthmus_notify::destination::{DeliveryError, Destination, Sender, Settings};
use isthmus_notify::senders::sender;
use lapin::options::{BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use tokio::runtime::Runtime;

use crate::servers::{Server, free_port, key, record, runtime, send_batched, send_timed};

const EXCHANGE: &str = "isthmus";
const QUEUE: &str = "events";

fn amqp_sender(port: u16, exchange: &str, routing_key: &str) -> Box<dyn Sender> {
    let settings = Settings::Amqp {
        url: format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
        exchange: exchange.into(),
        routing_key: routing_key.into(),
    };
    sender(&Destination { id: "rabbit".into(), settings }).unwrap()
}

fn refusal(result: Result<(), DeliveryError>) -> String {
    match result {
        Err(DeliveryError::Refused(text)) => text,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The test's own client: declares `exchange` (direct, durable) and binds the queue to it.
fn bind(runtime: &Runtime, channel: &Channel, exchange: &str, routing_key: &str) {
    runtime.block_on(async {
        let durable = ExchangeDeclareOptions { durable: true, ..Default::default() };
        channel.exchange_declare(exchange.into(), ExchangeKind::Direct, durable, FieldTable::default()).await.unwrap();
        channel
            .queue_bind(
                QUEUE.into(),
                exchange.into(),
                routing_key.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
    })
}

/// Takes the queue's messages, checking that each is persistent JSON.
fn take(runtime: &Runtime, channel: &Channel) -> Vec<Vec<u8>> {
    runtime.block_on(async {
        let mut messages = Vec::new();
        let no_ack = BasicGetOptions { no_ack: true };
        while let Some(message) = channel.basic_get(QUEUE.into(), no_ack).await.unwrap() {
            let properties = &message.delivery.properties;
            assert_eq!(properties.delivery_mode(), &Some(2));
            assert_eq!(properties.content_type().as_ref().map(|t| t.as_str()), Some("application/json"));
            messages.push(message.delivery.data);
        }
        messages
    })
}

#[test]
fn amqp_sender_delivers_confirmed_in_order_refuses_what_no_queue_takes_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();

    // Made while the broker is down: unreachable, then delivered once it is up.
    let mut sender = amqp_sender(port, EXCHANGE, "bucket.created");
    assert!(matches!(sender.send(&key(0), &record(0)), Err(DeliveryError::Unreachable(_))));
    let _server = Server::rabbitmq(port, dir.path());
    let runtime = runtime();
    let (_connection, channel) = runtime.block_on(async {
        let connection = Connection::connect(&format!("amqp://127.0.0.1:{port}/%2f"), ConnectionProperties::default())
            .await
            .unwrap();
        let channel = connection.create_channel().await.unwrap();
        let durable = QueueDeclareOptions { durable: true, ..Default::default() };
        channel.queue_declare(QUEUE.into(), durable, FieldTable::default()).await.unwrap();
        (connection, channel)
    });
    bind(&runtime, &channel, EXCHANGE, "bucket.created");
    send_timed(sender.as_mut(), "amqp", 0, 2000);
    // Then in batches, each put on the wire whole before its acknowledgements are awaited.
    send_batched(sender.as_mut(), "amqp", 2000, 2000, 64);
    let messages = take(&runtime, &channel);
    assert_eq!(messages.len(), 4000);
    for (index, message) in messages.iter().enumerate() {
        assert_eq!(message, &record(index), "message {index}");
    }

    // A routing key no queue is bound to: the broker returns the record (mandatory).
    let mut unrouted = amqp_sender(port, EXCHANGE, "nobody");
    let text = refusal(unrouted.send(&key(1), &record(1)));
    assert!(text.contains("NO_ROUTE") && text.contains("no queue is bound"), "{text}");
    bind(&runtime, &channel, EXCHANGE, "nobody");
    unrouted.send(&key(2), &record(2)).unwrap();

    // An exchange that does not exist: the broker closes the channel; the sender opens a new
    // one for the next record.
    let mut lost = amqp_sender(port, "missing", "k");
    let text = refusal(lost.send(&key(3), &record(3)));
    assert!(text.contains("NOT_FOUND") || text.contains("no exchange"), "{text}");
    let text = refusal(lost.send(&key(3), &record(3)));
    assert!(text.contains("NOT_FOUND") || text.contains("no exchange"), "{text}");
    bind(&runtime, &channel, "missing", "k");
    lost.send(&key(4), &record(4)).unwrap();
    // The first sender's connection was never disturbed.
    sender.send(&key(5), &record(5)).unwrap();
    assert_eq!(take(&runtime, &channel), vec![record(2), record(4), record(5)]);
}
