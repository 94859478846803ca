"""An erasure-coded pool's bucket namespace is decided by its drives together, through the real
gateway: the first drive losing every bucket directory (its identity kept, as after an fsck that
lost directories or an operator's mistake) hides no bucket, setting or object, and a bucket left
on one drive by a delete it missed does not come back."""

import json
import shutil

import botocore.exceptions

from conftest import make_client
from test_erasure_pool import BUCKET, body, check_body, pool, write_pools  # noqa: F401 (fixture)

SIZES = [0, 100, 20_000, 300_000]


def fill(s3):
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
    s3.put_bucket_tagging(Bucket=BUCKET, Tagging={"TagSet": [{"Key": "project", "Value": "eqsim"}]})
    written = {}
    for i, size in enumerate(SIZES):
        for prefix in ["", "run/step/"]:
            key = f"{prefix}obj{i}"
            s3.put_object(Bucket=BUCKET, Key=key, Body=body(key, 1, size))
            written[key] = size
    return written


def check_whole(s3, written):
    s3.head_bucket(Bucket=BUCKET)
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == [BUCKET]
    assert s3.get_bucket_tagging(Bucket=BUCKET)["TagSet"] == [{"Key": "project", "Value": "eqsim"}]
    for page_size in [1, 3, 1000]:
        keys = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, PaginationConfig={"PageSize": page_size}):
            keys += [o["Key"] for o in page.get("Contents", [])]
        assert keys == sorted(written), page_size
    prefixes = s3.list_objects_v2(Bucket=BUCKET, Delimiter="/")["CommonPrefixes"]
    assert [p["Prefix"] for p in prefixes] == ["run/"]
    for key, size in written.items():
        data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert len(data) == size
        if size:
            check_body(key, data)


def test_the_first_drive_losing_every_bucket_directory_hides_nothing(pool):
    root, drives, start = pool
    srv = start()
    s3 = make_client(srv.endpoint)
    written = fill(s3)
    srv.stop()
    # The first drive keeps its identity (.isthmus) and loses every bucket directory.
    for entry in drives[0].iterdir():
        if entry.name != ".isthmus":
            shutil.rmtree(entry)
    srv = start()
    s3 = make_client(srv.endpoint)
    check_whole(s3, written)
    # The name stays taken, and writes go on.
    try:
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "ec"})
        raise AssertionError("the bucket was created twice")
    except botocore.exceptions.ClientError as err:
        assert err.response["Error"]["Code"] in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists")
    s3.put_object(Bucket=BUCKET, Key="after", Body=body("after", 1, 5000))
    written["after"] = 5000
    # The drive got the bucket back (its objects' records come back with `isthmus heal`), and
    # with a second drive damaged as well (two: the pool's parity) all still reads.
    assert (drives[0] / BUCKET).is_dir()
    srv.stop()
    shutil.rmtree(drives[1] / BUCKET)
    srv = start()
    check_whole(make_client(srv.endpoint), written)


def test_a_bucket_a_drive_kept_after_its_delete_stays_deleted(pool):
    root, drives, start = pool
    srv = start()
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket="old", CreateBucketConfiguration={"LocationConstraint": "ec"})
    s3.put_object(Bucket="old", Key="stale", Body=b"from before")
    srv.stop()
    # The first drive (the one earlier versions took the namespace from) misses the delete.
    away = drives[0].with_name("away")
    drives[0].rename(away)
    srv = start()
    s3 = make_client(srv.endpoint)
    s3.delete_object(Bucket="old", Key="stale")
    s3.delete_bucket(Bucket="old")
    srv.stop()
    away.rename(drives[0])
    srv = start()
    s3 = make_client(srv.endpoint)
    assert s3.list_buckets()["Buckets"] == []
    try:
        s3.head_bucket(Bucket="old")
        raise AssertionError("a deleted bucket came back")
    except botocore.exceptions.ClientError as err:
        assert err.response["Error"]["Code"] in ("404", "NoSuchBucket")
    # The name is free again, and the new bucket holds nothing of the old one.
    s3.create_bucket(Bucket="old", CreateBucketConfiguration={"LocationConstraint": "ec"})
    assert s3.list_objects_v2(Bucket="old").get("KeyCount") == 0
    try:
        s3.get_object(Bucket="old", Key="stale")
        raise AssertionError("an object of the deleted bucket came back")
    except botocore.exceptions.ClientError as err:
        assert err.response["Error"]["Code"] == "NoSuchKey"
    record = json.loads((drives[0] / ".isthmus" / "ec" / "buckets" / "old.json").read_text())
    assert record["settings"]["tags"] == {}
