"""Flows written for wfpy run when the import is changed: the parts of its API an outside probe
found missing or refused (union port types, inherited Ports, File/Map/Resource, @source, tools'
unwired outputs and inherit_stdio, run()'s options and its error's cause)."""

from __future__ import annotations

import json

import pytest
from flowtape import FlowError, RunFailed, run
from flowtape.loader import load_flow
from flowtape.runner import execute
from flowtape.tape import read_tape

UNIONS = '''
from typing import Optional, Union
from flowtape import Port, connect, task, workflow

@task
class Maybe:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[Optional[int]](direction="out")
        Either = Port[Union[int, str]](direction="out")

    def action(self, s: str):
        return None if s == "skip" else int(s), s

@task
class Take:
    class Ports:
        In = Port[{into}](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        return f"got {{x}}"

@workflow(inputs={{"S": str}})
def main():
    m = Maybe()
    t = Take()
    connect("S", m.In)
    connect(m.{port}, t.In)  # WIRE
    connect(t.Out, "Out")
'''


@pytest.mark.parametrize(("port", "into"), [
    ("Out", "Optional[int]"), ("Out", "int | None"), ("Out", "int"),  # None is never put: Optional[T] feeds a T
    ("Either", "Union[str, int]"), ("Either", "str | int"), ("Either", "int"),  # an int may come: no certain mismatch
])
def test_union_typed_ports_wire_as_their_arms_allow(write_flow, tmp_path, port, into):
    flow = load_flow(write_flow(UNIONS.format(port=port, into=into)))
    result = execute(flow, {"S": "42"}, runs_dir=tmp_path)
    assert result.status == "succeeded" and result.outputs == {"Out": ["got 42"]}


def test_a_certain_mismatch_names_the_whole_types(write_flow):
    with pytest.raises(FlowError) as info:
        load_flow(write_flow(UNIONS.format(port="Out", into="str"))).build()
    assert "carries Optional[int] but t.In expects str" in info.value.message


def test_a_ports_class_extending_a_base_tasks_has_its_ports(write_flow, tmp_path):
    path = write_flow('''
        from flowtape import Port, action, connect, task, workflow

        class Stage:
            class Ports:
                In = Port[str](direction="in")
                Out = Port[str](direction="out")

        @task
        class Audited(Stage):
            class Ports(Stage.Ports):
                Audit = Port[str](direction="out")

            @action(consumes={"In": 1}, produces={"Out": 1, "Audit": 1})
            def go(self, x):
                return {"Out": x + "!", "Audit": "saw " + x}

        @workflow(inputs={"In": str})
        def main():
            a = Audited()
            connect("In", a.In)
            connect(a.Out, "Out")
            connect(a.Audit, "Audit")
    ''')
    result = execute(load_flow(path), {"In": "x"}, runs_dir=tmp_path)
    assert result.outputs == {"Out": ["x!"], "Audit": ["saw x"]}


FILES = '''
from flowtape import File, Map, Port, Resource, connect, source, task, tool, workflow

@source
class Doc:
    path: File

    class Ports:
        Out = Port[File](direction="out")

@tool(cmd="sh", args=["-c", "wc -l < \\"$0\\" > \\"$1\\"; echo log > \\"$2\\"", "{{in.Src}}", "{{out.Lines}}", "/dev/null"],
      inherit_stdio={shown})
class Count:
    class Ports:
        Src = Port[Resource](direction="in")
        Lines = Port[File(ext=".md")](direction="out")
        Log = Port[File](direction="out")  # never written, and wired to nothing

@task
class Read:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[Map](direction="out")

    def action(self, path):
        print("read", path.rsplit("/", 1)[-1])
        return {{"lines": int(open(path).read())}}

@task
class Keep:
    class Ports:
        In = Port[dict](direction="in")
        Out = Port[dict](direction="out")

    def action(self, d):
        return d

@workflow
def main():
    d = Doc(path=File(DATA))
    c = Count()
    r = Read()
    k = Keep()
    connect(d.Out, c.Src)
    connect(c.Lines, r.In)
    connect(r.Out, k.In)
    connect(k.Out, "Out")
'''


@pytest.mark.parametrize("shown", [False, True])
def test_file_map_resource_ports_a_source_and_a_tools_unwired_output(write_flow, tmp_path, capsys, shown):
    data = tmp_path / "data.txt"
    data.write_text("a\nb\nc\n")
    path = write_flow(f"DATA = {str(data)!r}\n" + FILES.format(shown=shown))
    result = execute(load_flow(path), runs_dir=tmp_path, max_workers=1)
    assert result.status == "succeeded", result.error
    assert result.outputs == {"Out": [{"lines": 3}]}
    work = sorted(p.name for p in (result.run_dir / "work").iterdir())
    assert work == ["c__1__Lines.md"]  # the extension from File(ext=".md"); Log was not asked for
    (put,) = [f.produced for f in read_tape(result.run_dir / "tape.jsonl").firings() if f.actor == "d"]
    assert [bytes(t) for _, tokens in put for t in tokens] == [json.dumps(str(data)).encode()]  # a path: a string
    # the source put its path once: a resume at its step replays it, and the rest runs the same
    again = execute(load_flow(path), runs_dir=tmp_path, resume_from=result.run_dir, at_step=1)
    assert again.outputs == result.outputs


