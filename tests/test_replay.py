"""Resuming a run at a step: recorded firings up to the step are replayed, the rest run live."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GEN_FLOW
from flowtape import checkpoints, connect, replay, trust, workflow
from flowtape.cli import main as cli_main
from flowtape.errors import ResumeRefused, UsageError
from flowtape.loader import load_flow, load_module
from flowtape.rundir import RunSummary, read_summary, still_running
from flowtape.runner import execute
from flowtape.tape import FORMAT_VERSION, READABLE_VERSIONS, Checkpoint, Firing, Step, read_tape
from flowtape.verify import verify

FLOWS = Path(__file__).parent / "flows"


def load(name: str):
    return load_module(FLOWS / f"{name}.py")


@pytest.fixture
def chain():
    m = load("chain")
    m.CALLS.clear()
    m.BROKEN, m.SKEW = False, 0
    yield m
    m.BROKEN, m.SKEW = False, 0


@pytest.fixture
def branches():
    m = load("branches")
    m.CALLS.clear()
    m.LEFT_SKEW, m.VERDICT = 0, "ok"
    yield m
    m.LEFT_SKEW, m.VERDICT = 0, "ok"


def tape_of(result):
    return read_tape(result.run_dir / "tape.jsonl")


def covered_by(tape, at_step: int) -> set[tuple[str, int]]:
    """The firings steps 1..at_step cover: their own, and those that ran inside them (`within`)."""
    tops = {(s.actor, s.fireCount) for s in tape.steps()[:at_step]}
    return {(f.actor, f.fireCount) for f in tape.firings() if (tuple(f.within) if f.within else (f.actor, f.fireCount)) in tops}


def live_counts(tape, leaf_kinds=("task", "agent")) -> dict[str, int]:
    kinds = {a.path: a.kind for a in tape.header.actors}
    counts: dict[str, int] = {}
    for f in tape.firings():
        if not f.replayed and kinds[f.actor] in leaf_kinds:
            counts[f.actor] = counts.get(f.actor, 0) + 1
    return counts


# name of each actor's counter, per flow (agents are mocks: they count nothing)
COUNTERS = {
    "main": {"source": "source", "double": "double", "add": "add", "total": "total"},
    "looped": {"sub/inc": "inc", "sub/square": "square", "done": "count"},
    "nested_top": {"numbers": "numbers", "sub/inc": "inc", "sub/square": "square"},
    "fanout": {"numbers": "numbers", "left": "left", "right": "right", "left_sink": "left_sink", "right_sink": "right_sink"},
    "gated": {"numbers": "numbers", "parity": "parity", "even": "even", "odd": "odd"},
}


def check_resume(module, flow, original, at_step: int, workers: int, runs_dir: Path) -> None:
    module.CALLS.clear()
    resumed = execute(flow, max_workers=workers, runs_dir=runs_dir, resume_from=original.run_dir, at_step=at_step)
    assert resumed.status == "succeeded", resumed.error
    assert resumed.outputs == original.outputs, f"at step {at_step}"
    assert resumed.replay_stopped == []
    verify(resumed.run_dir / "tape.jsonl")
    old, new = tape_of(original), tape_of(resumed)
    assert new.header.resumedFrom == original.run_id and new.header.resumedAtStep == at_step
    # exactly the firings the step covers are replayed ...
    replayed = {(f.actor, f.fireCount) for f in new.firings() if f.replayed}
    assert replayed == covered_by(old, at_step), f"at step {at_step}"
    if workers == 1 and at_step:
        # ... which, with one worker, are the firings written before the step
        cut = old.steps()[at_step - 1].journalSeq
        assert replayed == {(f.actor, f.fireCount) for f in old.firings() if f.seq <= cut}
    # ... and the actions that ran live are those of the firings after it
    counters = COUNTERS[flow.name]
    live = live_counts(new)
    for actor, counter in counters.items():
        total = sum(1 for f in new.firings() if f.actor == actor)
        replayed_here = sum(1 for f in new.firings() if f.actor == actor and f.replayed)
        assert module.CALLS.get(counter, 0) == live.get(actor, 0) == total - replayed_here, (at_step, actor)
    # every step up to the resume step is marked replayed, composite ones too
    steps = new.steps()
    assert sum(1 for s in steps if s.replayed) == at_step
    if workers == 1:
        assert [s.replayed for s in steps] == [True] * at_step + [False] * (len(steps) - at_step)
        # one worker's steps follow one another on the tape's clock, across the resume too: the
        # live ones come after the replayed ones whose recorded times were copied (the timeline)
        overlaps = [(a.step, b.step) for a, b in zip(steps, steps[1:], strict=False) if b.at < a.at + a.dur]
        assert overlaps == [], f"at step {at_step}"


@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("flow_name", ["chain:main", "branches:looped", "branches:nested_top", "branches:fanout", "branches:gated"])
def test_resume_at_every_step(flow_name, workers, tmp_path, chain, branches, resume_path):
    module = chain if flow_name.startswith("chain") else branches
    flow = getattr(module, flow_name.split(":")[1])
    original = execute(flow, max_workers=workers, runs_dir=tmp_path)
    assert original.status == "succeeded"
    clean_outputs = execute(flow, max_workers=1, runs_dir=tmp_path).outputs
    assert original.outputs == clean_outputs
    if resume_path == "checkpoints":
        assert any(isinstance(r, Checkpoint) for r in tape_of(original).records()) or workers > 1
    for at_step in range(original.steps + 1):
        check_resume(module, flow, original, at_step, workers, tmp_path)


def test_resume_at_step_zero_runs_everything_again(chain, tmp_path):
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    chain.CALLS.clear()
    resumed = execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir, at_step=0)
    assert resumed.outputs == original.outputs
    assert chain.CALLS == {"source": 5, "double": 5, "add": 5, "total": 5}
    assert not any(f.replayed for f in tape_of(resumed).firings())
    assert not any(s.replayed for s in tape_of(resumed).steps())


@pytest.mark.parametrize("workers", [1, 3])
def test_a_failed_run_fixed_and_resumed_runs_no_firing_twice(chain, tmp_path, workers):
    clean = execute(chain.main, max_workers=1, runs_dir=tmp_path / "clean").outputs
    chain.CALLS.clear()
    chain.BROKEN = True
    failed = execute(chain.main, max_workers=workers, runs_dir=tmp_path)
    assert failed.status == "failed"
    assert failed.error.actor == "add" and failed.error.fireCount == 3
    assert "power cut" in failed.error.message
    first_calls = dict(chain.CALLS)
    chain.BROKEN = False  # the fix
    chain.CALLS.clear()
    resumed = execute(chain.main, max_workers=workers, runs_dir=tmp_path, resume_from=failed.run_dir)
    assert resumed.status == "succeeded", resumed.error
    assert resumed.outputs == clean
    assert read_tape(resumed.run_dir / "tape.jsonl").header.resumedAtStep == failed.steps
    # across both runs, every firing ran exactly once
    for actor in ("source", "double", "add", "total"):
        assert first_calls.get(actor, 0) + chain.CALLS.get(actor, 0) == 5, actor
    new = tape_of(resumed)
    assert {(f.actor, f.fireCount) for f in new.firings() if f.replayed} == {
        (f.actor, f.fireCount) for f in tape_of(failed).firings()
    }


def test_a_resumed_run_resumed_again(chain, tmp_path):
    first = execute(chain.main, max_workers=1, runs_dir=tmp_path, run_id="first")
    second = execute(chain.main, max_workers=2, runs_dir=tmp_path, run_id="second", resume_from=first.run_dir, at_step=7)
    chain.CALLS.clear()
    third = execute(chain.main, max_workers=1, runs_dir=tmp_path, run_id="third", resume_from="second", at_step=13)
    assert first.outputs == second.outputs == third.outputs
    head = tape_of(third).header
    assert (head.resumedFrom, head.resumedAtStep) == ("second", 13)
    assert read_summary(third.run_dir).resumedFrom == "second"
    new = tape_of(third)
    assert sum(1 for f in new.firings() if f.replayed) == 13
    assert sum(chain.CALLS.values()) == 20 - 13
    assert covered_by(tape_of(second), 13) == {(f.actor, f.fireCount) for f in new.firings() if f.replayed}


def test_replayed_answers_are_kept(chain, branches, tmp_path):
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    chain.SKEW = 1000  # `double` would now answer differently
    chain.CALLS.clear()
    resumed = execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir)
    assert chain.CALLS == {}
    assert resumed.outputs == original.outputs
    assert all(f.replayed for f in tape_of(resumed).firings())

    looped = execute(branches.looped, max_workers=1, runs_dir=tmp_path)
    branches.VERDICT = "changed my mind"  # the agent would now answer differently
    branches.CALLS.clear()
    again = execute(branches.looped, max_workers=1, runs_dir=tmp_path, resume_from=looped.run_dir)
    assert branches.CALLS == {}
    assert again.outputs == looped.outputs
    assert again.outputs["Verdicts"] == ["ok", "ok", "ok"]
    old_chats = [f.chat for f in tape_of(looped).firings() if f.actor == "reviewer"]
    new_chats = [f.chat for f in tape_of(again).firings() if f.actor == "reviewer"]
    assert [bytes(c) for c in new_chats] == [bytes(c) for c in old_chats] and len(new_chats) == 3
    # resumed earlier, the agent answers live, with the new answer
    fresh = execute(branches.looped, max_workers=1, runs_dir=tmp_path, resume_from=looped.run_dir, at_step=1)
    assert fresh.outputs["Verdicts"] == ["ok", "changed my mind", "changed my mind"]


def test_divergence_names_the_actor_and_independent_branches_replay_on(branches, tmp_path):
    original = execute(branches.diverge, max_workers=1, runs_dir=tmp_path)
    assert original.outputs == {"LeftOut": [10, 30, 60, 100], "RightOut": [100, 300, 600, 1000]}
    branches.LEFT_SKEW = 1  # `moody` (never replayable, so always live) now answers differently
    branches.CALLS.clear()
    resumed = execute(branches.diverge, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir)
    assert resumed.status == "succeeded"
    assert resumed.outputs == {"LeftOut": [11, 32, 63, 104], "RightOut": [100, 300, 600, 1000]}
    stopped = {d.actor: d for d in resumed.replay_stopped}
    assert list(stopped) == ["moody", "left_sink"]
    assert "notReplayable" in stopped["moody"].reason and "_mutex" in stopped["moody"].reason
    d = stopped["left_sink"]
    assert d.reason == "inputs differ"
    assert d.fireCount == 1
    assert d.queue == "moody.Out->left_sink.In"
    assert d.recorded and d.actual and d.recorded != d.actual
    assert d.recordedPreview == "10" and d.actualPreview == "11"
    steps = tape_of(resumed).steps()
    first_left_sink = next(s.step for s in steps if s.actor == "left_sink")
    assert d.step == first_left_sink
    # the right branch never saw the change: it replays on, after the divergence
    assert "right" not in branches.CALLS and "right_sink" not in branches.CALLS
    assert branches.CALLS == {"moody": 4, "left_sink": 4}
    right_steps = [s for s in steps if s.actor in ("right", "right_sink")]
    assert len(right_steps) == 8 and all(s.replayed for s in right_steps)
    assert all(s.step > first_left_sink for s in right_steps)
    assert not any(s.replayed for s in steps if s.actor in ("moody", "left_sink"))


def test_show_says_where_the_replay_stopped(branches, tmp_path, capsys):
    original = execute(branches.diverge, max_workers=1, runs_dir=tmp_path)
    branches.LEFT_SKEW = 1
    resumed = execute(branches.diverge, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir)
    capsys.readouterr()
    assert cli_main(["show", str(resumed.run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    said = [i for i, line in enumerate(lines) if "replay stopped" in line]
    assert [lines[i].strip() for i in said][1] == (
        "replay stopped: left_sink firing 1: inputs differ; queue moody.Out->left_sink.In; recorded 10, now 11")
    step = next(s.step for s in tape_of(resumed).steps() if s.actor == "left_sink")
    assert lines[said[1] + 1].split("·")[0].strip() == str(step)  # said just before the step it stopped at


def test_a_not_replayable_actor_runs_live_and_downstream_replays_on(chain, tmp_path):
    original = execute(chain.locked, max_workers=1, runs_dir=tmp_path)
    # said when the run is recorded, not first when it is resumed
    assert original.warnings == ["4 firing(s) of locky cannot be replayed (locky._guard: a Lock cannot be saved): a resume runs them live"]
    chain.CALLS.clear()
    resumed = execute(chain.locked, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir)
    assert resumed.outputs == original.outputs
    assert chain.CALLS == {"locky": 4}  # the same answers: `double` replays all of its firings
    assert [d.actor for d in resumed.replay_stopped] == ["locky"]
    assert "_guard" in resumed.replay_stopped[0].reason


# ---- refusals -------------------------------------------------------------------------------


def test_refused_step_out_of_range(chain, tmp_path):
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    for bad in (21, 999, -1):
        with pytest.raises(ResumeRefused, match=r"step .*steps 0 to 20"):
            execute(chain.main, runs_dir=tmp_path, resume_from=original.run_dir, at_step=bad)


def _variants(m):
    @workflow
    def main():  # an actor added
        source = m.Source(n=5)
        double = m.Double()
        add = m.Add(k=3)
        total = m.Total()
        extra = m.Double()
        connect(source.Out, double.In)
        connect(double.Out, add.In)
        connect(add.Out, total.In)
        connect(total.Out, extra.In)
        connect(extra.Out, "Out")

    added = main

    @workflow
    def main():  # noqa: F811 - an actor removed
        source = m.Source(n=5)
        double = m.Double()
        total = m.Total()
        connect(source.Out, double.In)
        connect(double.Out, total.In)
        connect(total.Out, "Out")

    removed = main

    @workflow
    def main():  # noqa: F811 - an actor renamed
        source = m.Source(n=5)
        double = m.Double()
        plus = m.Add(k=3)
        total = m.Total()
        connect(source.Out, double.In)
        connect(double.Out, plus.In)
        connect(plus.Out, total.In)
        connect(total.Out, "Out")

    renamed = main

    @workflow
    def main():  # noqa: F811 - rewired: add before double
        source = m.Source(n=5)
        double = m.Double()
        add = m.Add(k=3)
        total = m.Total()
        connect(source.Out, add.In)
        connect(add.Out, double.In)
        connect(double.Out, total.In)
        connect(total.Out, "Out")

    rewired = main
    return added, removed, renamed, rewired


def test_refused_when_the_graph_changed(chain, tmp_path):
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    added, removed, renamed, rewired = _variants(chain)
    cases = [
        (added, "actor 'extra' (Double) was added"),
        (removed, "actor 'add' (Add) was removed"),
        (renamed, "actor 'add' was renamed 'plus'"),
        (rewired, "rewired"),
    ]
    for flow, expected in cases:
        with pytest.raises(ResumeRefused, match="graph changed") as info:
            execute(flow, runs_dir=tmp_path, resume_from=original.run_dir)
        assert expected in str(info.value)
        # these flows are defined here, not in the recorded file: the message names that file
        assert f"since run {original.run_id}, which ran {FLOWS / 'chain.py'}: " in str(info.value)
    with pytest.raises(ResumeRefused) as info:
        execute(rewired, runs_dir=tmp_path, resume_from=original.run_dir)
    assert "source.Out->double.In removed" in str(info.value) and "source.Out->add.In added" in str(info.value)


def test_refused_another_workflow(chain, tmp_path):
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    with pytest.raises(ResumeRefused, match="ran workflow 'main', not 'locked'"):
        execute(chain.locked, runs_dir=tmp_path, resume_from=original.run_dir)


def test_refused_a_tape_that_fails_verification(chain, tmp_path):
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    path = original.run_dir / "tape.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if b'"a":"double"' in line and b'"n":2' in line)
    assert b'"p":[[2,[4]]]' in lines[index]
    lines[index] = lines[index].replace(b'"p":[[2,[4]]]', b'"p":[[2,[5]]]')  # a forged answer
    path.write_bytes(b"".join(lines))
    with pytest.raises(ResumeRefused, match="fails verification"):
        execute(chain.main, runs_dir=tmp_path, resume_from=original.run_dir)


def test_refused_inputs_with_a_resume(chain, tmp_path):
    original = execute(chain.seeded, {"In": 4}, max_workers=1, runs_dir=tmp_path)
    with pytest.raises(ResumeRefused, match="inputs"):
        execute(chain.seeded, {"In": 5}, runs_dir=tmp_path, resume_from=original.run_dir)
    # without inputs, the recorded ones are used
    chain.CALLS.clear()
    resumed = execute(chain.seeded, runs_dir=tmp_path, resume_from=original.run_dir, at_step=1)
    assert resumed.outputs == original.outputs == {"Out": [9]}
    assert chain.CALLS == {"add": 1}


def test_at_step_needs_resume_from(chain, tmp_path):
    with pytest.raises(UsageError, match="at_step needs resume_from"):
        execute(chain.main, runs_dir=tmp_path, at_step=3)


def test_refused_an_unknown_run(chain, tmp_path):
    with pytest.raises(UsageError, match="no run"):
        execute(chain.main, runs_dir=tmp_path, resume_from="no-such-run")


# ---- the CLI --------------------------------------------------------------------------------


def test_cli_resume_at_step(chain, tmp_path, capsys):
    flow = str(FLOWS / "chain.py")
    runs = str(tmp_path)
    assert cli_main(["run", flow, "--runs-dir", runs, "--run-id", "orig", "--max-workers", "1", "--json"]) == 0
    original = json.loads(capsys.readouterr().out)
    assert original["status"] == "succeeded" and original["steps"] == 20
    chain.CALLS.clear()
    code = cli_main(["run", flow, "--runs-dir", runs, "--run-id", "again", "--resume-from", "orig", "--at-step", "12", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["outputs"] == original["outputs"] and out["status"] == "succeeded"
    assert sum(chain.CALLS.values()) == 20 - 12
    head = read_tape(tmp_path / "again" / "tape.jsonl").header
    assert (head.resumedFrom, head.resumedAtStep) == ("orig", 12)
    # a run directory works as well as a run id
    assert cli_main(["run", flow, "--runs-dir", runs, "--resume-from", str(tmp_path / "orig"), "--at-step", "20"]) == 0
    captured = capsys.readouterr()
    assert "Out: [5, 12, 21, 32, 45]" in captured.out
    # refusals are usage errors: exit 2 with one line
    assert cli_main(["run", flow, "--runs-dir", runs, "--resume-from", "orig", "--at-step", "99"]) == 2
    err = capsys.readouterr().err
    assert "step 99" in err and "0 to 20" in err
    assert cli_main(["run", flow, "--runs-dir", runs, "--resume-from", "orig", "--input", "In=3"]) == 2
    assert "inputs" in capsys.readouterr().err
    assert cli_main(["run", flow, "--runs-dir", runs, "--at-step", "3"]) == 2
    assert "--resume-from" in capsys.readouterr().err
    # a resumed run that fails exits 1
    chain.BROKEN = True
    assert cli_main(["run", flow, "--runs-dir", runs, "--resume-from", "orig", "--at-step", "5"]) == 1
    assert "power cut" in capsys.readouterr().err


def test_steps_and_firings_of_a_resumed_tape_line_up(chain, tmp_path):
    original = execute(chain.main, max_workers=4, runs_dir=tmp_path)
    resumed = execute(chain.main, max_workers=4, runs_dir=tmp_path, resume_from=original.run_dir, at_step=9)
    tape = tape_of(resumed)
    last = 0
    for record in tape.records():
        if isinstance(record, Firing):
            last = record.seq
        elif isinstance(record, Step):
            assert record.journalSeq == last


def test_values_that_look_like_tape_fields_do_not_confuse_the_replayed_flag(tmp_path):
    m = load("tricky")
    original = execute(m.main, max_workers=1, runs_dir=tmp_path)
    assert original.outputs == {"Out": [11, 20, 31]}
    for at_step in range(original.steps + 1):
        m.CALLS.clear()
        resumed = execute(m.main, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir, at_step=at_step)
        assert resumed.outputs == original.outputs
        tape = tape_of(resumed)
        assert [f.replayed for f in tape.firings()] == [True] * at_step + [False] * (6 - at_step)
        assert [s.replayed for s in tape.steps()] == [True] * at_step + [False] * (6 - at_step)
        assert sum(m.CALLS.values()) == 6 - at_step
    # resumed from a resumed run (whose records already say `replayed`)
    twice = execute(m.main, max_workers=1, runs_dir=tmp_path, resume_from=resumed.run_dir, at_step=4)
    assert all(f.replayed for f in tape_of(twice).firings()[:4])


@pytest.mark.parametrize("workers", [1, 4])
def test_a_run_failed_inside_a_loop_resumes_without_running_anything_twice(branches, tmp_path, workers):
    clean = execute(branches.looped_fragile, max_workers=1, runs_dir=tmp_path)
    assert clean.outputs == {"Out": [5, 15, 30]}
    branches.CALLS.clear()
    branches.BROKEN = True
    try:
        failed = execute(branches.looped_fragile, max_workers=workers, runs_dir=tmp_path)
    finally:
        branches.BROKEN = False
    assert failed.status == "failed" and failed.error.actor == "fragile" and failed.error.fireCount == 2
    assert failed.steps == 1  # the loop's second item never finished: it has no step
    first = dict(branches.CALLS)
    branches.CALLS.clear()
    resumed = execute(branches.looped_fragile, max_workers=workers, runs_dir=tmp_path, resume_from=failed.run_dir)
    assert resumed.status == "succeeded" and resumed.outputs == clean.outputs
    for name in ("fragile", "acc"):
        assert first.get(name, 0) + branches.CALLS.get(name, 0) == 3, name
    assert [s.replayed for s in tape_of(resumed).steps()] == [True, False, False, False]


# ---- a tape this machine wrote is trusted: no re-verification, rebuilt from its checkpoints ----


@pytest.mark.parametrize("copy_chunk", [97, 8 << 20])
def test_a_trusted_tape_is_resumed_from_its_nearest_checkpoint(chain, tmp_path, monkeypatch, copy_chunk):
    from flowtape import writer as writer_module

    monkeypatch.setattr(writer_module, "COPY_CHUNK", copy_chunk)  # the prefix copied in many writes, or one
    monkeypatch.setattr(trust, "MAC_CHUNK", copy_chunk)  # the seal checked in many pieces (a tape over 2 GiB), or one
    monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 3)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    assert [r.step for r in tape_of(original).records() if isinstance(r, Checkpoint)] == [3, 6, 9, 12, 15, 18]
    verify(original.run_dir / "tape.jsonl")

    def full_read(*args):
        raise AssertionError("the trusted tape was verified in full")

    monkeypatch.setattr(replay, "_verified_plan", full_read)
    for at_step in range(original.steps + 1):
        check_resume(chain, chain.main, original, at_step, 1, tmp_path)
    # the copied prefix keeps its hashes: the new header names the chain they continue
    resumed = execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir, at_step=7)
    recorded, copied = tape_of(original), tape_of(resumed)
    assert copied.header.chainFrom == recorded.header.h
    assert [line.record.h for line in copied.lines[1:15]] == [line.record.h for line in recorded.lines[1:15]]
    # and a resumed tape is trusted in turn
    again = execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=resumed.run_dir, at_step=11)
    assert again.outputs == original.outputs and copied.header.chainFrom == tape_of(again).header.chainFrom


def test_a_changed_tape_is_verified_in_full_even_if_consistent(chain, tmp_path):
    """A forger who re-chains the hashes still loses the trust: the tape is verified and refused."""
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    path = original.run_dir / "tape.jsonl"
    lines = path.read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines) if b'"a":"double"' in line and b'"p"' in line)
    lines[at] = lines[at].replace(b'"p":[[2,[2]]]', b'"p":[[2,[3]]]')
    from flowtape.chain import reseal

    path.write_bytes(b"".join(line + b"\n" for line in reseal(lines)))
    with pytest.raises(ResumeRefused, match="fails verification.*consumed digests match"):
        execute(chain.main, runs_dir=tmp_path, resume_from=original.run_dir, at_step=3)


def test_without_a_key_tapes_are_verified_and_resume_the_same(chain, tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.setattr(trust, "_key_read", False)
    monkeypatch.setattr(trust, "_key", None)
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    assert read_summary(original.run_dir).tape is None
    for at_step in (0, 7, original.steps):
        check_resume(chain, chain.main, original, at_step, 1, tmp_path)


def test_a_diverged_run_resumes_the_same_trusted_or_verified(branches, tmp_path, monkeypatch):
    """A tape holding divergences and unreplayable firings: the trusted path hands it to the full
    one, and every step resumes to the same run either way."""
    monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 2)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    original = execute(branches.diverge, max_workers=1, runs_dir=tmp_path)
    branches.LEFT_SKEW = 1
    diverged = execute(branches.diverge, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir)
    assert diverged.replay_stopped
    verify(diverged.run_dir / "tape.jsonl")

    def story(result):
        return [(s.actor, s.fireCount, s.replayed) for s in tape_of(result).steps()]

    for at_step in range(diverged.steps + 1):
        trusted = execute(branches.diverge, max_workers=1, runs_dir=tmp_path, resume_from=diverged.run_dir, at_step=at_step)
        with monkeypatch.context() as m:
            m.setattr(trust, "seals", lambda data, seal: False)
            verified = execute(branches.diverge, max_workers=1, runs_dir=tmp_path, resume_from=diverged.run_dir, at_step=at_step)
        assert trusted.outputs == verified.outputs == diverged.outputs, at_step
        assert story(trusted) == story(verified), at_step
        verify(trusted.run_dir / "tape.jsonl")


def test_a_sealed_tape_of_another_version_is_refused_with_the_reason(chain, tmp_path):
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    path = original.run_dir / "tape.jsonl"
    from flowtape.chain import reseal
    from flowtape.rundir import write_summary

    lines = path.read_bytes().splitlines()
    later = FORMAT_VERSION + 1
    lines[0] = lines[0].replace(b'"version":%d,' % FORMAT_VERSION, b'"version":%d,' % later, 1)
    path.write_bytes(b"".join(line + b"\n" for line in reseal(lines)))
    summary = read_summary(original.run_dir)
    summary.tape = trust.seal_file(path, path.stat().st_size)  # as if a later Flowtape had written it
    write_summary(original.run_dir, summary)
    readable = ", ".join(str(v) for v in READABLE_VERSIONS[:-1]) + f" and {READABLE_VERSIONS[-1]}"
    with pytest.raises(ResumeRefused, match=f"format version {later}; this Flowtape reads versions {readable}"):
        execute(chain.main, runs_dir=tmp_path, resume_from=original.run_dir)


def test_checkpoints_carry_what_an_agents_chat_gained_and_resumes_restore_it(tmp_path, monkeypatch):
    """An agent at the top level, a checkpoint every other step: each checkpoint holds only the chat
    messages added since the one before; resuming anywhere gives the agent its whole history."""
    from flowtape import Port, agent, task

    @task
    class Numbers:
        i: int = 0

        class Ports:
            Out = Port[int](direction="out")

        def action(self):
            if self.i < 6:
                self.i += 1
                return self.i
            return None

    @agent(prompt="Even?", transport="mock", mock_outputs={"Verdict": lambda inputs: "yes"})
    class Judge:
        class Ports:
            In = Port[int](direction="in")
            Verdict = Port[str](direction="out")

    @workflow
    def judged():
        numbers = Numbers()
        judge = Judge()
        connect(numbers.Out, judge.In)
        connect(judge.Verdict, "Out")

    monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 2)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    original = execute(judged, max_workers=1, runs_dir=tmp_path)
    verify(original.run_dir / "tape.jsonl")
    gained = [c.chats for c in tape_of(original).records() if isinstance(c, Checkpoint)]
    assert len(gained) >= 4 and all(len(chats) <= 1 and all(len(m) <= 1 for _, m in chats) for chats in gained)
    for at_step in range(original.steps + 1):
        resumed = execute(judged, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir, at_step=at_step)
        assert resumed.outputs == original.outputs == {"Out": ["yes"] * 6}
        verify(resumed.run_dir / "tape.jsonl")  # its checkpoints say the same as its records


def test_a_resume_never_rebuilds_an_object_the_flow_does_not_define(chain, tmp_path):
    """A tape from elsewhere names a standard-library class in an actor's state, one whose
    collection would delete a file: the resume is refused, says why, and leaves a failed run."""
    from flowtape.chain import reseal

    original = execute(chain.main, max_workers=1, runs_dir=tmp_path, run_id="src")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    evil = {"$t": "object", "cls": "tempfile:_TemporaryFileCloser", "v": {"name": str(victim), "delete": True}}
    lines = (original.run_dir / "tape.jsonl").read_bytes().splitlines()
    at = next(i for i, raw in enumerate(lines) if b'"state":' in raw)
    record = json.loads(lines[at])
    record["state"]["evil"] = evil
    record.pop("h", None)
    lines[at] = json.dumps(record, separators=(",", ":")).encode()
    (original.run_dir / "tape.jsonl").write_bytes(b"".join(line + b"\n" for line in reseal(lines)))
    verify(original.run_dir / "tape.jsonl")  # the story holds: only rebuilding the value is refused
    import tempfile  # noqa: F401 - loaded, as in any flow that uses it

    with pytest.raises(ResumeRefused, match="tempfile:_TemporaryFileCloser is not the flow's own"):
        execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from="src", at_step=3, run_id="again")
    import gc

    gc.collect()
    assert victim.read_text() == "keep me"
    summary = read_summary(tmp_path / "again")
    assert summary is not None and summary.status == "failed" and "cannot resume" in summary.error.message
    assert read_tape(tmp_path / "again" / "tape.jsonl").end.status == "failed"


@pytest.mark.parametrize("example", ["chain.py", "fanout_join.py", "guards.py", "if_else.py", "nested.py", "review.py"])
def test_with_one_worker_a_resume_goes_on_in_the_recorded_order(example, tmp_path):
    """Each step's round is on the tape, so the round-robin picks up where the recording was:
    resumed at any step, the run fires in the same order and its outputs come out the same."""
    flow = load_flow(Path(__file__).parent.parent / "examples" / example)
    original = execute(flow, max_workers=1, runs_dir=tmp_path, run_id="orig")
    order = [(s.actor, s.fireCount) for s in read_tape(original.run_dir / "tape.jsonl").steps()]
    for step in range(1, original.steps):
        resumed = execute(flow, max_workers=1, runs_dir=tmp_path, resume_from="orig", at_step=step)
        assert [(s.actor, s.fireCount) for s in read_tape(resumed.run_dir / "tape.jsonl").steps()] == order, step
        assert resumed.outputs == original.outputs, step


@pytest.mark.parametrize("every", [3, 1024])
def test_an_input_wired_straight_to_an_output_is_on_the_tape_and_survives_every_resume(chain, tmp_path, monkeypatch, every):
    """No firing puts the input on its output queue: the header names it (`seededOutputs`), so
    verify, show and every resume, from the first record or from a checkpoint, still hold it."""
    from flowtape.show import detail_of

    monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", every)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    original = execute(chain.echoed, {"Tag": "hi"}, max_workers=1, runs_dir=tmp_path)
    assert original.outputs == {"Echo": ["hi"], "Out": [2, 4, 6, 8, 10]}
    assert tape_of(original).header.seededOutputs == [("Tag", 0)]
    verify(original.run_dir / "tape.jsonl")
    for at_step in range(original.steps + 1):
        resumed = execute(chain.echoed, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir, at_step=at_step)
        assert resumed.outputs == original.outputs, at_step
        verify(resumed.run_dir / "tape.jsonl")
    shown = detail_of(original.run_dir, original.steps)
    assert [(q.size, [bytes(t) for t in q.tokens]) for q in shown.queues if q.queue == "$.Echo"] == [(1, [b'"hi"'])]


ORDERED = '''
from flowtape import Port, action, connect, task, workflow

WORDS = ["pear", "apple", "fig"]


@task
class Src:
    class Ports:
        Out = Port[str](direction="out")
    i: int = 0

    def action(self):
        if self.i >= len(WORDS):
            return None
        self.i += 1
        return WORDS[self.i - 1]


@task
class Order:
    """A dict as an ordered set in its state, and dict tokens built in a chosen order."""
    class Ports:
        In = Port[str](direction="in")
        Out = Port[list](direction="out")
        Tok = Port[dict](direction="out")
    seen: dict = {}

    @action(produces={"Out": 1, "Tok": 1})
    def go(self, w):
        self.seen = {**self.seen, w: len(self.seen)}
        return {"Out": list(self.seen), "Tok": {w: 1, "zzz": 2, "aaa": 3}}


@task
class Keys:
    class Ports:
        In = Port[dict](direction="in")
        Out = Port[list](direction="out")

    def action(self, d):
        return list(d)


@workflow
def main():
    s = Src()
    o = Order()
    k = Keys()
    connect(s.Out, o.In)
    connect(o.Out, "Order")
    connect(o.Tok, k.In)
    connect(k.Out, "Keys")
'''


def test_a_dict_keeps_its_order_as_a_token_and_in_state_restored_by_a_resume(write_flow, tmp_path):
    """A dict's order is something a flow sees: the consumer gets the keys in the order they were
    put, and a resume restores a state dict in its order, so the resumed run says what the fresh
    one said."""
    flow = load_flow(write_flow(ORDERED))
    fresh = execute(flow, max_workers=1, runs_dir=tmp_path)
    assert fresh.outputs["Keys"] == [["pear", "zzz", "aaa"], ["apple", "zzz", "aaa"], ["fig", "zzz", "aaa"]]
    assert fresh.outputs["Order"][-1] == ["pear", "apple", "fig"]
    for at_step in range(fresh.steps + 1):
        resumed = execute(flow, max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=at_step)
        assert resumed.outputs == fresh.outputs, at_step
        verify(resumed.run_dir / "tape.jsonl")


PARAMS = '''
import threading

from flowtape import Port, action, connect, guard, task, workflow


@task
class Feed:
    values: list  # a parameter the actor uses up
    lock: object  # a parameter that cannot be saved: never part of the state

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    @guard(lambda self: len(self.values) > 0)
    def emit(self):
        return self.values.pop(0)


@task
class Tally:
    table: dict  # a parameter kept as a running table
    step: int  # a parameter the actor gives anew

    class Ports:
        In = Port[int](direction="in")
        Out = Port[list](direction="out")

    def action(self, x):
        self.table[x % 2] = self.table.get(x % 2, 0) + self.step
        self.step += 1
        return sorted(self.table.items())


@workflow
def main():
    feed = Feed(values=[1, 2, 3, 4, 5], lock=threading.Lock())
    tally = Tally(table={}, step=1)
    connect(feed.Out, tally.In)
    connect(tally.Out, "Out")
'''


def test_parameters_an_actor_changes_are_state_and_come_back_on_resume(write_flow, tmp_path):
    """A parameter is given once, but an actor may change it in place (pop from its list, fill its
    dict) or give it anew: each is then state, recorded and restored by a resume. A parameter that
    cannot be saved (a lock) stays out of the state and keeps every firing replayable."""
    path = write_flow(PARAMS)
    fresh = execute(load_flow(path), max_workers=1, runs_dir=tmp_path)
    assert fresh.outputs["Out"][-1] == [(0, 2 + 4), (1, 1 + 3 + 5)]
    assert not any(f.notReplayable for f in tape_of(fresh).firings())
    for at_step in range(fresh.steps + 1):
        resumed = execute(load_flow(path), max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=at_step)
        assert resumed.outputs == fresh.outputs and resumed.steps == fresh.steps, at_step


KEPT = '''
from flowtape import Port, connect, task, workflow


class Missing:
    """A sentinel: compared by identity."""


MISSING = Missing()


@task
class Flip:
    flag: bool  # given anew each firing, back to the very object given every other time
    marker: object  # never changed: a resume keeps the very object given

    class Ports:
        In = Port[int](direction="in")
        Out = Port[list](direction="out")

    def action(self, x):
        self.flag = not self.flag
        if x % 3 == 1:
            self.scratch = x  # an attribute one firing makes ...
        elif hasattr(self, "scratch"):
            del self.scratch  # ... and the next one deletes
        return [x, self.flag, self.marker is MISSING, hasattr(self, "scratch")]


@task
class Src:
    class Ports:
        Out = Port[int](direction="out")
    i: int = 0

    def action(self):
        if self.i >= 6:
            return None
        self.i += 1
        return self.i


@workflow
def main():
    src = Src()
    flip = Flip(flag=True, marker=MISSING)
    connect(src.Out, flip.In)
    connect(flip.Out, "Out")
'''


def test_a_resume_restores_parameters_given_back_deleted_fields_and_keeps_untouched_objects(write_flow, tmp_path, resume_path):
    path = write_flow(KEPT)
    fresh = execute(load_flow(path), max_workers=1, runs_dir=tmp_path)
    assert [out[1:] for out in fresh.outputs["Out"]] == [
        [False, True, True], [True, True, False], [False, True, False], [True, True, True], [False, True, False], [True, True, False]]
    for at_step in range(fresh.steps + 1):
        resumed = execute(load_flow(path), max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=at_step)
        assert resumed.outputs == fresh.outputs, (resume_path, at_step)


SHARED = '''
from flowtape import Port, action, connect, task, workflow


class Registry:
    def __init__(self):
        self.names = []


REG = Registry()
BIG = list(range(5000))  # more than is watched at every firing


@task
class Writer:
    reg: Registry
    big: list
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    def go(self):
        if self.i >= 3:
            return None
        self.i += 1
        self.reg.names.append(self.i)  # the object a Reader was given too
        if self.i == 3:
            self.big.append(-1)
        return self.i


@task
class Reader:
    reg: Registry

    class Ports:
        In = Port[int](direction="in")
        Out = Port[list](direction="out")

    def action(self, x):
        return list(self.reg.names)


@workflow
def main():
    w = Writer(reg=REG, big=BIG)
    r = Reader(reg=REG)
    connect(w.Out, r.In)
    connect(r.Out, "Out")
'''


def test_a_parameter_object_actors_share_is_not_replayed_and_a_big_one_is_checked_at_the_end(write_flow, tmp_path):
    """Per-actor state cannot hold one object two actors share: a firing that changes it is
    notReplayable (a resume says so and runs it live). A parameter too big to encode at every
    firing is checked once, at the end, and a change is a warning."""
    path = write_flow(SHARED)
    fresh = execute(load_flow(path), max_workers=1, runs_dir=tmp_path)
    assert fresh.outputs == {"Out": [[1], [1, 2], [1, 2, 3]]}
    reasons = [f.notReplayable for f in tape_of(fresh).firings() if f.actor == "w"]
    assert all(r and "w.reg changed, and r.reg holds the very same object" in r for r in reasons)
    big, *shared = fresh.warnings
    assert "parameter w.big (" in big and "a resume would not see it" in big
    assert [line.split(" (")[0] for line in shared] == ["3 firing(s) of w cannot be replayed", "3 firing(s) of r cannot be replayed"]
    assert "(w.reg changed, and r.reg holds the very same object" in shared[0]
    resumed = execute(load_flow(path), max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=2)
    assert resumed.replay_stopped and "very same object" in resumed.replay_stopped[0].reason


COUNTING_SOURCE = """
@task
class Src:  # puts 1, 2, ... n
    n: int
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @guard(lambda self: self.i < self.n)
    def action(self):
        self.i += 1
        return self.i
