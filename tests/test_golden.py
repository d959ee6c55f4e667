"""Golden tapes: committed snapshots of deterministic runs of two examples; a change in the
engine or the flow fails naming the first step that moved and the fields that changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flowtape import Port, connect, task, workflow
from flowtape.cli import main as cli_main
from flowtape.errors import UsageError
from flowtape.golden import GoldenMismatch, assert_golden, check, compare, record, snapshot
from flowtape.loader import load_module

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).parent / "golden"
CASES = [("chain.py", "chain.json"), ("review.py", "review.json"), ("tool.py", "tool.json")]  # tool: its outputs are files of the run


def example(name: str):
    return load_module(EXAMPLES / name)


@pytest.mark.parametrize(("flow_file", "golden"), CASES)
def test_examples_match_their_goldens(flow_file, golden):
    assert_golden(example(flow_file).main, GOLDEN / golden)


@pytest.mark.parametrize(("flow_file", "golden"), CASES)
def test_recording_again_gives_the_same_file(flow_file, golden, tmp_path):
    data = record(example(flow_file).main, tmp_path / golden)
    assert (tmp_path / golden).read_bytes() == (GOLDEN / golden).read_bytes()
    assert data["end"]["status"] == "succeeded"
    assert all(not key.endswith(("At", "runId")) for key in data)  # no clock times, no ids
    assert "finishedAt" not in data["end"] and "at" not in data["steps"][0] and "dur" not in data["steps"][0]


@task
class Triple:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return 3 * x


def _changed_chain():
    m = example("chain.py")

    @workflow
    def main():
        numbers = m.Numbers(upto=5)
        double = Triple()  # "double" now triples
        add_one = m.AddOne()
        connect(numbers.Out, double.In)
        connect(double.Out, add_one.In)
        connect(add_one.Out, "Out")

    return main


def _longer_chain():
    m = example("chain.py")

    @workflow
    def main():
        numbers = m.Numbers(upto=6)
        double = m.Double()
        add_one = m.AddOne()
        connect(numbers.Out, double.In)
        connect(double.Out, add_one.In)
        connect(add_one.Out, "Out")

    return main


def test_a_changed_flow_fails_naming_the_first_step_that_moved():
    with pytest.raises(AssertionError) as info:
        assert_golden(_changed_chain(), GOLDEN / "chain.json")
    message = str(info.value)
    # one worker, in rounds: step 1 is the source's first firing, unchanged; step 2 is double's
    # first firing, which now puts 3
    assert "step 2 moved (double fire 1)" in message
    assert "firings:" in message
    # and the firing, told as `flowtape diff` tells it: what it put in the golden and now
    assert "double firing 1 (a: step 2, b: step 2): outputs, state" not in message
    assert "double firing 1 (a: step 2, b: step 2): outputs" in message
    assert "a: {'double.Out->add_one.In': [2]}" in message and "b: {'double.Out->add_one.In': [3]}" in message
    assert "actor:" not in message and "queues:" not in message
    assert str(GOLDEN / "chain.json") in message


def test_a_longer_run_fails_naming_the_step_where_it_departs():
    with pytest.raises(GoldenMismatch) as info:
        check(_longer_chain(), GOLDEN / "chain.json")
    # in rounds each number goes down the whole chain before the next is emitted: steps 1-15 are
    # unchanged, and the run departs where the source fires a 6th time, after the golden's last step
    headline, _, firing = str(info.value).partition("\n")
    assert headline == f"{GOLDEN / 'chain.json'}: step 16 is new: numbers fire 6"
    # then the first differing firing, as `flowtape diff` tells it, with its values
    assert firing.startswith("first firing that differs (a = the golden, b = this run): numbers firing 6 (a: —, b: step 16): only in b")
    assert "outputs:" in firing and "[6]" in firing


def test_compare_names_changed_fields_new_and_missing_steps():
    golden = json.loads((GOLDEN / "chain.json").read_bytes())
    assert compare(golden, golden) is None
    shorter = {**golden, "steps": golden["steps"][:-1]}
    assert compare(golden, shorter).startswith("step 15 (add_one fire 5) is gone")
    assert compare(shorter, golden).startswith("step 15 is new: add_one fire 5")
    moved = json.loads(json.dumps(golden))
    moved["steps"][2]["journalSeq"] = 99
    assert compare(golden, moved) == "step 3 moved (add_one fire 1): journalSeq: 3 -> 99"
    departed = {**golden, "steps": golden["steps"][:2] + golden["steps"][3:]}  # step 3 left out
    message = compare(golden, departed)
    assert message.startswith('step 3 moved (add_one fire 1): actor: "add_one" -> "numbers"; ')
    assert 'fireCount: 1 -> 2; ' in message and "journalSeq: 3 -> 4" in message
    renamed = json.loads(json.dumps(golden).replace('"add_one"', '"plus_one"'))
    assert compare(golden, renamed).startswith(
        "the actors that fire changed: 'add_one' no longer fires and 'plus_one' fires now (renamed?); step 3 moved (add_one fire 1): ")
    ended = json.loads(json.dumps(golden))
    ended["end"]["outputs"]["Out"][0] = 4
    assert compare(golden, ended).startswith("end changed")
    # a change far into a long value is shown where it is, on both sides
    state = {"log": ["x" * 40] * 20 + ["old"]}
    far = compare({"steps": [{"actor": "a", "fireCount": 1, "state": state}]},
                  {"steps": [{"actor": "a", "fireCount": 1, "state": {"log": state["log"][:-1] + ["new"]}}]})
    assert far is not None and '"old"' in far and '"new"' in far and far.count("…") >= 2
    # equal in Python, not as values: 1, 1.0 and True are three
    one = json.loads(json.dumps(golden))
    one["end"]["outputs"]["Out"] = [1]
    for other in (True, 1.0):
        changed = json.loads(json.dumps(one))
        changed["end"]["outputs"]["Out"] = [other]
        assert (compare(one, changed) or "").startswith("end changed"), other
    state_one = {"steps": [{"actor": "a", "fireCount": 1, "state": {"best": 1}}]}
    state_true = {"steps": [{"actor": "a", "fireCount": 1, "state": {"best": True}}]}
    assert (compare(state_one, state_true) or "").startswith("step 1 moved (a fire 1): state: ")


def test_snapshot_is_deterministic_and_uses_one_worker():
    flow = example("review.py").main
    assert snapshot(flow) == snapshot(flow)


def test_missing_golden(tmp_path):
    """A setup mistake, not a regression: exit 2, as for a file that is no golden."""
    with pytest.raises(UsageError, match="no golden"):
        check(example("chain.py").main, tmp_path / "missing.json")


def test_the_cli_golden_record_and_check(tmp_path, capsys):
    flow = str(EXAMPLES / "chain.py")
    out = tmp_path / "chain.json"
    assert cli_main(["golden", "record", flow, str(out)]) == 0
    assert "recorded" in capsys.readouterr().out
    assert out.read_bytes() == (GOLDEN / "chain.json").read_bytes()
    assert cli_main(["golden", "check", flow, str(GOLDEN / "chain.json")]) == 0
    assert "ok" in capsys.readouterr().out
    data = json.loads(out.read_bytes())
    data["steps"][6]["firings"][0]["produced"][0][1] = [7]
    out.write_text(json.dumps(data))
    assert cli_main(["golden", "check", flow, str(out)]) == 1
    err = capsys.readouterr().err
    assert "golden mismatch" in err and "step 7 moved" in err and "firings" in err
    assert cli_main(["golden", "check", flow, str(tmp_path / "nope.json")]) == 2
    assert "no golden" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"", b"null", b"[]", b'{"workflow": "main"}', b'{"workflow": "main", "steps": [{}]}', b"\x00junk"])
def test_a_file_that_is_not_a_golden_is_named_not_crashed_on(tmp_path, capsys, content):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert cli_main(["golden", "check", str(EXAMPLES / "chain.py"), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "is not a golden file" in err and "internal error" not in err


def test_golden_record_never_writes_over_a_flow_a_tape_or_another_file(tmp_path, capsys):
    flow = tmp_path / "chain.py"
    flow.write_bytes((EXAMPLES / "chain.py").read_bytes())
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}')
    tape = tmp_path / "tape.jsonl"
    tape.write_text("{}\n")
    for target in (flow, notes, tape, tmp_path):
        before = target.read_bytes() if target.is_file() else None
        assert cli_main(["golden", "record", str(flow), str(target)]) == 2
        assert "internal error" not in capsys.readouterr().err
        assert before is None or target.read_bytes() == before
    golden = tmp_path / "chain.json"
    assert cli_main(["golden", "record", str(flow), str(golden)]) == 0
    assert cli_main(["golden", "record", str(flow), str(golden)]) == 0  # a golden file may be recorded again


def test_a_golden_of_a_failing_flow_holds_no_path_of_the_checkout(tmp_path):
    """The end's error names where the actor is created: relative to the flow's folder, so the
    golden still matches in another checkout (CI)."""
    import shutil

    flow = tmp_path / "one" / "fails.py"
    flow.parent.mkdir()
    flow.write_text(
        "from flowtape import Port, connect, task, workflow\n\n\n"
        "@task\nclass Boom:\n    class Ports:\n        Out = Port[int](direction='out')\n\n"
        "    def action(self):\n        raise ValueError('boom')\n\n\n"
        "@workflow\ndef main():\n    b = Boom()\n    connect(b.Out, 'Out')\n"
    )
    data = record(load_module(flow).main, tmp_path / "one" / "fails.json")
    assert data["end"]["error"] == "b failed on firing 1 (created at fails.py:15): ValueError: boom (line 10)"
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    check(load_module(tmp_path / "two" / "fails.py").main, tmp_path / "two" / "fails.json")


def test_a_golden_whose_inputs_no_longer_fit_says_which_golden(tmp_path):
    flow = example("chain.py").main
    path = tmp_path / "chain.json"
    data = record(flow, path)
    data["inputs"] = {"Nope": 1}
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match=f"{path}: the inputs it holds do not fit the flow: .*Nope"):
        check(flow, path)


STOPS = """
import os
import signal

