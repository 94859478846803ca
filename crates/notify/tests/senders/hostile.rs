//! Destinations that are not the broker they claim to be: one that accepts connections and
//! never answers, one that answers garbage. Every sender gives up within its timeout (5 s per
//! network step) with an error, and never hangs.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use isthmus_notify::destination::{Destination, Settings};
use isthmus_notify::senders::sender;

use crate::servers::{key, record};

/// A listener on a free port that, for each connection, writes `answer` and then keeps the
/// connection open, reading and ignoring whatever comes.
fn impostor(answer: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = stream.write_all(answer);
                let mut sink = [0; 4096];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    });
    port
}

/// Each kind of broker sender against `port`, in parallel; each must fail within `limit`.
fn all_fail_within(port: u16, limit: Duration) {
    let destinations = [
        Settings::Nats { url: format!("nats://127.0.0.1:{port}"), subject: "s".into() },
        Settings::Amqp { url: format!("amqp://127.0.0.1:{port}/%2f"), exchange: "x".into(), routing_key: "k".into() },
        Settings::Redis { url: format!("redis://127.0.0.1:{port}/0"), stream: "s".into() },
    ];
    let threads: Vec<_> = destinations
        .into_iter()
        .map(|settings| {
            std::thread::spawn(move || {
                let kind = settings.kind();
                let mut sender = sender(&Destination { id: "impostor".into(), settings }).unwrap();
                let started = Instant::now();
                let result = sender.send(&key(0), &record(0));
                (kind, result, started.elapsed())
            })
        })
        .collect();
    for thread in threads {
        let (kind, result, took) = thread.join().unwrap();
        assert!(result.is_err(), "{kind:?} took a record an impostor never acknowledged");
        assert!(took < limit, "{kind:?} gave up only after {took:?}");
    }
}

#[test]
fn senders_give_up_on_a_destination_that_never_answers() {
    all_fail_within(impostor(b""), Duration::from_secs(8));
}

#[test]
fn senders_give_up_on_a_destination_that_answers_garbage() {
    // An HTTP answer, then a Redis bulk string claiming 2 GiB that never comes: nothing may
    // wait for it or allocate it.
    all_fail_within(
        impostor(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc\r\n$2147483647\r\nxyz"),
        Duration::from_secs(8),
    );
}

#[test]
fn senders_give_up_on_a_destination_that_announces_a_huge_answer() {
    // As a Redis reply: a 2 GiB bulk string, of which 3 bytes come.
    all_fail_within(impostor(b"$2147483647\r\nxyz"), Duration::from_secs(8));
}
