"""Bucket CORS: the configuration API (Put/Get/DeleteBucketCors) and the browser's side of it:
preflights (OPTIONS) answered by the bucket's rules, Access-Control-* headers on actual
responses, and refusal where no rule allows. The real-browser test is in test_cors_browser.py."""

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from conftest import make_client
from test_users import CONFIG, multi  # noqa: F401 (the two-user server fixture)

RULES = {
    "CORSRules": [
        {"ID": "viewer", "AllowedOrigins": ["https://viewer.example.org"], "AllowedMethods": ["GET", "HEAD"],
         "AllowedHeaders": ["range", "x-amz-*"], "ExposeHeaders": ["ETag", "Content-Range"], "MaxAgeSeconds": 600},
        {"AllowedOrigins": ["http://*.lab.example"], "AllowedMethods": ["PUT", "POST", "DELETE"], "AllowedHeaders": ["*"]},
    ]
}


def code(call, **kwargs):
    with pytest.raises(ClientError) as e:
        call(**kwargs)
    return e.value.response["Error"]["Code"]


def test_cors_configuration_round_trip_and_checks(s3):
    s3.create_bucket(Bucket="cors")
    assert code(s3.get_bucket_cors, Bucket="cors") == "NoSuchCORSConfiguration"
    s3.put_bucket_cors(Bucket="cors", CORSConfiguration=RULES)
    assert s3.get_bucket_cors(Bucket="cors")["CORSRules"] == RULES["CORSRules"]
    # Rules as S3 checks them; a refused configuration leaves the one in place.
    for bad in (
        {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]},
        {"CORSRules": [{"AllowedOrigins": ["http://*.*.example"], "AllowedMethods": ["GET"]}]},
        {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "AllowedHeaders": ["x-*-*"]}]},
        {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}] * 101},
    ):
        assert code(s3.put_bucket_cors, Bucket="cors", CORSConfiguration=bad) in ("InvalidRequest", "MalformedXML")
    assert s3.get_bucket_cors(Bucket="cors")["CORSRules"] == RULES["CORSRules"]
    s3.delete_bucket_cors(Bucket="cors")
    assert code(s3.get_bucket_cors, Bucket="cors") == "NoSuchCORSConfiguration"
    assert code(s3.get_bucket_cors, Bucket="missing-bucket") == "NoSuchBucket"


def test_only_the_owner_reads_and_changes_cors(multi):  # noqa: F811
    _, root, _, bob = multi
    root.create_bucket(Bucket="owned-cors", ACL="public-read-write")
    root.put_bucket_cors(Bucket="owned-cors", CORSConfiguration=RULES)
    anonymous = make_client(root.meta.endpoint_url, signature_version=UNSIGNED)
    for client in (bob, anonymous):
        assert code(client.get_bucket_cors, Bucket="owned-cors") == "AccessDenied"
        assert code(client.put_bucket_cors, Bucket="owned-cors",
                    CORSConfiguration={"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET", "PUT"]}]}) == "AccessDenied"
        assert code(client.delete_bucket_cors, Bucket="owned-cors") == "AccessDenied"
    assert root.get_bucket_cors(Bucket="owned-cors")["CORSRules"] == RULES["CORSRules"]
