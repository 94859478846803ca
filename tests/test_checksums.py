"""Multipart checksums as the S3 API reference specifies them, through boto3: the algorithm and
type of CreateMultipartUpload (CRC32, CRC32C, CRC64NVME, SHA1, SHA256 x FULL_OBJECT, COMPOSITE,
the combinations S3 refuses), part checksums in UploadPart, ListParts and
CompleteMultipartUpload, the object's checksum a Complete declares, and what HeadObject,
GetObject (also with partNumber), GetObjectAttributes and the listings report, each compared
with values computed here. Then what boto3 sends by default (CRC32), low-level and through upload_file."""

import base64
import hashlib
import os
import zlib

import pytest
from awscrt import checksums as crt
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from conftest import make_client

MiB = 1024 * 1024
ALGORITHMS = ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"]
TYPES = ["FULL_OBJECT", "COMPOSITE"]
SUPPORTED = {
    "FULL_OBJECT": {"CRC32", "CRC32C", "CRC64NVME"},
    "COMPOSITE": {"CRC32", "CRC32C", "SHA1", "SHA256"},
}
DEFAULT_TYPE = {"CRC32": "COMPOSITE", "CRC32C": "COMPOSITE", "CRC64NVME": "FULL_OBJECT", "SHA1": "COMPOSITE", "SHA256": "COMPOSITE"}
COMBINATIONS = [(a, t) for a in ALGORITHMS for t in TYPES]
VALID = [(a, t) for a, t in COMBINATIONS if a in SUPPORTED[t]]
# Every part but the last is at least 5 MiB (S3's minimum); one first part serves every test.
FIRST = os.urandom(5 * MiB)
LAST = os.urandom(1000)


def digest(algorithm, data):
    if algorithm == "CRC32":
        return zlib.crc32(data).to_bytes(4, "big")
    if algorithm == "CRC32C":
        return crt.crc32c(data).to_bytes(4, "big")
    if algorithm == "CRC64NVME":
        return crt.crc64nvme(data).to_bytes(8, "big")
    return hashlib.new(algorithm.lower(), data).digest()


def b64(raw):
    return base64.b64encode(raw).decode()


def checksum(algorithm, data):
    return b64(digest(algorithm, data))


def object_checksum(algorithm, kind, parts):
    """What S3 reports for a multipart object: the checksum of the whole object (FULL_OBJECT),
    or the checksum of the parts' concatenated digests with their count (COMPOSITE)."""
    if kind == "FULL_OBJECT":
        return checksum(algorithm, b"".join(parts))
    return f"{checksum(algorithm, b''.join(digest(algorithm, p) for p in parts))}-{len(parts)}"


def error(excinfo):
    return excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"], excinfo.value.response["Error"]["Code"]


def message(excinfo):
    return excinfo.value.response["Error"]["Message"]


def absent(s3, bucket, key):
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key=key)
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def upload(s3, bucket, key, algorithm, kind, parts, **create):
    """Creates an upload with `algorithm` and `kind` and uploads `parts` with their checksums;
    the upload id and the parts as CompleteMultipartUpload lists them."""
    uid = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm=algorithm, ChecksumType=kind, **create)["UploadId"]
    listed = []
    for n, data in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=n, Body=data, ChecksumAlgorithm=algorithm)
        assert r[f"Checksum{algorithm}"] == checksum(algorithm, data)
        listed.append({"PartNumber": n, "ETag": r["ETag"], f"Checksum{algorithm}": r[f"Checksum{algorithm}"]})
    return uid, listed


@pytest.mark.parametrize("algorithm,kind", COMBINATIONS)
def test_create_takes_the_combinations_s3_supports(s3, bucket, algorithm, kind):
    if (algorithm, kind) in VALID:
        created = s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm=algorithm, ChecksumType=kind)
        assert (created["ChecksumAlgorithm"], created["ChecksumType"]) == (algorithm, kind)
        uploads = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
        assert [(u["ChecksumAlgorithm"], u["ChecksumType"]) for u in uploads] == [(algorithm, kind)]
        return
    with pytest.raises(ClientError) as e:
        s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm=algorithm, ChecksumType=kind)
    assert error(e) == (400, "InvalidRequest")
    assert message(e) == f"The {kind} checksum type cannot be used with the {algorithm.lower()} checksum algorithm."
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_an_algorithm_alone_gets_its_default_type(s3, bucket, algorithm):
    created = s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm=algorithm)
    assert (created["ChecksumAlgorithm"], created["ChecksumType"]) == (algorithm, DEFAULT_TYPE[algorithm])
    listed = s3.list_parts(Bucket=bucket, Key="k", UploadId=created["UploadId"])
    assert (listed["ChecksumAlgorithm"], listed["ChecksumType"]) == (algorithm, DEFAULT_TYPE[algorithm])


