"""Build-time errors name the flow file and line; the CLI's exit codes and output channels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import line_of
from flowtape import FlowError
from flowtape.loader import load_flow

HEADER = """
from flowtape import Port, action, connect, task, workflow


@task
class Num:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x


@task
class Text:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[str](direction="out")

    def action(self, s):
        return s
"""


def _build_error(write_flow, body: str) -> tuple[FlowError, Path]:
    path = write_flow(HEADER + body)
    with pytest.raises(FlowError) as info:
        load_flow(path).build()
    return info.value, path


def _assert_names(exc: FlowError, path: Path, marker: str) -> None:
    line = line_of(path, marker)
    assert (exc.file, exc.line) == (str(path), line)
    assert str(exc).startswith(f"{path}:{line}: ")
    assert "\n" not in str(exc)


def test_two_edges_into_one_input_port(write_flow):
    exc, path = _build_error(write_flow, """

@workflow
def main():
    a = Num()
    b = Num()
    c = Num()
    connect("In", a.In)
    connect("In", b.In)
    connect(a.Out, c.In)
    connect(b.Out, c.In)  # HERE
""")
    _assert_names(exc, path, "HERE")
    assert "c.In already has an incoming edge" in exc.message


def test_an_unknown_port(write_flow):
    exc, path = _build_error(write_flow, """

@workflow
def main():
    a = Num()
    connect("In", a.In)
    connect(a.Nope, "Out")  # HERE
""")
    _assert_names(exc, path, "HERE")
    assert "Num has no port or attribute 'Nope' (its ports: In, Out)" in exc.message


def test_a_port_wired_in_the_wrong_direction(write_flow):
    exc, path = _build_error(write_flow, """

@workflow
def main():
    a = Num()
    b = Num()
    connect("In", a.In)
    connect(b.In, a.Out)  # HERE
""")
    _assert_names(exc, path, "HERE")
    assert "wrong direction" in exc.message


PAIR = HEADER + """

@task
class Pair:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    @action(consumes={"In": 2})  # HERE
    def pair(self, x):
        return x
"""


def test_an_action_whose_arity_does_not_match_what_it_consumes(write_flow):
    path = write_flow(PAIR)
    with pytest.raises(FlowError) as info:
        load_flow(path)
    _assert_names(info.value, path, "HERE")
    assert "Pair.pair takes 1 token argument(s) but consumes 2" in info.value.message


def test_a_flow_imported_by_hand_is_still_named_in_its_errors(write_flow):
    """A module loaded with importlib and never put in sys.modules (a test harness, a bench)."""
    import importlib.util

    path = write_flow(PAIR)
    spec = importlib.util.spec_from_file_location("by_hand", path)
    assert spec is not None and spec.loader is not None
    with pytest.raises(FlowError) as info:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    _assert_names(info.value, path, "HERE")


def test_a_type_mismatch_visible_from_port_types(write_flow):
    exc, path = _build_error(write_flow, """

@workflow
def main():
    t = Text()
    n = Num()
    connect("In", t.In)
    connect(t.Out, n.In)  # HERE
""")
    _assert_names(exc, path, "HERE")
    assert "type mismatch" in exc.message and "str" in exc.message and "int" in exc.message


def test_an_unknown_workflow_port_name(write_flow):
    exc, path = _build_error(write_flow, """

@workflow(inputs={"In": int}, outputs={"Out": int})
def main():
    a = Num()
    connect("Input", a.In)  # HERE
    connect(a.Out, "Out")
""")
    _assert_names(exc, path, "HERE")
    assert "no input port 'Input'" in exc.message


def test_an_unknown_port_of_a_nested_workflow(write_flow):
    exc, path = _build_error(write_flow, """

@workflow(inputs={"In": int}, outputs={"Out": int})
def child():
    a = Num()
    connect("In", a.In)
    connect(a.Out, "Out")


@workflow
def main():
    c = child()
    connect("In", c.In)
    connect(c.Result, "Out")  # HERE
""")
    _assert_names(exc, path, "HERE")
    assert "workflow child has no port 'Result'" in exc.message


def test_an_actor_that_can_never_fire(write_flow):
    exc, path = _build_error(write_flow, """

@workflow
def main():
    a = Num()
    b = Num()  # HERE
    connect("In", a.In)
    connect(a.Out, "Out")
