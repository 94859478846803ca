"""Bucket notifications end to end: a real gateway, real destinations (NATS JetStream,
RabbitMQ, Redis streams, a webhook; tests/notify_servers.py starts them), real clients (boto3)
and plain POSIX writes into the data root. A file a simulation writes and closes is announced
like an object PUT over S3; the gateway's own writes are announced once; the queue survives
kill -9; rules' filters hold; the API is the bucket owner's."""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, Server, free_port, make_client, wait_until
from notify_servers import nats, rabbitmq, redis, webhook, webhook_factory  # noqa: F401 (fixtures)
from test_identity import SECRET, USERS, config_text, traversable_root, unix  # noqa: F401 (the fixture)

ALL = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectTagging:*"]


def gateway(tmp_path, *destinations, extra="", root=None, port_args=()):
    """A gateway whose configuration declares `destinations` (fixtures of notify_servers)."""
    config = tmp_path / "isthmus.toml"
    # Top-level keys first: a key after a table's header would belong to the table.
    config.write_text(extra + "".join(d.toml for d in destinations))
    root = root or tmp_path / "root"
    root.mkdir(exist_ok=True)
    return Server(root, extra_args=["--config", str(config), *port_args])


def rules(*destinations, events=ALL, prefix=None, suffix=None):
    """A NotificationConfiguration with one queue rule per destination."""
    filters = [{"Name": name, "Value": value} for name, value in (("prefix", prefix), ("suffix", suffix)) if value]
    config = []
    for d in destinations:
        rule = {"Id": f"to-{d.id}", "QueueArn": d.arn, "Events": list(events)}
        if filters:
            rule["Filter"] = {"Key": {"FilterRules": filters}}
        config.append(rule)
    return {"QueueConfigurations": config}


def records_of(documents):
    """The S3 event records of received documents, flattened, in order."""
    return [record for document in documents for record in document["Records"]]


def summary(record):
    obj = record["s3"]["object"]
    return (record["eventName"], urllib.parse.unquote_plus(obj["key"]), obj.get("size"), obj.get("eTag"))


def write_posix(path, data):
    """What a simulation does: open, write, close."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def announced_within(consumer, seconds):
    """Whether `consumer` has received something within `seconds` (polling)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if consumer.deliveries:
            return True
        time.sleep(0.05)
    return bool(consumer.deliveries)


def md5(data):
    return hashlib.md5(data).hexdigest()


@pytest.mark.posix_only
def test_posix_and_s3_writes_each_reach_nats_amqp_redis_and_a_webhook_once(tmp_path, nats, rabbitmq, redis, webhook_factory):
    rabbitmq.reset()
    hook = webhook_factory(token="hook-token-123")
    destinations = (nats, rabbitmq, redis, hook)
    srv = gateway(tmp_path, *destinations)
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="results")
        s3.put_bucket_notification_configuration(Bucket="results", NotificationConfiguration=rules(*destinations))
        root = srv.root / "results"

        # A simulation writes a file with plain POSIX calls.
        sim = os.urandom(200_000)
        write_posix(root / "run 1" / "step-0001.dat", sim)
        # Announced once quiet (200 ms): wait for it, so the order below is the order of calls.
        hook.wait_for(1, timeout=20)
        # The S3 calls a pipeline makes.
        s3.put_object(Bucket="results", Key="put.txt", Body=b"over S3")
        mpu = s3.create_multipart_upload(Bucket="results", Key="big.bin")
        part = os.urandom(5 << 20)
        etag = s3.upload_part(Bucket="results", Key="big.bin", UploadId=mpu["UploadId"], PartNumber=1, Body=part)["ETag"]
        done = s3.complete_multipart_upload(
            Bucket="results", Key="big.bin", UploadId=mpu["UploadId"], MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
        )
        s3.copy_object(Bucket="results", Key="copy.txt", CopySource={"Bucket": "results", "Key": "put.txt"})
        s3.delete_object(Bucket="results", Key="put.txt")
        # A last file written through POSIX: once it is announced, anything the watcher saw
        # before it (the gateway's own renames among them) has been too.
        write_posix(root / "marker", b"m")

        expected = [
            ("ObjectCreated:Put", "run 1/step-0001.dat", len(sim), md5(sim)),
            ("ObjectCreated:Put", "put.txt", 7, md5(b"over S3")),
            ("ObjectCreated:CompleteMultipartUpload", "big.bin", 5 << 20, done["ETag"].strip('"')),
            ("ObjectCreated:Copy", "copy.txt", 7, md5(b"over S3")),
            ("ObjectRemoved:Delete", "put.txt", None, None),
            ("ObjectCreated:Put", "marker", 1, md5(b"m")),
        ]
        for destination in destinations:
            got = records_of(destination.wait_for(len(expected), timeout=30))
            assert [summary(r) for r in got] == expected, (destination.kind, [summary(r) for r in got])
            for record in got:
                assert record["eventVersion"].startswith("2.") and record["eventSource"] == "aws:s3"
                assert record["s3"]["bucket"]["name"] == "results"
                assert record["s3"]["bucket"]["arn"] == "arn:aws:s3:::results"
                assert record["s3"]["configurationId"] == f"to-{destination.id}"
            sequencers = [r["s3"]["object"]["sequencer"] for r in got]
            assert sequencers == sorted(sequencers) and len(set(sequencers)) == len(sequencers)
            # S3 requests name their user and address; the simulation's file names POSIX.
            assert got[0]["userIdentity"]["principalId"] == "posix"
            assert got[1]["userIdentity"]["principalId"] == ACCESS_KEY
            assert got[1]["requestParameters"]["sourceIPAddress"] == "127.0.0.1"
        for delivery in hook.deliveries:
            headers = {name.lower(): value for name, value in delivery.meta["headers"].items()}
            assert headers["authorization"] == "Bearer hook-token-123"
            assert headers["content-type"] == "application/json"
    finally:
        srv.stop()


