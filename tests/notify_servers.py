"""Real message servers for the bucket-notification tests, each with a consumer that records what
it receives: NATS JetStream (`nats`), RabbitMQ (`rabbitmq`), Redis streams (`redis`) and a
webhook receiver (`webhook`, `webhook_factory`).

Each server runs on 127.0.0.1 on a free port over a temporary directory and is stopped after its
test, also when the test fails. The servers come from Debian:

    apt-get install -y nats-server rabbitmq-server redis-server
    systemctl stop nats-server rabbitmq-server redis-server   # the services apt started (no
    epmd -kill                                                # systemd: `service X stop`); the
                                                              # stop of rabbitmq leaves epmd

(`scripts/test` installs them.) A missing server binary FAILS the test that needs it, naming the
package to install; it does not skip. The services apt starts need not be stopped for these
fixtures to work (every port is free-picked, RabbitMQ gets an epmd of its own on a free port),
but they cost memory and hold the default ports.

Use them from a test module by importing the fixtures:

    from notify_servers import nats, rabbitmq, redis, webhook, webhook_factory  # noqa: F401

    def test_x(nats, webhook):
        config = nats.toml + webhook.toml          # the gateway's [[notify_*]] tables
        ...                                        # a rule's destination: nats.arn, webhook.arn
        records = nats.wait_for(1, timeout=10)     # the JSON documents received, in order

Every consumer (class `Collector`) keeps what arrived with the time it arrived (`deliveries`,
for latencies), and offers `wait_for(n, timeout)` (at least n arrived: all of them, else an
AssertionError saying what did), `records()` (the documents so far) and `clear()`.
Servers offer `stop()` and `start()` (same port; NATS and RabbitMQ keep their data, Redis runs
without persistence and starts empty) to test a destination that is down.

`rabbitmq` is module-scoped: RabbitMQ takes seconds to start. Its queue carries over between the
tests of a module: call `rabbitmq.reset()` first (purges the queue, forgets what arrived).
"""

import asyncio
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import free_port

NATS_SUBJECT = "isthmus.events"
NATS_STREAM = "ISTHMUS"
AMQP_EXCHANGE = "isthmus"
AMQP_QUEUE = "events"
AMQP_ROUTING_KEY = "bucket.events"
REDIS_STREAM = "isthmus-events"
# Debian installs the RabbitMQ scripts here; /usr/sbin/rabbitmq-server is a wrapper that, run as
# root, switches to the `rabbitmq` user with `su` (which resets HOME) and runs in /var/lib/rabbitmq.
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")


def require(command: str, package: str, path=None) -> str:
    """The path of a server binary; fails the test (with the apt line) when it is missing."""
    search = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"  # a user's PATH may lack /usr/sbin
    found = str(path) if path and Path(path).exists() else shutil.which(command, path=search)
    if not found:
        pytest.fail(f"{command} is not installed: apt-get install -y {package}", pytrace=False)
    return found


def arn(destination_id: str, kind: str) -> str:
    """A rule's name for a destination of the config file."""
    return f"arn:isthmus:sqs::{destination_id}:{kind}"