""")
    _assert_names(exc, path, "HERE")
    assert "b (Num) can never fire" in exc.message and "'In'" in exc.message


# ---- the CLI: exit codes, messages, --json -----------------------------------------------------------

GOOD = HEADER + """

@workflow
def main():
    a = Num()
    connect("In", a.In)
    connect(a.Out, "Out")
"""

FAILING = HEADER + """

@task
class Explode:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        raise RuntimeError("kaboom")


@workflow
def main():
    e = Explode()
    connect("In", e.In)
    connect(e.Out, "Out")
"""


def _flowtape(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowtape", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def test_exit_0_on_success(write_flow, tmp_path):
    path = write_flow(GOOD)
    proc = _flowtape("run", str(path), "--input", "In=7", "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Out: [7]\n"


def test_exit_1_on_a_failed_run_with_a_one_line_message(write_flow, tmp_path):
    path = write_flow(FAILING)
    proc = _flowtape("run", str(path), "--input", "In=1", "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("flowtape:")]
    assert len(errors) == 1
    assert "e failed on firing 1" in errors[0] and "RuntimeError: kaboom" in errors[0]
    assert "Traceback" not in proc.stderr
    verbose = _flowtape("run", str(path), "--input", "In=1", "--runs-dir", "runs", "--verbose", cwd=tmp_path)
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr and "kaboom" in verbose.stderr
    top = _flowtape("--verbose", "run", str(path), "--input", "In=1", "--runs-dir", "runs", cwd=tmp_path)
    assert top.returncode == 1 and "Traceback" in top.stderr


def test_exit_2_on_a_flow_definition_error(write_flow, tmp_path):
    path = write_flow(GOOD.replace('connect(a.Out, "Out")', 'connect(a.Out, a.In)'))
    proc = _flowtape("run", str(path), "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"flowtape: {path}:") and proc.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()  # nothing ran, nothing was recorded


def test_exit_2_on_a_syntax_error_naming_file_and_line(write_flow, tmp_path):
    path = write_flow(GOOD + "\ndef broken(:  # HERE\n    pass\n")
    proc = _flowtape("run", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"flowtape: {path}:{line_of(path, 'HERE')}: syntax error")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_exit_2_on_usage_errors(write_flow, tmp_path):
    path = write_flow(GOOD)
    assert _flowtape("run", str(path), "--bogus", cwd=tmp_path).returncode == 2
    for where, says in ((tmp_path / "missing.py", "no such flow file"), (tmp_path, "is a directory, not a flow file"),
                        (Path("/dev/null"), "is a device or special file, not a flow file")):
        proc = _flowtape("run", str(where), cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr == f"flowtape: {where}: {says}\n"
    bad_input = _flowtape("run", str(path), "--input", "Nope=1", "--runs-dir", "runs", cwd=tmp_path)
    assert bad_input.returncode == 2 and "no input port 'Nope'" in bad_input.stderr
    assert _flowtape(cwd=tmp_path).returncode == 2


@pytest.mark.parametrize("flow,code,status", [(GOOD, 0, "succeeded"), (FAILING, 1, "failed")])
def test_json_prints_exactly_one_object_on_stdout(write_flow, tmp_path, flow, code, status):
    path = write_flow(flow)
    proc = _flowtape("run", str(path), "--input", "In=3", "--json", "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == code
    assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1
    result = json.loads(proc.stdout)
    assert result["status"] == status and result["runId"] and (tmp_path / result["runDir"]).is_dir()
    if status == "succeeded":
        assert result["outputs"] == {"Out": [3]}
    else:
        assert "kaboom" in result["error"]


@pytest.mark.parametrize(("body", "words"), [
    ("    a = Num(colour='red')  # HERE\n", "TypeError: Num() got unexpected parameter(s): 'colour'"),
    ("    a = Num()\n    connect(a.Out, b.In)  # HERE\n", "NameError: name 'b' is not defined"),
    ("    raise RuntimeError('no inputs yet')  # HERE\n", "RuntimeError: no inputs yet"),
])
def test_a_mistake_in_the_workflow_body_names_its_line(write_flow, body, words):
    exc, path = _build_error(write_flow, "\n\n@workflow\ndef main():\n" + body)
    _assert_names(exc, path, "HERE")
    assert f"building workflow 'main' failed: {words}" in str(exc)


def test_json_outputs_are_plain_json_and_the_flows_prints_go_to_stderr(write_flow, tmp_path):
    path = write_flow(HEADER.replace("Port[int]", "Port[object]") + """