@pytest.mark.posix_only
def test_filters_hold_and_files_the_gateway_owns_or_cannot_serve_are_not_announced(tmp_path, webhook):
    srv = gateway(tmp_path, webhook)
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="sim")
        s3.put_bucket_notification_configuration(
            Bucket="sim", NotificationConfiguration=rules(webhook, events=["s3:ObjectCreated:*"], prefix="runs/", suffix=".h5")
        )
        root = srv.root / "sim"
        s3.put_object(Bucket="sim", Key="runs/a.txt", Body=b"wrong suffix")
        s3.put_object(Bucket="sim", Key="other/a.h5", Body=b"wrong prefix")
        s3.put_object(Bucket="sim", Key="runs/a.h5", Body=b"wanted")
        s3.delete_object(Bucket="sim", Key="runs/a.h5")  # not an ObjectCreated event
        write_posix(root / "runs" / "b.txt", b"wrong suffix")
        write_posix(root / "scratch" / "b.h5", b"wrong prefix")
        # What a user may plant: a link to a file outside the bucket, a name the gateway keeps
        # for its own writes in progress, its internal directory.
        (root / "runs" / "passwd.h5").symlink_to("/etc/passwd")
        write_posix(root / "runs" / ".isthmus.tmp.forged.h5", b"not a key")
        write_posix(root / "runs" / "x" / ".isthmus" / "y.h5", b"not a key")
        os.mkfifo(root / "runs" / "fifo.h5")
        write_posix(root / "runs" / "b.h5", b"wanted too")
        got = [summary(r) for r in records_of(webhook.wait_for(2, timeout=20))]
        assert got == [("ObjectCreated:Put", "runs/a.h5", 6, md5(b"wanted")), ("ObjectCreated:Put", "runs/b.h5", 10, md5(b"wanted too"))]
    finally:
        srv.stop()


def test_events_queued_while_the_destination_is_down_survive_kill_9(tmp_path, webhook_factory):
    hook = webhook_factory(fail_first=10**6)  # down: every POST answered 503
    srv = gateway(tmp_path, hook)
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket="queued")
    s3.put_bucket_notification_configuration(Bucket="queued", NotificationConfiguration=rules(hook, events=["s3:ObjectCreated:*"]))
    for i in range(5):
        s3.put_object(Bucket="queued", Key=f"k{i}", Body=b"x" * i)
    wait_until(lambda: len(hook.status_log) >= 1, timeout=10)  # delivery was tried, and failed
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    srv.log.close()
    assert hook.records() == []
    hook.fail_first = 0  # the destination is back
    again = gateway(tmp_path, hook, root=srv.root)
    try:
        got = [summary(r) for r in records_of(hook.wait_for(5, timeout=30))]
        # At least once, in order: each key's first delivery comes in the order written.
        firsts = list(dict.fromkeys(key for _, key, _, _ in got))
        assert firsts == [f"k{i}" for i in range(5)]
        assert all(name == "ObjectCreated:Put" for name, *_ in got)
    finally:
        again.stop()