def wait_port(port: int, proc: subprocess.Popen, timeout: float, log: Path):
    """Until something accepts on 127.0.0.1:`port`; raises if `proc` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}): {tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing accepts on port {port} after {timeout} s: {tail(log)}")


def tail(log: Path, size=4000) -> str:
    try:
        return log.read_text(errors="replace")[-size:]
    except OSError:
        return "(no log)"


def stop_group(proc: subprocess.Popen, timeout=15.0):
    """SIGTERM then, after `timeout`, SIGKILL to the process group `proc` leads (it was started
    with start_new_session), so children it left behind go too."""
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            try:  # the leader is gone; children still in its group get the same end
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        break


def spawn(argv, log: Path, env=None, cwd=None) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
            start_new_session=True,
        )


@dataclass
class Delivery:
    """One message a consumer received: its body, when it arrived (time.time()) and what the
    transport said about it (path/headers, subject, properties, stream fields)."""

    body: bytes
    received: float
    meta: dict = field(default_factory=dict)

    @property
    def record(self):
        try:
            return json.loads(self.body)
        except ValueError as err:
            raise AssertionError(f"not a JSON document: {self.body[:500]!r}") from err


class Collector:
    """What a consumer has received, in arrival order, for tests to wait on."""

    def __init__(self):
        self._cond = threading.Condition()
        self._deliveries = []

    def _add(self, body: bytes, **meta):
        with self._cond:
            self._deliveries.append(Delivery(bytes(body), time.time(), meta))
            self._cond.notify_all()

    @property
    def deliveries(self):
        with self._cond:
            return list(self._deliveries)

    def records(self, timeout=0.0):
        """The JSON documents received so far, in order (`timeout` is ignored here; NATS uses it)."""
        return [d.record for d in self.deliveries]

    def wait_for(self, n: int, timeout=10.0):
        """Waits until at least `n` messages arrived; returns all the documents received."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._deliveries) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    got = [d.body[:300] for d in self._deliveries]
                    raise AssertionError(f"{type(self).__name__}: {len(got)} of {n} messages after {timeout} s: {got}")
                self._cond.wait(left)
        return self.records()

    def clear(self):
        with self._cond:
            self._deliveries.clear()


# ---------------------------------------------------------------------------------------- NATS


