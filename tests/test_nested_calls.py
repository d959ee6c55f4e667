"""Calling a nested workflow as wfpy does: `child(instance=RUN)` answers for the child from a
recorded run (wfpy's own tests of it, with the import switched, first), any other keyword is
refused naming it, and a nested workflow's `File` outputs are the files as they were put."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import line_of
from flowtape import File, FlowError, Port, action, connect, guard, run, task, workflow
from flowtape.loader import load_flow
from flowtape.runner import execute
from flowtape.tape import read_tape


def _make_child(raw: Path, builds: list[str]):
    @task
    class Produce:
        _done: bool = False

        class Ports:
            Num = Port[int](direction="out")
            Doc = Port[File](direction="out")

        @action(consumes={}, produces={"Num": 1, "Doc": 1})
        @guard(lambda self: not self._done)
        def emit(self) -> dict[str, object]:
            self._done = True
            path = raw / "doc.txt"
            path.write_text("recorded")
            return {"Num": 7, "Doc": str(path)}

    @workflow(outputs={"Num": int, "Doc": File(ext=".txt")})
    def child():
        builds.append("child")
        p = Produce()
        connect(p.Num, "Num")
        connect(p.Doc, "Doc")

    return child


@task
class Collect:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    @action(consumes={"In": 1}, produces={"Out": 1})
    def go(self, x: int) -> int:
        return x * 10


def test_instance_emits_recorded_outputs_without_running_child(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    builds: list[str] = []
    child = _make_child(raw, builds)

    run(child, out_dir=str(tmp_path / "wf-out"), run_id="first")
    run_dir = tmp_path / "wf-out" / "first"
    assert builds == ["child"]

    @workflow(outputs={"Out": int, "Doc": File(ext=".txt")})
    def parent():
        c = child(instance=str(run_dir))
        col = Collect()
        connect(c.Num, col.In)
        connect(col.Out, "Out")
        connect(c.Doc, "Doc")

    (raw / "doc.txt").unlink()  # the instance must hand on the recorded copy
    outputs = run(parent, out_dir=str(tmp_path / "wf-out"), run_id="second")

    assert builds == ["child"]  # never rebuilt, never run
    assert outputs["Out"] == [70]  # each recorded token sent once
    assert Path(outputs["Doc"][0]).read_text() == "recorded"

    # beyond wfpy's test: a resume of the parent replays the instance's firing, and still runs no child
    second = tmp_path / "wf-out" / "second"
    for at_step in (0, 1, None):
        resumed = execute(parent, runs_dir=tmp_path / "wf-out", resume_from=second, at_step=at_step, max_workers=1)
        assert resumed.status == "succeeded" and resumed.outputs["Out"] == [70], at_step
    assert builds == ["child"]
    assert [s.replayed for s in read_tape(resumed.run_dir / "tape.jsonl").steps()] == [True] * resumed.steps


def test_instance_accepts_the_run_record_itself_and_a_run_id(tmp_path: Path, monkeypatch) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    child = _make_child(raw, [])
    run(child, out_dir=str(tmp_path / "wf-out"), run_id="first")

    for ref in (tmp_path / "wf-out" / "first" / "run.json", tmp_path / "wf-out" / "first" / "tape.jsonl", "first"):
        @workflow(outputs={"Out": int})
        def parent():
            c = child(instance=str(ref))  # noqa: B023 - built right here
            col = Collect()
            connect(c.Num, col.In)
            connect(col.Out, "Out")

        assert run(parent, out_dir=str(tmp_path / "wf-out"))["Out"] == [70], ref


def test_instance_of_an_edited_tape_is_refused(tmp_path: Path) -> None:
    child = _make_child(tmp_path, [])
    run(child, out_dir=str(tmp_path / "wf-out"), run_id="first")
    tape = tmp_path / "wf-out" / "first" / "tape.jsonl"
    tape.write_bytes(tape.read_bytes().replace(b'"Num":[7]', b'"Num":[8]'))  # outputs the run never put

    @workflow(outputs={"Out": int})
    def parent():
        c = child(instance=str(tape.parent))
        connect(c.Num, "Out")

    with pytest.raises(ValueError, match="its tape fails verification: line .*hash chain"):
        run(parent, out_dir=str(tmp_path / "wf-out"))


def test_instance_refuses_a_child_with_inputs(tmp_path: Path) -> None:
    @workflow(inputs={"In": int}, outputs={"Out": int})
    def fed():
        c = Collect()
        connect("In", c.In)
        connect(c.Out, "Out")

    @workflow(outputs={"Out": int})
    def parent():
        f = fed(instance=str(tmp_path))
        connect(f.Out, "Out")

    with pytest.raises(TypeError, match="an instance has no inputs"):
        run(parent, out_dir=str(tmp_path / "wf-out"))


def test_instance_refuses_a_run_of_another_workflow(tmp_path: Path) -> None:
    run_dir = tmp_path / "other"
    run_dir.mkdir()
    (run_dir / "run.wf-run.json").write_text(
        json.dumps({"workflowName": "someone_else", "outputs": {"Num": [1]}})
    )
    child = _make_child(tmp_path, [])

    @workflow(outputs={"Out": int})
    def parent():
        c = child(instance=str(run_dir))
        connect(c.Num, "Out")

    with pytest.raises(ValueError, match="is of 'someone_else'"):
        run(parent, out_dir=str(tmp_path / "wf-out"))


def test_instance_without_a_run_record(tmp_path: Path) -> None:
    child = _make_child(tmp_path, [])

    @workflow(outputs={"Out": int})
    def parent():
        c = child(instance=str(tmp_path / "missing"))
        connect(c.Num, "Out")

    with pytest.raises(FileNotFoundError, match="run.wf-run.json"):
        run(parent, out_dir=str(tmp_path / "wf-out"))


def test_instance_only_nested(tmp_path: Path) -> None:
    child = _make_child(tmp_path, [])
    with pytest.raises(TypeError, match="only meaningful nested"):
        child(instance=str(tmp_path))


def test_sibling_workflow_outputs_keep_their_own_files(tmp_path: Path) -> None:
    """wfpy's own test (test_nested_workflows.py), the import switched."""
    raw = tmp_path / "raw"
    raw.mkdir()

    @task
    class FireOnce:
        _done: bool = False

        class Ports:
            Out = Port[int]()

        def action(self) -> int | None:
            if self._done:
                return None
            self._done = True
            return 1

    @task
    class Start:
        class Ports:
            In = Port[int](direction="in")
            Out = Port[File](direction="out")

        @action(consumes={"In": 1}, produces={"Out": 1})
        def write(self, _trigger: int) -> str:
            path = raw / "first.raw"
            path.write_text("first")
            return str(path)

    @task
    class Follow:
        class Ports:
            In = Port[File](direction="in")
            Out = Port[File](direction="out")

        @action(consumes={"In": 1}, produces={"Out": 1})
        def write(self, _previous: str) -> str:
            path = raw / "second.raw"
            path.write_text("second")
            return str(path)

    @workflow(inputs={"In": int}, outputs={"Out": File(ext=".txt")})
    def first_child():
        start = Start()
        connect("In", start.In)
        connect(start.Out, "Out")

    @workflow(inputs={"In": File}, outputs={"Out": File(ext=".txt")})
    def second_child():
        follow = Follow()
        connect("In", follow.In)
        connect(follow.Out, "Out")

    @workflow(outputs={"A": File(ext=".txt"), "B": File(ext=".txt")})
    def parent():
        src = FireOnce()
        first = first_child()
        second = second_child()
        connect(src.Out, first.In)
        connect(first.Out, second.In)
        connect(first.Out, "A")
        connect(second.Out, "B")

    outputs = run(parent, out_dir=str(tmp_path / "wf-out"), work_dir=str(tmp_path / "work"))

    a, b = Path(outputs["A"][0]), Path(outputs["B"][0])
    assert (a.name, a.read_text()) == ("A.txt", "first")
    assert (b.name, b.read_text()) == ("B.txt", "second")


