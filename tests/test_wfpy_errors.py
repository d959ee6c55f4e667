"""Errors code written for wfpy catches, and what a run says at its end: refusals are
ValueErrors worded with `run()`'s keywords, `out_dir=` is the runs folder, a flow still importing
wfpy is told to switch the import, and a feedback loop that ends as such loops do is no news."""

from __future__ import annotations

import pytest
from conftest import GEN_FLOW
from flowtape import FlowError, run
from flowtape.cli import main as cli_main
from flowtape.loader import load_flow
from flowtape.runner import execute

FLOW = GEN_FLOW.format(body='''
@workflow
def main():
    g = Gen(n=3)
    connect(g.Out, "Out")
''')


def test_refusals_are_value_errors_worded_for_python_and_for_the_cli(write_flow, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = write_flow(FLOW)
    flow = load_flow(path)
    with pytest.raises(ValueError, match="^at_step needs resume_from") as info:
        run(flow, at_step=2)
    assert "--" not in str(info.value)
    first = tmp_path / "runs" / "first"
    assert run(flow, runs_dir=tmp_path / "runs", run_id="first") == {"Out": [1, 2, 3]}
    with pytest.raises(ValueError, match="cannot resume at step 99"):  # a ResumeRefused
        run(flow, runs_dir=tmp_path / "runs", resume_from=first, at_step=99)
    with pytest.raises(ValueError, match="already exists"):
        run(flow, runs_dir=tmp_path / "runs", run_id="first")
    with pytest.raises(ValueError, match="^max_steps 1 is not above the step resumed at"):
        execute(flow, runs_dir=tmp_path / "runs", resume_from=first, at_step=2, max_steps=1)
    capsys.readouterr()
    assert cli_main(["run", str(path), "--at-step", "2", "--runs-dir", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == "flowtape: --at-step needs --resume-from\n"
    assert cli_main(["run", str(path), "--resume-from", str(first), "--at-step", "2", "--max-steps", "1"]) == 2
    assert "flowtape: --max-steps 1 is not above the step resumed at (2)" in capsys.readouterr().err


def test_out_dir_is_the_runs_folder_and_the_clis_is_pointed_to_runs_dir(write_flow, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    flow = load_flow(write_flow(FLOW))
    assert run(flow, out_dir=str(tmp_path / "wf-out"), run_id="first") == {"Out": [1, 2, 3]}
    assert (tmp_path / "wf-out" / "first" / "tape.jsonl").is_file()
    assert not (tmp_path / ".flowtape").exists()
    with pytest.raises(ValueError, match="run 'first' already exists in"):  # no collision in another folder
        run(flow, out_dir=tmp_path / "wf-out", run_id="first")
    with pytest.raises(TypeError, match="both runs_dir and out_dir"):
        run(flow, out_dir=tmp_path / "a", runs_dir=tmp_path / "b")
    capsys.readouterr()
    assert cli_main(["run", str(tmp_path / "flow.py"), "--out-dir", "wf-out"]) == 2
    err = capsys.readouterr().err
    assert "--out-dir is wfpy's option" in err and "--runs-dir wf-out" in err
    assert not (tmp_path / ".flowtape").exists()


def test_a_flow_that_still_imports_wfpy_is_told_to_switch_the_import(write_flow):
    path = write_flow('''
        """A wfpy flow."""
        from wfpy import Port, task, workflow
    ''')
    with pytest.raises(FlowError) as info:
        load_flow(path)
    assert info.value.line == 2 and info.value.file == str(path)
    assert "imports wfpy: switch the import to flowtape" in info.value.message


CREDIT_LOOP = '''
from flowtape import Port, action, connect, task, workflow


@task
class Items:
    n: int
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    def give(self):
        if self.i >= self.n:
            return None
        self.i += 1
        return self.i


@task
class Paced:
    """Takes an item each time its last result has come back (a credit fed back to itself)."""

    class Ports:
        Item = Port[int](direction="in")
        Credit = Port[int](direction="in")
        Out = Port[int](direction="out")
        Again = Port[int](direction="out")

    @action(consumes={"Item": 1}, produces={"Out": 1, "Again": 1})
    @guard(lambda self, item: self.first)
    def start(self, item):
        self.first = False
        return {"Out": item, "Again": item}

    @action(consumes={"Item": 1, "Credit": 1}, produces={"Out": 1, "Again": 1})
    def go(self, item, credit):
        return {"Out": item + credit, "Again": item}

    first: bool = True


@task
class Pair:
    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, a, b):
        return a + b


@workflow
def main():
    items = Items(n=3)
    paced = Paced()
    connect(items.Out, paced.Item)
    connect(paced.Again, paced.Credit)
    connect(paced.Out, "Out")


@workflow
def unpaired():
    xs = Items(n=3)
    ys = Items(n=1)
    pair = Pair()
    connect(xs.Out, pair.A)
    connect(ys.Out, pair.B)
    connect(pair.Out, "Out")
'''.replace("action, connect", "action, connect, guard")


def test_a_feedback_loop_that_ends_normally_is_no_news_and_what_is_left_is_said_calmly(write_flow, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = write_flow(CREDIT_LOOP)
    capsys.readouterr()
    assert cli_main(["run", str(path), "--max-workers", "1"]) == 0
    out, err = capsys.readouterr()
    assert out == "Out: [1, 3, 5]\n"
    assert err.splitlines()[0].startswith("succeeded") and len(err.splitlines()) == 1, err  # the credit left: no news
    result = execute(load_flow(path), max_workers=1, runs_dir=tmp_path / "runs")
    assert result.leftovers == [] and result.stuck == []
    assert cli_main(["run", str(path), "--workflow", "unpaired", "--max-workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "stuck" not in err and "never" not in err
    assert "flowtape: note: 2 token(s) left in xs.Out->pair.A, not taken" in err
    assert "flowtape: note: pair waits on 'B', which nothing will fill ('A' holds 2)" in err