"""


NESTED_AND_ALIASED = """
from flowtape import Port, connect, guard, task, workflow


""" + COUNTING_SOURCE + """

@task
class Writer:
    box: dict

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        self.box["l"].append(x)
        return x


@task
class Alias:
    items: list = []
    view: list = []

    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        if x == 1:
            self.view = self.items
        self.items.append(x)
        return f"{x}:{len(self.view)}"


@task
class Reader:
    box: dict

    class Ports:
        In = Port[str](direction="in")
        Out = Port[str](direction="out")

    def action(self, said):
        return f"{said}:{list(self.box['l'])}"


@workflow
def main():
    shared = []
    src = Src(n=4)
    w = Writer(box={"l": shared})
    a = Alias()
    r = Reader(box={"l": shared})
    connect(src.Out, w.In)
    connect(w.Out, a.In)
    connect(a.Out, r.In)
    connect(r.Out, "Out")
"""


def test_objects_shared_inside_parameters_or_between_fields_are_not_replayed_as_two(write_flow, tmp_path):
    path = write_flow(NESTED_AND_ALIASED)
    fresh = execute(load_flow(path), max_workers=1, runs_dir=tmp_path)
    assert fresh.outputs == {"Out": ["1:1:[1]", "2:2:[1, 2]", "3:3:[1, 2, 3]", "4:4:[1, 2, 3, 4]"]}
    reasons = {f.actor: f.notReplayable for f in tape_of(fresh).firings() if f.notReplayable}
    assert "w.box changed, and r.box holds the very same object" in reasons["w"]
    assert "a.items and a.view are one object" in reasons["a"]
    for step in range(fresh.steps + 1):
        resumed = execute(load_flow(path), max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=step)
        assert resumed.outputs == fresh.outputs, step


def test_an_object_held_twice_deep_in_one_actors_state_is_not_replayed_as_two(write_flow, tmp_path):
    flow = NESTED_AND_ALIASED.replace(
        "        if x == 1:\n            self.view = self.items\n",
        "        if x == 1:\n            self.view = [{'all': self.items}]\n",
    ).replace('return f"{x}:{len(self.view)}"', 'return f"{x}:{len(self.view[0][\'all\'])}"')
    path = write_flow(flow)
    fresh = execute(load_flow(path), max_workers=1, runs_dir=tmp_path)
    assert fresh.outputs == {"Out": ["1:1:[1]", "2:2:[1, 2]", "3:3:[1, 2, 3]", "4:4:[1, 2, 3, 4]"]}
    reasons = {f.notReplayable for f in tape_of(fresh).firings() if f.actor == "a"}
    assert reasons == {"a.items and a.view[0]['all'] are one object: the tape saves each as a value, and a resume would give back two"}
    for step in range(fresh.steps + 1):
        resumed = execute(load_flow(path), max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=step)
        assert resumed.outputs == fresh.outputs, step


def test_the_check_of_a_tape_a_resume_must_verify_reports_its_progress(chain, tmp_path, monkeypatch):
    """A tape from elsewhere is verified before the resume: `on_check` follows that check (the
    CLI shows it on a terminal), and a trusted tape, not checked, calls it never."""
    monkeypatch.setattr(replay, "PROGRESS_EVERY", 4)
    original = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    records = len(tape_of(original).lines) - 1
    trusted: list[tuple[int, int]] = []
    execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir, at_step=5, on_check=lambda *a: trusted.append(a))
    assert trusted == []
    monkeypatch.setattr(trust, "seals", lambda data, seal: False)
    checked: list[tuple[int, int]] = []
    resumed = execute(chain.main, max_workers=1, runs_dir=tmp_path, resume_from=original.run_dir, at_step=5,
                      on_check=lambda *a: checked.append(a))
    assert resumed.outputs == original.outputs
    assert [done for done, _ in checked] == list(range(3, records, 4))
    assert {total for _, total in checked} == {records}


@pytest.mark.parametrize("change", [("i: int = 0", "j: int = 0", "self.i", "self.j"),  # a field renamed
                                    ("i: int = 0", "i: int = 0\n    seen: int = 0", "", "")])  # a field added
def test_refused_when_a_state_field_the_class_has_was_not_recorded(write_flow, tmp_path, change):
    """The new field would start at its default beside the recorded ones: a state no run had."""
    body = "@workflow\ndef main():\n    g = Gen(n=5)\n    connect(g.Out, 'Out')\n"
    recorded = execute(load_flow(write_flow(GEN_FLOW.format(body=body), "gen.py")), runs_dir=tmp_path, max_workers=1)
    old_field, new_field, old_use, new_use = change
    changed = GEN_FLOW.format(body=body).replace(old_field, new_field).replace(old_use or "\0", new_use)
    flow = load_flow(write_flow(changed, "changed.py"))
    for verified in (False, True):
        with pytest.MonkeyPatch.context() as m:
            if verified:
                m.setattr(trust, "seals", lambda data, seal: False)
            with pytest.raises(ResumeRefused) as info:
                execute(flow, runs_dir=tmp_path, resume_from=recorded.run_dir, at_step=3)
        assert "the fields of Gen changed since run" in str(info.value) and "which its recorded state lacks (it holds 'i')" in str(info.value)
    # before its first firing nothing of it is restored: that resume is sound
    assert execute(flow, runs_dir=tmp_path, resume_from=recorded.run_dir, at_step=0).outputs == recorded.outputs


def test_a_run_still_running_is_not_resumed_until_it_ends(write_flow, tmp_path):
    """Both runs would go on, doing the same tool and agent work twice, from a tape not finished."""
    body = "import time\n\n@workflow\ndef main():\n    g = Gen(n=10_000)\n    connect(g.Out, 'Out')\n"
    path = write_flow(GEN_FLOW.format(body=body).replace("        self.i += 1\n", "        time.sleep(0.01)\n        self.i += 1\n"))
    child = subprocess.Popen([sys.executable, "-m", "flowtape", "run", str(path), "--run-id", "live", "--runs-dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        tape = tmp_path / "live" / "tape.jsonl"
        deadline = time.monotonic() + 30
        while (not tape.exists() or tape.read_bytes().count(b'{"t":"s"') + tape.read_bytes().count(b'{"t":"F"') < 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ResumeRefused, match=rf"run live: it is still running \(process {child.pid}\)"):
            execute(load_flow(path), runs_dir=tmp_path, resume_from="live")
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(30)
    assert read_summary(tmp_path / "live").status == "stopped"
    resumed = execute(load_flow(path), runs_dir=tmp_path, resume_from="live", max_steps=read_summary(tmp_path / "live").steps + 2)
    assert resumed.status == "stopped" and resumed.steps == read_summary(tmp_path / "live").steps + 2


def test_a_pid_taken_by_a_later_process_is_no_run_still_running():
    """A run's pid counts only with the stamp (start time, command line) the run recorded of it."""
    from flowtape.ownership import ProcessStamp, own_stamp

    def summary(stamp: ProcessStamp | None) -> RunSummary:
        return RunSummary(id="r", workflow="main", flowFile="f.py", status="running",
                          startedAt="2001-01-01T00:00:00.000+00:00", pid=os.getpid(), process=stamp)

    mine = own_stamp()
    assert mine is not None
    assert still_running(summary(mine))
    assert not still_running(summary(None))  # a run.json that names a pid, nothing more: not provably the run's
    assert not still_running(summary(ProcessStamp(mine.pid, mine.started - 1, mine.cmdline)))  # the pid, reused
    assert not still_running(summary(ProcessStamp(mine.pid, mine.started, "0" * 32)))  # another command


