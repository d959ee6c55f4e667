"""Forking a run with edits (`--set`, `run(edits=...)`): a token, a field, an agent's next answer,
changed at the step resumed at. The forked tape verifies, resumes, diffs and golden-checks; every
edit that does not fit is refused before anything runs, naming what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import flowtape
import msgspec
import pytest
from conftest import EXAMPLES
from flowtape.chain import reseal
from flowtape.cli import main
from flowtape.diff import RunDiff
from flowtape.errors import ResumeRefused, TraceCorruption
from flowtape.golden import GoldenMismatch, check, record
from flowtape.loader import load_flow
from flowtape.verify import verify

CHAIN = str(EXAMPLES / "chain.py")
REVIEW = str(EXAMPLES / "review.py")


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    runs = str(tmp_path / "runs")

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, "--runs-dir", runs])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def _runs(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "runs").iterdir()}


def _edits(tmp_path: Path, run: str) -> list[dict]:
    lines = (tmp_path / "runs" / run / "tape.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith('{"t":"edit"')]


def test_a_token_edit_forks_the_run_and_the_tape_says_so(cli, tmp_path):
    assert cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")[0] == 0
    # after step 4 (numbers' second firing) its 2 waits for double
    code, out, err = cli("run", CHAIN, "--resume-from", "a", "--at-step", "4", "--set", "double.In[0]=10", "--run-id", "f")
    assert code == 0, err
    assert out == "Out: [3, 21, 7, 9, 11]\n"
    assert cli("verify", "f")[0] == 0
    [edit] = _edits(tmp_path, "f")
    assert (edit["step"], edit["what"], edit["value"], edit.get("index", 0)) == (4, "double.In[0]", 10, 0)  # (0: left out)
    header = json.loads((tmp_path / "runs" / "f" / "tape.jsonl").read_text().splitlines()[0])
    assert edit["queue"] == header["queues"].index("numbers.Out->double.In")
    assert edit["old"] == flowtape.digests.digest([b"2"]) and edit["new"] == flowtape.digests.digest([b"10"])
    code, out, _ = cli("runs")
    assert "f  main" in out and "forked from a @ step 4 (1 edit)" in out
    _, shown, _ = cli("show", "f")
    assert "forked from a at step 4" in shown and "edited: double.In[0] = 10" in shown
    records = [json.loads(line) for line in cli("show", "f", "--records")[1].splitlines()]
    [told] = [r for r in records if r["t"] == "edit"]
    assert told["queue"] == "numbers.Out->double.In" and told["value"] == 10
    # the diff names the firing that took the edited token
    code, out, _ = cli("diff", "a", "f", "--json")
    diff = msgspec.json.decode(out, type=RunDiff)
    assert diff.first is not None and (diff.first.actor, diff.first.fireCount, diff.first.aspects) == ("double", 2, ["inputs", "outputs"])


def test_field_edits_and_a_queue_by_its_id_count_as_two(cli, tmp_path):
    cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")
    # after step 4 numbers has emitted 1 and 2 (2 waits for double): it emits 5 next, and double takes 7
    code, out, err = cli("run", CHAIN, "--resume-from", "a", "--at-step", "4", "--set", "numbers._next=5",
                         "--set", "numbers.Out->double.In[-1]=7", "--run-id", "f")
    assert code == 0, err
    assert out == "Out: [3, 15, 11]\n"
    assert cli("verify", "f")[0] == 0
    assert [e["what"] for e in _edits(tmp_path, "f")] == ["numbers._next", "numbers.Out->double.In[-1]"]
    state = _edits(tmp_path, "f")[0]
    assert state["actor"] == "numbers" and state["field"] == "_next" and state["value"] == {"_next": 5}
    assert "forked from a @ step 4 (2 edits)" in cli("runs")[1]
    summary = json.loads((tmp_path / "runs" / "f" / "run.json").read_text())
    assert summary["edits"] == 2 and summary["resumedFrom"] == "a" and summary["resumedAtStep"] == 4


def test_an_agents_next_answer_is_edited_even_inside_a_loop(cli, tmp_path):
    cli("run", REVIEW, "--run-id", "a")
    code, out, err = cli("run", REVIEW, "--resume-from", "a", "--at-step", "4", "--json", "--run-id", "f",
                         "--set", 'reviewer.answer={"Verdict": "revise", "Note": "forked"}')
    assert code == 0, err
    result = json.loads(out)
    assert result["outputs"]["Notes"][2] == "forked"
    assert result["outputs"]["Summary"] == ["4 drafts reviewed: 1 approved, 3 revised"]
    assert cli("verify", "f")[0] == 0
    [edit] = _edits(tmp_path, "f")
    assert edit["answer"] is True and edit["actor"] == "reviewer" and edit["value"] == {"Verdict": "revise", "Note": "forked"}
    # the recorded run's answer there, by digest: approve, looks good
    assert edit["old"] == flowtape.digests.digest([b'{"Verdict":"approve","Note":"looks good"}'])
    code, out, _ = cli("diff", "a", "f", "--json")
    first = msgspec.json.decode(out, type=RunDiff).first
    assert first is not None and (first.actor, first.fireCount, first.aspects) == ("reviewer", 3, ["outputs", "chat"])
    assert b'\\"forked\\"' in bytes(first.b.chat) and b'\\"looks good\\"' in bytes(first.a.chat)  # (JSON in the message)
    # one port of the answer: the rest is the recorded run's answer there
    code, out, err = cli("run", REVIEW, "--resume-from", "a", "--at-step", "4", "--json", "--run-id", "g",
                         "--set", "reviewer.answer.Note=only the note")
    assert code == 0, err and json.loads(out)["outputs"]["Notes"][2] == "only the note"
    assert json.loads(out)["outputs"]["Summary"] == ["4 drafts reviewed: 2 approved, 2 revised"]
    assert cli("verify", "g")[0] == 0


def test_a_forked_tape_resumes_and_its_edits_come_after_their_step(cli, tmp_path):
    cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")
    cli("run", CHAIN, "--resume-from", "a", "--at-step", "4", "--set", "double.In[0]=10", "--run-id", "f")
    for step, out in ((10, "Out: [3, 21, 7, 9, 11]\n"), (5, "Out: [3, 21, 7, 9, 11]\n"), (4, "Out: [3, 5, 7, 9, 11]\n")):
        code, said, err = cli("run", CHAIN, "--resume-from", "f", "--at-step", str(step), "--run-id", f"r{step}")
        assert code == 0 and said == out, (step, err)
        assert cli("verify", f"r{step}")[0] == 0
    assert cli("diff", "f", "r10")[0] == 0  # the same story
    assert "resumed from f @ step 10" in cli("runs")[1]  # its own run made no edit: a resume, not a fork
    assert json.loads((tmp_path / "runs" / "r10" / "run.json").read_text()).get("edits", 0) == 0
    # a tape copied elsewhere is verified in full (not trusted), and resumes the same
    import shutil
    shutil.copytree(tmp_path / "runs" / "f", tmp_path / "copy")
    code, said, _ = cli("run", CHAIN, "--resume-from", str(tmp_path / "copy"), "--at-step", "9", "--run-id", "c9")
    assert code == 0 and said == "Out: [3, 21, 7, 9, 11]\n" and cli("verify", "c9")[0] == 0


def test_run_takes_edits_and_golden_checks_a_fork(tmp_path):
    flow = load_flow(CHAIN)
    runs = tmp_path / "runs"
    flowtape.run(flow, max_workers=1, runs_dir=runs, run_id="a")
    out = flowtape.run(flow, runs_dir=runs, run_id="f", resume_from="a", at_step=4, edits={"double.In[0]": 10})
    assert out == {"Out": [3, 21, 7, 9, 11]}
    golden = tmp_path / "fork.json"
    fork = {"resume_from": runs / "a", "at_step": 4, "edits": {"double.In[0]": 10}}
    record(flow, golden, **fork)
    check(flow, golden, **fork)
    with pytest.raises(GoldenMismatch) as info:
        check(flow, golden, resume_from=runs / "a", at_step=4, edits={"double.In[0]": 11})
    assert "double firing 2" in str(info.value) and "inputs" in str(info.value)


def test_golden_cli_records_and_checks_a_fork(cli, tmp_path):
    cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")
    fork = ["--resume-from", "a", "--at-step", "4", "--set", "double.In[0]=10"]
    assert cli("golden", "record", CHAIN, "g.json", *fork)[0] == 0
    assert cli("golden", "check", CHAIN, "g.json", *fork)[0] == 0
    code, _, err = cli("golden", "check", CHAIN, "g.json", "--resume-from", "a", "--at-step", "4", "--set", "double.In[0]=12")
    assert code == 1 and "golden mismatch" in err and "double firing 2" in err
    code, _, err = cli("golden", "check", CHAIN, "g.json", "--set", "double.In[0]=12")
    assert code == 2 and "need --resume-from" in err


@pytest.mark.parametrize(("edit", "said"), [
    ("nope[0]=1", "no queue 'nope' (queues: "),
    ("double.In[3]=1", "numbers.Out->double.In holds 1 token(s) at step 4 (0 to 0)"),
    ("add_one.In[0]=1", "double.Out->add_one.In holds 0 token(s) at step 4: there is no token to edit"),
    ('double.In[0]="ten"', "port In of double takes int, not str 'ten'"),
    ("double.In[0]=true", "port In of double takes int, not bool"),
    ("$.Out[0]=1", "$.Out is an output of the run: nothing takes from it"),
    ("ghost.x=1", "no actor 'ghost' (actors: numbers, double, add_one)"),
    ("numbers.nope=1", "numbers (Numbers) has no field 'nope' in its state"),
    ("numbers.upto=1", "has no field 'upto' in its state (a parameter it never changed is no state)"),
    ('numbers._next="x"', "field _next of Numbers takes int, not str 'x'"),
    ("double.answer=1", "double is a task, not an agent: only an agent has a recorded answer"),
    ("numbers=1", "name a token (QUEUE[i]), a field (ACTOR.field) or an agent's answer (AGENT.answer)"),
])
def test_every_misfit_edit_is_refused_before_anything_runs(cli, tmp_path, edit, said):
    cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")
    code, _, err = cli("run", CHAIN, "--resume-from", "a", "--at-step", "4", "--set", edit, "--run-id", "f")
    assert code == 2, err
    assert said in err and f"--set {edit.partition('=')[0]}" in err and "Traceback" not in err
    assert _runs(tmp_path) == {"a"}  # nothing ran: no run directory


@pytest.mark.parametrize(("edit", "said"), [
    ("reviewer.answer.Verdict=3", "output Verdict of Reviewer takes str, not int 3"),
    ("reviewer.answer.Nope=1", "Reviewer has no output port 'Nope' (its outputs: Verdict, Note)"),
    ('reviewer.answer={"Verdict": 3}', "output Verdict of Reviewer takes str, not int 3"),
])
def test_misfit_answers_are_refused(cli, tmp_path, edit, said):
    cli("run", REVIEW, "--run-id", "a")
    code, _, err = cli("run", REVIEW, "--resume-from", "a", "--at-step", "4", "--set", edit, "--run-id", "f")
    assert code == 2, err
    assert said in err and "Traceback" not in err
    assert _runs(tmp_path) == {"a"}


def test_set_needs_a_resume_a_step_and_each_edit_once(cli, tmp_path):
    cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")
    code, _, err = cli("run", CHAIN, "--set", "double.In[0]=1")
    assert code == 2 and "edits (--set) need --resume-from" in err
    code, _, err = cli("run", CHAIN, "--resume-from", "a", "--at-step", "4", "--set", "double.In[0]")
    assert code == 2 and "--set takes WHERE=VALUE" in err
    code, _, err = cli("run", CHAIN, "--resume-from", "a", "--at-step", "4", "--set", "double.In[0]=1", "--set", "double.In[0]=2")
    assert code == 2 and "--set double.In[0] is given twice" in err
    code, _, err = cli("run", CHAIN, "--resume-from", "a", "--at-step", "0", "--set", "double.In[0]=1")
    assert code == 2 and "cannot fork at step 0: nothing has run yet" in err
    with pytest.raises(ResumeRefused, match="no actor 'ghost'"):
        flowtape.run(load_flow(CHAIN), runs_dir=tmp_path / "runs", resume_from="a", at_step=4, edits={"ghost.x": 1})
    assert _runs(tmp_path) == {"a"}


def _forked(tmp_path: Path) -> Path:
    flow = load_flow(CHAIN)
    runs = tmp_path / "runs"
    flowtape.run(flow, max_workers=1, runs_dir=runs, run_id="a")
    flowtape.run(flow, runs_dir=runs, run_id="f", resume_from="a", at_step=4, edits={"double.In[0]": 10})
    return runs / "f" / "tape.jsonl"


def _rewrite(path: Path, change) -> None:
    lines = path.read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"t":"edit"'))
    lines = change(lines, at)
    path.write_bytes(b"".join(line + b"\n" for line in reseal(lines)))


def test_verify_holds_a_fork_to_its_edits(tmp_path):
    tape = _forked(tmp_path)
    verify(tape)

    def other_value(lines, at):  # the edit says 10, the run took 11: a forger's edit
        lines[at] = lines[at].replace(b'"value":10', b'"value":11')
        return lines

    _rewrite(tape, other_value)
    with pytest.raises(TraceCorruption) as info:
        verify(tape, warn=False)
    assert info.value.rule == "an edit replaces the value it names" and "digest" in str(info.value)


def test_verify_refuses_an_edit_of_a_value_the_run_did_not_hold(tmp_path):
    tape = _forked(tmp_path)

    def other_old(lines, at):
        record = json.loads(lines[at])
        record["old"] = flowtape.digests.digest([b"3"])
        lines[at] = json.dumps(record, separators=(",", ":")).encode()
        return lines

    _rewrite(tape, other_old)
    with pytest.raises(TraceCorruption) as info:
        verify(tape, warn=False)
    assert info.value.rule == "an edit replaces the value it names" and "numbers.Out->double.In" in str(info.value)


def test_verify_refuses_an_edit_moved_or_in_a_run_that_resumed_nothing(tmp_path):
    tape = _forked(tmp_path)

    def another_step(lines, at):  # it says it was made at step 3, where it stands after step 4
        lines[at] = lines[at].replace(b'"step":4', b'"step":3')
        return lines

    _rewrite(tape, another_step)
    with pytest.raises(TraceCorruption) as info:
        verify(tape, warn=False)
    assert info.value.rule == "an edit follows the step it names" and "made at step 3" in str(info.value)
    fresh = tmp_path / "runs" / "a" / "tape.jsonl"
    edit = next(line for line in tape.read_bytes().splitlines() if line.startswith(b'{"t":"edit"'))
    lines = fresh.read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines)  # (format 6: a simple firing's line holds its step)
              if any(isinstance(r, flowtape.tape.Step) and r.step == 4 for r in flowtape.tape.decode_line(line)))
    lines.insert(at + 1, edit)
    fresh.write_bytes(b"".join(line + b"\n" for line in reseal(lines)))
    with pytest.raises(TraceCorruption) as info:
        verify(fresh, warn=False)
    assert info.value.rule == "edits only in forked runs"


def test_a_field_of_an_actor_that_has_not_fired_yet(cli, tmp_path, write_flow):
    flow = write_flow('''
        from flowtape import Port, connect, task, workflow

        @task
        class Gen:
            class Ports:
                Out = Port[int](direction="out")
            i: int = 0
            def action(self):
                if self.i >= 3:
                    return None
                self.i += 1
                return self.i

        @task
        class Acc:
            total: int = 0
            class Ports:
                In = Port[int](direction="in")
                Out = Port[int](direction="out")
            def action(self, x):
                self.total += x
                return self.total

        @workflow
        def main():
            gen = Gen()
            acc = Acc()
            connect(gen.Out, acc.In)
            connect(acc.Out, "Out")
    ''')
    cli("run", str(flow), "--run-id", "a", "--max-workers", "1")
    code, out, err = cli("run", str(flow), "--resume-from", "a", "--at-step", "1", "--set", "acc.total=100", "--run-id", "f")
    assert code == 0, err
    assert out == "Out: [101, 103, 106]\n"
    [edit] = _edits(tmp_path, "f")
    assert edit.get("old", "") == "" and edit["value"] == {"total": 100}  # no state of it on the tape before
    assert cli("verify", "f")[0] == 0
