//! The NATS JetStream sender against a real nats-server.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use isthmus_notify::destination::{DeliveryError, Destination, Sender, Settings};
use isthmus_notify::senders::sender;
use tokio::runtime::Runtime;

use crate::servers::{Server, key, record, runtime, send_batched, send_timed};

const SUBJECT: &str = "isthmus.events";

fn nats_sender(port: u16, subject: &str) -> Box<dyn Sender> {
    let settings = Settings::Nats { url: format!("nats://127.0.0.1:{port}"), subject: subject.into() };
    sender(&Destination { id: "nats".into(), settings }).unwrap()
}

/// The test's own JetStream client, and a stream named `name` capturing `subject`.
fn create_stream(runtime: &Runtime, port: u16, name: &str, subject: &str) -> jetstream::Context {
    runtime.block_on(async {
        let client = async_nats::connect(format!("127.0.0.1:{port}")).await.unwrap();
        let context = jetstream::new(client);
        let config = stream::Config { name: name.into(), subjects: vec![subject.into()], ..Default::default() };
        context.get_or_create_stream(config).await.unwrap();
        context
    })
}

/// The payloads of the stream's messages, in order.
fn stored(runtime: &Runtime, context: &jetstream::Context, name: &str) -> Vec<Vec<u8>> {
    runtime.block_on(async {
        let mut stream = context.get_stream(name).await.unwrap();
        let count = stream.info().await.unwrap().state.messages;
        let mut payloads = Vec::new();
        for sequence in 1..=count {
            payloads.push(stream.get_raw_message(sequence).await.unwrap().payload.to_vec());
        }
        payloads
    })
}

#[test]
fn nats_records_arrive_in_order_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::nats(crate::servers::free_port(), dir.path());
    let runtime = runtime();
    let context = create_stream(&runtime, server.port, "EVENTS", SUBJECT);
    let mut sender = nats_sender(server.port, SUBJECT);
    send_timed(sender.as_mut(), "nats", 0, 2000);
    // Then in batches, each put on the wire whole before its acknowledgements are awaited.
    send_batched(sender.as_mut(), "nats", 2000, 2000, 64);
    // The same record again (as after a lost acknowledgement) is acknowledged, not stored twice.
    sender.send(&key(7), &record(7)).unwrap();
    let payloads = stored(&runtime, &context, "EVENTS");
    assert_eq!(payloads.len(), 4000);
    for (index, payload) in payloads.iter().enumerate() {
        assert_eq!(payload, &record(index), "message {}", index + 1);
    }
    let headers = runtime
        .block_on(async { context.get_stream("EVENTS").await.unwrap().get_raw_message(1).await.unwrap().headers });
    let id = headers.get("Nats-Msg-Id").expect("a message id").to_string();
    assert!(id.starts_with("isthmus-"), "{id}");
}

#[test]
fn nats_refuses_a_subject_no_stream_captures_until_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::nats(crate::servers::free_port(), dir.path());
    let mut sender = nats_sender(server.port, "nobody.listens");
    match sender.send(&key(0), &record(0)) {
        Err(DeliveryError::Refused(text)) => {
            assert!(text.contains("no stream captures subject nobody.listens"), "{text}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let runtime = runtime();
    let context = create_stream(&runtime, server.port, "LATE", "nobody.listens");
    sender.send(&key(1), &record(1)).unwrap();
    assert_eq!(stored(&runtime, &context, "LATE"), vec![record(1)]);
}

#[test]
fn nats_sender_waits_for_a_server_that_is_down_and_survives_its_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = crate::servers::free_port();
    let mut sender = nats_sender(port, SUBJECT);
    assert!(matches!(sender.send(&key(0), &record(0)), Err(DeliveryError::Unreachable(_))));

    let server = Server::nats(port, dir.path());
    let runtime = runtime();
    create_stream(&runtime, port, "EVENTS", SUBJECT);
    sender.send(&key(0), &record(0)).unwrap();
    drop(server);
    let started = Instant::now();
    assert!(matches!(sender.send(&key(1), &record(1)), Err(DeliveryError::Unreachable(_))));
    assert!(started.elapsed() < Duration::from_secs(12), "a dead server took {:?} to notice", started.elapsed());

    // The same storage: the stream and its first record are still there.
    let _server = Server::nats(port, dir.path());
    sender.send(&key(1), &record(1)).unwrap();
    let context =
        runtime.block_on(async { jetstream::new(async_nats::connect(format!("127.0.0.1:{port}")).await.unwrap()) });
    assert_eq!(stored(&runtime, &context, "EVENTS"), vec![record(0), record(1)]);
}