from flowtape import Port, connect, task, workflow


@task
class Ticks:
    class Ports:
        Out = Port[int](direction="out")

    n: int = 0

    def action(self):
        if self.n == 6:
            return None  # done: nothing to give
        self.n += 1
        if self.n == 4 and os.environ.get("STOP_AT_4"):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as a cancelled CI job sends it
        if self.n == 3 and os.environ.get("FAIL_AT_3"):
            raise ValueError("boom at 3")
        return self.n


@workflow
def main():
    t = Ticks()
    connect(t.Out, "Out")
"""


def test_a_run_stopped_or_failing_is_no_silent_verdict(tmp_path, monkeypatch, capsys):
    """Ctrl-C during record writes nothing (a good golden stays); during check it is no mismatch;
    a run that now fails names its error; a golden of a failure is recorded, and said so."""
    flow = tmp_path / "ticks.py"
    flow.write_text(STOPS)
    golden = tmp_path / "ticks.json"
    assert cli_main(["golden", "record", str(flow), str(golden)]) == 0
    good = golden.read_bytes()
    monkeypatch.setenv("STOP_AT_4", "1")
    assert cli_main(["golden", "record", str(flow), str(golden)]) == 1
    assert "stopped before its end: no golden written" in capsys.readouterr().err
    assert golden.read_bytes() == good and not list(tmp_path.glob(".*.tmp"))
    assert cli_main(["golden", "check", str(flow), str(golden)]) == 1
    err = capsys.readouterr().err
    assert "stopped before its end" in err and "not checked" in err and "mismatch" not in err
    monkeypatch.delenv("STOP_AT_4")
    monkeypatch.setenv("FAIL_AT_3", "1")
    assert cli_main(["golden", "check", str(flow), str(golden)]) == 1
    err = capsys.readouterr().err
    assert "golden mismatch" in err and "the run failed: t failed on firing 3" in err and "ValueError: boom at 3" in err
    failing = tmp_path / "failing.json"
    assert cli_main(["golden", "record", str(flow), str(failing)]) == 0
    assert "note: the recorded run failed, and the golden holds that" in capsys.readouterr().err
    assert cli_main(["golden", "check", str(flow), str(failing)]) == 0  # the same failure again: a match



def test_other_inputs_are_named_before_any_step(tmp_path):
    flow = tmp_path / "inc.py"
    flow.write_text(
        "from flowtape import Port, connect, task, workflow\n\n\n"
        "@task\nclass Inc:\n    class Ports:\n        In = Port[int](direction='in')\n        Out = Port[int](direction='out')\n\n"
        "    def action(self, x):\n        return x + 1\n\n\n"
        "@workflow(inputs={'N': int})\ndef main():\n    i = Inc()\n    connect('N', i.In)\n    connect(i.Out, 'Out')\n"
    )
    golden = tmp_path / "inc.json"
    record(load_module(flow).main, golden, {"N": 3})
    with pytest.raises(GoldenMismatch, match=r'the inputs differ: \{"N":3\} -> \{"N":5\}'):
        check(load_module(flow).main, golden, {"N": 5})


POINTS = '''
from dataclasses import dataclass

from flowtape import File, Port, connect, task, workflow


@dataclass
class Point:
    x: int
    y: int


@task
class Src:
    n: int = 0

    class Ports:
        Out = Port[object](direction="out")

    def action(self):
        if self.n >= 3:
            return None
        self.n += 1
        return Point(self.n, 10)


@task
class Sum:
    last: object = None  # state holding an object of the flow's own class

    class Ports:
        In = Port[object](direction="in")
        Doc = Port[File](direction="in")
        Out = Port[str](direction="out")

    def action(self, p, doc):
        prev = self.last.x if self.last is not None else 0
        self.last = p
        with open(doc) as fh:
            return f"{p.x + p.y} (prev x {prev}) {fh.read().strip()}"


@workflow(inputs={"Doc": File})
def main():
    src = Src()
    s = Sum()
    connect(src.Out, s.In)
    connect("Doc", s.Doc)
    connect(s.Out, "Out")
'''


def test_a_golden_holds_in_another_checkout_and_a_run_resumes_through_either_loader(tmp_path, monkeypatch):
    """The flow's own classes are named on the tape by the flow (`__flow__:Point`), not by the
    name a loader gave its module (`flowtape_flow_<hash of its path>`, `points`), and a `File`
    input of the checkout is `<flow>/...` in a golden: a checkout moved keeps its goldens, and a
    run recorded by `flowtape run` resumes from Python (and back)."""
    import importlib
    import shutil
    import subprocess
    import sys

    from flowtape.runner import execute

    first = tmp_path / "a"
    first.mkdir()
    (first / "points.py").write_text(POINTS)
    (first / "doc.txt").write_text("ok\n")
    monkeypatch.chdir(first)
    assert cli_main(["golden", "record", "points.py", "g.json", "--input", "Doc=doc.txt"]) == 0
    assert '"__flow__:Point"' in (first / "g.json").read_text() and '"<flow>/doc.txt"' in (first / "g.json").read_text()
    subprocess.run([sys.executable, "-m", "flowtape", "run", "points.py", "--input", "Doc=doc.txt", "--run-id", "cli"],
                   check=True, capture_output=True)
    moved = tmp_path / "b"
    shutil.copytree(first, moved)
    (first / "doc.txt").write_text("the old checkout's\n")  # (were it read, the outputs would differ)
    (first / "points.py").write_text(POINTS.replace("prev x", "before x"))
    monkeypatch.chdir(moved)
    assert cli_main(["golden", "check", "points.py", "g.json"]) == 0  # its input is the doc of this checkout
    (first / "doc.txt").write_text("ok\n")  # (the run's tape names the first checkout's doc: a resume reads it)
    monkeypatch.syspath_prepend(str(moved))
    flow = importlib.import_module("points").main  # imported by name: another module name than the CLI's
    recorded = read_summary_outputs(moved / ".flowtape" / "runs" / "cli")
    for step in range(4):
        again = execute(flow, None, max_workers=1, runs_dir=moved / ".flowtape" / "runs", resume_from="cli", at_step=step)
        assert again.outputs == recorded and not again.replay_stopped, step


def read_summary_outputs(run_dir: Path):  # type: ignore[no-untyped-def]
    return json.loads((run_dir / "run.json").read_text())["outputs"]


def test_a_golden_writes_the_flows_folder_only_where_a_string_starts_with_it(tmp_path):
    from flowtape.golden import snapshot

    folder = tmp_path.resolve()
    (folder / "where.py").write_text(
        "from pathlib import Path\nfrom flowtape import Port, connect, task, workflow\n\n\n"
        "@task\nclass Say:\n    class Ports:\n        Out = Port[list](direction='out')\n\n    done: bool = False\n\n"
        "    def action(self):\n        if self.done:\n            return None\n        self.done = True\n"
        f"        return [str(Path(__file__).parent), str(Path(__file__)), 'https://host{folder}/login']\n\n\n"
        "@workflow\ndef main():\n    s = Say()\n    connect(s.Out, 'Out')\n")
    data = snapshot(load_module(folder / "where.py").main)
    assert data["end"]["outputs"]["Out"] == [["<flow>", "<flow>/where.py", f"https://host{folder}/login"]]
