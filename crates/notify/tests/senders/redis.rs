//! The Redis stream sender against a real redis-server.

use std::time::{Duration, Instant};

use isthmus_notify::destination::{DeliveryError, Destination, Sender, Settings};
use isthmus_notify::senders::sender;

use crate::servers::{Server, free_port, key, record, send_batched, send_timed};

const STREAM: &str = "isthmus-events";

fn redis_sender(url: String, stream: &str) -> Box<dyn Sender> {
    sender(&Destination { id: "redis".into(), settings: Settings::Redis { url, stream: stream.into() } }).unwrap()
}

/// The test's own connection.
fn admin(port: u16, password: Option<&str>) -> redis::Connection {
    let url = match password {
        Some(password) => format!("redis://:{password}@127.0.0.1:{port}/0"),
        None => format!("redis://127.0.0.1:{port}/0"),
    };
    redis::Client::open(url).unwrap().get_connection_with_timeout(Duration::from_secs(5)).unwrap()
}

/// Each entry of the stream as its field-value list.
fn entries(connection: &mut redis::Connection, stream: &str) -> Vec<Vec<Vec<u8>>> {
    let entries: Vec<(String, Vec<Vec<u8>>)> =
        redis::cmd("XRANGE").arg(stream).arg("-").arg("+").query(connection).unwrap();
    entries.into_iter().map(|(_id, fields)| fields).collect()
}

fn entry(index: usize) -> Vec<Vec<u8>> {
    vec![b"event".to_vec(), record(index), b"key".to_vec(), key(index).into_bytes()]
}

#[test]
fn redis_records_arrive_in_order_with_their_event_and_key_fields() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::redis(free_port(), dir.path(), None);
    let mut sender = redis_sender(format!("redis://127.0.0.1:{}/0", server.port), STREAM);
    send_timed(sender.as_mut(), "redis", 0, 2000);
    // Then in batches, each put on the wire whole before its acknowledgements are awaited.
    send_batched(sender.as_mut(), "redis", 2000, 2000, 64);
    let stored = entries(&mut admin(server.port, None), STREAM);
    assert_eq!(stored.len(), 4000);
    for (index, fields) in stored.iter().enumerate() {
        assert_eq!(fields, &entry(index), "entry {index}");
    }
}

#[test]
fn redis_sender_waits_for_a_server_that_is_down_and_survives_its_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let mut sender = redis_sender(url, STREAM);
    assert!(matches!(sender.send(&key(0), &record(0)), Err(DeliveryError::Unreachable(_))));
    let server = Server::redis(port, dir.path(), None);
    sender.send(&key(0), &record(0)).unwrap();
    drop(server);
    let started = Instant::now();
    assert!(matches!(sender.send(&key(1), &record(1)), Err(DeliveryError::Unreachable(_))));
    assert!(started.elapsed() < Duration::from_secs(7), "a dead server took {:?} to notice", started.elapsed());
    let _server = Server::redis(port, dir.path(), None);
    sender.send(&key(1), &record(1)).unwrap();
    // Without persistence the restarted server holds only what came after the restart.
    assert_eq!(entries(&mut admin(port, None), STREAM), vec![entry(1)]);
}

#[test]
fn redis_refuses_a_wrong_password_and_a_key_that_is_not_a_stream_then_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::redis(free_port(), dir.path(), Some("s3cret-pw"));
    let port = server.port;

    let mut wrong = redis_sender(format!("redis://:not-the-pw@127.0.0.1:{port}/0"), STREAM);
    match wrong.send(&key(0), &record(0)) {
        Err(DeliveryError::Refused(text)) => {
            assert!(!text.contains("not-the-pw") && text.contains(&format!("127.0.0.1:{port}")), "{text}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }

    let mut admin = admin(port, Some("s3cret-pw"));
    redis::cmd("SET").arg("plain").arg("a string").query::<()>(&mut admin).unwrap();
    let mut sender = redis_sender(format!("redis://:s3cret-pw@127.0.0.1:{port}/0"), "plain");
    match sender.send(&key(1), &record(1)) {
        Err(DeliveryError::Refused(text)) => {
            assert!(text.contains("WRONGTYPE") && !text.contains("s3cret-pw"), "{text}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    redis::cmd("DEL").arg("plain").query::<()>(&mut admin).unwrap();
    sender.send(&key(2), &record(2)).unwrap();
    assert_eq!(entries(&mut admin, "plain"), vec![entry(2)]);
}
