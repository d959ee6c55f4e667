"""Shared fixtures for the engine, example and CLI tests (kept small on purpose)."""

from __future__ import annotations

import textwrap
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
    from flowtape import scheduler, trust

    if request.param == "checkpoints":
        monkeypatch.setattr(scheduler, "CHECKPOINT_STEPS", 2)
        monkeypatch.setattr(scheduler, "CHECKPOINT_GROWTH", 0)
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