def _loop_flow(items):  # type: ignore[no-untyped-def]
    from flowtape import Port, loop, task

    @task
    class Twice:
        class Ports:
            In = Port[int](direction="in")
            Out = Port[int](direction="out")

        def action(self, x):
            return 2 * x

    @workflow
    def looped():
        lp = loop(items)
        with lp:
            t = Twice()
        connect(lp.item, t.In)
        connect(t.Out, "Out")

    return looped


@pytest.mark.parametrize("trusted", [True, False])
def test_a_static_loop_whose_items_changed_is_replayed_to_the_change_at_every_step(tmp_path, monkeypatch, trusted):
    """A resume at the end restores the run from a snapshot; but the loop's items changed in the
    code since: the loop runs again and its consumer's replay stops where the items differ, at
    every step as at the first, never the recorded outputs for items no longer there."""
    if not trusted:
        monkeypatch.setattr(trust, "key", lambda: None)  # the tape verified in full instead
    before = execute(_loop_flow([1, 2, 3]), max_workers=1, runs_dir=tmp_path, run_id="was")
    assert before.outputs == {"Out": [2, 4, 6]}
    for step in range(before.steps + 1):
        after = execute(_loop_flow([1, 9, 3]), max_workers=1, runs_dir=tmp_path, resume_from="was", at_step=step)
        assert after.outputs == {"Out": [2, 18, 6]}, step
        assert step < 4 or [(d.actor, d.fireCount) for d in after.replay_stopped][:1] == [("t", 2)], (step, after.replay_stopped)
    same = execute(_loop_flow([1, 2, 3]), max_workers=1, runs_dir=tmp_path, resume_from="was")
    assert same.outputs == before.outputs and not same.replay_stopped
    # the loop's own firings: replayed when they hand in what the recorded ones did, else live
    edited = execute(_loop_flow([1, 9, 3]), max_workers=1, runs_dir=tmp_path, resume_from="was", at_step=before.steps)
    loops = [(f.fireCount, f.replayed) for f in read_tape(edited.run_dir / "tape.jsonl").records() if isinstance(f, Firing) and f.actor == "lp"]
    assert loops == [(1, True), (2, False), (3, True), (4, True)], loops


