"""Hard quotas per bucket and per user (bytes and objects): a write that cannot fit is refused
(403 QuotaExceeded) before its data is written and leaves nothing behind; concurrent writers
racing for the last bytes never overshoot (each reserves its declared size first); what POSIX
tools add is counted at the next rescan; `isthmus admin usage` reports usage and limits."""

import json
import subprocess
import threading
import time

import pytest
from botocore.exceptions import ClientError

from conftest import Server, binary, make_client

SECRET = "secret-key-0123456789"


def start(tmp_path, quotas, rescan=300):
    config = tmp_path / "isthmus.toml"
    config.write_text(
        f'quota_rescan_seconds = {rescan}\n[[users]]\naccess_key = "alice"\nsecret_key = "{SECRET}"\n' + quotas
    )
    root = tmp_path / "data"
    return Server(root, extra_args=["--config", str(config)]), root, config


def code_of(fn):
    try:
        fn()
    except ClientError as e:
        return e.response["Error"]["Code"]
    return "OK"


def visible_files(path):
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file() and ".isthmus" not in p.parts)


def test_bucket_quota_holds_at_the_exact_boundary(tmp_path):
    srv, root, _ = start(tmp_path, '[[quotas]]\nbucket = "quota"\nmax_bytes = 1000\nmax_objects = 3\n')
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="quota")
        s3.put_object(Bucket="quota", Key="a", Body=b"a" * 600)
        s3.put_object(Bucket="quota", Key="b", Body=b"b" * 400)  # exactly 1000
        with pytest.raises(ClientError) as err:
            s3.put_object(Bucket="quota", Key="c", Body=b"c")
        assert err.value.response["Error"]["Code"] == "QuotaExceeded"
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert "1000 bytes" in err.value.response["Error"]["Message"]
        assert visible_files(root / "quota") == ["a", "b"], "nothing of the refused write is left"
        # Replacing with a smaller object frees room; replacing with a larger one needs it.
        s3.put_object(Bucket="quota", Key="a", Body=b"a" * 500)
        assert code_of(lambda: s3.put_object(Bucket="quota", Key="a", Body=b"a" * 700)) == "QuotaExceeded"
        s3.put_object(Bucket="quota", Key="c", Body=b"c" * 100)  # 1000 again, 3 objects
        assert code_of(lambda: s3.put_object(Bucket="quota", Key="d", Body=b"")) == "QuotaExceeded", "object count"
        assert code_of(lambda: s3.copy_object(Bucket="quota", Key="e", CopySource="quota/c")) == "QuotaExceeded"
        s3.delete_object(Bucket="quota", Key="c")
        s3.put_object(Bucket="quota", Key="c", Body=b"c" * 100)  # the delete freed its bytes and its slot
        assert visible_files(root / "quota") == ["a", "b", "c"]
    finally:
        srv.stop()


def test_deletes_free_room_and_copies_count(tmp_path):
    srv, _, _ = start(tmp_path, '[[quotas]]\nbucket = "quota"\nmax_bytes = 1000\n')
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="quota")
        s3.put_object(Bucket="quota", Key="a", Body=b"a" * 600)
        assert code_of(lambda: s3.copy_object(Bucket="quota", Key="b", CopySource="quota/a")) == "QuotaExceeded"
        s3.delete_object(Bucket="quota", Key="a")
        s3.put_object(Bucket="quota", Key="b", Body=b"b" * 1000)
    finally:
        srv.stop()


def test_multipart_parts_and_completion_respect_the_quota(tmp_path):
    mib = 1 << 20
    srv, root, _ = start(tmp_path, f'[[quotas]]\nbucket = "quota"\nmax_bytes = {12 * mib}\n')
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="quota")
        s3.put_object(Bucket="quota", Key="base", Body=b"x" * (4 * mib))
        upload = s3.create_multipart_upload(Bucket="quota", Key="big")["UploadId"]
        parts = []
        for n in (1, 2):
            etag = s3.upload_part(Bucket="quota", Key="big", UploadId=upload, PartNumber=n, Body=b"p" * (5 * mib))["ETag"]
            parts.append({"PartNumber": n, "ETag": etag})
        # A part larger than all the room left is refused outright.
        assert code_of(lambda: s3.upload_part(Bucket="quota", Key="big", UploadId=upload, PartNumber=3, Body=b"p" * (9 * mib))) == "QuotaExceeded"
        # 4 + 10 > 12: the completion is refused and the object never appears.
        assert code_of(lambda: s3.complete_multipart_upload(Bucket="quota", Key="big", UploadId=upload, MultipartUpload={"Parts": parts})) == "QuotaExceeded"
        assert code_of(lambda: s3.head_object(Bucket="quota", Key="big")) == "404"
        # With one part it fits (4 + 5 <= 12).
        s3.complete_multipart_upload(Bucket="quota", Key="big", UploadId=upload, MultipartUpload={"Parts": parts[:1]})
        assert s3.head_object(Bucket="quota", Key="big")["ContentLength"] == 5 * mib
        assert visible_files(root / "quota") == ["base", "big"]
    finally:
        srv.stop()


