"""Shared fixtures for the engine, example and CLI tests (kept small on purpose)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

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


@pytest.fixture
def clean_env(monkeypatch):
    """No variable that configures a model (agent tests: each says what it uses)."""
    from agent_flows import ENV_VARS

    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server(clean_env):
    """A local model server speaking both providers' wire formats (tests/model_server.py)."""
    from model_server import ModelServer

    s = ModelServer()
    yield s
    s.close()