def test_a_static_loop_over_a_set_runs_in_one_order_in_every_process(tmp_path):
    """A set iterates in an order that changes from process to process (str hashing is salted):
    a loop over one takes its items in their encoded order, so a one-worker run is the same run."""
    flow = tmp_path / "words.py"
    flow.write_text(
        "from flowtape import Port, connect, loop, task, workflow\n\n\n"
        "@task\nclass Echo:\n    class Ports:\n        In = Port[str](direction='in')\n"
        "        Out = Port[str](direction='out')\n\n    def action(self, x):\n        return x\n\n\n"
        "@workflow\ndef main():\n    lp = loop({'apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape'})\n"
        "    with lp:\n        e = Echo()\n    connect(lp.item, e.In)\n    connect(e.Out, 'Out')\n")
    outs = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-m", "flowtape", "run", str(flow), "--max-workers", "1", "--json",
                               "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        outs.add(json.dumps(json.loads(done.stdout.strip().splitlines()[-1])["outputs"]))
    assert outs == {json.dumps({"Out": ["apple", "banana", "cherry", "date", "elder", "fig", "grape"]})}


def test_what_the_header_tells_of_static_loops_is_cheap_and_never_uses_up_an_iterator():
    from flowtape.network import build_network

    def told(items):  # type: ignore[no-untyped-def]
        return dict(replay.statics_of(build_network(_loop_flow(items).build())))["lp"]

    assert told(range(10**9)) == told(range(10**9)) != told(range(10**9 - 1))  # by its bounds, not its items
    assert told([1, 2, 3]) == told((1, 2, 3)) != told([1, 9, 3])
    assert told(list(range(replay.STATIC_ITEMS_TOLD + 1))) == ""  # too many to digest at each start
    items = iter([1, 2, 3])
    assert told(items) == "" and list(items) == [1, 2, 3]  # an iterator is the run's, not looked at
    words = {"alpha", "beta", "gamma", "delta"}
    assert told(words) == told(set(sorted(words, reverse=True))) != ""  # not by its order of the day


