//! Bucket notifications: what happened to an object (an S3 write or delete, or a file written
//! or removed through POSIX), recorded in the gateway's own durable queue and delivered at
//! least once, in order per key, to the destinations the operator configured (webhooks, NATS
//! JetStream, AMQP 0-9-1, Redis streams).
//!
//! Which buckets send which events is a bucket setting (`isthmus_store::notification`); this
//! crate owns everything after a rule matched: the AWS event record, the queue, the senders,
//! and the watchers that turn kernel notifications or scans of a shared file system into
//! changes for the gateway to announce.

pub mod amqp;
pub mod background;
mod broker;
mod bytes;
pub mod destination;
pub mod dispatch;
pub mod event;
pub mod metrics;
pub mod nats;
pub mod queue;
pub mod redis_stream;
pub mod senders;
pub mod watch;
pub mod webhook;