def test_a_type_needs_a_known_algorithm_and_a_known_name(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumType="COMPOSITE")
    assert error(e) == (400, "InvalidRequest")
    assert "x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header" in message(e)
    with pytest.raises(ClientError) as e:
        s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm="CRC32", ChecksumType="WHOLE")
    assert error(e) == (400, "InvalidRequest")
    with pytest.raises(ClientError) as e:
        s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm="MD4")
    assert error(e) == (400, "InvalidRequest")
    plain = s3.create_multipart_upload(Bucket=bucket, Key="k")
    assert "ChecksumAlgorithm" not in plain and "ChecksumType" not in plain


@pytest.mark.parametrize("algorithm,kind", VALID)
def test_every_call_reports_the_checksum(server, s3, bucket, algorithm, kind):
    key, parts = f"mp-{algorithm}-{kind}", [FIRST, LAST]
    field = f"Checksum{algorithm}"
    uid, listed = upload(s3, bucket, key, algorithm, kind, parts)
    page = s3.list_parts(Bucket=bucket, Key=key, UploadId=uid)
    assert (page["ChecksumAlgorithm"], page["ChecksumType"]) == (algorithm, kind)
    assert [p[field] for p in page["Parts"]] == [checksum(algorithm, p) for p in parts]
    expected = object_checksum(algorithm, kind, parts)
    # The client's own computation of the object's checksum is checked against the parts'.
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=uid, MultipartUpload={"Parts": listed}, ChecksumType=kind, **{field: expected}
    )
    assert (done[field], done["ChecksumType"]) == (expected, kind)
    if kind == "FULL_OBJECT":
        assert expected == checksum(algorithm, FIRST + LAST)
    # HEAD and GET: only on request, then the object's, or with partNumber the part's.
    head = s3.head_object(Bucket=bucket, Key=key)
    assert field not in head and "ChecksumType" not in head
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert (head[field], head["ChecksumType"]) == (expected, kind)
    plain_client = make_client(server.endpoint, response_checksum_validation="when_required")
    got = plain_client.get_object(Bucket=bucket, Key=key)
    assert field not in got and got["Body"].read() == FIRST + LAST
    got = s3.get_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert (got[field], got["ChecksumType"]) == (expected, kind)
    assert got["Body"].read() == FIRST + LAST  # botocore checks a full-object value against the body
    for n, data in enumerate(parts, 1):
        head = s3.head_object(Bucket=bucket, Key=key, PartNumber=n, ChecksumMode="ENABLED")
        assert (head[field], head["ChecksumType"], head["PartsCount"]) == (checksum(algorithm, data), kind, 2)
        got = s3.get_object(Bucket=bucket, Key=key, PartNumber=n, ChecksumMode="ENABLED")
        assert got[field] == checksum(algorithm, data) and got["Body"].read() == data
    # A range of the bytes has no checksum of its own; one that covers them all has the object's.
    ranged = s3.get_object(Bucket=bucket, Key=key, Range="bytes=0-9", ChecksumMode="ENABLED")
    assert field not in ranged and ranged["Body"].read() == FIRST[:10]
    whole = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{len(FIRST) + len(LAST) - 1}", ChecksumMode="ENABLED")
    assert whole[field] == expected and whole["Body"].read() == FIRST + LAST
    attributes = s3.get_object_attributes(Bucket=bucket, Key=key, ObjectAttributes=["Checksum", "ObjectParts", "ObjectSize"])
    assert attributes["Checksum"] == {field: expected, "ChecksumType": kind}
    assert attributes["ObjectSize"] == len(FIRST) + len(LAST)
    object_parts = attributes["ObjectParts"]
    assert object_parts["TotalPartsCount"] == 2
    assert [(p["PartNumber"], p["Size"], p[field]) for p in object_parts["Parts"]] == [
        (n, len(data), checksum(algorithm, data)) for n, data in enumerate(parts, 1)
    ]
    second = s3.get_object_attributes(Bucket=bucket, Key=key, ObjectAttributes=["ObjectParts"], MaxParts=1, PartNumberMarker=1)
    assert [(p["PartNumber"], p[field]) for p in second["ObjectParts"]["Parts"]] == [(2, checksum(algorithm, LAST))]
    # Listings name each object's checksum algorithm and type.
    listed_object = s3.list_objects_v2(Bucket=bucket)["Contents"][0]
    assert (listed_object["ChecksumAlgorithm"], listed_object["ChecksumType"]) == ([algorithm], kind)
    version = s3.list_object_versions(Bucket=bucket)["Versions"][0]
    assert (version["ChecksumAlgorithm"], version["ChecksumType"]) == ([algorithm], kind)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_upload_part_checks_the_parts_checksum(server, s3, bucket, algorithm):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm=algorithm)["UploadId"]
    field, data = f"Checksum{algorithm}", b"part data"
    # A value that is not the part's: BadDigest.
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=data, **{field: checksum(algorithm, b"other")})
    assert error(e) == (400, "BadDigest")
    # A value that is no digest of the algorithm at all: InvalidRequest.
    not_a_digest = b64(b"\x01" * (len(digest(algorithm, b"")) + 1))
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=data, **{field: not_a_digest})
    assert error(e) == (400, "InvalidRequest")
    assert message(e) == f"Value for x-amz-checksum-{algorithm.lower()} header is invalid."
    # Another algorithm than the upload's, or none at all: InvalidRequest.
    other = "SHA1" if algorithm != "SHA1" else "CRC32"
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=data, ChecksumAlgorithm=other)
    assert error(e) == (400, "InvalidRequest")
    assert message(e) == f"Checksum Type mismatch occurred, expected checksum Type: {algorithm.lower()}, actual checksum Type: {other.lower()}"
    bare = make_client(server.endpoint, request_checksum_calculation="when_required")
    with pytest.raises(ClientError) as e:
        bare.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=data)
    assert error(e) == (400, "InvalidRequest")
    assert message(e).endswith(f"expected checksum Type: {algorithm.lower()}, actual checksum Type: null")
    assert s3.list_parts(Bucket=bucket, Key="k", UploadId=uid).get("Parts", []) == []
    # The right value, given or left to boto3 to compute: the part, with its checksum.
    given = s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=data, **{field: checksum(algorithm, data)})
    computed = s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=2, Body=data, ChecksumAlgorithm=algorithm)
    assert given[field] == computed[field] == checksum(algorithm, data)


