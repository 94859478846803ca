"""What a site installs and runs beside the gateway: the systemd unit (checked by
systemd-analyze), the container and Apptainer definitions (their commands checked against the
binary's own flags), shell completions, `isthmus config check`, and every command's help."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import binary

REPO = Path(__file__).resolve().parent.parent
PACKAGING = REPO / "packaging"


def run(*args, **kwargs):
    return subprocess.run([str(binary()), *args], capture_output=True, text=True, timeout=60, **kwargs)


def serve_flags():
    return set(re.findall(r"--[a-z][a-z0-9-]+", run("serve", "--help").stdout))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_systemd_unit_verifies_and_is_hardened(tmp_path):
    text = (PACKAGING / "isthmus.service").read_text()
    for option in ["NoNewPrivileges=true", "ProtectSystem=strict", "PrivateTmp=true", "ReadWritePaths=",
                   "CapabilityBoundingSet=", "SystemCallFilter=@system-service", "ExecReload=/bin/kill -HUP"]:
        assert option in text, option
    unit = tmp_path / "isthmus.service"
    unit.write_text(text.replace("/usr/local/bin/isthmus", str(binary())))
    verify = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stderr
    exec_start = re.search(r"^ExecStart=\S+ (.*)$", text, re.M).group(1).split()
    assert set(a for a in exec_start if a.startswith("--")) <= serve_flags()


def test_container_and_apptainer_definitions_are_well_formed():
    known = {"FROM", "WORKDIR", "COPY", "RUN", "VOLUME", "EXPOSE", "ENTRYPOINT", "CMD", "ENV", "ARG", "LABEL", "USER"}
    lines = [l for l in (PACKAGING / "Containerfile").read_text().splitlines() if l.strip() and not l.startswith("#")]
    instructions = [l.split()[0] for l in lines]
    assert set(instructions) <= known, instructions
    assert instructions[0] == "FROM" and instructions.count("FROM") == 2
    cmd = json.loads(next(l for l in lines if l.startswith("CMD"))[3:])
    entry = json.loads(next(l for l in lines if l.startswith("ENTRYPOINT"))[10:])
    assert entry == ["/usr/local/bin/isthmus"] and cmd[0] == "serve"
    assert {a for a in cmd if a.startswith("--")} <= serve_flags()
    assert "cargo build --release --bin isthmus" in (PACKAGING / "Containerfile").read_text()

    definition = (PACKAGING / "isthmus.def").read_text()
    assert definition.count("Bootstrap: docker") == 2
    sections = re.findall(r"^%(\w+)", definition, re.M)
    assert {"files", "post", "runscript", "help"} <= set(sections)
    runscript = definition.split("%runscript")[1].split("%help")[0]
    assert {a for a in runscript.split() if a.startswith("--")} <= serve_flags()


def test_shell_completions_parse():
    bash = run("completions", "bash")
    assert bash.returncode == 0 and "_isthmus()" in bash.stdout and "config" in bash.stdout
    check = subprocess.run(["bash", "-n"], input=bash.stdout, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    if shutil.which("zsh"):
        zsh = run("completions", "zsh")
        assert subprocess.run(["zsh", "-n"], input=zsh.stdout, capture_output=True, text=True).returncode == 0
    for shell in ["fish", "elvish", "powershell"]:
        assert run("completions", shell).stdout.strip(), shell
    assert run("completions", "tcsh").returncode != 0


def test_completions_follow_the_commands_and_flags():
    """Completions are generated from the same definitions as the commands, so they name every
    command, the nested ones (`bench reproduce`, `config reference`) and every flag of `serve`
    and `bench`: a command added without them would show here. The benchmarks are the
    isthmus-bench binary's (`isthmus bench ...` runs it): its own script, `isthmus bench
    completions SHELL`, names `reproduce` and every flag of `bench` and `bench reproduce`."""
    bash = run("completions", "bash").stdout
    bench = run("bench", "completions", "bash")
    assert bench.returncode == 0 and "complete -F" in bench.stdout and "isthmus-bench" in bench.stdout, bench.stderr
    check = subprocess.run(["bash", "-n"], input=bench.stdout, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    commands = re.findall(r"^  ([a-z-]+)\s", run("--help").stdout.split("Commands:")[1], re.M)
    for command in [c for c in commands if c != "help"] + ["reference"]:
        assert f"isthmus__{command}" in bash or f"__{command}" in bash, command
    assert "__reproduce" in bench.stdout
    for command, script in ((["serve"], bash), (["bench"], bench.stdout), (["bench", "reproduce"], bench.stdout),
                            (["cost"], bash)):
        for flag in set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", run(*command, "--help").stdout)):
            assert flag in script, (command, flag)


def test_config_check_says_what_a_file_means_and_what_is_wrong(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text(f'root = "{tmp_path}/data"\naddress = "127.0.0.1:9443"\nadmin_address = "127.0.0.1:9100"\n'
                    'access_log = "stdout"\n[[users]]\naccess_key = "alice"\nsecret_key = "alice-secret-1"\n'
                    'buckets = ["shared-*"]\n[[quotas]]\nuser = "alice"\nmax_bytes = "2GiB"\n')
    out = run("config", "check", str(good))
    assert out.returncode == 0, out.stderr
    assert "valid" in out.stdout and "http://127.0.0.1:9443" in out.stdout
    assert "user alice" in out.stdout and "max bytes 2147483648" in out.stdout and "admin:" in out.stdout
    cases = {
        'rooot = 1\n': "unknown field `rooot`",
        'identity = "posix"\n[[users]]\naccess_key = "bob"\nsecret_key = "bob-secret-1"\n': "unix_user",
        'tls_cert = "/nonexistent/c.pem"\ntls_key = "/nonexistent/k.pem"\n': "/nonexistent/c.pem",
        '[[quotas]]\nbucket = "b"\nmax_bytes = "lots"\n': "not a size",
        '[[users]]\naccess_key = "x"\nsecret_key = "short"\n': "secret keys 8+",
    }
    for text, expected in cases.items():
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        out = run("config", "check", str(bad))
        assert out.returncode != 0, text
        assert expected in out.stderr, (text, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_every_command_has_help():
    top = run("--help")
    assert top.returncode == 0
    commands = re.findall(r"^  ([a-z-]+)\s", top.stdout.split("Commands:")[1], re.M)
    assert {"serve", "admin", "config", "copy", "completions", "pool"} <= set(commands)
    for command in commands:
        if command == "help":
            continue
        out = run(command, "--help")
        assert out.returncode == 0 and "Usage:" in out.stdout, command


def test_the_readmes_wheel_install_line_installs_a_working_package(tmp_path):
    """The README's `pip install ./crates/python` (a maturin wheel, built in pip's isolated
    build environment) run as written in a fresh virtual environment: the package imports and
    stores and reads an object in-process."""
    readme = (REPO / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith("pip install ./crates/python"))
    command = line.split("#")[0].split()
    venv = tmp_path / "venv"
    # numpy (the package's one dependency) comes from the system site, not the network.
    subprocess.run(["python3", "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    env = dict(__import__("os").environ, CARGO_TARGET_DIR=str(REPO / "target"))
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", *command], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=1800)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    script = (
        "import isthmus, sys, os; print(os.path.dirname(isthmus.__file__));"
        "s = isthmus.Store(sys.argv[1]); s.create_bucket('wheel'); s.put_object('wheel', 'k', b'wheel');"
        "print(s.get_object('wheel', 'k').decode())"
    )
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", script, str(tmp_path / "root")],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    where, answer = ran.stdout.split()
    assert answer == "wheel" and where.startswith(str(venv))
