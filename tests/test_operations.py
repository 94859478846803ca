"""What a site runs the gateway with: TLS built in (a certificate made here, reloaded without a
restart), a plain-HTTP listener beside it, Prometheus metrics and health on an admin listener
(parsed with the Prometheus client's own text parser), and access logs."""

import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import time

import boto3
import pytest
import requests
from botocore.config import Config
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client.parser import text_string_to_metric_families

from conftest import ACCESS_KEY, SECRET_KEY, Server, console_server, free_port, make_client


def make_ca():
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Isthmus test CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def issue(ca, common_name):
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert_pem, key_pem


def served_common_name(port, cafile):
    context = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value


@pytest.fixture
def tls_gateway(tmp_path):
    ca = make_ca()
    cafile = tmp_path / "ca.pem"
    cafile.write_bytes(ca[1].public_bytes(serialization.Encoding.PEM))
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_pem, key_pem = issue(ca, "gateway-one")
    cert.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    http_port = free_port()
    srv = console_server(tmp_path / "data", extra_args=["--tls-cert", str(cert), "--tls-key", str(key),
                                                         "--http-address", f"127.0.0.1:{http_port}"])
    yield srv, ca, cafile, cert, key, http_port
    srv.stop()


def test_tls_serves_boto3_aws_cli_and_curl_beside_plain_http(tls_gateway, tmp_path):
    srv, _, cafile, _, _, http_port = tls_gateway
    https = f"https://127.0.0.1:{srv.port}"
    s3 = boto3.client("s3", endpoint_url=https, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                      region_name="us-east-1", verify=str(cafile), config=Config(retries={"max_attempts": 1}))
    s3.create_bucket(Bucket="secure")
    s3.put_object(Bucket="secure", Key="a.txt", Body=b"over tls")
    assert s3.get_object(Bucket="secure", Key="a.txt")["Body"].read() == b"over tls"
    # The plain listener serves the same data.
    assert make_client(f"http://127.0.0.1:{http_port}").get_object(Bucket="secure", Key="a.txt")["Body"].read() == b"over tls"
    aws = shutil.which("aws")
    env = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1",
           "PATH": "/usr/bin:/bin:" + str(__import__("os").path.dirname(aws)),
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    out = subprocess.run([aws, "--endpoint-url", https, "--ca-bundle", str(cafile), "s3", "ls", "s3://secure/"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and "a.txt" in out.stdout, out.stderr
    for version in ["1.2", "1.3"]:
        curl = subprocess.run(["curl", "-sS", "--cacert", str(cafile), f"--tlsv{version}", "--tls-max", version,
                               "-o", "/dev/null", "-w", "%{http_code}", f"{https}/secure/a.txt"],
                              capture_output=True, text=True, timeout=30)
        assert curl.stdout == "403", (version, curl.stderr)  # TLS works; the anonymous GET is refused
    old = subprocess.run(["curl", "-sS", "--cacert", str(cafile), "--tlsv1.1", "--tls-max", "1.1", f"{https}/"],
                         capture_output=True, text=True, timeout=30)
    assert old.returncode != 0, "TLS 1.1 must be refused"
    # A client that does not trust the certificate is refused by its own TLS check.
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{https}/", timeout=5)


def test_certificates_reload_without_a_restart_and_a_bad_one_is_not_taken(tls_gateway):
    srv, ca, cafile, cert, key, _ = tls_gateway
    assert served_common_name(srv.port, str(cafile)) == "gateway-one"
    cert.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    time.sleep(3)
    assert served_common_name(srv.port, str(cafile)) == "gateway-one", "a broken file does not replace the certificate"
    cert_pem, key_pem = issue(ca, "gateway-two")
    key.write_bytes(key_pem)
    cert.write_bytes(cert_pem)
    deadline = time.time() + 15
    while served_common_name(srv.port, str(cafile)) != "gateway-two":
        assert time.time() < deadline, "the new certificate was never served"
        time.sleep(0.5)
    assert "TLS certificate loaded again" in srv.output()


def test_metrics_and_health_on_the_admin_listener(tmp_path):
    admin_port = free_port()
    root = tmp_path / "data"
    srv = Server(root, extra_args=["--admin-address", f"127.0.0.1:{admin_port}"])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="observed")
        for i in range(5):
            s3.put_object(Bucket="observed", Key=f"k{i}", Body=b"x" * 1000)
        s3.get_object(Bucket="observed", Key="k0")["Body"].read()
        with pytest.raises(Exception):
            s3.get_object(Bucket="observed", Key="missing")
        admin = f"http://127.0.0.1:{admin_port}"
        text = requests.get(f"{admin}/metrics", timeout=10).text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        requests_total = {(s.labels["operation"], s.labels["status"]): s.value
                          for s in families["isthmus_http_requests"].samples}
        assert requests_total[("PutObject", "200")] == 5
        assert requests_total[("GetObject", "200")] == 1
        assert requests_total[("GetObject", "404")] == 1
        latency = families["isthmus_http_request_duration_seconds"]
        assert latency.type == "histogram"
        counts = [s for s in latency.samples if s.name.endswith("_count") and s.labels["operation"] == "PutObject"]
        assert counts[0].value == 5
        assert families["isthmus_http_request_bytes"].samples[0].value >= 5000
        assert families["isthmus_http_response_bytes"].samples[0].value >= 1000
        errors = {s.labels["code"]: s.value for s in families["isthmus_engine_errors"].samples}
        assert errors["NoSuchKey"] >= 1
        assert families["isthmus_http_open_connections"].samples[0].value >= 1
        assert families["process_resident_memory_bytes"].samples[0].value > 1 << 20
        assert families["process_open_fds"].samples[0].value > 3
        assert families["isthmus_pool_size_bytes"].samples[0].labels["pool"] == "default"
        assert requests.get(f"{admin}/health/live", timeout=5).status_code == 200
        assert requests.get(f"{admin}/health/ready", timeout=5).status_code == 200
        # The data root gone: not ready, and says why.
        shutil.move(str(root), str(tmp_path / "moved"))
        ready = requests.get(f"{admin}/health/ready", timeout=10)
        assert ready.status_code == 503 and "not ready" in ready.text
        shutil.move(str(tmp_path / "moved"), str(root))
        assert requests.get(f"{admin}/health/ready", timeout=5).status_code == 200
        # Metrics are not on the S3 listener.
        assert requests.get(f"{srv.endpoint}/metrics", timeout=5).status_code in (403, 404)
    finally:
        srv.stop()


def test_access_log_has_one_json_line_per_request(tmp_path):
    log = tmp_path / "access.log"
    srv = Server(tmp_path / "data", extra_args=["--access-log", str(log), "--access-log-format", "json"])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="logged")
        s3.put_object(Bucket="logged", Key="dir/file.bin", Body=b"y" * 4096)
        s3.get_object(Bucket="logged", Key="dir/file.bin")["Body"].read()
        requests.get(f"{srv.endpoint}/logged/dir/file.bin", timeout=5)  # anonymous: refused
    finally:
        srv.stop()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    put = next(l for l in lines if l["operation"] == "PutObject")
    assert put["user"] == ACCESS_KEY and put["bucket"] == "logged" and put["key"] == "dir/file.bin"
    assert put["status"] == 200 and put["bytes_in"] == 4096 and put["request_id"] and put["duration_us"] > 0
    gets = [l for l in lines if l["operation"] == "GetObject"]
    assert [g["status"] for g in gets] == [200, 403]
    assert gets[0]["bytes_out"] == 4096 and gets[1]["user"] == ""
    assert all(set(l) >= {"time", "user", "operation", "bucket", "key", "status", "bytes_in", "bytes_out", "duration_us", "request_id"} for l in lines)


