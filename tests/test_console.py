"""The web console, end to end in a real headless browser (Debian's Chromium driven by Selenium)
against a real gateway with the console on its own address (`--console-listen`): log in,
create a bucket, upload a 20 MiB file (multipart, with progress), see it listed, download it
and compare bytes, look at its metadata, make a share link, delete it; keyboard-only use and
labels; a bearer-token login; the pools of the root user's view (a replaced drive healing, then
online); and the attack of issue 42 (finding 9): a user's HTML object,
opened in the tab of a logged-in console, reads no key. Screenshots go to target/screenshots
(or $ISTHMUS_SCREENSHOTS: scripts/screenshots refreshes the README's, in docs/console/), so a
test run changes no tracked file."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, REPO, SECRET_KEY, Server, binary, console_server, make_client

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
SCREENSHOTS = Path(os.environ.get("ISTHMUS_SCREENSHOTS", REPO / "target" / "screenshots"))

pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(
        not (CHROMIUM and CHROMEDRIVER),
        reason="needs Debian's chromium and chromium-driver (scripts/test --full installs them)",
    ),
]

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture
def browser(tmp_path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,800",
                "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option("prefs", {
        "download.default_directory": str(downloads),
        "download.prompt_for_download": False,
    })
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.downloads = downloads
    yield driver
    driver.quit()


@pytest.fixture
def gateway(tmp_path):
    """A gateway with its console on an address of its own (`server.console`), a bucket
    `results`, and the root user's boto3 client."""
    server = console_server(tmp_path / "data")
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="results")
    yield server, s3
    server.stop()


def wait(driver, condition, timeout=30):
    # The console re-renders its tables after each change: an element found a moment ago may
    # be gone, so stale references are retried.
    return WebDriverWait(driver, timeout, ignored_exceptions=[StaleElementReferenceException]).until(condition)


def visible(driver, by, what, timeout=30):
    return wait(driver, EC.visibility_of_element_located((by, what)), timeout)


