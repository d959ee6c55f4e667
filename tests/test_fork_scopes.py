"""A fork edits what waits inside every kind of scope, at any step: a token in a queue and a field
of an actor's state in a loop body (the loop between two items), an if branch, a nested workflow
and a nested workflow inside a loop body, named as `flowtape show` names them (`sub/acc.total`,
`sub/acc.Out->sub/pair.In[0]`). What truly cannot be edited is refused, saying why, before
anything runs."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from flowtape.cli import main
from flowtape.golden import check, record
from flowtape.loader import load_module
from flowtape.network import build_network
from flowtape.replay import plan_resume
from flowtape.runner import execute
from flowtape.tape import Edited, read_tape
from flowtape.verify import verify

FLOWS = Path(__file__).parent / "flows"
FLOW = FLOWS / "edit_scopes.py"


@pytest.fixture
def scopes():
    return load_module(FLOW)


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, "--runs-dir", str(tmp_path / "runs")])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def _step_of(run_dir: Path, actor: str, fire_count: int) -> int:
    return next(s.step for s in read_tape(run_dir / "tape.jsonl").steps() if (s.actor, s.fireCount) == (actor, fire_count))


# each workflow; the firing after whose step the scope's acc holds 1 and its pair waits with that
# one token; the edits there, by short and by full name; the outputs the fork gives
CASES = {
    "in_loop": (("lp", 1), {"acc.total": 100, "pair.In[0]": 50}, [[50, 102], [105, 109]]),
    # (the branch's acc, not fired yet, takes every even number waiting when the branch runs)
    "in_branch": (("c", 1), {"acc.total": 100, "even.Even->acc.In[0]": 50}, [[150, 154], [160, 168]]),
    "in_nested": (("sub", 1), {"sub/acc.total": 100, "sub/pair.In[0]": 50}, [[50, 102], [105, 109]]),
    "nested_in_loop": (("lp", 1), {"sub/acc.total": 100, "sub/acc.Out->sub/pair.In[0]": 50}, [[50, 102], [105, 109]]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_fork_edits_a_field_and_a_token_inside_a_scope(scopes, tmp_path, name):
    flow = getattr(scopes, name)
    (actor, count), edits, outputs = CASES[name]
    runs = tmp_path / "runs"
    recorded = execute(flow, max_workers=1, runs_dir=runs, run_id="a")
    assert recorded.status == "succeeded"
    at = _step_of(recorded.run_dir, actor, count)
    fork = execute(flow, runs_dir=runs, run_id="f", resume_from="a", at_step=at, edits=edits)
    assert fork.status == "succeeded", fork.error
    assert fork.outputs == {"Out": outputs}
    verify(fork.run_dir / "tape.jsonl")
    told = [r for r in read_tape(fork.run_dir / "tape.jsonl").records() if isinstance(r, Edited)]
    assert [(e.step, e.what) for e in told] == [(at, what) for what in edits]
    summary = json.loads((fork.run_dir / "run.json").read_text())
    assert summary["edits"] == 2 and summary["resumedAtStep"] == at
    # the fork resumes at a later step, its edits part of the run it restores, trusted or copied
    last = fork.steps - 1
    again = execute(flow, runs_dir=runs, run_id="r", resume_from="f", at_step=last)
    assert again.status == "succeeded" and again.outputs == fork.outputs
    shutil.copytree(fork.run_dir, tmp_path / "copy")  # not this machine's run directory: verified in full
    copied = execute(flow, runs_dir=runs, run_id="c", resume_from=tmp_path / "copy", at_step=at + 1)
    assert copied.status == "succeeded" and copied.outputs == fork.outputs
    golden = tmp_path / "g.json"
    record(flow, golden, resume_from=runs / "a", at_step=at, edits=edits)
    check(flow, golden, resume_from=runs / "a", at_step=at, edits=edits)


@pytest.mark.parametrize("trusted", [True, False])
@pytest.mark.parametrize("name", ["in_loop", "nested_in_loop", "over_tokens"])
def test_a_loop_between_two_items_is_put_back_where_it_stood_at_every_step(scopes, tmp_path, monkeypatch, name, trusted):
    """The resume a fork is made of, at each step: a snapshot (no step replayed firing by
    firing), the loop going on with its next item, the same outputs as the recorded run."""
    from flowtape import trust

    flow = getattr(scopes, name)
    recorded = execute(flow, max_workers=1, runs_dir=tmp_path, run_id="a")
    tape = read_tape(recorded.run_dir / "tape.jsonl")
    steps = tape.steps()
    loops = {a.path for a in tape.header.actors if a.kind == "loop" and not a.owner}
    # the firing that ends a pass puts the loop's `out` (a None), or nothing: none of its items
    items = {i for i, qid in enumerate(tape.header.queues) if ".item->" in qid}
    ends = {(f.actor, f.fireCount) for f in tape.firings() if f.actor in loops and not any(i in items for i, _ in f.produced)}
    if not trusted:
        monkeypatch.setattr(trust, "seals", lambda data, seal: False)
    for at in range(1, recorded.steps + 1):
        plan = plan_resume(recorded.run_dir, at, build_network(flow.build()), name)
        assert plan.snapshot is not None, (at, plan.no_snapshot)
        latest = {s.actor: s.fireCount for s in steps[:at] if s.actor in loops}
        mid = {path for path, count in latest.items() if (path, count) not in ends}
        assert set(plan.snapshot.loops) == mid, at
        resumed = execute(flow, runs_dir=tmp_path, run_id=f"r{at}", resume_from="a", at_step=at)
        assert resumed.status == "succeeded" and resumed.outputs == recorded.outputs, at
        assert resumed.replay_stopped == []
        live = Counter(f.actor for f in read_tape(resumed.run_dir / "tape.jsonl").firings() if not f.replayed)
        assert {p: live[p] for p in loops} == {p: sum(s.actor == p for s in steps[at:]) for p in loops}, at  # each once


def test_a_loop_whose_items_changed_is_not_put_back_on_a_stale_place(scopes, tmp_path, monkeypatch):
    """A static loop whose items changed since the recording is told by the header's digest: the
    snapshot cannot stand for it (the resume replays firing by firing, and diverges there)."""
    recorded = execute(scopes.in_loop, max_workers=1, runs_dir=tmp_path, run_id="a")
    net = build_network(scopes.in_loop.build())
    net.by_path["lp"].node.obj.iterable = [1, 9, 9, 9]  # (what the header's digest also tells)
    plan = plan_resume(recorded.run_dir, 2, net, "in_loop")
    assert plan.snapshot is None and "lp goes over other values than in the recorded run" in plan.no_snapshot


@pytest.mark.parametrize(("edit", "said"), [
    ("sub/acc.total=\"x\"", "field total of Acc takes int, not str 'x'"),
    ("sub/pair.In[1]=1", "sub/acc.Out->sub/pair.In holds 1 token(s) at step 1 (0 to 0)"),
    ("lp.item->sub.In[0]=1", "lp.item->sub.In holds 0 token(s) at step 1: there is no token to edit"),
    ("sub/nope.In[0]=1", "no queue 'sub/nope.In'"),
    ("sub/ghost.total=1", "no actor 'sub/ghost' (actors: lp, sub, sub/acc, sub/pair)"),
    ("sub.total=1", "sub is a workflow: it keeps no state to edit"),
    ("lp.total=1", "lp is a loop: it keeps no state to edit"),
    ("sub/pair.In[0]=\"x\"", "port In of sub/pair takes int, not str 'x'"),
])
def test_misfit_edits_inside_scopes_are_refused_before_anything_runs(cli, tmp_path, edit, said):
    assert cli("run", str(FLOW), "--workflow", "nested_in_loop", "--run-id", "a", "--max-workers", "1")[0] == 0
    code, _, err = cli("run", str(FLOW), "--workflow", "nested_in_loop", "--resume-from", "a", "--at-step", "1",
                       "--set", edit, "--run-id", "f")
    assert code == 2, err
    assert said in err and "Traceback" not in err
    assert {p.name for p in (tmp_path / "runs").iterdir()} == {"a"}


def test_what_cannot_be_restored_at_the_step_is_refused_saying_why(cli, tmp_path):
    """A loop over an iterator (its place cannot be told the same), a firing that cannot be
    replayed (a Lock in its state) and, with several workers, a nested workflow still running
    beside the step leave no picture of the run at the step to edit."""
    assert cli("run", str(FLOW), "--workflow", "ticks", "--run-id", "a", "--max-workers", "1")[0] == 0
    code, _, err = cli("run", str(FLOW), "--workflow", "ticks", "--resume-from", "a", "--at-step", "2",
                       "--set", "acc.total=7", "--run-id", "f")
    assert code == 2 and "Traceback" not in err
    assert "cannot fork run a at step 2 with --set acc.total" in err
    assert "loop lp goes over an iterator, or values a tape cannot hold, which cannot be told the same" in err
    chain = str(FLOWS / "chain.py")
    assert cli("run", chain, "--workflow", "locked", "--run-id", "k", "--max-workers", "1")[0] == 0
    code, _, err = cli("run", chain, "--workflow", "locked", "--resume-from", "k", "--at-step", "3",
                       "--set", "double.In[0]=1", "--run-id", "g")
    assert code == 2 and "locky's firing 1 cannot be replayed (locky._guard: a Lock cannot be saved)" in err
    assert cli("run", str(FLOW), "--workflow", "under_way", "--run-id", "w", "--max-workers", "4")[0] == 0
    code, _, err = cli("run", str(FLOW), "--workflow", "under_way", "--resume-from", "w", "--at-step", "2",
                       "--set", "beside.i=0", "--run-id", "h")
    assert code == 2 and "sub's firing 1 was under way beside step 2 (a run with one worker, --max-workers 1" in err
    assert {p.name for p in (tmp_path / "runs").iterdir()} == {"a", "k", "w"}


def test_where_a_loop_stood_is_checked_against_the_items_its_tape_recorded(scopes, tmp_path):
    """midloop.LoopPasses goes over the items again: fewer items, or another at the loop's place,
    is no place to put it back (the plan then replays firing by firing, and says why)."""
    from flowtape.midloop import LoopPasses
    from flowtape.tape import Firing, Step
    from flowtape.verify import Rebuild

    recorded = execute(scopes.in_loop, max_workers=1, runs_dir=tmp_path, run_id="a")
    tape = read_tape(recorded.run_dir / "tape.jsonl")
    passes, rebuild = LoopPasses(tape.header), Rebuild(tape.header)
    for line in tape.lines[1:]:
        rebuild.apply(line)
        if isinstance(line.record, Firing):
            passes.see(line.record, rebuild.taken)
        if isinstance(line.record, Step) and line.record.step == 2:
            break
    net = build_network(scopes.in_loop.build())
    loops, why = passes.place(net)
    assert why == "" and next(loops["lp"]) == 3  # it goes on with its third item
    for items, said in (([1, 9, 9], "loop lp's item 2 is not the one its tape recorded"),
                        ([1], "loop lp has fewer items than the 2 its tape says it handed in"),
                        ([], "loop lp has fewer items than the 2 its tape says it handed in"),
                        (5, "loop lp's items cannot be gone over again (TypeError: ")):
        net.by_path["lp"].node.obj.iterable = items
        placed, why = passes.place(net)
        assert placed == {} and why.startswith(said), (items, why)


@pytest.mark.parametrize(("workflow", "edit", "said"), [
    ("over_tokens", "lp.iter[0]=5", "loop lp goes over its iter token: a list (or another collection), not int 5"),
    ("over_tokens", 'lp.iter[0]=[1, "a"]', "loop lp hands each item to port In of acc, which takes int, not str 'a'"),
    ("in_nested", 'sub.In[0]="x"', "port In of sub/acc takes int, not str 'x'"),  # (a nested workflow's input: where it goes)
])
def test_a_token_for_a_loop_or_a_nested_workflow_is_checked_against_where_it_goes(cli, tmp_path, workflow, edit, said):
    assert cli("run", str(FLOW), "--workflow", workflow, "--run-id", "a", "--max-workers", "1")[0] == 0
    code, _, err = cli("run", str(FLOW), "--workflow", workflow, "--resume-from", "a", "--at-step", "1",
                       "--set", edit, "--run-id", "f")
    assert code == 2 and said in err and "Traceback" not in err
    assert {p.name for p in (tmp_path / "runs").iterdir()} == {"a"}
    what = edit.partition("=")[0]
    fine = {"lp.iter[0]": "[7, 8]", "sub.In[0]": "7"}[what]
    code, _, err = cli("run", str(FLOW), "--workflow", workflow, "--resume-from", "a", "--at-step", "1",
                       "--set", f"{what}={fine}", "--run-id", "g")
    assert code == 0, err
    assert cli("verify", "g")[0] == 0