HELD_TWICE = """
from dataclasses import dataclass
from typing import NamedTuple

from flowtape import Port, connect, guard, task, workflow


@dataclass(slots=True)
class Box:
    items: list


@dataclass(frozen=True)
class Frozen:
    n: int


class Pair(NamedTuple):
    a: int
    b: int


class Key:
    def __init__(self) -> None:
        self.seen = []


""" + COUNTING_SOURCE + """

@task
class Held:
    items: list = []
    other: object = None
    index: dict = {}
    order: list = []

    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        if KIND == "slots" and x == 1:
            self.other = Box(self.items)
        if KIND == "key" and x == 1:
            k = Key()
            self.index = {k: 1}
            self.order = [k]
        if KIND == "fine":
            self.other = [Pair(1, 2), Frozen(3), frozenset({Frozen(4)}), int]
            self.order = list(self.other) + [type(x)]
        self.items.append(x)
        if KIND == "key":
            self.order[0].seen.append(x)
            return f"{x}:{len(next(iter(self.index)).seen)}"
        return f"{x}:{len(self.other.items) if KIND == 'slots' else len(self.items)}"


@workflow
def main():
    src = Src(n=4)
    h = Held()
    connect(src.Out, h.In)
    connect(h.Out, "Out")
"""


@pytest.mark.parametrize(("kind", "said"), [
    ("slots", "h.items and h.other.items are one object"),
    ("key", "h.index key <"),
    ("fine", None),  # a NamedTuple, a frozen dataclass, a frozenset held twice: values that cannot change
])
def test_an_object_held_twice_through_slots_or_a_dict_key_is_not_replayed_as_two(write_flow, tmp_path, kind, said):
    path = write_flow(f"KIND = {kind!r}\n" + HELD_TWICE)
    fresh = execute(load_flow(path), max_workers=1, runs_dir=tmp_path)
    assert fresh.outputs == {"Out": ["1:1", "2:2", "3:3", "4:4"]}
    reasons = {f.notReplayable for f in tape_of(fresh).firings() if f.actor == "h"}
    assert (said is None and reasons == {None}) or (said is not None and all(r and said in r for r in reasons)), reasons
    for step in range(fresh.steps + 1):
        resumed = execute(load_flow(path), max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=step)
        assert resumed.outputs == fresh.outputs, (step, resumed.outputs)


