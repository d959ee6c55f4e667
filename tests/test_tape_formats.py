"""Every reader reads a tape of the previous formats as it reads today's (8: a token taken that is
an int, a bool or None named by itself, digests.taken_mark), record for record: 5 (a firing and
its step on two lines), 6 (one line, written with a write(2) a line) and 7 (written through a
mapping, tapefile.py; every token taken named by its digest). The fixtures in tests/tapes/
v5-growing, v6-growing and v7-growing were written by Flowtape before formats 6, 7 and 8, from
tests/flows/growing.py's `main` with 600 numbers, one worker."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest
from flowtape.cli import main as cli_main
from flowtape.loader import load_module
from flowtape.runner import execute
from flowtape.seek import at_step_from_checkpoints, find_steps, last_step_number
from flowtape.tape import FORMAT_VERSION, Firing, Step, read_tape
from flowtape.verify import verify
from flowtape_lsp.tapeindex import TapeIndex, last_step_from_end

TAPES = Path(__file__).parent / "tapes"
FLOW = Path(__file__).parent / "flows" / "growing.py"
N = 600  # as the fixture was recorded
STEPS = 2 * N


PREVIOUS = {"v5-growing": 5, "v6-growing": 6, "v7-growing": 7}


@pytest.fixture(params=list(PREVIOUS))
def tapes(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A fixture's run directory (a previous format) and a run of the same flow recorded now."""
    old = tmp_path / "runs" / request.param
    shutil.copytree(TAPES / request.param, old)
    m = load_module(FLOW)
    monkeypatch.setattr(m, "N", N)  # (the module is shared with later tests that load the same file)
    new = execute(m.main, max_workers=1, runs_dir=tmp_path / "runs", run_id="now-growing")
    assert new.status == "succeeded"
    return old, new.run_dir


def story(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """What a tape says happened, without its timings and hashes: its firings and its steps."""
    tape = read_tape(path)
    firings = [(f.seq, f.actor, f.fireCount, f.consumed, [(i, [bytes(t) for t in ts]) for i, ts in f.produced],
                bytes(f.state) if f.state else None, f.stateEdit) for f in tape.firings()]
    steps = [(s.step, s.actor, s.fireCount, s.journalSeq, s.queues, s.round, s.kind, s.line) for s in tape.steps()]
    return firings, steps


def test_the_previous_format_reads_as_todays(tapes):
    old, new = tapes
    old_tape, new_tape = read_tape(old / "tape.jsonl"), read_tape(new / "tape.jsonl")
    version = PREVIOUS[old.name]
    assert (old_tape.header.version, new_tape.header.version) == (version, FORMAT_VERSION)
    assert len(old_tape.lines) == len(new_tape.lines)  # (format 5: two lines where one holds two records now)
    if version == 5:
        assert new_tape.lines[-1].number < old_tape.lines[-1].number * 0.6
    else:
        assert new_tape.lines[-1].number == old_tape.lines[-1].number
    old_firings, old_steps = story(old / "tape.jsonl")
    new_firings, new_steps = story(new / "tape.jsonl")
    assert len(old_steps) == STEPS
    # the same firings, digests included (the digest rule did not change), and the same steps
    assert [f[:4] + f[4:5] for f in old_firings] == [f[:4] + f[4:5] for f in new_firings]
    assert old_steps == new_steps


def test_every_reader_reads_the_previous_format(tapes, capsys):
    old, new = tapes
    for name in (old.name, new.name):
        assert cli_main(["verify", str(old.parent / name)]) == 0
    capsys.readouterr()
    _, old_rebuild = verify(old / "tape.jsonl")
    _, new_rebuild = verify(new / "tape.jsonl")
    assert old_rebuild.states == new_rebuild.states and old_rebuild.outputs_raw() == new_rebuild.outputs_raw()
    assert old_rebuild.step == new_rebuild.step == STEPS

    headers = [read_tape(run / "tape.jsonl").header for run in (old, new)]
    assert [last_step_number(run / "tape.jsonl") for run in (old, new)] == [STEPS, STEPS]
    for first, limit in ((1, 5), (517, 40), (STEPS - 3, 10)):  # bisected on step numbers, then read on
        found = [find_steps(run / "tape.jsonl", header, first, limit) for run, header in zip((old, new), headers, strict=True)]
        assert found[0] is not None and found[1] is not None
        assert [(s.step, s.actor, s.fireCount, s.journalSeq, s.queues) for s in found[0]] == \
               [(s.step, s.actor, s.fireCount, s.journalSeq, s.queues) for s in found[1]], first
    for number in (1, 2, 700, 1025, STEPS - 1, STEPS):  # from the checkpoints before the step
        at = [at_step_from_checkpoints(run / "tape.jsonl", header, number) for run, header in zip((old, new), headers, strict=True)]
        assert at[0] is not None and at[1] is not None
        assert at[0].rebuild.states == at[1].rebuild.states and at[0].step.actor == at[1].step.actor, number
        assert [f.seq for f, _ in at[0].firings] == [f.seq for f, _ in at[1].firings], number

    # the language server's index, followed from the start, and its answer from the tape's two ends
    indexes = [TapeIndex(run) for run in (old, new)]
    for index in indexes:
        index.ingest_all()
        assert index.steps == STEPS and index.corrupt is None and index.end is not None
    pages = [[(s.step, s.actor, s.fireCount, s.journalSeq) for s in index.read_steps(600, 70)] for index in indexes]
    assert pages[0] == pages[1] and len(pages[0]) == 70
    for number in (3, 999, STEPS):
        details = [index.at_step(number) for index in indexes]
        assert details[0].rebuild.states == details[1].rebuild.states, number
    ends = [last_step_from_end(run / "tape.jsonl", STEPS) for run in (old, new)]
    assert ends[0] is not None and ends[1] is not None and ends[0].rebuild.states == ends[1].rebuild.states

    # show, whole and at a step
    shown = []
    for run in (old, new):
        assert cli_main(["show", str(run), "--step", "777"]) == 0
        shown.append(capsys.readouterr().out.replace(run.name, "RUN"))
    assert shown[0].splitlines()[1:] == shown[1].splitlines()[1:]
    assert cli_main(["show", str(old), "--records"]) == 0
    records = [msgspec.json.decode(line) for line in capsys.readouterr().out.splitlines()]
    assert sum(1 for r in records if r["t"] == "step") == STEPS and sum(1 for r in records if r["t"] == "firing") == STEPS


@pytest.mark.parametrize("at_step", [1, 700, STEPS - 1, STEPS])
def test_a_previous_format_tape_resumes_into_todays(tapes, at_step, monkeypatch):
    old, new = tapes
    m = load_module(FLOW)
    monkeypatch.setattr(m, "N", N)  # (the module is shared with later tests that load the same file)
    resumed = execute(m.main, max_workers=1, runs_dir=old.parent, resume_from=old, at_step=at_step)
    assert resumed.status == "succeeded" and resumed.replay_stopped == []
    tape, rebuild = verify(resumed.run_dir / "tape.jsonl")
    assert tape.header.version == FORMAT_VERSION
    assert rebuild.outputs_raw() == verify(new / "tape.jsonl")[1].outputs_raw()
    replayed = [r for r in tape.records() if isinstance(r, Firing | Step) and r.replayed]
    assert len(replayed) == 2 * at_step  # the recorded firings up to the step, and their steps