def test_the_notification_api_is_the_bucket_owners_and_names_only_configured_destinations(tmp_path, webhook):
    extra = '[[users]]\naccess_key = "bob"\nsecret_key = "bob-secret-123"\n'
    srv = gateway(tmp_path, webhook, extra=extra)
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="shared")
        assert "QueueConfigurations" not in s3.get_bucket_notification_configuration(Bucket="shared")
        config = rules(webhook, events=["s3:ObjectCreated:Put", "s3:ObjectRemoved:*"], prefix="in/", suffix=".nc")
        s3.put_bucket_notification_configuration(Bucket="shared", NotificationConfiguration=config)
        got = s3.get_bucket_notification_configuration(Bucket="shared")["QueueConfigurations"]
        assert got == [
            {
                "Id": "to-hook1",
                "QueueArn": webhook.arn,
                "Events": ["s3:ObjectCreated:Put", "s3:ObjectRemoved:*"],
                "Filter": {"Key": {"FilterRules": [{"Name": "Prefix", "Value": "in/"}, {"Name": "Suffix", "Value": ".nc"}]}},
            }
        ]

        def refused(config):
            with pytest.raises(ClientError) as e:
                s3.put_bucket_notification_configuration(Bucket="shared", NotificationConfiguration=config)
            return e.value.response["Error"]["Code"]

        # Destinations are the operator's: an ARN not configured, or an AWS one, is refused.
        assert refused({"QueueConfigurations": [{"QueueArn": "arn:isthmus:sqs::nope:webhook", "Events": ALL}]}) == "InvalidArgument"
        assert refused({"QueueConfigurations": [{"QueueArn": "arn:aws:sqs:us-east-1:1:q", "Events": ALL}]}) == "InvalidArgument"
        assert refused({"QueueConfigurations": [{"QueueArn": webhook.arn, "Events": ["s3:Replication:*"]}]}) == "InvalidArgument"
        overlapping = {"QueueConfigurations": [{"QueueArn": webhook.arn, "Events": ["s3:ObjectCreated:*"]}] * 2}
        assert refused(overlapping) == "InvalidArgument"
        # Another user, even one the bucket's ACL lets write, neither reads nor changes its rules.
        s3.put_bucket_acl(Bucket="shared", ACL="public-read-write")
        bob = make_client(srv.endpoint, "bob", "bob-secret-123")
        bob.put_object(Bucket="shared", Key="bob.txt", Body=b"granted")
        for call in (
            lambda: bob.get_bucket_notification_configuration(Bucket="shared"),
            lambda: bob.put_bucket_notification_configuration(Bucket="shared", NotificationConfiguration={}),
        ):
            with pytest.raises(ClientError) as e:
                call()
            assert e.value.response["Error"]["Code"] == "AccessDenied"
        assert s3.get_bucket_notification_configuration(Bucket="shared")["QueueConfigurations"][0]["Id"] == "to-hook1"
        # An empty configuration turns notifications off.
        s3.put_bucket_notification_configuration(Bucket="shared", NotificationConfiguration={})
        assert "QueueConfigurations" not in s3.get_bucket_notification_configuration(Bucket="shared")
    finally:
        srv.stop()


