"""CORS in a real browser (Debian's Chromium, headless, driven by Selenium): a page served from
another local origin reads a Zarr array's metadata and a chunk (a ranged read, its ETag exposed)
from a public bucket whose CORS rules allow that origin, and a presigned object, with `fetch`;
and is refused where no rule allows it (a bucket without rules, a method no rule names, another
origin). The gateway answers the preflights; the browser enforces the answer."""

import http.server
import json
import shutil
import threading
import time

import pytest

from conftest import free_port, make_client

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(
        not (CHROMIUM and CHROMEDRIVER),
        reason="needs Debian's chromium and chromium-driver (scripts/test --full installs them)",
    ),
]

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

PAGE = """<!doctype html><meta charset="utf-8"><title>running</title><pre id="out"></pre><script>
const cases = %(cases)s;
async function attempt(c) {
  try {
    const r = await fetch(c.url, c.init || {});
    const body = await r.text();
    return {status: r.status, body: body.slice(0, 200), etag: r.headers.get("ETag"),
            range: r.headers.get("Content-Range")};
  } catch (e) {
    return {refused: String(e)};
  }
}
(async () => {
  const results = {};
  for (const c of cases) results[c.name] = await attempt(c);
  document.getElementById("out").textContent = JSON.stringify(results);
  document.title = "done";
})();
</script>"""


class PageServer:
    """Serves one page from its own origin (another port of 127.0.0.1)."""

    def __init__(self, html):
        self.port = free_port()
        page = html.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.origin = f"http://127.0.0.1:{self.port}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def chromium(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--user-data-dir={tmp_path / 'profile'}"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def run_page(driver, cases):
    """Serves a page running `cases` from its own origin; returns each case's result."""
    page = PageServer(PAGE % {"cases": json.dumps(cases)})
    try:
        driver.get(page.origin + "/")
        deadline = time.monotonic() + 30
        while driver.title != "done":
            assert time.monotonic() < deadline, "the page did not finish"
            time.sleep(0.1)
        return json.loads(driver.find_element("id", "out").text), page.origin
    finally:
        page.close()


def test_a_page_on_another_origin_reads_what_the_rules_allow(server, chromium):
    s3 = make_client(server.endpoint)
    chunk = bytes(range(64))
    for bucket in ("viewer-data", "no-rules"):
        s3.create_bucket(Bucket=bucket, ACL="public-read")
        s3.put_object(Bucket=bucket, Key="arr/zarr.json", Body=b'{"zarr_format": 3, "node_type": "array"}',
                      ACL="public-read", ContentType="application/json")
        s3.put_object(Bucket=bucket, Key="arr/c/0/0", Body=chunk, ACL="public-read")
    s3.put_object(Bucket="viewer-data", Key="private.txt", Body=b"presigned content")
    presigned = s3.generate_presigned_url("get_object", Params={"Bucket": "viewer-data", "Key": "private.txt"},
                                          ExpiresIn=600)
    base = server.endpoint

    def cases():
        return [
            {"name": "metadata", "url": f"{base}/viewer-data/arr/zarr.json"},
            {"name": "chunk", "url": f"{base}/viewer-data/arr/c/0/0",
             "init": {"headers": {"Range": "bytes=8-15", "X-Viewer": "zarr"}}},
            {"name": "presigned", "url": presigned},
            {"name": "no_rules", "url": f"{base}/no-rules/arr/zarr.json"},
            {"name": "delete", "url": f"{base}/viewer-data/arr/c/0/0", "init": {"method": "DELETE"}},
        ]

    # First the rules name an origin the page does not have: everything is refused.
    rules = lambda origin: {"CORSRules": [{  # noqa: E731
        "AllowedOrigins": [origin], "AllowedMethods": ["GET", "HEAD"], "AllowedHeaders": ["*"],
        "ExposeHeaders": ["ETag", "Content-Range"], "MaxAgeSeconds": 60}]}
    s3.put_bucket_cors(Bucket="viewer-data", CORSConfiguration=rules("https://elsewhere.example"))
    results, _ = run_page(chromium, cases())
    assert all("refused" in r for r in results.values()), results

    # Then the page's own origin (the next page server gets a new port: allow any 127.0.0.1
    # port with the rule's one wildcard).
    s3.put_bucket_cors(Bucket="viewer-data", CORSConfiguration=rules("http://127.0.0.1:*"))
    results, _ = run_page(chromium, cases())
    assert results["metadata"]["status"] == 200 and '"zarr_format": 3' in results["metadata"]["body"]
    chunk_result = results["chunk"]
    assert chunk_result["status"] == 206, results
    assert chunk_result["range"] == "bytes 8-15/64"
    assert chunk_result["etag"] and chunk_result["etag"].strip('"'), "the exposed ETag is readable"
    assert results["presigned"] == {"status": 200, "body": "presigned content", "etag": results["presigned"]["etag"],
                                    "range": None}
    assert "refused" in results["no_rules"], results
    assert "refused" in results["delete"], results
    # The refused DELETE never reached the object.
    assert s3.get_object(Bucket="viewer-data", Key="arr/c/0/0")["Body"].read() == chunk