class AsyncLoop:
    """An asyncio event loop on a thread of its own, for sync tests to run coroutines on."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="notify-asyncio")
        self.thread.start()

    def run(self, coro, timeout=15.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


class NatsServer(Collector):
    """nats-server with JetStream, a stream `ISTHMUS` on subject `isthmus.events`, and a durable
    pull consumer that fetches (and acks) everything published to it as it arrives."""

    kind = "nats"

    def __init__(self, tmp: Path, id="nats1"):
        super().__init__()
        self.binary = require("nats-server", "nats-server")
        self.id, self.tmp, self.port = id, tmp, free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.log = tmp / "nats-server.log"
        self.proc = None
        self.aio = AsyncLoop()
        self.client = self.js = None
        self._puller = None
        # While set, the consumer fetches nothing (the stream keeps what is published): what a
        # consumer on another machine costs this one.
        self.paused = False
        try:
            self.start()
            self.aio.run(self._connect())
        except BaseException:
            self.close()
            raise

    @property
    def toml(self):
        return f'[[notify_nats]]\nid = "{self.id}"\nurl = "{self.url}"\nsubject = "{NATS_SUBJECT}"\n'

    @property
    def arn(self):
        return arn(self.id, self.kind)

    def start(self):
        (self.tmp / "jetstream").mkdir(exist_ok=True)
        argv = [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.tmp / "jetstream")]
        self.proc = spawn(argv, self.log)
        wait_port(self.port, self.proc, 15, self.log)

    def stop(self):
        stop_group(self.proc)

    async def _connect(self):
        import nats as nats_py  # the fixture below is named `nats`

        self.client = await nats_py.connect(
            self.url, connect_timeout=2, reconnect_time_wait=0.2, max_reconnect_attempts=-1, name="isthmus-tests"
        )
        self.js = self.client.jetstream(timeout=5)
        await self.js.add_stream(name=NATS_STREAM, subjects=[NATS_SUBJECT])
        sub = await self.js.pull_subscribe(NATS_SUBJECT, durable="isthmus-tests", stream=NATS_STREAM)
        self._puller = asyncio.ensure_future(self._pull(sub))

    async def _pull(self, sub):
        import nats.errors

        while True:
            if self.paused:
                await asyncio.sleep(0.05)
                continue
            try:
                msgs = await sub.fetch(batch=100, timeout=0.2)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                continue
            except asyncio.CancelledError:
                raise
            except Exception:  # the server is stopped (a test of a destination that is down)
                await asyncio.sleep(0.1)
                continue
            for msg in msgs:
                self._add(msg.data, subject=msg.subject, headers=dict(msg.headers or {}),
                          sequence=msg.metadata.sequence.stream)
                try:
                    await msg.ack()
                except Exception:
                    pass  # redelivered later: duplicates are the at-least-once contract's to show

    def stream_messages(self) -> int:
        """How many messages the stream holds (the last sequence number)."""
        async def last_seq():
            return (await self.js.stream_info(NATS_STREAM)).state.last_seq

        return self.aio.run(last_seq())

    def records(self, timeout=1.0):
        """The documents published to the stream so far, in order: waits up to `timeout` for the
        consumer to have fetched every message the stream holds."""
        deadline = time.monotonic() + timeout
        want = self.stream_messages()
        with self._cond:
            while len(self._deliveries) < want and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
        return super().records()

    def publish(self, data: bytes):
        """A JetStream publish, acknowledged (for checking the fixture itself)."""
        return self.aio.run(self.js.publish(NATS_SUBJECT, data))

    def close(self):
        async def shut():
            if self._puller is not None:
                self._puller.cancel()
                await asyncio.gather(self._puller, return_exceptions=True)
            if self.client is not None:
                await self.client.close()

        try:
            self.aio.run(shut(), timeout=5)
        except Exception:
            pass
        self.aio.close()
        self.stop()


@pytest.fixture
def nats(tmp_path):
    """A NATS JetStream server and its consumer (NatsServer)."""
    server = NatsServer(tmp_path)
    try:
        yield server
    finally:
        server.close()


# ------------------------------------------------------------------------------------ RabbitMQ


class RabbitMQServer(Collector):
    """rabbitmq-server as a node of its own (name, ports, epmd, data, logs, HOME with the Erlang
    cookie, all under `tmp`), a durable topic exchange `isthmus`, a queue `events` bound with
    `bucket.events`, and a consumer thread."""

    kind = "amqp"
    START_TIMEOUT = 90.0

    def __init__(self, tmp: Path, id="amqp1"):
        super().__init__()
        self.server_bin = require("rabbitmq-server", "rabbitmq-server", RABBITMQ_BIN / "rabbitmq-server")
        self.epmd_bin = require("epmd", "erlang-base")
        self.id, self.tmp = id, tmp
        self.port, self.dist_port, self.epmd_port = free_port(), free_port(), free_port()
        self.node = f"isthmus-{os.getpid()}-{self.port}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2f"
        self.log = tmp / "rabbitmq-stdout.log"
        self.proc = self.epmd = None
        self._stop = threading.Event()
        self._consumer = None
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    @property
    def toml(self):
        return (
            f'[[notify_amqp]]\nid = "{self.id}"\nurl = "{self.url}"\nexchange = "{AMQP_EXCHANGE}"\n'
            f'routing_key = "{AMQP_ROUTING_KEY}"\n'
        )

    @property
    def arn(self):
        return arn(self.id, self.kind)

    def env(self):
        t = self.tmp
        env = dict(os.environ)
        env.update(
            HOME=str(t / "home"),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            # Else NODE_PORT + 20000, past 65535 for a high free port.
            RABBITMQ_DIST_PORT=str(self.dist_port),
            ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
            RABBITMQ_MNESIA_BASE=str(t / "mnesia"),
            RABBITMQ_LOG_BASE=str(t / "log"),
            RABBITMQ_CONFIG_FILE=str(t / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(t / "advanced.config"),
            RABBITMQ_CONF_ENV_FILE=str(t / "rabbitmq-env.conf"),  # not /etc/rabbitmq's
            RABBITMQ_ENABLED_PLUGINS_FILE=str(t / "enabled_plugins"),
            RABBITMQ_PID_FILE=str(t / "rabbitmq.pid"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
        )
        return env

    def start(self):
        t = self.tmp
        for d in ("home", "mnesia", "log"):
            (t / d).mkdir(exist_ok=True)
        conf = f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users.guest = true\n"
        (t / "rabbitmq.conf").write_text(conf)
        (t / "advanced.config").write_text("[].\n")
        (t / "rabbitmq-env.conf").write_text("")
        (t / "enabled_plugins").write_text("[].\n")
        env = self.env()
        # An epmd of its own on a free port: a system one (apt's service) is left alone, and the
        # one Erlang would start by itself would outlive the test.
        if self.epmd is None or self.epmd.poll() is not None:  # kept from a previous start()
            argv = [self.epmd_bin, "-port", str(self.epmd_port), "-address", "127.0.0.1"]
            self.epmd = spawn(argv, t / "epmd.log", env)
            wait_port(self.epmd_port, self.epmd, 10, t / "epmd.log")
        self.proc = spawn([self.server_bin], self.log, env, cwd=t)
        wait_port(self.port, self.proc, self.START_TIMEOUT, self.log)
        with self._connection() as conn:
            ch = conn.channel()
            ch.exchange_declare(AMQP_EXCHANGE, exchange_type="topic", durable=True)
            ch.queue_declare(AMQP_QUEUE, durable=True)
            ch.queue_bind(AMQP_QUEUE, AMQP_EXCHANGE, routing_key=AMQP_ROUTING_KEY)
        self._stop.clear()
        self._consumer = threading.Thread(target=self._consume, daemon=True, name="notify-amqp")
        self._consumer.start()

    def _connection(self, retry_for=20.0):
        import pika

        params = pika.URLParameters(self.url)
        params.socket_timeout = params.blocked_connection_timeout = 5
        params.stack_timeout = 10
        params.heartbeat = 0  # a test may hold the connection idle for long
        deadline = time.monotonic() + retry_for
        while True:  # the port opens slightly before the broker takes logins
            try:
                return pika.BlockingConnection(params)
            except pika.exceptions.AMQPConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _consume(self):
        import pika

        def on_message(_ch, method, props, body):
            self._add(body, routing_key=method.routing_key, exchange=method.exchange,
                      redelivered=method.redelivered, properties=props)

        while not self._stop.is_set():
            try:
                conn = self._connection(retry_for=1.0)
            except pika.exceptions.AMQPError:
                continue
            try:
                ch = conn.channel()
                ch.basic_consume(AMQP_QUEUE, on_message, auto_ack=True)
                while not self._stop.is_set():
                    conn.process_data_events(time_limit=0.1)
            except pika.exceptions.AMQPError:
                time.sleep(0.1)
            finally:
                try:
                    conn.close()
                except Exception:
                    pass

    def publish(self, body: bytes, routing_key=AMQP_ROUTING_KEY):
        """A publish with confirms (for checking the fixture itself)."""
        import pika

        with self._connection() as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish(AMQP_EXCHANGE, routing_key, body, pika.BasicProperties(delivery_mode=2), mandatory=True)

    def reset(self):
        """Empties the queue and forgets what arrived: call first in each test of a module."""
        with self._connection() as conn:
            conn.channel().queue_purge(AMQP_QUEUE)
        self.clear()

    def stop(self):
        self._stop.set()
        if self._consumer is not None:
            self._consumer.join(10)
        stop_group(self.proc, timeout=30)
        self.proc = None

    def close(self):
        self.stop()
        stop_group(self.epmd, timeout=5)


@pytest.fixture(scope="module")
def rabbitmq(tmp_path_factory):
    """A RabbitMQ node and its consumer (RabbitMQServer), one per test module: it takes seconds
    to start. Tests call `rabbitmq.reset()` first."""
    server = RabbitMQServer(tmp_path_factory.mktemp("rabbitmq"))
    try:
        yield server
    finally:
        server.close()


# --------------------------------------------------------------------------------------- Redis


class RedisServer(Collector):
    """redis-server without persistence, and a thread reading stream `isthmus-events` (XREAD);
    a delivery's body is the entry's `event` field, its meta the entry's id and `key` field."""

    kind = "redis"

    def __init__(self, tmp: Path, id="redis1"):
        super().__init__()
        self.binary = require("redis-server", "redis-server")
        self.id, self.tmp, self.port = id, tmp, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = tmp / "redis-server.log"
        self.proc = None
        self._stop = threading.Event()
        self._reader = None
        self._last_id = "0-0"
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    @property
    def toml(self):
        return f'[[notify_redis]]\nid = "{self.id}"\nurl = "{self.url}"\nstream = "{REDIS_STREAM}"\n'

    @property
    def arn(self):
        return arn(self.id, self.kind)

    def client(self):
        import redis as redis_py  # the fixture below is named `redis`

        return redis_py.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=2)

    def start(self):
        argv = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.tmp), "--daemonize", "no"]
        self.proc = spawn(argv, self.log)
        wait_port(self.port, self.proc, 15, self.log)
        self._stop.clear()
        self._reader = threading.Thread(target=self._read, daemon=True, name="notify-redis")
        self._reader.start()

    def _read(self):
        import redis as redis_py

        conn = self.client()
        while not self._stop.is_set():
            try:
                answer = conn.xread({REDIS_STREAM: self._last_id}, count=100, block=100)
            except redis_py.RedisError:
                time.sleep(0.1)
                continue
            for _stream, entries in answer or []:
                for entry_id, fields in entries:
                    self._last_id = entry_id
                    key = fields.get(b"key")
                    self._add(fields.get(b"event", b""), id=entry_id.decode(),
                              key=key.decode() if key is not None else None,
                              fields={k.decode(): v.decode(errors="replace") for k, v in fields.items()})
        conn.close()

    def publish(self, event: bytes, key: str):
        """An XADD as the gateway makes it (for checking the fixture itself)."""
        with self.client() as conn:
            return conn.xadd(REDIS_STREAM, {"event": event, "key": key})

    def stop(self):
        """Stops the server (its stream is lost: no persistence) and the reader."""
        self._stop.set()
        if self._reader is not None:
            self._reader.join(5)
        stop_group(self.proc)
        self._last_id = "0-0"

    close = stop


