"""ARCHITECTURE.md stays true, and the module structure it describes stays a stack: every path
the document names exists, and within each directory of a crate no module uses a module that
uses it back (an import circle is a missing module or a function in the wrong file)."""

import glob
import re
from pathlib import Path

from conftest import REPO

PATH = re.compile(r"(?:crates|tests|scripts)/[\w./*-]+")


def test_every_path_architecture_md_names_exists():
    text = (REPO / "ARCHITECTURE.md").read_text()
    named = {m.group(0).rstrip(".,)") for m in PATH.finditer(text)}
    assert len(named) > 20, "the document names the code it describes"
    missing = sorted(p for p in named if not glob.glob(str(REPO / p)))
    assert not missing, f"ARCHITECTURE.md names paths that do not exist: {missing}"


def sibling_modules(directory: Path):
    """The modules of one directory of a crate: name -> the files it is made of."""
    modules = {}
    for entry in directory.iterdir():
        if entry.suffix == ".rs":
            modules.setdefault(entry.stem, []).append(entry)
        elif entry.is_dir():
            modules.setdefault(entry.name, []).extend(entry.rglob("*.rs"))
    return modules


def module_path(directory: Path):
    """The module path of a directory of a crate's src (`posix` for crates/store/src/posix)."""
    parts = directory.parts
    src = len(parts) - 1 - parts[::-1].index("src")
    return list(parts[src + 1:])


def uses(directory: Path):
    """Which sibling module each module of `directory` names (super::x or crate::...::x)."""
    modules = sibling_modules(directory)
    prefix = module_path(directory)
    edges = {}
    for name, files in modules.items():
        if name in ("lib", "main", "mod"):
            continue
        text = "".join(f.read_text() for f in files)
        edges[name] = set()
        for other in modules:
            if other in (name, "lib", "main", "mod"):
                continue
            crate_path = "::".join(["crate", *prefix, other])
            if re.search(rf"\bsuper::{other}\b", text) or re.search(rf"{re.escape(crate_path)}\b", text):
                edges[name].add(other)
    return edges


def circles(edges):
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_one_that_imports_it_back():
    found = {}
    for src in sorted((REPO / "crates").glob("*/src")):
        for directory in [src, *[d for d in src.rglob("*") if d.is_dir()]]:
            groups = circles(uses(directory))
            if groups:
                found[str(directory.relative_to(REPO))] = groups
    assert not found, f"import circles: {found}"


def test_the_circle_finder_finds_a_circle(tmp_path):
    src = tmp_path / "crates" / "demo" / "src"
    src.mkdir(parents=True)
    (src / "a.rs").write_text("use crate::b::thing;\n")
    (src / "b.rs").write_text("pub fn thing() { crate::a::other() }\n")
    (src / "c.rs").write_text("use crate::a::x;\n")
    assert circles(uses(src)) == [["a", "b"]]


# The floors of ARCHITECTURE.md, read from its table: a crate depends only on crates of its
# floor or below.
FLOOR_ROW = re.compile(r"^\| (\d+) [^|]*\| ([^|]+) \|", re.M)


def floors_of_architecture_md():
    text = (REPO / "ARCHITECTURE.md").read_text()
    floors = {}
    for number, crates in FLOOR_ROW.findall(text):
        for crate in re.findall(r"`([\w-]+)`", crates):
            floors[crate] = int(number)
    return floors


FLOORS = floors_of_architecture_md()

# The benchmark crates: the isthmus-bench binary and its library. The gateway binary (cli) does
# not depend on them; `isthmus bench ...` runs the isthmus-bench binary.
BENCHMARK_CRATES = {"bench"}