def shot(driver, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def log_in(driver, console, access_key=ACCESS_KEY, secret_key=SECRET_KEY):
    driver.get(f"{console}/")
    visible(driver, By.ID, "access-key").send_keys(access_key)
    driver.find_element(By.ID, "secret-key").send_keys(secret_key + Keys.ENTER)


def object_row(driver, name):
    return driver.execute_script("""
        for (const row of document.querySelectorAll('#objects-table tbody tr')) {
          if (row.cells[0].textContent === arguments[0]) return row;
        }
        return null;""", name)


def press(driver, name, action):
    """Clicks the row action `action` (Download, Info, Share, Delete) of object `name`."""
    def clicked(d):
        d.find_element(By.CSS_SELECTOR, f"button[aria-label='{action} {name}']").click()
        return True
    wait(driver, clicked)


def test_upload_list_download_delete_a_20_mib_file(browser, gateway, tmp_path):
    server, s3 = gateway
    s3.put_object(Bucket="results", Key="run-001/summary.txt", Body=b"ok\n")
    browser.get(f"{server.console}/")
    visible(browser, By.ID, "access-key")
    shot(browser, "login")
    log_in(browser, server.console)
    visible(browser, By.ID, "buckets-view")
    visible(browser, By.LINK_TEXT, "results")

    # A new bucket, made in the console, opens at once.
    browser.find_element(By.ID, "new-bucket").send_keys("simulation-output" + Keys.ENTER)
    wait(browser, lambda d: d.find_element(By.ID, "objects-title").text == "simulation-output")
    assert "simulation-output" in [b["Name"] for b in s3.list_buckets()["Buckets"]]

    # A 20 MiB file goes up in parts, with a progress bar, and is listed.
    data = os.urandom(20 * 1024 * 1024)
    source = tmp_path / "field-0001.bin"
    source.write_bytes(data)
    browser.find_element(By.ID, "upload-files").send_keys(str(source))
    wait(browser, lambda d: object_row(d, "field-0001.bin") is not None, timeout=120)
    assert "Uploaded 1 file" in browser.find_element(By.ID, "status").text
    assert object_row(browser, "field-0001.bin").find_elements(By.TAG_NAME, "td")[1].text == "20.0 MiB"
    assert not browser.find_element(By.ID, "more").is_displayed()  # one page holds it all
    head = s3.head_object(Bucket="simulation-output", Key="field-0001.bin")
    assert head["ContentLength"] == len(data) and head["ETag"].endswith('-3"')  # 3 parts of 8 MiB
    assert head["ContentType"] == "application/octet-stream" and "CacheControl" not in head
    # The gateway wrote a plain file: duality holds for what the console uploads.
    if os.environ.get("ISTHMUS_TEST_POOL", "posix") == "posix":
        assert (tmp_path / "data" / "simulation-output" / "field-0001.bin").read_bytes() == data
    browser.find_element(By.ID, "new-folder").send_keys("inputs" + Keys.ENTER)
    wait(browser, lambda d: d.find_elements(By.LINK_TEXT, "inputs/"))
    shot(browser, "objects")

    # Download: the browser saves the same bytes.
    press(browser, "field-0001.bin", "Download")
    target = browser.downloads / "field-0001.bin"
    wait(browser, lambda d: target.exists() and target.stat().st_size == len(data), timeout=120)
    assert target.read_bytes() == data

    # Metadata.
    press(browser, "field-0001.bin", "Show metadata of")
    dialog = visible(browser, By.ID, "info-dialog")
    assert "content-length" in dialog.text and str(len(data)) in dialog.text
    assert head["ETag"] in dialog.text
    shot(browser, "info")
    dialog.find_element(By.XPATH, ".//button[text()='Close']").click()

    # Delete, confirmed in a dialog.
    press(browser, "field-0001.bin", "Delete")
    visible(browser, By.ID, "confirm-dialog")
    browser.find_element(By.ID, "confirm-ok").click()
    wait(browser, lambda d: object_row(d, "field-0001.bin") is None)
    with pytest.raises(ClientError):
        s3.head_object(Bucket="simulation-output", Key="field-0001.bin")


def test_share_links_folders_breadcrumbs_and_errors(browser, gateway, tmp_path):
    server, s3 = gateway
    s3.put_object(Bucket="results", Key="run-001/deep/table.csv", Body=b"a,b\n1,2\n", ContentType="text/csv")
    # A wrong secret is refused with the gateway's reason, announced to screen readers.
    log_in(browser, server.console, secret_key="wrong")
    alert = visible(browser, By.CSS_SELECTOR, "#status.error")
    assert "SignatureDoesNotMatch" in alert.text and alert.get_attribute("role") == "alert"
    browser.find_element(By.ID, "access-key").clear()
    log_in(browser, server.console)
    visible(browser, By.LINK_TEXT, "results").click()
    visible(browser, By.LINK_TEXT, "run-001/").click()
    visible(browser, By.LINK_TEXT, "deep/").click()
    wait(browser, lambda d: object_row(d, "table.csv") is not None)
    crumbs = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#crumbs li")]
    assert crumbs == ["Buckets", "results", "run-001", "deep"]
    assert browser.find_element(By.CSS_SELECTOR, "#crumbs [aria-current=page]").text == "deep"

    # A whole folder goes up with its tree, beneath the folder being viewed.
    tree = tmp_path / "mesh"
    (tree / "parts").mkdir(parents=True)
    (tree / "a.txt").write_bytes(b"A")
    (tree / "parts" / "b.txt").write_bytes(b"B")
    browser.find_element(By.ID, "upload-folder").send_keys(str(tree))
    wait(browser, lambda d: d.find_elements(By.LINK_TEXT, "mesh/"))
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="results", Prefix="run-001/deep/mesh/")["Contents"])
    assert keys == ["run-001/deep/mesh/a.txt", "run-001/deep/mesh/parts/b.txt"]
    assert s3.get_object(Bucket="results", Key="run-001/deep/mesh/parts/b.txt")["Body"].read() == b"B"

    press(browser, "table.csv", "Make a share link for")
    visible(browser, By.ID, "share-dialog")
    browser.find_element(By.CSS_SELECTOR, "#share-expiry option[value='3600']").click()
    browser.find_element(By.CSS_SELECTOR, "#share-form button").click()
    wait(browser, lambda d: d.find_element(By.ID, "share-url").get_attribute("value"))
    url = browser.find_element(By.ID, "share-url").get_attribute("value")
    shot(browser, "share")
    # A link to the S3 address (the console's serves no object), signed with the session's
    # temporary credentials: it ends with the session at the latest.
    assert url.startswith(f"{server.endpoint}/results/") and "X-Amz-Expires=3600" in url
    assert "X-Amz-Security-Token=" in url and "this session ends" in browser.find_element(By.ID, "share-note").text
    fetched = requests.get(url, timeout=10)  # anyone with the link, no credentials
    assert fetched.status_code == 200 and fetched.content == b"a,b\n1,2\n"
    browser.find_element(By.CSS_SELECTOR, "#share-dialog form[method=dialog] button").click()

    # The bucket is not empty: deleting it is refused with the gateway's reason.
    browser.find_element(By.LINK_TEXT, "results").click()
    visible(browser, By.ID, "delete-bucket").click()
    browser.find_element(By.ID, "confirm-ok").click()
    assert "BucketNotEmpty" in visible(browser, By.CSS_SELECTOR, "#status.error").text
    # Logging out forgets the keys.
    browser.find_element(By.ID, "logout").click()
    visible(browser, By.ID, "login-view")
    assert browser.execute_script("return sessionStorage.getItem('isthmus-console')") is None