@pytest.fixture
def redis(tmp_path):
    """A Redis server and its stream consumer (RedisServer)."""
    server = RedisServer(tmp_path)
    try:
        yield server
    finally:
        server.close()


# ------------------------------------------------------------------------------------- webhook


class WebhookServer(Collector):
    """A threaded HTTP server recording each POST (meta: path, headers) and answering 200;
    503 to the first `fail_first` ones, 401 unless `Authorization: Bearer <token>` when `token`
    is set. Both can be changed while it runs; `status_log` lists every answer given."""

    kind = "webhook"

    def __init__(self, id="hook1", fail_first=0, token=None):
        super().__init__()
        self.id, self.fail_first, self.token = id, fail_first, token
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}/events"
        self.status_log = []
        self.httpd = None
        self.start()

    @property
    def toml(self):
        text = f'[[notify_webhook]]\nid = "{self.id}"\nendpoint = "{self.endpoint}"\n'
        return text + (f'auth_token = "{self.token}"\n' if self.token else "")

    @property
    def arn(self):
        return arn(self.id, self.kind)

    def _answer(self, handler) -> int:
        length = int(handler.headers.get("Content-Length") or 0)
        if length > 64 << 20:
            return 413
        body = handler.rfile.read(length)
        with self._cond:
            if self.token and handler.headers.get("Authorization") != f"Bearer {self.token}":
                status = 401
            elif self.fail_first > 0:
                self.fail_first -= 1
                status = 503
            else:
                status = 200
            self.status_log.append(status)
        if status == 200:
            self._add(body, path=handler.path, headers=dict(handler.headers.items()))
        return status

    def start(self):
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10

            def do_POST(self):
                status = owner._answer(self)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="notify-webhook").start()

    def stop(self):
        """Closes the listener: connections are refused until `start()`."""
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    close = stop


@pytest.fixture
def webhook_factory():
    """Makes webhook receivers with options: `webhook_factory(fail_first=2, token="t", id="h2")`."""
    made = []

    def make(**options):
        made.append(WebhookServer(**options))
        return made[-1]

    try:
        yield make
    finally:
        for server in made:
            server.close()


@pytest.fixture
def webhook(webhook_factory):
    """A webhook receiver answering 200 to every POST (WebhookServer)."""
    return webhook_factory()