def isthmus_dependencies(crate: str):
    """The isthmus crates `crate` depends on to build (not for its tests)."""
    text = (REPO / "crates" / crate / "Cargo.toml").read_text()
    section = re.search(r"^\[dependencies\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    return set(re.findall(r"^isthmus-([\w-]+)", section.group(1), re.M)) if section else set()


def test_crate_dependencies_point_down_the_floors():
    crates = {p.parent.name for p in (REPO / "crates").glob("*/Cargo.toml")}
    assert crates == set(FLOORS), "every crate has its floor in ARCHITECTURE.md and here"
    upward = {
        (crate, dep)
        for crate in crates
        for dep in isthmus_dependencies(crate)
        if FLOORS[dep] > FLOORS[crate]
    }
    assert not upward, f"dependencies that point up: {sorted(upward)}"
    # The engine API stands alone; access control knows no backend; backends and pools know
    # no access rule.
    assert isthmus_dependencies("store") == set()
    assert isthmus_dependencies("access") == {"store"}
    for crate in ("posix", "erasure", "pools"):
        assert "access" not in isthmus_dependencies(crate), crate


# Switching a thread to a request's Unix identity (and letting it rest in one) happens in the
# session floor only; the store crate defines the mechanism (identity.rs). Backends step back to
# the gateway's own identity for their internal state (`as_gateway`): that is not a switch to a
# user and may sit where that state is.
SWITCHES = re.compile(r"\.assume\(|\brun_call\(|\brun_resting\(|\ballow_resting\(|\bend_resting\(")


def test_only_the_session_floor_switches_to_a_requests_identity():
    found = []
    for path in sorted((REPO / "crates").glob("*/src/**/*.rs")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith("crates/session/") or relative == "crates/store/src/identity.rs":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SWITCHES.search(line.split("//")[0]):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert not found, "identity switches outside crates/session:\n" + "\n".join(found)


def test_only_the_session_floor_assembles_the_store_stack():
    """`Authorized::new` (the authorization layer over a store) is built by crates/session's
    stack module, not by a door or a tool (tests may build their own)."""
    found = []
    for path in sorted((REPO / "crates").glob("*/src/**/*.rs")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(("crates/session/", "crates/access/")):
            continue
        text = path.read_text()
        if "Authorized::new(" in text:
            found.append(relative)
    assert not found, f"store stacks assembled outside crates/session: {found}"


def test_the_gateway_binary_holds_no_benchmark():
    """crates/cli (the `isthmus` binary) depends on no benchmark crate, not even for its tests,
    and holds no benchmark code: no bench*.rs, no reproduce/, no eqsim script, no use of the
    harness (`isthmus_bench`)."""
    cargo = (REPO / "crates" / "cli" / "Cargo.toml").read_text()
    assert not isthmus_dependencies("cli") & BENCHMARK_CRATES
    assert not [c for c in BENCHMARK_CRATES if f"isthmus-{c}" in cargo], "crates/cli/Cargo.toml names a benchmark crate"
    src = REPO / "crates" / "cli" / "src"
    harness = [p for p in src.rglob("*") if p.name.startswith("bench") or p.name in ("reproduce", "eqsim.py")]
    assert not harness, f"benchmark code in the gateway binary: {harness}"
    uses_harness = [p for p in src.rglob("*.rs") if re.search(r"\bisthmus_bench\b", p.read_text())]
    assert not uses_harness, f"the gateway binary uses the benchmark harness: {uses_harness}"


def test_no_crate_includes_a_file_outside_itself():
    """`include!`, `include_str!` and `include_bytes!` name files inside their own crate's
    directory, so each crate builds (and packages) from its own directory."""
    outside = []
    for crate in sorted((REPO / "crates").glob("*/Cargo.toml")):
        root = crate.parent.resolve()
        for source in root.rglob("*.rs"):
            for path in re.findall(r'\binclude(?:_str|_bytes)?!\(\s*"([^"]+)"', source.read_text()):
                target = (source.parent / path).resolve()
                if not target.is_relative_to(root):
                    outside.append(f"{source.relative_to(REPO)}: {path}")
    assert not outside, f"includes of files outside their crate: {outside}"


# Engine calls and a request's blocking work are placed by the session floor's runner. The
# gateway's own maintenance (administration calls, the readiness check, metrics) is no
# request's and starts its blocking tasks where it runs.
OWN_BLOCKING_WORK = {"crates/s3/src/admin/route.rs", "crates/s3/src/admin_http.rs"}


def test_only_the_runner_places_a_requests_blocking_work():
    found = []
    for crate in ("s3", "local", "array", "hdf5", "access", "embed", "libs3", "libs3-core", "libs3-4", "python"):
        for path in sorted((REPO / "crates" / crate / "src").rglob("*.rs")):
            relative = path.relative_to(REPO).as_posix()
            if relative in OWN_BLOCKING_WORK:
                continue
            if "spawn_blocking" in path.read_text():
                found.append(relative)
    assert not found, f"blocking work started outside crates/session/src/runner.rs: {found}"
