"""The timeline's reader on tapes as written: inner firings carry their time (a step's `at`/`dur`),
and a tape from before they did reads as before, its composite steps without inner bars."""

from __future__ import annotations

import re
from pathlib import Path

from flowtape.loader import load_module
from flowtape.runner import execute
from flowtape.tape import read_tape
from flowtape_lsp.timeline import TimelineReader

EXAMPLES = Path(__file__).parent.parent / "examples"


def _run(tmp_path: Path) -> Path:
    result = execute(load_module(EXAMPLES / "if_else.py").main, max_workers=1, runs_dir=tmp_path / "runs")
    assert result.status == "succeeded"
    return result.run_dir / "tape.jsonl"


def test_inner_firings_are_timed_inside_their_step(tmp_path: Path) -> None:
    tape = read_tape(_run(tmp_path))
    steps = {(s.actor, s.fireCount): s for s in tape.steps()}
    inner = [f for f in tape.firings() if f.within is not None]
    leaves = [f for f in inner if f.actor in ("check", "review", "approve")]
    assert leaves and all(f.at is not None and f.dur is not None for f in leaves)
    for f in leaves:
        assert f.within is not None and f.at is not None and f.dur is not None
        step = steps[f.within]
        assert step.at <= f.at and f.at + f.dur <= step.at + step.dur
    assert all(f.at is None for f in inner if f.actor == "c")  # an if's own record: when it started is its step's


def test_a_tape_without_inner_times_reads_without_inner_bars(tmp_path: Path) -> None:
    path = _run(tmp_path)
    timed_steps, timed_inner = TimelineReader(path).read(1)
    # each loop item's step has its inner bars; the loop's last step (its `out` firing) none
    assert {f.step for f in timed_inner} == {s.step for s in timed_steps[:-1]}
    old = tmp_path / "old.jsonl"
    old.write_bytes(_strip_inner_times(path.read_bytes()))
    steps, inner = TimelineReader(old).read(1)
    assert inner == [] and [(s.step, s.at, s.dur) for s in steps] == [(s.step, s.at, s.dur) for s in timed_steps]
    assert not [f for f in read_tape(old).firings() if f.at is not None]


def _strip_inner_times(data: bytes) -> bytes:
    lines = data.split(b"\n")
    return b"\n".join(re.sub(rb',"at":\d+,"dur":\d+', b"", line) if b'"within"' in line else line for line in lines)


def test_a_reader_goes_on_from_where_it_stopped(tmp_path: Path) -> None:
    path = _run(tmp_path)
    whole, whole_inner = TimelineReader(path).read(1)
    data = path.read_bytes()
    cut = tmp_path / "growing.jsonl"
    half = data.index(b'"t":"s","step":3')  # mid-run: steps 1 and 2 written, and step 3's firings
    cut.write_bytes(data[: data.rindex(b"\n", 0, half) + 1] + b'{"t":"f","seq":99')  # and a line being written
    reader = TimelineReader(cut)
    first, first_inner = reader.read(1)
    assert [s.step for s in first] == [1, 2]
    cut.write_bytes(data)
    rest, rest_inner = reader.read(3)
    assert [s.step for s in first + rest] == [s.step for s in whole]
    assert first_inner + rest_inner == whole_inner  # step 3's inner firings, read before its step, are kept
    again, _ = reader.read(1)  # asked from the start again: read anew
    assert again == whole