@pytest.mark.parametrize("algorithm,kind", VALID)
def test_complete_checks_the_checksums_it_is_given(s3, bucket, algorithm, kind):
    key, field, data = "k", f"Checksum{algorithm}", b"the only part"
    uid, listed = upload(s3, bucket, key, algorithm, kind, [data])
    expected = object_checksum(algorithm, kind, [data])

    def refused(parts=listed, **headers):
        with pytest.raises(ClientError) as e:
            s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid, MultipartUpload={"Parts": parts}, **headers)
        assert absent(s3, bucket, key)
        return e

    other = {f"Checksum{algorithm}": checksum(algorithm, b"not the part")}
    e = refused([{**listed[0], **other}])
    assert error(e) == (400, "InvalidPart")
    e = refused([{**listed[0], field: "not base64!"}])
    assert error(e) == (400, "InvalidArgument")
    e = refused(**{field: checksum(algorithm, b"something else")})
    assert error(e) == (400, "BadDigest")
    assert message(e) == f"The {algorithm.lower()} you specified did not match the calculated checksum."
    e = refused(**{field: expected.split("-")[0] + "-a"})
    assert error(e) == (400, "InvalidRequest")
    assert message(e) == f"Value for x-amz-checksum-{algorithm.lower()} header is invalid."
    other_type = "COMPOSITE" if kind == "FULL_OBJECT" else "FULL_OBJECT"
    e = refused(ChecksumType=other_type)
    assert error(e) == (400, "InvalidRequest")
    assert message(e) == f"The upload was created using the {kind} checksum mode. The complete request must use the same checksum mode."
    without_checksums = [{"PartNumber": 1, "ETag": listed[0]["ETag"]}]
    if kind == "COMPOSITE":
        e = refused(without_checksums)
        assert error(e) == (400, "InvalidRequest")
        assert message(e) == (
            f"The upload was created using a {algorithm.lower()} checksum. The complete request must include "
            "the checksum for each part. It was missing for part 1 in the request."
        )
        e = refused(**{field: expected.split("-")[0] + "-2"})
        assert error(e) == (400, "BadDigest")
        # A composite value may leave out its part count.
        declared = {field: expected.split("-")[0]}
        parts = listed
    else:
        # A full-object upload's parts need not be listed with their checksums.
        declared = {field: expected}
        parts = without_checksums
    done = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid, MultipartUpload={"Parts": parts}, **declared)
    assert (done[field], done["ChecksumType"]) == (expected, kind)
    assert s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")[field] == expected