@task
class Shapes:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[object](direction="out")

    def action(self, x):
        print("shaping", x)  # a flow that prints
        return {"pair": (x, x + 1), "set": {3, 1}, (1, 2): "tuple key", "inf": float("inf")}


@workflow
def main():
    s = Shapes()
    connect("In", s.In)
    connect(s.Out, "Out")
""")
    proc = _flowtape("run", str(path), "--input", "In=1", "--json", "--runs-dir", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "shaping 1" in proc.stderr and proc.stdout.count("\n") == 1
    assert json.loads(proc.stdout)["outputs"] == {"Out": [{"pair": [1, 2], "set": [1, 3], "(1, 2)": "tuple key", "inf": "inf"}]}


def test_a_guard_that_raises_fails_its_actor_naming_the_guard_and_its_line(write_flow, tmp_path):
    from flowtape.runner import execute

    flow = write_flow('''
        from flowtape import Port, action, connect, guard, task, workflow

        @task
        class Ticks:
            class Ports:
                Out = Port[int](direction="out")
            n: int = 0

            @action(consumes={})
            @guard(lambda self: 1 / self.n > 0)  # GUARD
            def tick(self):
                return 1

        @workflow
        def main():
            ticks = Ticks()
            connect(ticks.Out, "Out")
    ''')
    result = execute(load_flow(flow), runs_dir=tmp_path)
    assert result.status == "failed" and result.error is not None
    line = line_of(flow, "GUARD")
    assert result.error.message.endswith(f"guard of ticks.tick raised ZeroDivisionError: division by zero (line {line})")
    assert result.error.raisedLine == line and result.error.actor == "ticks"


@pytest.mark.parametrize("control", ["loop(None)", "if_()"])
def test_a_loop_or_if_with_nothing_to_go_on_is_refused(write_flow, control):
    flow = write_flow(f'''
        from flowtape import Port, connect, if_, loop, task, workflow

        @task
        class Echo:
            class Ports:
                In = Port[int](direction="in")
                Out = Port[int](direction="out")

            def action(self, x):
                return x

        @workflow
        def main():
            c = {control}  # CONTROL
            e = Echo()
            connect(c.{"item" if control.startswith("loop") else "out"}, e.In)
            connect(e.Out, "Out")
    ''')
    with pytest.raises(FlowError, match="has nothing to go on") as info:
        load_flow(flow).build()
    assert info.value.line == line_of(flow, "CONTROL")


def test_a_failed_firing_tells_what_it_took_on_the_tape_and_in_run_json(tmp_path, write_flow):
    """The tokens a failed firing took are given back to its queues, so no firing record holds
    them: the end record's error does (what an editor shows on the failure's row)."""
    from flowtape.loader import load_flow
    from flowtape.rundir import read_summary
    from flowtape.runner import execute
    from flowtape.tape import read_tape

    flow = write_flow('''
        from flowtape import Port, connect, task, workflow

        @task
        class Src:
            class Ports:
                Out = Port[str](direction="out")
            i: int = 0

            def action(self):
                if self.i >= 3:
                    return None
                self.i += 1
                return f"w{self.i}"

        @task
        class Picky:
            class Ports:
                In = Port[str](direction="in")
                Out = Port[str](direction="out")

            def action(self, word):
                if word == "w2":
                    raise ValueError("no w2")
                return word

        @workflow
        def main():
            src = Src()
            picky = Picky()
            connect(src.Out, picky.In)
            connect(picky.Out, "Out")
    ''')
    result = execute(load_flow(flow), runs_dir=tmp_path)
    assert result.status == "failed" and result.run_dir is not None
    end = read_tape(result.run_dir / "tape.jsonl").end
    assert end is not None and end.error is not None
    header = read_tape(result.run_dir / "tape.jsonl").header
    [(queue, tokens)] = end.error.taken
    assert header.queues[queue] == "src.Out->picky.In" and [bytes(t) for t in tokens] == [b'"w2"']
    summary = read_summary(result.run_dir)
    assert summary is not None and summary.error == end.error