ACCUMULATE_ITEMS = """
import json
import os

from flowtape import Port, action, connect, loop, task, workflow

ITEMS = json.loads(os.environ["FT_ITEMS"])


@task
class Double:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return 2 * x


@task
class Accumulate:
    total: int = 0

    class Ports:
        In = Port[int](direction="in")
        Done = Port[object](direction="in")
        Total = Port[int](direction="out")

    @action(consumes={"In": 1}, produces={})
    def add(self, x):
        self.total += x

    @action(consumes={"Done": 1}, produces={"Total": 1})
    def finish(self, _done):
        return self.total


@workflow
def main():
    lp = loop(ITEMS)
    with lp:
        double = Double()
    acc = Accumulate()
    connect(lp.item, double.In)
    connect(double.Out, acc.In)
    connect(lp.out, acc.Done)
    connect(acc.Total, "Total")
"""


@pytest.mark.parametrize("workers", [1, 3])
def test_a_recorded_action_is_not_replayed_when_another_is_ready_after_a_live_firing(write_flow, tmp_path, monkeypatch, workers):
    """Items added to a static loop since the run: at the end, the accumulator's recorded `finish`
    takes the same token it took, but the new item's `add` is ready too, and comes first."""
    path = write_flow(ACCUMULATE_ITEMS)
    monkeypatch.setenv("FT_ITEMS", "[1, 2, 3]")
    before = execute(load_flow(path), max_workers=1, runs_dir=tmp_path, run_id=f"was{workers}")
    assert before.outputs == {"Total": [12]}
    monkeypatch.setenv("FT_ITEMS", "[1, 2, 3, 4]")
    for name in [n for n in sys.modules if n.startswith("flowtape_flow_")]:
        monkeypatch.delitem(sys.modules, name)  # (the flow reads its items as it is loaded: load it again)
    edited = load_flow(path)
    for step in range(before.steps + 1):
        after = execute(edited, max_workers=workers, runs_dir=tmp_path, resume_from=f"was{workers}", at_step=step)
        assert after.outputs == {"Total": [20]}, (step, after.replay_stopped)