@pytest.mark.posix_only  # versioning: posix pools only
def test_tagging_and_delete_markers_are_announced_and_queue_metrics_are_exported(tmp_path, webhook):
    admin_port = free_port()
    srv = gateway(tmp_path, webhook, port_args=["--admin-address", f"127.0.0.1:{admin_port}"])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="versioned")
        s3.put_bucket_versioning(Bucket="versioned", VersioningConfiguration={"Status": "Enabled"})
        s3.put_bucket_notification_configuration(Bucket="versioned", NotificationConfiguration=rules(webhook))
        v1 = s3.put_object(Bucket="versioned", Key="k", Body=b"one")["VersionId"]
        s3.put_object_tagging(Bucket="versioned", Key="k", Tagging={"TagSet": [{"Key": "state", "Value": "done"}]})
        s3.delete_object_tagging(Bucket="versioned", Key="k")
        marker = s3.delete_object(Bucket="versioned", Key="k")["VersionId"]
        s3.delete_object(Bucket="versioned", Key="k", VersionId=v1)
        # Deleting the current version by id brings the one before back: the gateway's doing,
        # one ObjectRemoved:Delete, not a new ObjectCreated for the file the watcher sees.
        v2 = s3.put_object(Bucket="versioned", Key="v", Body=b"first")["VersionId"]
        v3 = s3.put_object(Bucket="versioned", Key="v", Body=b"second")["VersionId"]
        s3.delete_object(Bucket="versioned", Key="v", VersionId=v3)
        assert s3.get_object(Bucket="versioned", Key="v")["Body"].read() == b"first"
        write_posix(srv.root / "versioned" / "marker", b"m")  # announced after anything before it
        wait_until(lambda: "marker" in [summary(r)[1] for r in records_of(webhook.records())], timeout=20)
        later = [(r["eventName"], summary(r)[1], r["s3"]["object"].get("versionId")) for r in records_of(webhook.records())[5:]]
        assert later == [
            ("ObjectCreated:Put", "v", v2),
            ("ObjectCreated:Put", "v", v3),
            ("ObjectRemoved:Delete", "v", v3),
            ("ObjectCreated:Put", "marker", later[-1][2]),
        ], later
        got = records_of(webhook.wait_for(5, timeout=20))[:5]
        assert [r["eventName"] for r in got] == [
            "ObjectCreated:Put",
            "ObjectTagging:Put",
            "ObjectTagging:Delete",
            "ObjectRemoved:DeleteMarkerCreated",
            "ObjectRemoved:Delete",
        ]
        assert got[0]["s3"]["object"]["versionId"] == v1
        assert got[3]["s3"]["object"]["versionId"] == marker
        assert got[4]["s3"]["object"]["versionId"] == v1
        def metrics():
            return urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10).read().decode()

        assert "isthmus_notify_queued_total 9" in metrics(), metrics()
        # The bucket with rules is watched for files written outside the gateway (buckets that
        # got rules are looked for every 2 s).
        assert wait_until(lambda: re.search(r"^isthmus_notify_watches [1-9]", metrics(), re.M)), metrics()
        assert "isthmus_notify_watch_refused_total 0" in metrics()
        # Counted once the webhook's answer came back, just after it stored the record.
        delivered = f'isthmus_notify_delivered_total{{destination="{webhook.arn}"}} 9'
        assert wait_until(lambda: delivered in metrics()), metrics()
    finally:
        srv.stop()


def test_a_full_queue_refuses_writes_with_slowdown_when_the_operator_says_so(tmp_path, webhook_factory):
    hook = webhook_factory(fail_first=10**6)
    extra = 'notify_queue_max_bytes = "1MiB"\nnotify_queue_full = "refuse"\n'
    srv = gateway(tmp_path, hook, extra=extra)
    try:
        s3 = make_client(srv.endpoint)  # one attempt: a SlowDown is seen, not retried
        s3.create_bucket(Bucket="busy")
        s3.put_bucket_notification_configuration(Bucket="busy", NotificationConfiguration=rules(hook, events=["s3:ObjectCreated:*"]))
        refused = None
        for i in range(20_000):
            try:
                s3.put_object(Bucket="busy", Key=f"k{i:05}/" + "x" * 200 + "/" + "y" * 200, Body=b"")
            except ClientError as e:
                refused = (i, e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])
                break
        assert refused is not None and refused[1:] == ("SlowDown", 503), refused
        # Refused before anything was written: the key does not exist.
        with pytest.raises(ClientError):
            s3.head_object(Bucket="busy", Key=f"k{refused[0]:05}/" + "x" * 200 + "/" + "y" * 200)
        # Buckets without rules are not held back.
        s3.create_bucket(Bucket="quiet")
        s3.put_object(Bucket="quiet", Key="k", Body=b"fine")
    finally:
        srv.stop()