def test_a_single_piece_object_has_a_full_object_checksum_and_no_parts(s3, bucket):
    data = b"one piece"
    put = s3.put_object(Bucket=bucket, Key="k", Body=data, ChecksumAlgorithm="CRC32C")
    assert (put["ChecksumCRC32C"], put["ChecksumType"]) == (checksum("CRC32C", data), "FULL_OBJECT")
    attributes = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["Checksum", "ObjectParts"])
    assert attributes["Checksum"] == {"ChecksumCRC32C": checksum("CRC32C", data), "ChecksumType": "FULL_OBJECT"}
    assert "ObjectParts" not in attributes
    head = s3.head_object(Bucket=bucket, Key="k", PartNumber=1, ChecksumMode="ENABLED")
    assert head["ChecksumCRC32C"] == checksum("CRC32C", data)


def test_boto3_default_low_level_flow(s3, bucket):
    """boto3 creates an upload without an algorithm, adds a CRC32 to each UploadPart on its own,
    and lists those in CompleteMultipartUpload: the parts match, and the object has no checksum
    (its upload asked for none)."""
    uid = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    parts = [FIRST, LAST]
    listed = []
    for n, data in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=n, Body=data)
        assert r["ChecksumCRC32"] == checksum("CRC32", data)
        listed.append({"PartNumber": n, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})
    page = s3.list_parts(Bucket=bucket, Key="k", UploadId=uid)
    assert "ChecksumAlgorithm" not in page
    assert [p["ChecksumCRC32"] for p in page["Parts"]] == [checksum("CRC32", p) for p in parts]
    wrong = [listed[0], {**listed[1], "ChecksumCRC32": checksum("CRC32", b"other")}]
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=uid, MultipartUpload={"Parts": wrong})
    assert error(e) == (400, "InvalidPart")
    done = s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=uid, MultipartUpload={"Parts": listed})
    assert "ChecksumCRC32" not in done
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == FIRST + LAST


@pytest.mark.parametrize("algorithm", [None, "CRC32C", "CRC64NVME", "SHA256"])
def test_upload_file_reports_the_checksum_it_made(s3, bucket, tmp_path, algorithm):
    """upload_file's multipart transfer: by default CRC32 (composite), else the algorithm asked
    for with its default type; each part's checksum in GetObjectAttributes."""
    chunks = [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(MiB)]
    src = tmp_path / "src"
    src.write_bytes(b"".join(chunks))
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=3)
    extra = {"ChecksumAlgorithm": algorithm} if algorithm else None
    s3.upload_file(str(src), bucket, "big", Config=config, ExtraArgs=extra)
    algorithm = algorithm or "CRC32"
    kind, field = DEFAULT_TYPE[algorithm], f"Checksum{algorithm}"
    head = s3.head_object(Bucket=bucket, Key="big", ChecksumMode="ENABLED")
    assert (head[field], head["ChecksumType"]) == (object_checksum(algorithm, kind, chunks), kind)
    attributes = s3.get_object_attributes(Bucket=bucket, Key="big", ObjectAttributes=["ObjectParts"])
    assert [p[field] for p in attributes["ObjectParts"]["Parts"]] == [checksum(algorithm, c) for c in chunks]
    dst = tmp_path / "dst"
    s3.download_file(bucket, "big", str(dst), Config=config)
    assert dst.read_bytes() == src.read_bytes()