SHARED_PARTS = """
from typing import NamedTuple

from flowtape import Port, connect, guard, task, workflow


class Pos(NamedTuple):
    x: int
    y: int


""" + COUNTING_SOURCE + """

@task
class Worker:
    opts: dict

    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        self.opts["n"] += 1  # its own dict changes; what it shares with the other worker does not
        return f"{x}:{self.opts['n']}:{len(self.opts['labels'])}"


@workflow
def main():
    labels = ["a", "b"]
    at = Pos(1, 2)
    src = Src(n=3)
    w1 = Worker(opts={"labels": labels, "at": at, "n": 0})
    w2 = Worker(opts={"labels": labels, "at": at, "n": 100})
    connect(src.Out, w1.In)
    connect(w1.Out, "Out")
    src2 = Src(n=3)
    connect(src2.Out, w2.In)
    connect(w2.Out, "Out2")
"""


def test_parameters_that_share_an_object_nobody_changes_stay_replayable(write_flow, tmp_path):
    """Two actors given dicts that hold one list (and one NamedTuple): each changes only its own
    dict, so nothing they share changes and every firing replays."""
    path = write_flow(SHARED_PARTS)
    fresh = execute(load_flow(path), max_workers=1, runs_dir=tmp_path)
    assert fresh.outputs == {"Out": ["1:1:2", "2:2:2", "3:3:2"], "Out2": ["1:101:2", "2:102:2", "3:103:2"]}
    assert not [f.notReplayable for f in tape_of(fresh).firings() if f.notReplayable]
    for step in range(fresh.steps + 1):
        resumed = execute(load_flow(path), max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=step)
        assert resumed.outputs == fresh.outputs and not resumed.replay_stopped, step