ONE_TOOL = '''
from flowtape import Port, connect, tool, workflow

@tool({config})
class T:
    class Ports:
        X = Port[str](direction="in")
        Y = Port[str](direction="out")

@workflow(inputs={{"X": str}})
def main():
    t = T()
    connect("X", t.X)
    connect(t.Y, "Out")
'''


@pytest.mark.parametrize("shown", [True, False])
def test_a_tool_with_inherit_stdio_shows_what_it_prints(write_flow, tmp_path, capsys, shown):
    says = "echo working on $0; echo to-err >&2; echo $0 > $1"
    path = write_flow(ONE_TOOL.format(config=f'cmd="sh", args=["-c", "{says}", "{{in.X}}", "{{out.Y}}"], inherit_stdio={shown}'))
    capsys.readouterr()
    assert execute(load_flow(path), {"X": "hi"}, runs_dir=tmp_path).status == "succeeded"
    out, err = capsys.readouterr()
    assert ("working on hi" in out, "to-err" in err) == (shown, shown)


def test_a_wired_output_a_tool_did_not_write_fails_the_firing(write_flow, tmp_path):
    result = execute(load_flow(write_flow(ONE_TOOL.format(config='cmd="true"'))), {"X": "hi"}, runs_dir=tmp_path)
    assert result.status == "failed" and "exited 0 but wrote no Y" in result.error.message


@pytest.mark.parametrize(("body", "says"), [
    ("    class Ports:\n        In = Port[str](direction='in')\n        Out = Port[str](direction='out')\n",
     "needs one output port and no input port (it has inputs: In; outputs: Out)"),
    ("    path: str = 'x'\n    class Ports:\n        Out = Port[str](direction='out')\n",
     "puts its `path` parameter, which has a class-level default"),
    ("    class Ports:\n        Out = Port[str](direction='out')\n", "puts its `path` parameter, which is missing"),
], ids=["an-input", "path-with-default", "no-path"])
def test_a_source_that_cannot_put_its_path_is_refused(write_flow, body, says):
    path = write_flow("from flowtape import Port, source\n\n@source\nclass S:\n" + body)
    with pytest.raises(FlowError) as info:
        load_flow(path)
    assert says in info.value.message and info.value.line == 4  # the class's line


DIVIDE = '''
from flowtape import Port, connect, task, workflow

@task
class Div:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[float](direction="out")

    def action(self, x):
        return 1 / x

@workflow(inputs={"X": int})
def main():
    d = Div()
    connect("X", d.In)
    connect(d.Out, "Y")
'''


def test_run_takes_wfpys_options_and_its_error_carries_the_actors_exception(write_flow, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flow = load_flow(write_flow(DIVIDE))
    assert run(flow, {"X": 2}, verbose=True, queue_trace=False, keep_work_dir=True) == {"Y": [0.5]}
    with pytest.raises(TypeError, match="unexpected keyword argument 'verbos'"):
        run(flow, {"X": 2}, verbos=True)
    with pytest.raises(RunFailed) as info:
        run(flow, {"X": 0})
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_a_class_with_ports_but_no_decorator_is_pointed_out(write_flow):
    path = write_flow('''
        from flowtape import Port, connect, workflow

        class Inc:
            class Ports:
                In = Port[int](direction="in")

        @workflow(inputs={"X": int})
        def main():
            i = Inc()
            connect("X", i.In)  # HERE
    ''')
    with pytest.raises(FlowError) as info:
        load_flow(path).build()
    assert "Inc has a Ports class but is no actor: decorate it with @task, @agent or @tool" in info.value.message


def test_an_attribute_a_task_lacks_is_named_as_such(write_flow, tmp_path):
    path = write_flow('''
        from flowtape import Port, connect, task, workflow

        @task
        class Limit:
            limit: int
            seen: int = 0

            class Ports:
                In = Port[int](direction="in")
                Out = Port[int](direction="out")

            def action(self, x):
                return x if x < self.limt else None

        @workflow(inputs={"X": int})
        def main():
            g = Limit(limit=3)
            connect("X", g.In)
            connect(g.Out, "Out")
    ''')
    result = execute(load_flow(path), {"X": 1}, runs_dir=tmp_path)
    assert "Limit has no port or attribute 'limt' (its ports: In, Out; its fields: limit, seen)" in result.error.message
