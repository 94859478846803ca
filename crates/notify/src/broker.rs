//! What the broker senders (NATS, AMQP, Redis) share: the time any one network step may take,
//! the small runtime that drives an async client from a sender's plain thread, and the form of
//! a broker's URL that may appear in a log line or an error (no user, no password, no query).

use std::future::Future;
use std::time::Duration;

use crate::destination::DeliveryError;

/// The bound on each network step of a delivery: connecting (with the handshake and the
/// authentication), and waiting for the broker's acknowledgement of one record.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// A Tokio runtime with one worker thread, owned by one sender. The worker keeps the client's
/// connection alive between records (heartbeats, pings), so an idle destination is not
/// dropped by its broker; the sender's own thread blocks on it for each record.
pub(crate) struct Runtime(tokio::runtime::Runtime);

impl Runtime {
    pub(crate) fn new(kind: &str) -> Result<Self, DeliveryError> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("notify-{kind}"))
            .on_thread_start(crate::background::yield_to_requests)
            .enable_all()
            .build()
            .map(Runtime)
            .map_err(|error| DeliveryError::Unreachable(format!("cannot start the {kind} client's runtime: {error}")))
    }

    /// Runs `step` to its end, or gives up with `Unreachable` after `TIMEOUT`.
    pub(crate) fn run<T>(
        &self,
        what: &str,
        step: impl Future<Output = Result<T, DeliveryError>>,
    ) -> Result<T, DeliveryError> {
        self.run_within(TIMEOUT, what, step)
    }

    fn run_within<T>(
        &self,
        limit: Duration,
        what: &str,
        step: impl Future<Output = Result<T, DeliveryError>>,
    ) -> Result<T, DeliveryError> {
        self.0.block_on(async {
            match tokio::time::timeout(limit, step).await {
                Ok(result) => result,
                Err(_) => Err(DeliveryError::Unreachable(format!("{what}: no answer within {limit:?}"))),
            }
        })
    }
}

/// `scheme://host:port` of a URL (each URL of a comma-separated list), without the user,
/// password, path and query, for logs and errors. A URL is not parsed strictly here: this only
/// has to never show a credential.
pub(crate) fn endpoint(url: &str) -> String {
    url.split(',').map(|one| endpoint_of_one(one.trim())).collect::<Vec<_>>().join(",")
}

fn endpoint_of_one(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // The user information ends at the authority's last `@` (a password may hold an `@`).
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    match scheme {
        Some(scheme) => format!("{scheme}://{host}"),
        None => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_never_show_credentials() {
        assert_eq!(endpoint("nats://user:s3cret@broker:4222"), "nats://broker:4222");
        assert_eq!(endpoint("amqp://guest:p@ss@rabbit:5672/%2fvhost?heartbeat=10"), "amqp://rabbit:5672");
        assert_eq!(endpoint("redis://:pw@127.0.0.1:6379/0"), "redis://127.0.0.1:6379");
        assert_eq!(endpoint("redis://127.0.0.1:6379/0?password=pw"), "redis://127.0.0.1:6379");
        assert_eq!(endpoint("tok@host:4222"), "host:4222");
        assert_eq!(endpoint("nats://a:x@n1:4222, nats://b:y@n2:4222"), "nats://n1:4222,nats://n2:4222");
    }

    #[test]
    fn a_step_that_never_ends_is_unreachable_after_the_timeout() {
        let runtime = Runtime::new("test").unwrap();
        let started = std::time::Instant::now();
        let never = runtime.run_within(
            Duration::from_millis(100),
            "waiting",
            std::future::pending::<Result<(), DeliveryError>>(),
        );
        assert!(
            matches!(&never, Err(DeliveryError::Unreachable(text)) if text.starts_with("waiting: no answer within")),
            "{never:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(runtime.run("quick", async { Ok(7) }).unwrap(), 7);
    }
}