RACED_ACTIONS = """
import threading
import time

from flowtape import Port, action, connect, guard, task, workflow


@task
class Src:
    n: int
    delay: float
    base: int
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    @guard(lambda self: self.i < self.n)
    def emit(self):
        time.sleep(self.delay)
        self.i += 1
        return self.base + self.i


@task
class Merge:
    total: int = 0

    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")

    @action(consumes={"A": 1}, produces={})
    def a(self, x):
        self.total += x

    @action(consumes={"B": 1}, produces={})
    def b(self, x):
        self.total += x


@task
class Locky:  # each firing notReplayable (a Lock in a field): it runs live at once in a resume
    lock: object = None
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    @guard(lambda self: self.i < 2)
    def emit(self):
        self.lock = threading.Lock()
        self.i += 1
        return self.i


@workflow
def main():
    s = Src(n=3, delay=0.02, base=0)  # slow: its tokens reach m.A late in the recorded run
    f = Src(n=15, delay=0.002, base=100)  # fast: m fires b while m.A is empty
    m = Merge()
    k = Locky()
    connect(s.Out, m.A)
    connect(f.Out, m.B)
    connect(k.Out, "Locked")
"""


def test_a_recorded_action_chosen_by_timing_still_replays_when_tokens_came_replayed(write_flow, tmp_path):
    """With three workers, which of Merge's actions fired first was timing. A resume whose replayed
    sources put their tokens at once must not take that for a divergence (only tokens a live
    firing put can make another action the one to fire)."""
    path = write_flow(RACED_ACTIONS)
    fresh = execute(load_flow(path), max_workers=3, runs_dir=tmp_path, run_id="rec")
    assert fresh.status == "succeeded"
    resumed = execute(load_flow(path), max_workers=3, runs_dir=tmp_path, resume_from="rec")
    assert [d.actor for d in resumed.replay_stopped] == ["k"]  # the notReplayable one, as documented
    live = [f.actor for f in tape_of(resumed).firings() if not f.replayed]
    assert "m" not in live, live