@pytest.mark.posix_only
def test_on_a_shared_file_system_a_scan_announces_posix_files_and_the_gateways_writes_once(tmp_path, webhook):
    # What a CephFS, NFS or Lustre root gets (the kernel there does not see other nodes'
    # writes), forced here on a local directory.
    srv = gateway(tmp_path, webhook, extra='notify_watch = "scan"\nnotify_scan_interval_seconds = 1\n')
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="shared-fs")
        s3.put_bucket_notification_configuration(Bucket="shared-fs", NotificationConfiguration=rules(webhook))
        root = srv.root / "shared-fs"
        # The bucket's first pass records what is there: write until a file is announced.
        written = {}
        for i in range(60):
            data = os.urandom(1000 + i)
            write_posix(root / "out" / f"f{i:03}.bin", data)
            written[f"out/f{i:03}.bin"] = data
            if announced_within(webhook, 0.5):
                break
        first = summary(records_of(webhook.wait_for(1, timeout=20))[0])
        key = first[1]
        assert first == ("ObjectCreated:Put", key, len(written[key]), md5(written[key]))
        s3.put_object(Bucket="shared-fs", Key="over-s3.txt", Body=b"once")
        write_posix(root / "marker", b"m")
        wait_until(lambda: any(summary(r)[1] == "marker" for r in records_of(webhook.records())), timeout=20)
        got = [summary(r) for r in records_of(webhook.records())]
        assert [g[1] for g in got].count("over-s3.txt") == 1, got
        keys = [g[1] for g in got if g[0] == "ObjectCreated:Put"]
        assert len(keys) == len(set(keys)), f"a file announced twice: {got}"
    finally:
        srv.stop()


def notification_thread_policies(pid):
    """{thread name: scheduling policy} of gateway `pid`'s notification threads (named
    isthmus-notify-* and notify-*; policy is field 41 of /proc/PID/task/TID/stat)."""
    policies = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        name = (task / "comm").read_text().strip()
        if name.startswith(("isthmus-notify", "notify-")):
            policies[f"{name}/{task.name}"] = int((task / "stat").read_text().rsplit(")", 1)[1].split()[41 - 3])
    return policies


@pytest.mark.posix_only
def test_directories_past_the_watch_limit_are_scanned_and_each_file_is_announced_once(tmp_path, webhook):
    # A bucket with more directories than inotify may watch (the kernel's
    # fs.inotify.max_user_watches, shared by every process of the user, or the operator's
    # notify_watch_max_directories, set to 1 here: the bucket's own directory) is scanned as
    # well: writes in its unwatched directories are announced within a scan interval.
    admin_port = free_port()
    extra = "notify_watch_max_directories = 1\nnotify_scan_interval_seconds = 1\n"
    srv = gateway(tmp_path, webhook, extra=extra, port_args=["--admin-address", f"127.0.0.1:{admin_port}"])

    def metrics():
        return urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10).read().decode()

    def keys_announced():
        return [summary(r)[1] for r in records_of(webhook.records())]

    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="many-dirs")
        s3.put_bucket_notification_configuration(Bucket="many-dirs", NotificationConfiguration=rules(webhook))
        root = srv.root / "many-dirs"
        # The bucket's directory is watched (buckets that got rules are looked for every 2 s).
        write_posix(root / "top.bin", b"top")
        wait_until(lambda: "top.bin" in keys_announced(), timeout=20)
        # A new directory is past the limit: refused, and its bucket is scanned from then on.
        (root / "deep").mkdir()
        assert wait_until(lambda: re.search(r"^isthmus_notify_watch_refused_total [1-9]", metrics(), re.M)), metrics()
        # The bucket's first scan records what is there: write until a file is announced.
        written = {}
        for i in range(60):
            data = os.urandom(500 + i)
            write_posix(root / "deep" / f"f{i:03}.bin", data)
            written[f"deep/f{i:03}.bin"] = data
            if any(k.startswith("deep/") for k in keys_announced()):
                break
            time.sleep(0.5)
        wait_until(lambda: any(k.startswith("deep/") for k in keys_announced()), timeout=20)
        deep = next(summary(r) for r in records_of(webhook.records()) if summary(r)[1].startswith("deep/"))
        assert deep == ("ObjectCreated:Put", deep[1], len(written[deep[1]]), md5(written[deep[1]]))
        # A file in the watched directory, seen by both the watcher and the scans: announced once.
        write_posix(root / "top2.bin", b"seen twice, announced once")
        wait_until(lambda: "top2.bin" in keys_announced(), timeout=20)
        time.sleep(2.5)  # two more scans
        got = keys_announced()
        assert got.count("top.bin") == 1 and got.count("top2.bin") == 1, got
        assert len(got) == len(set(got)), f"a file announced twice: {got}"
        # Every notification thread (delivery, flusher, watcher, scanner, the thread that hashes
        # watched files) is under SCHED_BATCH (3): none preempts a request thread.
        policies = notification_thread_policies(srv.proc.pid)
        names = {name.split("/")[0] for name in policies}
        assert {"notify-watch", "notify-scan", "notify-changes"} <= names, policies
        assert set(policies.values()) == {3}, policies
    finally:
        srv.stop()


