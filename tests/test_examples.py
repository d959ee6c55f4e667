"""Every example runs, in-process (one worker and several) and through the CLI, with exact outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO
from flowtape import run
from flowtape.loader import load_flow
from flowtape.tape import read_tape

DRAFTS_PUBLISHED = [
    "Flowtape records every firing on a tape.",
    "Resume at any step replays the recorded firings.",
    "This paragraph rambles on without a point and also has no capital letter at the start.",
    "Tapes r cool.",
]

EXPECTED: dict[str, dict[str, list]] = {
    "agents": {"notes": ["7 words", "3 words"], "summary": ["2 drafts reviewed: 1 approved, 1 to revise"]},  # (the mock)
    "chain": {"Out": [3, 5, 7, 9, 11]},
    "fanout_join": {
        "Out": [{"n": n, "square": n * n, "cube": n**3, "neg": -n} for n in (1, 2, 3, 4)],
    },
    "guards": {"Small": [1, 2], "Even": [10, 42], "Odd": [7, 99]},
    "loop_accumulator": {"Total": [30], "Seen": [[2, 4, 6, 8, 10]]},
    "if_else": {
        "Decisions": [
            "A1: approved automatically (40)",
            "A2: sent to review (250)",
            "A3: approved automatically (99)",
            "A4: sent to review (1200)",
        ]
    },
    "nested": {"Out": [7, 11, 15]},
    "review": {
        "Summary": ["4 drafts reviewed: 2 approved, 2 revised"],
        "Published": [DRAFTS_PUBLISHED],
        "Notes": [
            "looks good",
            "missing capital letter and final period",
            "looks good",
            "missing capital letter and final period",
        ],
    },
    "tool": {
        "Stats": [
            {"words": 5, "chars": 23, "longest": "dataflow"},
            {"words": 4, "chars": 24, "longest": "processes"},
            {"words": 4, "chars": 21, "longest": "through"},
        ]
    },
}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """examples/agents.py calls a model when these are set: here it answers with its mock."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_every_example_is_listed():
    flows = {p.stem for p in EXAMPLES.glob("*.py")}
    assert flows == set(EXPECTED)
    listing = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for name in EXPECTED:
        assert f"`{name}.py`" in listing


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("workers", [1, 4])
def test_example_outputs(name: str, workers: int, runs_dir: Path):
    flow = load_flow(EXAMPLES / f"{name}.py")
    assert flow.name == "main"
    outputs = run(flow, max_workers=workers, runs_dir=runs_dir, run_id=f"{name}-{workers}")
    assert outputs == EXPECTED[name]
    tape = read_tape(runs_dir / f"{name}-{workers}" / "tape.jsonl")
    assert tape.end is not None and tape.end.status == "succeeded"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_has_a_docstring(name: str):
    module_doc = (EXAMPLES / f"{name}.py").read_text(encoding="utf-8").lstrip()
    assert module_doc.startswith('"""')
    assert f"flowtape run examples/{name}.py" in module_doc


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "flowtape", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_through_the_cli(name: str, tmp_path: Path):
    proc = _cli("run", str(EXAMPLES / f"{name}.py"), "--json", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "succeeded"
    assert result["outputs"] == EXPECTED[name]


def test_demo_runs_from_the_repository_root_like_make_demo(tmp_path: Path):
    """`make demo` runs `flowtape run examples/review.py` from the repository root (human output)."""
    proc = _cli("run", "examples/review.py", "--runs-dir", str(tmp_path / "runs"), cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "Summary: ['4 drafts reviewed: 2 approved, 2 revised']" in proc.stdout
    assert "succeeded" in proc.stderr