# ---- beyond wfpy's own tests -------------------------------------------------------------------


def test_instance_of_a_run_that_did_not_succeed_is_refused_and_a_wfpy_runs_outputs_are_taken(tmp_path: Path) -> None:
    @task
    class Boom:
        class Ports:
            Num = Port[int](direction="out")

        @action(consumes={})
        def go(self):
            raise RuntimeError("no")

    @workflow(outputs={"Num": int})
    def child():
        b = Boom()
        connect(b.Num, "Num")

    failed = execute(child, runs_dir=tmp_path / "runs", run_id="bad")
    assert failed.status == "failed"

    @workflow(outputs={"Out": int})
    def parent():
        c = child(instance=str(failed.run_dir))
        col = Collect()
        connect(c.Num, col.In)
        connect(col.Out, "Out")

    with pytest.raises(ValueError, match=r"child\(instance=...\): the run at .*bad did not succeed") as info:
        run(parent, runs_dir=tmp_path / "runs")
    assert isinstance(info.value, FlowError) and info.value.line and info.value.file == __file__
    wfpy_run = tmp_path / "wf-out" / "w1"
    wfpy_run.mkdir(parents=True)
    (wfpy_run / "run.wf-run.json").write_text(json.dumps({"workflowName": "child", "outputs": {"Num": [4, 5]}}))

    @workflow(outputs={"Out": int})
    def from_wfpy():
        c = child(instance=str(wfpy_run))
        col = Collect()
        connect(c.Num, col.In)
        connect(col.Out, "Out")

    assert run(from_wfpy, runs_dir=tmp_path / "runs", max_workers=1) == {"Out": [40, 50]}


