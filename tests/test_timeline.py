"""The timeline's reader on tapes as written: inner firings carry their time (a step's `at`/`dur`),
each names the firing it ran in (a nested composite's own is timed by what it holds, as deep as the
flow nests), and a tape from before they were timed reads as before, its composite steps without
inner bars."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from flowtape.loader import load_module
from flowtape.runner import execute
from flowtape.tape import read_tape
from flowtape_lsp.protocol import TimelineFiring
from flowtape_lsp.timeline import TimelineReader

EXAMPLES = Path(__file__).parent.parent / "examples"
FLOWS = Path(__file__).parent / "flows"

WORKFLOW_IN_WORKFLOW = """\
from flowtape import Port, connect, task, workflow


@task
class Numbers:
    n: int
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    def action(self):
        if self.i == self.n:
            return None
        self.i += 1
        return self.i


@task
class Keep:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x


@workflow(inputs={"In": int}, outputs={"Out": int})
def leaf():
    k = Keep()
    connect("In", k.In)
    connect(k.Out, "Out")


@workflow(inputs={"In": int}, outputs={"Out": int})
def middle():
    first = Keep()
    deeper = leaf()
    connect("In", first.In)
    connect(first.Out, deeper.In)
    connect(deeper.Out, "Out")


@workflow
def main():
    numbers = Numbers(n=4)
    outer = middle()
    connect(numbers.Out, outer.In)
    connect(outer.Out, "Out")
"""


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


def _nesting(path: Path) -> tuple[int, list[TimelineFiring], list[str]]:
    """Check the timeline's inner firings against the tape: every firing a step ran, in its order,
    each naming the firing of its owner it ran in and lying within that one's bar (the step's at
    the first level). The deepest level found, the inner firings and the actors they name."""
    tape = read_tape(path)
    owners = {a.path: a.owner or a.path.rpartition("/")[0] for a in tape.header.actors}
    reader = TimelineReader(path)
    steps, inner = reader.read(1)
    names = reader.actors
    of_step = {s.step: s for s in steps}
    keys = {(s.actor, s.fireCount): s.step for s in tape.steps()}
    ran: dict[int, list[str]] = {}
    for f in tape.firings():
        if f.within is not None:
            ran.setdefault(keys[(f.within[0], f.within[1])], []).append(f.actor)
    assert {n: [names[f.actor] for f in inner if f.step == n] for n in ran} == ran
    by_ref = {(f.step, f.index): f for f in inner}
    depth: dict[tuple[int, int], int] = {}
    for f in inner:
        actor = names[f.actor]
        if f.parent == 0:
            up_actor, up_at, up_end = names[of_step[f.step].actor], of_step[f.step].at, of_step[f.step].at + of_step[f.step].dur
            depth[(f.step, f.index)] = 1
        else:
            up = by_ref[(f.step, f.parent)]
            assert up.index < f.index
            up_actor, up_at, up_end = names[up.actor], up.at, up.at + up.dur
            depth[(f.step, f.index)] = depth[(f.step, f.parent)] + 1
        assert owners[actor] == up_actor, (actor, up_actor)
        assert up_at <= f.at and f.at + f.dur <= up_end, (actor, up_actor)
    return max(depth.values()), inner, names


def test_a_composite_nested_in_composites_spans_what_it_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FT_LOG", str(tmp_path / "log"))
    module = load_module(FLOWS / "scopes.py")
    result = execute(module.deep, max_workers=1, runs_dir=tmp_path / "runs")  # loop > workflow > loop > if > task
    assert result.status == "succeeded"
    deepest, inner, names = _nesting(result.run_dir / "tape.jsonl")
    assert deepest == 4
    # the inner loop's last firing (its `out`) holds nothing: a mark where it came, after its items
    ends = [f for f in inner if names[f.actor] == "sub/lp" and f.dur == 0]
    assert ends and all(any(g.parent == f.parent and g.index < f.index for g in inner if g.step == f.step) for f in ends)


@pytest.mark.parametrize("workers", [1, 3])
def test_a_workflow_inside_a_workflow_has_its_own_bar(tmp_path: Path, workers: int) -> None:
    flow = tmp_path / "wfwf.py"
    flow.write_text(WORKFLOW_IN_WORKFLOW)
    try:
        result = execute(load_module(flow).main, max_workers=workers, runs_dir=tmp_path / "runs")
    finally:
        sys.modules.pop("wfwf", None)
    assert result.status == "succeeded"
    assert _nesting(result.run_dir / "tape.jsonl")[0] == 2  # (the step: outer) > outer/deeper > outer/deeper/k
    # a tape from before the header said `owner`: a nested workflow's members still nest, by path
    path = result.run_dir / "tape.jsonl"
    lines = path.read_bytes().split(b"\n")
    assert b'"owner"' in lines[0]
    old = tmp_path / "before-owner.jsonl"
    old.write_bytes(b"\n".join([re.sub(rb',"owner":"[^"]*"', b"", lines[0]), *lines[1:]]))
    assert TimelineReader(old).read(1) == TimelineReader(path).read(1)
