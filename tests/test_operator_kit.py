"""The operator's kit in examples/: each example configuration passes `isthmus config check`,
the example pool table starts a gateway with its pools, and the Grafana dashboard queries only
metrics a real gateway exports, and shows every family it exports."""

import json
import re
import shutil
import subprocess

import pytest
import requests

from conftest import REPO, Server, binary, free_port, make_client

EXAMPLES = REPO / "examples"


@pytest.mark.parametrize("name", ["one-user.toml", "project-posix.toml", "site.toml"])
def test_example_configurations_pass_config_check(name):
    # From examples/, as the site example's comment says (its JWKS path is relative).
    checked = subprocess.run([str(binary()), "config", "check", name], cwd=EXAMPLES, capture_output=True,
                             text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    assert f"{name}: valid" in checked.stdout


@pytest.fixture
def site_gateway(tmp_path):
    """A gateway on a data root with the example pool table, and its admin address."""
    root = tmp_path / "data"
    (root / ".isthmus").mkdir(parents=True)
    shutil.copy(EXAMPLES / "site-pools.toml", root / ".isthmus" / "pools.toml")
    admin = f"127.0.0.1:{free_port()}"
    srv = Server(root, extra_args=["--admin-address", admin])
    yield srv, admin, tmp_path
    srv.stop()


def test_the_example_pool_table_serves_its_pools(site_gateway):
    srv, _, base = site_gateway
    s3 = make_client(srv.endpoint)
    for pool in ["scratch", "archive"]:
        s3.create_bucket(Bucket=f"b-{pool}", CreateBucketConfiguration={"LocationConstraint": pool})
        s3.put_object(Bucket=f"b-{pool}", Key="k", Body=b"in " + pool.encode())
        assert s3.get_object(Bucket=f"b-{pool}", Key="k")["Body"].read() == b"in " + pool.encode()
    assert (base / "scratch" / "b-scratch" / "k").read_bytes() == b"in scratch"
    assert all((base / "jbod" / f"d{i}").is_dir() for i in range(6))


def exported_families(text):
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M))


def test_the_grafana_dashboard_matches_the_exported_metrics(site_gateway):
    srv, admin, _ = site_gateway
    s3 = make_client(srv.endpoint)
    s3.create_bucket(Bucket="watched", CreateBucketConfiguration={"LocationConstraint": "archive"})
    s3.put_object(Bucket="watched", Key="k", Body=b"x" * 100_000)
    s3.get_object(Bucket="watched", Key="k")["Body"].read()
    families = exported_families(requests.get(f"http://{admin}/metrics", timeout=10).text)
    assert "isthmus_pool_drive_up" in families and "isthmus_http_requests_total" in families, families
    dashboard = json.loads((EXAMPLES / "grafana-dashboard.json").read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids are unique"
    assert dashboard["__inputs"][0]["name"] == "DS_PROMETHEUS"
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    assert all(p["datasource"]["uid"] == "${DS_PROMETHEUS}" for p in panels)
    used = set(re.findall(r"\b((?:isthmus|process)_[a-z_]+)", " ".join(exprs)))

    def family(name):
        if name in families:
            return name
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        return base if families.get(base) == "histogram" else None

    unknown = sorted(name for name in used if family(name) is None)
    assert not unknown, f"the dashboard queries metrics the gateway does not export: {unknown}"
    shown = {family(name) for name in used}
    unshown = sorted(set(families) - shown)
    assert not unshown, f"exported but on no panel: {unshown}"