def test_any_other_keyword_is_refused_naming_it_the_file_and_the_line(write_flow):
    path = write_flow('''
        from flowtape import Port, connect, task, workflow

        @task
        class Inc:
            class Ports:
                In = Port[int](direction="in")
                Out = Port[int](direction="out")

            def action(self, x):
                return x + 1

        @workflow(inputs={"In": int}, outputs={"Out": int})
        def child():
            i = Inc()
            connect("In", i.In)
            connect(i.Out, "Out")

        @workflow(inputs={"In": int})
        def main():
            c = child(typo=1)  # HERE
            connect("In", c.In)
            connect(c.Out, "Out")
    ''')
    with pytest.raises(FlowError) as info:
        load_flow(path).build()
    assert isinstance(info.value, TypeError)
    assert info.value.file == str(path) and info.value.line == line_of(path, "HERE")
    assert "child() got unexpected keyword argument 'typo'" in info.value.message


REWRITER = '''
from flowtape import File, Port, action, connect, loop, task, workflow

OUT = {out!r}


@task
class Write:
    """Writes every item into the same file, and puts that file."""

    class Ports:
        In = Port[int](direction="in")
        Doc = Port[File](direction="out")

    def action(self, n):
        with open(OUT, "w") as fh:
            fh.write(f"version {{n}}")
        return OUT


@task
class Split:
    class Ports:
        In = Port[list](direction="in")
        Out = Port[int](direction="out")

    @action(consumes={{"In": 1}}, produces={{"Out": 3}})
    def split(self, items):
        return items


@workflow(inputs={{"In": list}}, outputs={{"Doc": File(ext=".txt")}})
def child():
    s = Split()
    w = Write()
    connect("In", s.In)
    connect(s.Out, w.In)
    connect(w.Doc, "Doc")


@task
class Read:
    class Ports:
        Doc = Port[File](direction="in")
        Out = Port[str](direction="out")

    def action(self, doc):
        with open(doc) as fh:
            return fh.read()


@task
class Fail:
    """Fails on its third token the first time (a marker file says it failed once)."""

    class Ports:
        In = Port[str](direction="in")
        Out = Port[str](direction="out")

    seen: int = 0

    def action(self, text):
        import os
        self.seen += 1
        if self.seen == 3 and not os.path.exists(OUT + ".failed"):
            open(OUT + ".failed", "w").close()
            raise RuntimeError("once")
        return text


@workflow
def main():
    lp = loop([[1, 2, 3], [4, 5, 6]])
    with lp:
        c = child()  # one firing per item: its three files are all put before anything reads one
        connect(lp.item, c.In)
    r = Read()
    f = Fail()
    connect(c.Doc, r.Doc)
    connect(r.Out, f.In)
    connect(f.Out, "Out")
'''


def test_a_nested_workflows_file_outputs_are_the_files_as_put_live_and_in_a_resume(write_flow, tmp_path):
    out = tmp_path / "shared.txt"
    flow = load_flow(write_flow(REWRITER.format(out=str(out))))
    failed = execute(flow, max_workers=1, runs_dir=tmp_path / "runs")
    assert failed.status == "failed" and "once" in failed.error.message
    resumed = execute(flow, max_workers=1, runs_dir=tmp_path / "runs", resume_from=failed.run_dir)
    assert resumed.status == "succeeded", resumed.error
    assert resumed.outputs == {"Out": [f"version {n}" for n in range(1, 7)]}
    copies = sorted(p.name for p in (failed.run_dir / "work").iterdir())
    assert copies == [f"c-w__{n}__Doc.txt" for n in range(1, 4)]  # (the failure came before the second item)
    put = [json.loads(bytes(t)) for f in read_tape(resumed.run_dir / "tape.jsonl").firings() if f.actor == "c/w"
           for _, tokens in f.produced for t in tokens]
    assert put[:3] == [str(failed.run_dir / "work" / name) for name in copies]  # replayed: the recorded copies
    assert put[3:] == [str(resumed.run_dir / "work" / f"c-w__{n}__Doc.txt") for n in range(4, 7)]
    fresh = execute(flow, max_workers=1, runs_dir=tmp_path / "runs")
    assert fresh.outputs == resumed.outputs