def test_text_access_log_to_stdout(tmp_path):
    srv = Server(tmp_path / "data", extra_args=["--access-log", "stdout"])
    try:
        make_client(srv.endpoint).create_bucket(Bucket="texty")
        # Lines are written by a thread of their own, a moment after the answer.
        deadline = time.time() + 10
        while not (line := next((l for l in srv.output().splitlines() if " CreateBucket " in l), None)):
            assert time.time() < deadline, "no access log line"
            time.sleep(0.05)
    finally:
        srv.stop()
    assert f" {ACCESS_KEY} CreateBucket \"texty\" \"\" 200 " in line


def test_tls_misconfiguration_is_a_clear_error(tmp_path):
    from conftest import binary, free_port
    cert = tmp_path / "c.pem"
    cert.write_text("nothing")
    address = f"127.0.0.1:{free_port()}"  # not the default port: another server may hold it
    out = subprocess.run([str(binary()), "serve", "--root", str(tmp_path / "d"), "--address", address,
                          "--tls-cert", str(cert), "--tls-key", str(cert)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "TLS" in out.stderr and str(cert) in out.stderr


def test_metrics_show_each_drive_of_an_erasure_coded_pool(tmp_path):
    admin_port = free_port()
    root = tmp_path / "data"
    (root / ".isthmus").mkdir(parents=True)
    drives = ", ".join(f'"{tmp_path}/drives/d{i}"' for i in range(6))
    (root / ".isthmus" / "pools.toml").write_text(
        f'[[pool]]\nname = "ec"\nkind = "erasure"\ndrives = [{drives}]\ndata = 4\nparity = 2\nblock_size = "64KiB"\n')
    srv = Server(root, extra_args=["--admin-address", f"127.0.0.1:{admin_port}"])
    try:
        s3 = make_client(srv.endpoint)
        s3.create_bucket(Bucket="coded", CreateBucketConfiguration={"LocationConstraint": "ec"})
        s3.put_object(Bucket="coded", Key="big", Body=b"z" * (1 << 20))
        assert s3.get_object(Bucket="coded", Key="big")["Body"].read() == b"z" * (1 << 20)
        text = requests.get(f"http://127.0.0.1:{admin_port}/metrics", timeout=10).text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        up = families["isthmus_pool_drive_up"].samples
        assert len(up) == 6 and all(s.value == 1 and s.labels["pool"] == "ec" for s in up)
        reads = families["isthmus_pool_drive_reads"].samples
        assert sum(s.value for s in reads) >= 4, "the GET read shards"
        assert families["isthmus_pool_drive_errors"].type == "counter"
    finally:
        srv.stop()


def test_admin_and_console_over_https_with_a_private_ca(tls_gateway, tmp_path):
    """`isthmus admin --ca-bundle` talks to an HTTPS gateway whose certificate a private CA
    signed; without the CA it refuses the certificate. The console's own listener is served over
    HTTPS too."""
    from conftest import binary
    srv, _, cafile, _, _, _ = tls_gateway
    https = f"https://127.0.0.1:{srv.port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_")}
    env["ISTHMUS_ADMIN_KEYS"] = f"{ACCESS_KEY}:{SECRET_KEY}"
    added = subprocess.run([str(binary()), "admin", "users", "add", "tina", "--endpoint", https,
                            "--ca-bundle", str(cafile), "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert added.returncode == 0, added.stderr
    tina = json.loads(added.stdout)
    s3 = boto3.client("s3", endpoint_url=https, aws_access_key_id=tina["access_key"],
                      aws_secret_access_key=tina["secret_key"], region_name="us-east-1", verify=str(cafile))
    s3.create_bucket(Bucket="tinas")
    refused = subprocess.run([str(binary()), "admin", "status", "--endpoint", https], capture_output=True,
                             text=True, env=env, timeout=60)
    assert refused.returncode != 0 and "cannot reach the gateway" in refused.stderr
    console = srv.console.replace("http://", "https://")
    page = requests.get(f"{console}/", verify=str(cafile), timeout=10)
    assert page.status_code == 200 and "Isthmus console" in page.text
    # The page's links go to the S3 address, over HTTPS too.
    config = requests.get(f"{console}/config.json", verify=str(cafile), timeout=10).json()
    assert config == {"s3": {"scheme": "https", "port": srv.port}}
