"""`flowtape graph`: a flow's graph without running it, a run's from its tape header, the same
picture both ways, nesting of loops, ifs and nested workflows, and clear errors."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES
from flowtape.cli import main


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


@pytest.mark.parametrize("example", ["review", "nested", "if_else", "chain"])
def test_a_flow_and_its_run_draw_the_same_graph(cli, example: str) -> None:
    flow = str(EXAMPLES / f"{example}.py")
    code, built, _ = cli("graph", flow, "--json")
    assert code == 0
    assert cli("run", flow, "--run-id", "r1")[0] == 0
    code, recorded, _ = cli("graph", "r1", "--json")
    assert code == 0
    ran = json.loads(recorded)
    assert ran.pop("runId") == "r1"
    assert json.loads(built) == ran


def test_nesting_and_edges(cli) -> None:
    code, out, _ = cli("graph", str(EXAMPLES / "if_else.py"), "--json")
    g = json.loads(out)
    owner = {a["path"]: a.get("owner", "") for a in g["actors"]}
    branch = {a["path"]: a.get("branch", "") for a in g["actors"]}
    assert owner["check"] == "lp" and owner["c"] == "lp" and owner["review"] == "c"
    assert branch["review"] == "then" and branch["approve"] == "else"
    assert {("check", "c"), ("review", ""), ("approve", "")} <= {(e["src"], e["dst"]) for e in g["edges"]}
    code, text, _ = cli("graph", str(EXAMPLES / "if_else.py"))
    assert "      review (task, Review) [then]" in text and "check.Cond -> c.cond" in text


def test_graph_errors_are_clear(cli, tmp_path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from flowtape import workflow\n\n@workflow\ndef main():\n    raise RuntimeError('no')\n")
    code, out, err = cli("graph", str(bad))
    assert code != 0 and out == "" and "no" in err and "Traceback" not in err
    code, _, err = cli("graph", "no-such-run")
    assert code != 0 and "no-such-run" in err and "Traceback" not in err
    assert cli("run", str(EXAMPLES / "chain.py"), "--run-id", "r2")[0] == 0
    code, _, err = cli("graph", "r2", "--workflow", "main")
    assert code == 2 and "--workflow is for a flow file" in err
