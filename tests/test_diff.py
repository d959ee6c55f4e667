"""`flowtape diff`: two runs' firings paired per actor (k-th with k-th), the first difference and
why, with the values on both sides; the JSON shape; interleavings alone are no difference."""

from __future__ import annotations

import json

import msgspec
import pytest
from conftest import EXAMPLES
from flowtape.cli import main
from flowtape.diff import RunDiff

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


def _variant(tmp_path, source: str, old: str, new: str, name: str) -> str:
    text = open(source, encoding="utf-8").read()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new), encoding="utf-8")
    return str(path)


def test_the_same_flow_twice_is_no_difference(cli):
    assert cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")[0] == 0
    assert cli("run", CHAIN, "--run-id", "b", "--max-workers", "4")[0] == 0
    code, out, _ = cli("diff", "a", "b")
    assert code == 0
    assert out.startswith("no difference: every firing of run a matches run b's")
    assert "numbers: 5 / 5" in out and "outputs: the same" in out


def test_runs_that_differ_only_in_interleaving_report_no_difference(cli, tmp_path, write_flow):
    body = '''
from flowtape import Port, connect, task, workflow

@task
class Count:
    n: int
    i: int = 0
    class Ports:
        Out = Port[int](direction="out")
    def action(self):
        if self.i >= self.n:
            return None
        self.i += 1
        return self.i

@task
class Sq:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")
    def action(self, x):
        return x * x

@workflow
def main():
    {first}
    {second}
    sq = Sq()
    connect(left.Out, sq.In)
    connect(right.Out, "Right")
    connect(sq.Out, "Out")
'''
    a = write_flow(body.format(first="left = Count(n=3)", second="right = Count(n=3)"), "a.py")
    b = write_flow(body.format(first="right = Count(n=3)", second="left = Count(n=3)"), "b.py")
    assert cli("run", str(a), "--run-id", "a", "--max-workers", "1")[0] == 0
    assert cli("run", str(b), "--run-id", "b", "--max-workers", "1")[0] == 0
    steps = [json.loads(cli("show", run, "--json")[1])["steps"] for run in ("a", "b")]
    assert [s["actor"] for s in steps[0]] != [s["actor"] for s in steps[1]]  # the interleavings differ
    code, out, _ = cli("diff", "a", "b", "--json")
    diff = msgspec.json.decode(out, type=RunDiff)
    assert code == 0 and diff.same and diff.first is None and diff.differences == []


def test_the_first_difference_names_the_firing_why_and_both_values(cli, tmp_path):
    changed = _variant(tmp_path, CHAIN, "return 2 * x", "return 2 * x + (x == 3)", "chain2.py")
    cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")
    cli("run", changed, "--run-id", "b", "--max-workers", "1")
    code, out, _ = cli("diff", "a", "b")
    assert code == 1
    assert out.startswith("runs differ: a = a, b = b")
    assert "first difference: double firing 3 (a: step 8, b: step 8): outputs\n" in out
    assert "a: {'double.Out->add_one.In': [6]}" in out and "b: {'double.Out->add_one.In': [7]}" in out
    # the next actor's paired firing took the other token: inputs and outputs differ
    assert "add_one firing 3 (a: step 9, b: step 9): inputs, outputs" in out
    # outputs as a readable diff of the structures
    assert "outputs differ:" in out and "-    7," in out and "+    8," in out


def test_the_json_shape(cli, tmp_path):
    changed = _variant(tmp_path, CHAIN, "return 2 * x", "return 2 * x + (x == 3)", "chain2.py")
    cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")
    cli("run", changed, "--run-id", "b", "--max-workers", "1")
    code, out, _ = cli("diff", "a", "b", "--json")
    data = json.loads(out)
    assert code == 1 and out.count("\n") == 1
    assert set(data) >= {"a", "b", "same", "counts", "outputs", "first", "differences", "statusA", "statusB"}
    assert data["same"] is False and data["a"] == "a" and data["b"] == "b"
    first = data["first"]
    assert (first["actor"], first["fireCount"], first["aspects"]) == ("double", 3, ["outputs"])
    assert first["a"]["inputs"] == [{"queue": "numbers.Out->double.In", "digest": first["a"]["inputs"][0]["digest"], "tokens": [3]}]
    assert first["a"]["outputs"] == [{"queue": "double.Out->add_one.In", "tokens": [6]}]
    assert first["b"]["outputs"] == [{"queue": "double.Out->add_one.In", "tokens": [7]}]
    assert first["a"]["step"] == first["b"]["step"] == 8
    assert [d["actor"] for d in data["differences"]] == ["double", "add_one"]
    assert {c["actor"]: (c["a"], c["b"]) for c in data["counts"]} == {"numbers": (5, 5), "double": (5, 5), "add_one": (5, 5)}
    assert data["outputs"] == {"same": False, "a": {"Out": [3, 5, 7, 9, 11]}, "b": {"Out": [3, 5, 8, 9, 11]}}


def test_an_agent_answer_differs_in_its_outputs_and_chat_and_firings_pair_per_actor(cli, tmp_path):
    changed = _variant(tmp_path, REVIEW, '"approve" if', '"approve" if "Resume" not in draft and', "review2.py")
    cli("run", REVIEW, "--run-id", "a")
    cli("run", changed, "--run-id", "b")
    code, out, _ = cli("diff", "a", "b", "--json")
    diff = msgspec.json.decode(out, type=RunDiff)
    assert code == 1 and diff.first is not None
    assert (diff.first.actor, diff.first.fireCount, diff.first.aspects) == ("reviewer", 3, ["outputs", "chat"])
    assert {c.actor: (c.a, c.b) for c in diff.counts}["revise"] == (2, 3)
    only = [d for d in diff.differences if d.aspects == ["only in b"]]
    assert [(d.actor, d.fireCount) for d in only] == [("revise", 3)] and only[0].a is None
    code, text, _ = cli("diff", "a", "b")
    # the chat's answer as a diff of the structure, both sides
    assert '-    "content": "{\\"outputs\\": {\\"Verdict\\": \\"approve\\"' in text
    assert '+    "content": "{\\"outputs\\": {\\"Verdict\\": \\"revise\\"' in text
    assert "revise: 2 / 3  ≠" in text


def test_actor_narrows_the_comparison(cli, tmp_path):
    changed = _variant(tmp_path, CHAIN, "return 2 * x", "return 2 * x + (x == 3)", "chain2.py")
    cli("run", CHAIN, "--run-id", "a", "--max-workers", "1")
    cli("run", changed, "--run-id", "b", "--max-workers", "1")
    code, out, _ = cli("diff", "a", "b", "--actor", "add_one", "--json")
    diff = msgspec.json.decode(out, type=RunDiff)
    assert code == 1 and diff.actor == "add_one"
    assert [(d.actor, d.fireCount) for d in diff.differences] == [("add_one", 3)]
    code, out, _ = cli("diff", "a", "b", "--actor", "numbers")
    assert code == 0 and out.startswith("no difference (actor numbers)")
    code, _, err = cli("diff", "a", "b", "--actor", "nobody")
    assert code == 2 and "no actor 'nobody' in either run (their actors: add_one, double, numbers)" in err


def test_an_unknown_run_is_a_usage_error(cli):
    cli("run", CHAIN, "--run-id", "a")
    code, _, err = cli("diff", "a", "zzz")
    assert code == 2 and "zzz" in err and "Traceback" not in err
