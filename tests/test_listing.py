"""ListObjects v1 and v2: order, paging, delimiters, encoding."""

from pathlib import Path

import pytest
from botocore.exceptions import ClientError

KEYS = ["a-c", "a/b/c-d", "a/b/c/d", "a0", "b", "a/b-", "dir/é/x", "Z", "a/a", "sp ace+plus"]


@pytest.fixture
def filled(s3, bucket):
    for k in KEYS:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    return bucket


def all_keys_v2(s3, bucket, **kwargs):
    keys, prefixes = [], []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, **kwargs):
        keys += [o["Key"] for o in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    return keys, prefixes


def test_full_listing_is_in_utf8_byte_order(s3, filled):
    expected = sorted(KEYS, key=lambda k: k.encode())
    for page_size in (1, 3, 1000):
        keys, _ = all_keys_v2(s3, filled, PaginationConfig={"PageSize": page_size})
        assert keys == expected, page_size


def test_v1_paging_with_markers(s3, filled):
    expected = sorted(KEYS, key=lambda k: k.encode())
    keys = []
    for page in s3.get_paginator("list_objects").paginate(Bucket=filled, PaginationConfig={"PageSize": 2}):
        keys += [o["Key"] for o in page.get("Contents", [])]
    assert keys == expected
    first = s3.list_objects(Bucket=filled, MaxKeys=2)
    assert first["IsTruncated"] is True and len(first["Contents"]) == 2


def test_delimiter_and_prefix(s3, filled):
    keys, prefixes = all_keys_v2(s3, filled, Delimiter="/", PaginationConfig={"PageSize": 2})
    assert keys == ["Z", "a-c", "a0", "b", "sp ace+plus"]
    assert prefixes == ["a/", "dir/"]
    keys, prefixes = all_keys_v2(s3, filled, Prefix="a/", Delimiter="/")
    assert keys == ["a/a", "a/b-"]
    assert prefixes == ["a/b/"]
    keys, _ = all_keys_v2(s3, filled, Prefix="a/b")
    assert keys == ["a/b-", "a/b/c-d", "a/b/c/d"]
    keys, prefixes = all_keys_v2(s3, filled, Delimiter="-")
    assert prefixes == ["a-", "a/b-", "a/b/c-"]


def test_start_after_and_max_keys(s3, filled):
    r = s3.list_objects_v2(Bucket=filled, StartAfter="a0", MaxKeys=2)
    assert [o["Key"] for o in r["Contents"]] == ["b", "dir/é/x"]
    assert r["KeyCount"] == 2 and r["IsTruncated"] is True
    r = s3.list_objects_v2(Bucket=filled, MaxKeys=0)
    assert r["KeyCount"] == 0
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=filled, ContinuationToken="***garbage***")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"


def test_encoding_type_url(s3, filled):
    # Asked for explicitly, the keys come back percent-encoded (botocore decodes only the
    # encoding it adds itself, which the other listing tests exercise).
    keys, _ = all_keys_v2(s3, filled, EncodingType="url")
    assert "sp%20ace%2Bplus" in keys and "dir/%C3%A9/x" in keys
    r = s3.list_objects(Bucket=filled, EncodingType="url", Prefix="sp")
    assert [o["Key"] for o in r["Contents"]] == ["sp%20ace%2Bplus"]
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=filled, EncodingType="base64")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"