@pytest.mark.posix_only
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates Unix users (CI runs as root)")
def test_a_file_the_buckets_owner_cannot_read_is_not_announced(webhook, unix):
    """identity = "posix": alice owns a bucket others may write; bob writes a file only he may
    read. The event would tell alice its size and ETag: it is not sent."""
    base, root = traversable_root("isthmus-notify-")
    config = base / "isthmus.toml"
    config.write_text(config_text() + webhook.toml)
    srv = Server(root, extra_args=["--config", str(config)])
    try:
        root.chmod(0o1777)  # like /tmp: anyone may make a bucket, only its owner removes it
        alice = make_client(srv.endpoint, "alice", SECRET)
        alice.create_bucket(Bucket="alice-data")
        alice.put_bucket_notification_configuration(Bucket="alice-data", NotificationConfiguration=rules(webhook))
        bucket = root / "alice-data"
        assert bucket.stat().st_uid == unix["alice"].pw_uid
        bucket.chmod(0o1777)  # a drop box: everyone may add files

        def as_bob(umask, name, data):
            script = f"umask {umask}; printf %s '{data}' > '{bucket / name}'"
            done = subprocess.run(["setpriv", f"--reuid={USERS['bob']}", f"--regid={USERS['bob']}", "--init-groups", "sh", "-c", script])
            assert done.returncode == 0

        as_bob("077", "bobs-secret.txt", "only bob")
        assert (bucket / "bobs-secret.txt").stat().st_mode & 0o777 == 0o600
        as_bob("022", "bobs-report.txt", "for alice")
        got = [summary(r) for r in records_of(webhook.wait_for(1, timeout=20))]
        assert got == [("ObjectCreated:Put", "bobs-report.txt", 9, md5(b"for alice"))]
        # The gateway went on: alice's own PUT is announced after it.
        alice.put_object(Bucket="alice-data", Key="mine.txt", Body=b"alice")
        got = [summary(r)[1] for r in records_of(webhook.wait_for(2, timeout=20))]
        assert got == ["bobs-report.txt", "mine.txt"]
    finally:
        srv.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="maps a user to uid 0, the uid this test runs as")
def test_writes_through_the_local_socket_are_announced_with_their_user(tmp_path, webhook):
    import isthmus

    extra = (
        'allow_root = true\n[[users]]\naccess_key = "LOCAL"\nsecret_key = "local-secret-0123456789"\n'
        'display_name = "local"\nuid = 0\ngid = 0\n'
    )
    socket = tmp_path / "isthmus.sock"
    srv = gateway(tmp_path, webhook, extra=extra, port_args=["--local-socket", str(socket)])
    try:
        store = isthmus.connect(f"unix://{socket}")  # this process's uid is LOCAL's
        store.create_bucket("node-local")
        local = make_client(srv.endpoint, "LOCAL", "local-secret-0123456789")
        local.put_bucket_notification_configuration(Bucket="node-local", NotificationConfiguration=rules(webhook))
        store.put_object("node-local", "from-the-node.txt", b"socket")
        store.delete_object("node-local", "from-the-node.txt")
        got = records_of(webhook.wait_for(2, timeout=20))
        assert [summary(r) for r in got] == [
            ("ObjectCreated:Put", "from-the-node.txt", 6, md5(b"socket")),
            ("ObjectRemoved:Delete", "from-the-node.txt", None, None),
        ]
        assert {r["userIdentity"]["principalId"] for r in got} == {"LOCAL"}
        assert got[0]["s3"]["bucket"]["ownerIdentity"]["principalId"] == "LOCAL"
    finally:
        srv.stop()


