"""The last step of a finished run is described from the two ends of its tape (header and end
record) exactly as a full read of the tape describes it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from flowtape.loader import load_module
from flowtape.runner import execute
from flowtape_lsp.commands import describe
from flowtape_lsp.tapeindex import TapeIndex, last_step_from_end
from flowtape_lsp.workspace import Locator

REPO = Path(__file__).resolve().parents[2]
FLOWS = [REPO / "examples" / name for name in ("chain.py", "loop_accumulator.py", "nested.py", "review.py", "fanout_join.py")]


@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("flow", FLOWS, ids=lambda p: p.stem)
def test_the_last_step_from_the_end_equals_a_full_read(flow, workers, tmp_path):
    result = execute(load_module(flow).main, max_workers=workers, runs_dir=tmp_path)
    assert result.run_dir is not None and result.steps > 0
    run = SimpleNamespace(run_id=result.run_id)
    fast = last_step_from_end(result.run_dir / "tape.jsonl", result.steps)
    assert fast is not None
    index = TapeIndex(result.run_dir)
    index.ingest_all()
    assert describe(run, fast, Locator()) == describe(run, index.at_step(result.steps), Locator())  # type: ignore[arg-type]


def test_only_the_last_step_of_a_finished_run_is_answered_from_the_end(tmp_path):
    result = execute(load_module(FLOWS[0]).main, max_workers=1, runs_dir=tmp_path)
    tape = result.run_dir / "tape.jsonl"
    assert last_step_from_end(tape, result.steps - 1) is None
    lines = tape.read_bytes().splitlines(keepends=True)
    tape.write_bytes(b"".join(lines[:-1]))  # no end record: still running, or killed
    assert last_step_from_end(tape, result.steps) is None


@pytest.mark.parametrize("flow", FLOWS, ids=lambda p: p.stem)
def test_a_hover_on_a_finished_run_not_read_yet_sees_what_a_full_read_sees(flow, tmp_path):
    """Hovering over an actor of a long finished run must not wait for the whole tape."""
    from flowtape_lsp.inspect import _last_view, _view

    result = execute(load_module(flow).main, max_workers=4, runs_dir=tmp_path)
    run = SimpleNamespace(run_id=result.run_id, run_dir=result.run_dir, index=TapeIndex(result.run_dir))
    fast = _last_view(run)  # type: ignore[arg-type]
    assert fast is not None and run.index.offset == 0  # nothing read through
    run.index.ingest_all()
    assert fast == _view(run, result.steps)  # type: ignore[arg-type]


def test_the_index_reads_past_a_line_longer_than_its_read_chunk(tmp_path, monkeypatch):
    """A first page of a finished run is read a chunk at a time: a longer line in the way must be
    read whole, not taken for the end of what is written."""
    from flowtape_lsp import tapeindex

    monkeypatch.setattr(tapeindex, "CHUNK", 1 << 16)  # 4 KB a read for `until_step`, far below the line
    flow = tmp_path / "big.py"
    flow.write_text(
        "from flowtape import Port, connect, task, workflow\n\n\n"
        "@task\nclass Src:\n    class Ports:\n        Out = Port[str](direction='out')\n\n    i: int = 0\n\n"
        "    def action(self):\n        if self.i >= 30:\n            return None\n        self.i += 1\n"
        "        return 'x' * (300_000 if self.i == 3 else 5)\n\n\n"
        "@workflow\ndef main():\n    connect(Src().Out, 'Out')\n"
    )
    result = execute(load_module(flow).main, max_workers=1, runs_dir=tmp_path / "runs")
    index = TapeIndex(result.run_dir)
    index.ingest_all(until_step=20)
    assert index.steps >= 20
    assert [s.step for s in index.read_steps(1, 20)] == list(range(1, 21))