def test_concurrent_writers_racing_for_the_last_bytes_never_overshoot(tmp_path):
    size, limit = 256 << 10, 10 * (256 << 10)
    srv, root, _ = start(tmp_path, f'[[quotas]]\nbucket = "quota"\nmax_bytes = {limit}\n')
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="quota")
        s3.put_object(Bucket="quota", Key="seed", Body=b"s" * (size // 2))
        results = []
        lock = threading.Lock()

        def writer(i):
            client = make_client(srv.endpoint)
            outcome = code_of(lambda: client.put_object(Bucket="quota", Key=f"k{i:02d}", Body=bytes([i]) * size))
            with lock:
                results.append(outcome)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results.count("OK") == 9, results  # 9.5 slots after the seed: 9 fit
        assert set(results) == {"OK", "QuotaExceeded"}
        stored = sum(p.stat().st_size for p in (root / "quota").iterdir() if p.is_file())
        assert stored <= limit
        assert len(visible_files(root / "quota")) == 10
    finally:
        srv.stop()


def test_posix_growth_is_counted_at_the_next_rescan(tmp_path):
    srv, root, _ = start(tmp_path, '[[quotas]]\nbucket = "quota"\nmax_bytes = 1000\n', rescan=1)
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="quota")
        s3.put_object(Bucket="quota", Key="a", Body=b"a" * 100)
        (root / "quota" / "from-posix.dat").write_bytes(b"p" * 800)
        deadline = time.time() + 10
        while code_of(lambda: s3.put_object(Bucket="quota", Key="b", Body=b"b" * 200)) == "OK":
            s3.delete_object(Bucket="quota", Key="b")
            assert time.time() < deadline, "the POSIX file was never counted"
            time.sleep(0.3)
        (root / "quota" / "from-posix.dat").unlink()
        deadline = time.time() + 10
        while code_of(lambda: s3.put_object(Bucket="quota", Key="b", Body=b"b" * 200)) != "OK":
            assert time.time() < deadline, "the removal was never counted"
            time.sleep(0.3)
    finally:
        srv.stop()


def test_user_quota_spans_the_users_buckets_and_admin_usage_reports_it(tmp_path):
    srv, root, config = start(tmp_path, '[[quotas]]\nuser = "alice"\nmax_bytes = 1000\nmax_objects = 10\n[[quotas]]\nbucket = "shared"\nmax_objects = 5\n')
    try:
        alice = make_client(srv.endpoint, "alice", SECRET)
        alice.create_bucket(Bucket="alice-1")
        alice.create_bucket(Bucket="alice-2")
        alice.put_object(Bucket="alice-1", Key="a", Body=b"a" * 700)
        assert code_of(lambda: alice.put_object(Bucket="alice-2", Key="b", Body=b"b" * 400)) == "QuotaExceeded"
        alice.put_object(Bucket="alice-2", Key="b", Body=b"b" * 300)
        root_client = make_client(srv.endpoint)
        root_client.create_bucket(Bucket="shared")
        root_client.put_object(Bucket="shared", Key="x", Body=b"x" * 5000)  # root has no quota
    finally:
        srv.stop()
    out = subprocess.run([str(binary()), "admin", "usage", "--root", str(root), "--config", str(config), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = {(r["kind"], r["name"]): r for r in map(json.loads, out.stdout.splitlines())}
    assert rows[("user", "alice")]["bytes"] == 1000 and rows[("user", "alice")]["max_bytes"] == 1000
    assert rows[("user", "alice")]["objects"] == 2
    assert rows[("bucket", "alice-1")]["owner"] == "alice"
    assert rows[("bucket", "shared")]["max_objects"] == 5 and rows[("bucket", "shared")]["bytes"] == 5000
    table = subprocess.run([str(binary()), "admin", "usage", "--root", str(root), "--config", str(config)],
                           capture_output=True, text=True, timeout=60)
    assert "user alice" in table.stdout and "100.0%" in table.stdout


def test_bad_quota_configuration_is_refused_with_the_fix(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[[quotas]]\nbucket = "quota"\n')
    out = subprocess.run([str(binary()), "serve", "--root", str(tmp_path / "d"), "--config", str(config)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "max_bytes or max_objects" in out.stderr