def test_a_second_gateway_with_destinations_on_the_same_root_refuses_to_start(tmp_path, webhook):
    first = gateway(tmp_path, webhook)
    try:
        with pytest.raises(RuntimeError) as refused:
            gateway(tmp_path, webhook, root=first.root)
        assert "one gateway per data root sends them" in str(refused.value), refused.value
        # The first one goes on.
        make_client(first.endpoint).create_bucket(Bucket="still-served")
    finally:
        first.stop()


@pytest.mark.posix_only
def test_a_rename_into_place_is_a_create_and_an_unlink_a_delete(tmp_path, webhook):
    srv = gateway(tmp_path, webhook)
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="moves")
        s3.put_bucket_notification_configuration(Bucket="moves", NotificationConfiguration=rules(webhook))
        root = srv.root / "moves"
        # What careful writers do: write a temporary name outside the rule's interest, rename.
        write_posix(root / "tmp" / "part.partial", b"complete data")
        os.makedirs(root / "final", exist_ok=True)
        os.rename(root / "tmp" / "part.partial", root / "final" / "part.dat")
        created = ("ObjectCreated:Put", "final/part.dat", 13, md5(b"complete data"))
        wait_until(lambda: created in [summary(r) for r in records_of(webhook.records())], timeout=20)
        assert created in [summary(r) for r in records_of(webhook.records())], webhook.records()
        os.unlink(root / "final" / "part.dat")
        wait_until(lambda: ("ObjectRemoved:Delete", "final/part.dat", None, None) in [summary(r) for r in records_of(webhook.records())], timeout=20)
        got = [summary(r) for r in records_of(webhook.records())]
        assert got[-1] == ("ObjectRemoved:Delete", "final/part.dat", None, None), got
        # Every announced key was announced once per change: no create twice.
        creates = [g[1] for g in got if g[0] == "ObjectCreated:Put"]
        assert len(creates) == len(set(creates)), got
    finally:
        srv.stop()


