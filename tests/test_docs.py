"""The README and the documentation book in docs/: every relative link and image leads to a file
that exists (anchors too), every page of docs/ is in the book's SUMMARY, every include of the
book finds its file and anchor, and the README stays a front door (under 250 lines). The book
itself is built by `scripts/test --full` with mdBook."""

import re
from pathlib import Path

from conftest import REPO

DOCS = REPO / "docs"


def pages():
    return [REPO / "README.md"] + sorted(DOCS.rglob("*.md"))


def without_code(text):
    return re.sub(r"```.*?```", "", text, flags=re.S)


def anchors(path):
    """The anchors a Markdown page's headings get (GitHub's and mdBook's rule)."""
    found = set()
    for line in without_code(path.read_text()).splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_every_relative_link_leads_somewhere():
    broken = []
    for page in pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", without_code(page.read_text())):
            if re.match(r"[a-z]+:", target) or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_page_of_the_book_is_in_its_summary():
    summary = (DOCS / "SUMMARY.md").read_text()
    listed = {(DOCS / target).resolve() for target in re.findall(r"\]\(([^)]+\.md)\)", summary)}
    pages_in_docs = {p.resolve() for p in DOCS.rglob("*.md") if p.name != "SUMMARY.md"}
    assert pages_in_docs - listed == set(), "pages missing from docs/SUMMARY.md"
    assert listed - pages_in_docs == set(), "SUMMARY.md names pages that do not exist"


def test_every_include_finds_its_file_and_anchor():
    for page in DOCS.rglob("*.md"):
        for target in re.findall(r"\{\{#include ([^}\s]+)\}\}", page.read_text()):
            path, _, anchor = target.partition(":")
            included = (page.parent / path).resolve()
            assert included.exists(), f"{page}: {target}"
            if anchor:
                text = included.read_text()
                assert f"ANCHOR: {anchor}" in text and f"ANCHOR_END: {anchor}" in text, f"{page}: {target}"


def test_the_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move details into the book (docs/)"
    text = "\n".join(lines)
    for command in ("cargo run --release --bin isthmus -- serve", "./scripts/test --full"):
        assert command in text


def test_the_quick_start_command_names_a_binary_cargo_can_run():
    """The workspace builds two binaries (isthmus, isthmus-bench): `cargo run` without --bin
    cannot choose, so the README's first command must name it."""
    import subprocess
    r = subprocess.run(["cargo", "run", "--release", "--bin", "isthmus", "--", "--version"],
                       cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0 and r.stdout.startswith("isthmus "), r.stderr[-2000:]
