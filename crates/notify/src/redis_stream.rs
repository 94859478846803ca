//! The Redis stream sender: each record is appended to the destination's stream with
//! `XADD STREAM * event RECORD key KEY` (fields `event`, the JSON record, and `key`, the object
//! key), and counts as delivered once Redis answered with the entry's id. The stream is not
//! trimmed: consumers (or a `MAXLEN` policy set by the operator) keep it bounded.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};

use crate::broker::{self, Runtime, TIMEOUT};
use crate::destination::{DeliveryError, Outgoing, Sender, Sent};

/// Appends records to one Redis stream. Connects on the first record, and again on the next
/// record after any failure.
pub struct RedisSender {
    client: Client,
    stream: String,
    /// `scheme://host:port`, for errors and logs.
    endpoint: String,
    runtime: Runtime,
    connection: Option<MultiplexedConnection>,
}

impl RedisSender {
    /// A sender for `url` (`redis://[:password@]host:port/db`, `redis://user:password@…`, or
    /// `rediss://` for TLS) and `stream`. Does not connect: a server that is down does not stop
    /// the gateway from starting. Fails only on a malformed URL or an empty stream name.
    pub fn new(url: &str, stream: &str) -> Result<Self, DeliveryError> {
        let endpoint = broker::endpoint(url);
        let client = Client::open(url).map_err(|_| DeliveryError::Refused(format!("not a Redis URL: {endpoint}")))?;
        if stream.is_empty() {
            return Err(DeliveryError::Refused("the Redis stream name is empty".into()));
        }
        Ok(RedisSender {
            client,
            stream: stream.to_string(),
            endpoint,
            runtime: Runtime::new("redis")?,
            connection: None,
        })
    }

    fn connect(&self) -> Result<MultiplexedConnection, DeliveryError> {
        let what = format!("connecting to Redis at {}", self.endpoint);
        // The runtime bounds the whole handshake (connection, AUTH, SELECT) by one timeout.
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(TIMEOUT)).set_response_timeout(Some(TIMEOUT));
        let connection = self.runtime.run(&what, async {
            self.client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map_err(|error| failure(&what, &error))
        })?;
        tracing::info!(endpoint = %self.endpoint, "notifications: connected to Redis");
        Ok(connection)
    }
}

impl Sender for RedisSender {
    /// The batch's XADDs go as one pipeline (one round trip); Redis runs them in order and
    /// answers each.
    fn send_all(&mut self, batch: &[Outgoing<'_>]) -> Sent {
        let mut connection = match self.connection.take() {
            Some(connection) => connection,
            None => match self.connect() {
                Ok(connection) => connection,
                Err(error) => return (0, Some(error)),
            },
        };
        let what = format!("adding to stream {:?} at {}", self.stream, self.endpoint);
        let mut pipeline = redis::pipe();
        // Each command's answer on its own: a refusal of one (OOM) is told apart from the rest.
        pipeline.ignore_errors();
        for outgoing in batch {
            pipeline
                .cmd("XADD")
                .arg(&self.stream)
                .arg("*")
                .arg("event")
                .arg(outgoing.record)
                .arg("key")
                .arg(outgoing.key);
        }
        let answers = self.runtime.run(&what, async {
            pipeline
                .query_async::<Vec<redis::RedisResult<redis::Value>>>(&mut connection)
                .await
                .map_err(|error| failure(&what, &error))
        });
        let answers = match answers {
            Ok(answers) => answers,
            Err(error) => return (0, Some(error)),
        };
        // The connection is kept only after the pipeline's answers all came: after a timeout,
        // an answer may still be on its way and would be taken for the next command's.
        self.connection = Some(connection);
        for (taken, answer) in answers.iter().enumerate() {
            if let Err(error) = answer {
                return (taken, Some(failure(&what, error)));
            }
        }
        match answers.len() {
            n if n == batch.len() => (n, None),
            n => (n, Some(DeliveryError::Refused(format!("{what}: {n} answers to {} commands", batch.len())))),
        }
    }
}

/// Redis's own answer (a wrong password, `WRONGTYPE` for a key that is not a stream, `OOM`) is
/// a refusal; a connection refused, broken or silent is unreachable.
fn failure(what: &str, error: &RedisError) -> DeliveryError {
    let text = format!("{what}: {error}");
    if error.is_io_error() || error.is_timeout() || error.is_connection_dropped() || error.is_connection_refusal() {
        DeliveryError::Unreachable(text)
    } else {
        DeliveryError::Refused(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_settings_are_refused_without_a_server() {
        assert!(RedisSender::new("redis://:pw@127.0.0.1:1/0", "events").is_ok());
        assert!(matches!(RedisSender::new("redis://127.0.0.1:1/0", ""), Err(DeliveryError::Refused(_))));
        let Err(DeliveryError::Refused(text)) = RedisSender::new("http://user:s3cret@host/", "events") else {
            panic!("a foreign URL was taken")
        };
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn an_unreachable_server_is_named_without_its_credentials() {
        let mut sender = RedisSender::new("redis://user:s3cret@127.0.0.1:1/0", "events").unwrap();
        let Err(DeliveryError::Unreachable(text)) = sender.send("k", b"{}") else { panic!("port 1 answered") };
        assert!(text.contains("redis://127.0.0.1:1") && !text.contains("s3cret"), "{text}");
    }
}
