//! The NATS JetStream, AMQP and Redis stream senders against real servers (Debian's
//! nats-server, rabbitmq-server and redis-server, started by the tests), and against
//! destinations that hang or answer garbage.

mod amqp;
mod hostile;
mod nats;
mod redis;
mod servers;