DELIMITER_CASES = [
    # (keys, list arguments, keys listed, common prefixes), as the S3 conformance suite lists them
    (['bar', 'baz', 'cab', 'foo'], dict(Delimiter='a'), ['foo'], ['ba', 'ca']),
    (['b%ar', 'b%az', 'c%ab', 'foo'], dict(Delimiter='%'), ['foo'], ['b%', 'c%']),
    (['b ar', 'b az', 'c ab', 'foo'], dict(Delimiter=' '), ['foo'], ['b ', 'c ']),
    (['b.ar', 'b.az', 'c.ab', 'foo'], dict(Delimiter='.'), ['foo'], ['b.', 'c.']),
    (['bar', 'baz', 'cab', 'foo'], dict(Delimiter='\x0a'), ['bar', 'baz', 'cab', 'foo'], []),
    (['bar', 'baz', 'cab', 'foo'], dict(Delimiter='/'), ['bar', 'baz', 'cab', 'foo'], []),
    (['_obj1_', '_under1/bar', '_under1/baz', '_under2/bar', '_under2/baz'], dict(Delimiter='/'), ['_obj1_'], ['_under1/', '_under2/']),
    (['asdf', 'boo/bar', 'boo/baz/xyzzy', 'cquux/thud', 'cquux/bla'], dict(Delimiter='/', Prefix='boo/'), ['boo/bar'], ['boo/baz/']),
    (['bar', 'baz', 'cab', 'foo'], dict(Delimiter='a', Prefix='ba'), ['bar', 'baz'], []),
    (['b/a/c', 'b/a/g', 'b/a/r', 'g'], dict(Delimiter='d', Prefix='b/'), ['b/a/c', 'b/a/g', 'b/a/r'], []),
    (['b/a/c', 'b/a/g', 'b/a/r', 'g'], dict(Delimiter='a', Prefix='b/'), [], ['b/a']),
    (['_bla/1', '_bla/2', '_bla/3', '_bla/4', 'abcd'], dict(Prefix='_bla/'), ['_bla/1', '_bla/2', '_bla/3', '_bla/4'], []),
    (['foo/bar', 'foo/baz', 'quux'], dict(Prefix='\x0a'), [], []),
    (['bar', 'baz', 'cab', 'foo'], dict(Delimiter='a', Prefix='ba', MaxKeys=1), ['bar'], []),
    (['foo+1/bar', 'foo/bar/xyzzy', 'quux ab/thud', 'asdf+b'], dict(), ['asdf+b', 'foo+1/bar', 'foo/bar/xyzzy', 'quux ab/thud'], []),
]


def test_delimiters_that_are_not_a_slash_and_keys_no_listing_skips(s3):
    """Delimiters of other characters (a letter, %, space, dot, a newline no key holds),
    prefixes that are not directories (`_bla/`, a newline), and keys with '+' and spaces: each
    case in a bucket of its own, listed by v1 and v2 alike."""
    for i, (keys, arguments, keys_listed, prefixes) in enumerate(DELIMITER_CASES):
        bucket = f"delimiters-{i}"
        s3.create_bucket(Bucket=bucket)
        for key in keys:
            s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
        for listing in (s3.list_objects, s3.list_objects_v2):
            page = listing(Bucket=bucket, **arguments)
            got = ([o["Key"] for o in page.get("Contents", [])], [p["Prefix"] for p in page.get("CommonPrefixes", [])])
            assert got == (keys_listed, prefixes), (keys, arguments, listing.__name__)


def test_listing_returns_sizes_and_etags(s3, filled):
    r = s3.list_objects_v2(Bucket=filled, Prefix="b")
    (obj,) = r["Contents"]
    assert obj["Size"] == 1
    assert obj["ETag"] == '"92eb5ffee6ae2fec3ad71c777531578f"'
    assert obj["StorageClass"] == "STANDARD"


@pytest.mark.posix_only
def test_a_listing_right_after_a_change_shows_it_on_tmpfs(tmp_path):
    """tmpfs keeps directory timestamps to a clock tick: changes within one tick leave the
    directory's version as it was, so a listing kept from between them was served stale (a
    deleted key still listed, a new one missing). Listings are kept only once a directory has
    been still for longer than any timestamp granule."""
    import shutil
    import tempfile

    from conftest import Server, make_client

    if not Path("/dev/shm").is_dir():
        pytest.skip("no tmpfs at /dev/shm")
    root = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="isthmus-listing-"))
    server = Server(root / "data")
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="tick")
        names = [f"k{i:03}" for i in range(50)]
        for name in names:
            s3.put_object(Bucket="tick", Key=name, Body=b"x")
        for name in names:
            listed = [o["Key"] for o in s3.list_objects_v2(Bucket="tick").get("Contents", [])]
            assert name in listed
            s3.delete_object(Bucket="tick", Key=name)
            listed = [o["Key"] for o in s3.list_objects_v2(Bucket="tick").get("Contents", [])]
            assert name not in listed, f"{name} deleted but still listed"
            (root / "data" / "tick" / f"posix-{name}").write_bytes(b"y")
            listed = [o["Key"] for o in s3.list_objects_v2(Bucket="tick").get("Contents", [])]
            assert f"posix-{name}" in listed, f"posix-{name} written but not listed"
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