def test_a_buckets_cors_rules_are_edited_in_the_console(browser, gateway):
    """The bucket view's CORS dialog shows an example where there are no rules, saves rules
    given as the aws CLI's JSON (the gateway then answers preflights by them), tells what is
    wrong with rules it refuses (bad JSON here, S3's checks at the gateway) and removes them."""
    server, s3 = gateway
    log_in(browser, server.console)
    visible(browser, By.LINK_TEXT, "results").click()
    visible(browser, By.ID, "cors-open").click()
    visible(browser, By.ID, "cors-dialog")
    rules = browser.find_element(By.ID, "cors-rules")
    assert "AllowedOrigins" in rules.get_attribute("value") and "example" in browser.find_element(By.ID, "cors-title").text
    wanted = {"CORSRules": [{"AllowedOrigins": ["http://viewer.test"], "AllowedMethods": ["GET"],
                             "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600}]}

    def give(text):
        browser.execute_script("arguments[0].value = arguments[1]", rules, text)
        browser.find_element(By.ID, "cors-save").click()

    give("{not json")
    assert "not JSON" in visible(browser, By.CSS_SELECTOR, "#cors-error").text
    give(json.dumps({"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["FETCH"]}]}))
    wait(browser, lambda d: "FETCH" in d.find_element(By.ID, "cors-error").text or "Invalid" in d.find_element(By.ID, "cors-error").text)
    with pytest.raises(ClientError):
        s3.get_bucket_cors(Bucket="results")  # nothing was stored
    give(json.dumps(wanted))
    wait(browser, lambda d: not d.find_element(By.ID, "cors-dialog").is_displayed())
    assert "Saved the CORS rules" in browser.find_element(By.ID, "status").text
    stored = s3.get_bucket_cors(Bucket="results")["CORSRules"]
    assert [(r["AllowedOrigins"], r["AllowedMethods"], r["ExposeHeaders"], r["MaxAgeSeconds"]) for r in stored] == [
        (["http://viewer.test"], ["GET"], ["ETag"], 600)
    ]
    preflight = requests.options(f"{server.endpoint}/results/x", timeout=10,
                                 headers={"Origin": "http://viewer.test", "Access-Control-Request-Method": "GET"})
    assert preflight.status_code == 200 and preflight.headers["Access-Control-Allow-Origin"] == "http://viewer.test"
    # Opened again, the dialog shows the stored rules; removing them removes them.
    visible(browser, By.ID, "cors-open").click()
    wait(browser, lambda d: "viewer.test" in d.find_element(By.ID, "cors-rules").get_attribute("value"))
    shot(browser, "cors")
    browser.find_element(By.ID, "cors-remove").click()
    wait(browser, lambda d: "Removed the CORS rules" in d.find_element(By.ID, "status").text)
    with pytest.raises(ClientError) as gone:
        s3.get_bucket_cors(Bucket="results")
    assert gone.value.response["Error"]["Code"] == "NoSuchCORSConfiguration"


def test_keyboard_only_use_and_every_control_labelled(browser, gateway):
    server, s3 = gateway
    s3.put_object(Bucket="results", Key="notes.txt", Body=b"n")
    browser.get(f"{server.console}/")
    visible(browser, By.ID, "access-key")
    focused = lambda: browser.switch_to.active_element.get_attribute("id")  # noqa: E731

    def key(*keys):
        # Keys go to whatever has focus, as a keyboard's do.
        ActionChains(browser).send_keys(*keys).perform()

    def tab_to(element_id, limit=15):
        for _ in range(limit):
            if focused() == element_id:
                return
            key(Keys.TAB)
        raise AssertionError(f"TAB never reached #{element_id} (at #{focused()})")

    key(Keys.TAB)
    tab_to("access-key")
    key(ACCESS_KEY, Keys.TAB)
    assert focused() == "secret-key"
    key(SECRET_KEY, Keys.ENTER)
    visible(browser, By.LINK_TEXT, "results")
    wait(browser, lambda d: focused() == "buckets-title")  # focus moves to the new view
    for _ in range(15):
        key(Keys.TAB)
        if browser.switch_to.active_element.text == "results":
            break
    key(Keys.ENTER)
    wait(browser, lambda d: object_row(d, "notes.txt") is not None)
    wait(browser, lambda d: focused() == "objects-title")
    # Every row action is reachable by TAB and named for its object.
    names = []
    for _ in range(40):
        key(Keys.TAB)
        label = browser.switch_to.active_element.get_attribute("aria-label") or ""
        names.append(label)
        if label == "Delete notes.txt":
            break
    assert {"Download notes.txt", "Show metadata of notes.txt", "Delete notes.txt"} <= set(names)
    # Escape closes a dialog and nothing is deleted.
    key(Keys.ENTER)
    visible(browser, By.ID, "confirm-dialog")
    key(Keys.ESCAPE)
    wait(browser, lambda d: not d.find_element(By.ID, "confirm-dialog").is_displayed())
    assert s3.head_object(Bucket="results", Key="notes.txt")["ContentLength"] == 1
    # Every form control has a label; every button a name.
    unlabelled = browser.execute_script("""
        const out = [];
        for (const el of document.querySelectorAll('input, select, textarea')) {
          if (el.type === 'hidden') continue;
          if (!(el.labels && el.labels.length) && !el.getAttribute('aria-label')) out.push(el.id || el.name);
        }
        for (const b of document.querySelectorAll('button')) {
          if (!(b.textContent.trim() || b.getAttribute('aria-label'))) out.push('button ' + b.outerHTML);
        }
        return out;""")
    assert unlabelled == []
    assert browser.execute_script("return document.documentElement.lang") == "en"
    # The page's own files all load and run without errors (a missing asset shows here).
    errors = [e["message"] for e in browser.get_log("browser")
              if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]]
    assert errors == []


def test_a_bearer_token_logs_in_and_opens_at_its_scope(browser, tmp_path):
    from test_tokens import Issuer, config_text

    issuer = Issuer()
    (tmp_path / "jwks.json").write_text(json.dumps(issuer.jwks()))
    config = tmp_path / "isthmus.toml"
    config.write_text(config_text(tmp_path / "jwks.json"))
    server = console_server(tmp_path / "data", extra_args=["--config", str(config)])
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="data")
        s3.put_object(Bucket="data", Key="run1/a.txt", Body=b"in scope")
        s3.put_object(Bucket="data", Key="secret/d.txt", Body=b"not in scope")
        browser.get(f"{server.console}/")
        visible(browser, By.ID, "method-token").click()
        token = issuer.token("storage.read:/data/run1")
        visible(browser, By.ID, "token").send_keys(token)
        browser.find_element(By.ID, "login").click()
        visible(browser, By.LINK_TEXT, "data").click()
        try:
            wait(browser, lambda d: object_row(d, "a.txt") is not None)
        finally:
            print("status:", browser.find_element(By.ID, "status").text, browser.current_url)
        assert browser.find_element(By.ID, "objects-title").text == "data/run1/"
        assert "token" in browser.find_element(By.ID, "who").text
        # The token became temporary credentials with its scopes; the token itself is not kept.
        stored = browser.execute_script("return sessionStorage.getItem('isthmus-console')")
        assert token not in stored and json.loads(stored)["accessKey"].startswith("ISTS")
    finally:
        server.stop()


def test_the_old_console_path_points_to_the_console_and_a_bucket_named_console_still_works(tmp_path):
    # With --no-console, /console/ is an S3 path like any other: no page, no pointer.
    server = Server(tmp_path / "data", extra_args=["--no-console"])
    try:
        answer = requests.get(f"{server.endpoint}/console/", timeout=10)
        assert b"<html" not in answer.content and b"web console" not in answer.content
    finally:
        server.stop()
    # Without console_listen there is no console, and the old path says how to have one.
    server = Server(tmp_path / "data1")
    try:
        answer = requests.get(f"{server.endpoint}/console/", timeout=10)
        assert answer.status_code == 404 and "console_listen" in answer.text
    finally:
        server.stop()
    server = console_server(tmp_path / "data2")
    try:
        port = server.console.rsplit(":", 1)[1]
        for path in ["/console", "/console/"]:
            answer = requests.get(f"{server.endpoint}{path}", timeout=10, allow_redirects=False)
            assert answer.status_code == 404 and f"port {port}" in answer.text and b"<html" not in answer.content
        page = requests.get(f"{server.console}/", timeout=10)
        assert page.status_code == 200 and "default-src 'none'" in page.headers["Content-Security-Policy"]
        assert "Isthmus console" in page.text
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="console")
        s3.put_object(Bucket="console", Key="console.js", Body=b"mine")
        assert s3.get_object(Bucket="console", Key="console.js")["Body"].read() == b"mine"
    finally:
        server.stop()


EVIL_PAGE = b"""<!doctype html><title>evil</title><p>Nothing to see.</p>
<script>
  const loot = {};
  try { loot.session = JSON.stringify(sessionStorage); } catch (e) { loot.session = 'refused ' + e.name; }
  try { loot.local = JSON.stringify(localStorage); } catch (e) { loot.local = 'refused ' + e.name; }
  document.title = 'ran ' + JSON.stringify(loot);
</script>"""

# What the page's own script could reach, asked from the page (Selenium runs this in its
# document, with its origin): the storage of the tab in that origin, and cookies.
REACHABLE = """
  const out = [];
  for (const read of [() => JSON.stringify(sessionStorage), () => JSON.stringify(localStorage),
                      () => document.cookie]) {
    try { out.push(read()); } catch (e) { out.push('refused ' + e.name); }
  }
  return out.join(' ');"""


def test_an_html_object_opened_in_the_console_tab_reads_no_key(browser, gateway):
    """Issue 42, finding 9: a user uploads evil.html (text/html) to a public bucket and sends
    its link; someone logged in to the console opens it in the same tab. It used to run in the
    console's origin and read the root user's keys from sessionStorage. Now the console has an
    origin no object shares, keeps only temporary credentials, and HTML objects are sandboxed."""
    server, s3 = gateway
    s3.create_bucket(Bucket="public", ACL="public-read")
    s3.put_object(Bucket="public", Key="evil.html", Body=EVIL_PAGE, ContentType="text/html", ACL="public-read")
    link = f"{server.endpoint}/public/evil.html"
    assert requests.get(link, timeout=10).content == EVIL_PAGE  # public: anyone can open it

    log_in(browser, server.console)
    visible(browser, By.LINK_TEXT, "public")
    stored = json.loads(browser.execute_script("return sessionStorage.getItem('isthmus-console')"))
    # Only temporary credentials are kept: never the secret typed in.
    assert SECRET_KEY not in json.dumps(stored)
    assert stored["accessKey"].startswith("ISTS") and stored["sessionToken"]
    secrets = [SECRET_KEY, stored["accessKey"], stored["secretKey"], stored["sessionToken"]]

    # The attack: the link, opened in the same tab.
    browser.get(link)
    wait(browser, lambda d: d.execute_script("return document.readyState") == "complete")
    seen = browser.title + " " + browser.execute_script(REACHABLE)
    for secret in secrets:
        assert secret not in seen, f"the attacker's page read a key: {seen[:300]}"
    assert not browser.title.startswith("ran"), "the object's script ran in the gateway's origin"
    # Each defence holds on its own: a page of the S3 address that is not sandboxed (a plain
    # text object) finds nothing in its origin's storage either.
    s3.put_object(Bucket="public", Key="note.txt", Body=b"plain", ContentType="text/plain", ACL="public-read")
    browser.get(f"{server.endpoint}/public/note.txt")
    reachable = browser.execute_script(REACHABLE)
    assert "refused" not in reachable and all(secret not in reachable for secret in secrets), reachable

    # Nor can the attacker have the object served on the console's address, plain or presigned
    # (the console's address answers only its page's own signed calls).
    presigned = s3.generate_presigned_url("get_object", Params={"Bucket": "public", "Key": "evil.html"})
    for url in [f"{server.console}/public/evil.html", presigned.replace(server.endpoint, server.console)]:
        answer = requests.get(url, timeout=10)
        assert answer.status_code == 403 and b"<script" not in answer.content, url
        browser.get(url)
        assert not browser.title.startswith("ran")

    # The console is still signed in in this tab, and works.
    browser.get(f"{server.console}/#/b/public/")
    wait(browser, lambda d: object_row(d, "evil.html") is not None)


def test_the_root_user_sees_each_erasure_pools_drives_heal(browser, tmp_path):
    """Issue 43: the console shows the root user each erasure-coded pool (drives with their
    states, healing progress, free space; the quorums), refreshed while a drive heals: a drive
    blanked while the gateway serves shows healing, then online. Another user sees no pools."""
    root = tmp_path / "data"
    (root / ".isthmus").mkdir(parents=True)
    drives = [tmp_path / "drives" / f"d{i}" for i in range(6)]
    listed = ", ".join(f'"{d}"' for d in drives)
    (root / ".isthmus" / "pools.toml").write_text(
        f'[[pool]]\nname = "ec"\nkind = "erasure"\ndrives = [{listed}]\ndata = 4\nparity = 2\n'
        'block_size = "64KiB"\nheal_rate_mib = 2\n')
    server = console_server(root)
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="coded", CreateBucketConfiguration={"LocationConstraint": "ec"})
        for i in range(24):
            s3.put_object(Bucket="coded", Key=f"o{i}", Body=os.urandom(256 << 10))
        log_in(browser, server.console)
        visible(browser, By.ID, "pools-section")
        assert "Pool ec: 4+2" in browser.find_element(By.ID, "pools").text
        assert "Read quorum met: 6 drives serve reads, 4 needed." in browser.find_element(By.ID, "pools").text
        states = lambda d: [r.find_elements(By.TAG_NAME, "td")[1].text  # noqa: E731
                            for r in d.find_elements(By.CSS_SELECTOR, "#pools tbody tr")]
        assert states(browser) == ["online"] * 6
        free = browser.find_elements(By.CSS_SELECTOR, "#pools tbody tr")[0].find_elements(By.TAG_NAME, "td")[3].text
        assert free.endswith("iB"), free
        # A blank disk where drive 3 was: the view (reloaded once) shows it healing, then online.
        drives[3].rename(drives[3].with_name("d3.failed"))
        drives[3].mkdir()
        def healing_after_reload(d):
            # The view refreshes itself only while a drive heals: reloaded until it shows one.
            d.refresh()
            wait(d, lambda d: len(states(d)) == 6)
            return states(d)[3] == "healing"
        wait(browser, healing_after_reload)
        row = browser.find_elements(By.CSS_SELECTOR, "#pools tbody tr")[3]
        wait(browser, lambda d: "objects left" in row.text or "counting" in row.text)
        shot(browser, "pool-healing")
        wait(browser, lambda d: states(d) == ["online"] * 6, timeout=60)
        # Another user's session: no pools shown.
        env = {k: v for k, v in os.environ.items() if not k.startswith("ISTHMUS_")}
        env["ISTHMUS_ADMIN_KEYS"] = f"{ACCESS_KEY}:{SECRET_KEY}"
        added = subprocess.run([str(binary()), "admin", "users", "add", "tina", "--endpoint", server.endpoint,
                                "--json"], capture_output=True, text=True, env=env, timeout=60)
        tina = json.loads(added.stdout)
        browser.find_element(By.ID, "logout").click()
        log_in(browser, server.console, tina["access_key"], tina["secret_key"])
        # Her bucket view opens with the root user's pools still in the page, hidden once the
        # status page refuses her session.
        wait(browser, lambda d: d.find_element(By.ID, "buckets-view").is_displayed()
             and not d.find_element(By.ID, "pools-section").is_displayed())
        assert tina["access_key"] in browser.find_element(By.ID, "who").text
    finally:
        server.stop()
