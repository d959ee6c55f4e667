"""Shared fixtures for the engine, example and CLI tests (kept small on purpose)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from flowtape.tape import Tape

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# A source of 1..n, for flows written in the tests themselves (engine, CLI and language server): GEN_FLOW.format(body=...)
GEN_FLOW = '''\
from flowtape import Port, connect, task, workflow


@task
class Gen:
    class Ports:
        Out = Port[int](direction="out")

    n: int
    i: int = 0

    def action(self):
        if self.i >= self.n:
            return None
        self.i += 1
        return self.i

{body}'''


def check_replayed_in_place(old: Tape, new: Tape, live: tuple[str, ...] = ()) -> None:
    """A resume where the recorded run stopped: every firing on the old tape replayed (those of
    the actors in `live` aside), inside the same top-level firing, but for the top-level firings
    that have no step there (a composite's is entered again, and it and its step are new; a
    leaf's was cut from its step, written with it, and runs again). A step is marked replayed
    exactly when all its firings were."""
    stepped = {(s.actor, s.fireCount) for s in old.steps()}
    recorded = {(f.actor, f.fireCount): f.within for f in old.firings()
                if f.actor not in live and (f.within or (f.actor, f.fireCount) in stepped)}
    replayed = {(f.actor, f.fireCount): f.within for f in new.firings() if f.replayed}
    assert replayed == recorded
    firings_of: dict[tuple[str, int], list[bool]] = {}
    for f in new.firings():
        top = (f.within[0], f.within[1]) if f.within else (f.actor, f.fireCount)
        firings_of.setdefault(top, []).append(f.replayed)
    for s in new.steps():
        assert s.replayed == all(firings_of[(s.actor, s.fireCount)]), s


@pytest.fixture(params=["trusted", "checkpoints", "verified"])
def resume_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a resume reads the recorded run: as a tape this machine wrote (trust.py), the same with
    a checkpoint after every other step, or verified in full as a tape from elsewhere."""
    from flowtape import checkpoints, trust

    if request.param == "checkpoints":
        monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 2)
        monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    if request.param == "verified":
        monkeypatch.setattr(trust, "seals", lambda data, seal: False)
    return str(request.param)


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    """A fresh runs directory, so no test writes to the repository's `.flowtape/`."""
    return tmp_path / "runs"


@pytest.fixture
def write_flow(tmp_path: Path):
    """Write a flow file; returns its resolved path. `line(path, marker)` finds a `# MARKER` line."""

    def write(source: str, name: str = "flow.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
        return path.resolve()

    return write


def line_of(path: Path, marker: str) -> int:
    """The 1-based line of the first line of `path` that ends with `# marker`."""
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if text.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(f"no line marked {marker!r} in {path}")


def loopback_only() -> bool:
    """Whether this process's network namespace has no interface but loopback (scripts/loopback-only.sh)."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


@pytest.fixture(scope="session")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real Ray head (2 CPUs) for the whole test session, in this loopback-only namespace: its
    address, which runs join (in this process, CLI children, the language server's children)."""
    if not loopback_only():
        message = ("the Ray tests start a cluster, so they run only in a loopback-only network namespace: "
                   "scripts/loopback-only.sh .venv/bin/python -m pytest ... (as `make pytest` does)")
        if os.environ.get("FLOWTAPE_LOOPBACK_ONLY"):
            pytest.fail(message)
        pytest.skip(message)
    # its own token and folder: nothing shared with another Ray on this machine (~/.ray, /tmp/ray)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16), RAY_USAGE_STATS_ENABLED="0")
    temp = tempfile.mkdtemp(prefix="ftray-", dir="/tmp")  # (short: Ray's socket paths must fit 107 bytes)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("ray") / "head.log"
    ray_bin = Path(sys.executable).with_name("ray")
    with log.open("w") as out:
        head = subprocess.Popen(
            [str(ray_bin), "start", "--head", "--block", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
             "--disable-usage-stats", f"--temp-dir={temp}", "--node-ip-address=127.0.0.1"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            if head.poll() is not None:
                pytest.fail(f"ray start --head exited {head.returncode}:\n{log.read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the Ray head did not answer within 90 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.3)
        yield f"127.0.0.1:{port}"
    finally:
        head.terminate()  # (--block: it stops what it started)
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(head.pid, signal.SIGKILL)  # its session: whatever of it is left
        shutil.rmtree(temp, ignore_errors=True)
@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No variable that configures a model, nor wfpy's config file (agent tests: each says what it uses)."""
    from agent_flows import ENV_VARS

    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # (where agents.config reads wfpy's file)


@pytest.fixture
def server(clean_env):
    """A local model server speaking both providers' wire formats (tests/model_server.py)."""
    from model_server import ModelServer

    s = ModelServer()
    yield s
    s.close()
