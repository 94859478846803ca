"""The clients Isthmus ships (`isthmus admin`, `region push/pull`, `copy`) accept, as curl does,
the self-signed certificate a site makes first (OpenSSL marks it CA:TRUE) given as the
`--ca-bundle`, and nothing more: another certificate with the same subject, a name the
certificate does not carry, or an expired certificate are refused."""

import datetime
import importlib.util
import ipaddress
import json
import os
import subprocess
from pathlib import Path

import boto3
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import ACCESS_KEY, SECRET_KEY, Server, binary


def openssl_self_signed(directory, name):
    """The operator guide's recipe: a self-signed certificate (CA:TRUE) for 127.0.0.1 and `host`."""
    directory.mkdir()
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                    "-addext", f"subjectAltName=IP:127.0.0.1,DNS:{name}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    assert b"CA:TRUE" in subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-text"],
                                        check=True, capture_output=True).stdout
    return cert, key


def expired_self_signed(directory):
    """A self-signed CA:TRUE certificate for 127.0.0.1 that expired yesterday (OpenSSL 3.0's
    `req` cannot date one in the past)."""
    directory.mkdir()
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "host")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=30)).not_valid_after(now - datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def self_signed_gateway(tmp_path):
    cert, key = openssl_self_signed(tmp_path / "site", "host")
    srv = Server(tmp_path / "data", extra_args=["--tls-cert", str(cert), "--tls-key", str(key)])
    yield srv, cert
    srv.stop()


def admin(endpoint, bundle, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_")}
    env["ISTHMUS_ADMIN_KEYS"] = f"{ACCESS_KEY}:{SECRET_KEY}"
    return subprocess.run([str(binary()), "admin", *args, "--endpoint", endpoint, "--ca-bundle", str(bundle), "--json"],
                          capture_output=True, text=True, env=env, timeout=60)


def test_admin_accepts_the_self_signed_certificate_given_as_the_bundle(self_signed_gateway, tmp_path):
    srv, cert = self_signed_gateway
    added = admin(f"https://127.0.0.1:{srv.port}", cert, "users", "add", "tina")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["access_key"]
    # Another self-signed certificate with the same subject and names is not the server's.
    other, _ = openssl_self_signed(tmp_path / "impostor", "host")
    refused = admin(f"https://127.0.0.1:{srv.port}", other, "status")
    assert refused.returncode != 0 and "cannot reach the gateway" in refused.stderr, refused.stderr
    assert "invalid peer certificate" in refused.stderr, refused.stderr
    # The right certificate reached by a name it does not carry.
    refused = admin(f"https://localhost:{srv.port}", cert, "status")
    assert refused.returncode != 0 and "NotValidForName" in refused.stderr, refused.stderr


def test_an_expired_self_signed_certificate_is_refused(tmp_path):
    cert, key = expired_self_signed(tmp_path / "site")
    srv = Server(tmp_path / "data", extra_args=["--tls-cert", str(cert), "--tls-key", str(key)])
    try:
        refused = admin(f"https://127.0.0.1:{srv.port}", cert, "status")
        assert refused.returncode != 0 and "expired" in refused.stderr.lower(), refused.stderr
    finally:
        srv.stop()


@pytest.mark.posix_only
def test_region_push_trusts_the_same_bundle(self_signed_gateway, tmp_path):
    import isthmus

    srv, cert = self_signed_gateway
    https = f"https://127.0.0.1:{srv.port}"
    local = tmp_path / "site-a"
    store = isthmus.Store(str(local))
    store.create_bucket("arrays")
    a = isthmus.Array.create(isthmus.Location.engine(store, "arrays"), "vel.zarr", shape=(4, 4), dtype="int32",
                             chunks=(2, 2))
    a[...] = np.arange(16, dtype=np.int32).reshape(4, 4)
    s3 = boto3.client("s3", endpoint_url=https, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                      region_name="us-east-1", verify=str(cert))
    s3.create_bucket(Bucket="arrays")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)

    def push(bundle):
        return subprocess.run([str(binary()), "region", "push", "arrays/vel.zarr", "--to", f"{https}/arrays/vel.zarr",
                               "--root", str(local), "--ca-bundle", str(bundle)],
                              capture_output=True, text=True, env=env, timeout=120)

    other, _ = openssl_self_signed(tmp_path / "impostor", "host")
    refused = push(other)
    assert refused.returncode != 0 and "certificate" in refused.stderr, refused.stderr
    pushed = push(cert)
    assert pushed.returncode == 0, pushed.stderr
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="arrays", Prefix="vel.zarr/")["Contents"]]
    assert sum("/c/" in k for k in keys) == 4, keys
    # The Python package's Gateway takes the same bundle (Python's ssl accepts it as curl does).
    gateway = tree_gateway_class()
    assert gateway(https, ACCESS_KEY, SECRET_KEY, ca_bundle=cert).info("arrays", "vel.zarr")["shape"] == [4, 4]
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
        gateway(https, ACCESS_KEY, SECRET_KEY, ca_bundle=other).info("arrays", "vel.zarr")


def tree_gateway_class():
    """This tree's `isthmus.remote.Gateway` (the test venv may hold an older build of the package)."""
    path = Path(__file__).parent.parent / "crates/python/python/isthmus/remote.py"
    spec = importlib.util.spec_from_file_location("isthmus._remote_of_the_tree", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Gateway