@pytest.mark.posix_only
def test_every_kind_of_gateway_write_into_a_watched_bucket_is_announced_once(tmp_path, webhook):
    """The gateway remembers none of its new keys linked into a directory the watcher already
    watches (the watcher sees only a name appear, which it does not announce); a PUT that
    makes a directory, an overwrite (a rename over the key) and a write to a versioned bucket
    (its current file moved aside) show the watcher more, and are remembered first; so is a new
    key linked into a directory a PUT, a copy or a multipart upload made a moment before (the
    watcher lists a new directory, and finds it there). Each is announced once, by the
    gateway, never again by the watcher as someone's POSIX write. A new key overwritten at
    once was announced twice before this test was written."""
    srv = gateway(tmp_path, webhook)
    try:
        s3 = make_client(srv.endpoint)
        for bucket in ("plain", "kept"):
            s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket="kept", VersioningConfiguration={"Status": "Enabled"})
        for bucket in ("plain", "kept"):
            s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=rules(webhook, events=["s3:ObjectCreated:*"]))
        # The watcher looks for buckets that got rules every 2 s: a POSIX file announced
        # there says it watches it now.
        for bucket in ("plain", "kept"):
            write_posix(srv.root / bucket / "ready", b"r")
            wait_until(lambda: ("ObjectCreated:Put", "ready", 1, md5(b"r")) in [summary(r) for r in records_of(webhook.records()) if r["s3"]["bucket"]["name"] == bucket], timeout=20)
        expected = []

        def put(bucket, key, body):
            etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"].strip('"')
            expected.append((bucket, "ObjectCreated:Put", key, len(body), etag))

        for bucket in ("plain", "kept"):
            put(bucket, "dir/new/first", b"a new directory")
            for i in range(20):
                put(bucket, f"dir/new/k{i:02}", b"into a directory that exists %d" % i)
            put(bucket, "dir/new/first", b"an overwrite")
            put(bucket, "top", b"at the top")
            put(bucket, "top", b"at the top again")
            # A copy and a multipart upload that make directories, and a PUT into each at once.
            copied = s3.copy_object(Bucket=bucket, Key="copied/here/c", CopySource={"Bucket": bucket, "Key": "top"})
            expected.append((bucket, "ObjectCreated:Copy", "copied/here/c", 16, copied["CopyObjectResult"]["ETag"].strip('"')))
            put(bucket, "copied/here/k", b"just after a copy made the directory")
            mpu = s3.create_multipart_upload(Bucket=bucket, Key="assembled/here/big")
            part = s3.upload_part(Bucket=bucket, Key="assembled/here/big", UploadId=mpu["UploadId"], PartNumber=1, Body=b"one part")
            done = s3.complete_multipart_upload(
                Bucket=bucket, Key="assembled/here/big", UploadId=mpu["UploadId"], MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
            )
            expected.append((bucket, "ObjectCreated:CompleteMultipartUpload", "assembled/here/big", 8, done["ETag"].strip('"')))
            put(bucket, "assembled/here/k", b"just after an upload made the directory")
        for bucket in ("plain", "kept"):
            write_posix(srv.root / bucket / "marker", b"m")
            expected.append((bucket, "ObjectCreated:Put", "marker", 1, md5(b"m")))
        # Once both markers are announced, whatever the watcher saw before them has been too
        # (one watcher thread, in order); a second announcement would come after the settle.
        wait_until(lambda: len(records_of(webhook.records())) >= len(expected) + 2, timeout=30)
        time.sleep(1.0)
        got = [r for r in records_of(webhook.records()) if urllib.parse.unquote_plus(r["s3"]["object"]["key"]) != "ready"]
        summaries = [(r["s3"]["bucket"]["name"], *summary(r)) for r in got]
        who = [(s, r["userIdentity"]["principalId"], r["s3"]["object"]["sequencer"]) for s, r in zip(summaries, got)]
        unexpected = [w for w in who if summaries.count(w[0]) > 1 or w[0] not in expected]
        assert sorted(summaries) == sorted(expected), (unexpected, [e for e in expected if e not in summaries])
        posix = [s for s, r in zip(summaries, got) if r["userIdentity"]["principalId"] == "posix"]
        assert sorted(posix) == [("kept", "ObjectCreated:Put", "marker", 1, md5(b"m")), ("plain", "ObjectCreated:Put", "marker", 1, md5(b"m"))], posix
    finally:
        srv.stop()


@pytest.mark.posix_only
def test_four_clients_making_directories_as_they_write_are_each_announced_once(tmp_path, webhook):
    """At the scale of a few clients writing into new directories: each PUT that makes a
    directory is followed at once by one into it, beside keys written twice. One write in
    4,800 was announced a second time while the memory of young directories forgot a
    directory as soon as the watcher had read past it, though a write that began before still
    asked about it."""
    srv = gateway(tmp_path, webhook)
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="scale")
        s3.put_bucket_notification_configuration(Bucket="scale", NotificationConfiguration=rules(webhook, events=["s3:ObjectCreated:*"]))
        write_posix(srv.root / "scale" / "ready", b"r")
        wait_until(lambda: len(records_of(webhook.records())) >= 1, timeout=20)
        written = []

        def client(t):
            c = make_client(srv.endpoint)
            for i in range(300):
                for key in (f"t{t}/d{i}/k", f"t{t}/d{i}/k2", f"t{t}/flat{i}", f"t{t}/flat{i}"):
                    c.put_object(Bucket="scale", Key=key, Body=b"x" * (i % 7 + 1))
                    written.append(key)

        threads = [threading.Thread(target=client, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(written) == 4800
        write_posix(srv.root / "scale" / "marker", b"m")
        wait_until(lambda: any(r["s3"]["object"]["key"] == "marker" for r in records_of(webhook.records())), timeout=60)
        time.sleep(1.0)
        got = records_of(webhook.records())
        posix = sorted(r["s3"]["object"]["key"] for r in got if r["userIdentity"]["principalId"] == "posix")
        assert posix == ["marker", "ready"], posix
        assert len(got) == len(written) + 2
    finally:
        srv.stop()
