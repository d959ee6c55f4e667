"""What the server finds on disk when it starts: a run whose process was killed while no server
watched is reported failed, left as it is (never written to: the server did not start it), and can
be stepped through and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from flowtape.verify import verify
from pytest_lsp import LanguageClient

from .conftest import collector, command, count_flow, request, write_flow


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace holding a run killed with SIGKILL after a few steps (before the server starts)."""
    root = tmp_path / "ws"
    root.mkdir()
    flow = write_flow(root, "count.py", count_flow(200, delay=0.02))
    runs = root / ".flowtape" / "runs"
    child = subprocess.Popen(
        [sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", "killed", "--runs-dir", str(runs)],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    tape = runs / "killed" / "tape.jsonl"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not tape.exists() or tape.read_bytes().count(b'"t":"s"') + tape.read_bytes().count(b'"t":"F"') < 5):
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert json.loads((runs / "killed" / "run.json").read_text())["status"] == "running"
    # and a long one, killed at its very end (as it is written: no end record, run.json says running)
    big = write_flow(root, "long.py", count_flow(6000))
    subprocess.run([sys.executable, "-m", "flowtape", "run", str(big), "--run-id", "long", "--runs-dir", str(runs)],
                   cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    lines = (runs / "long" / "tape.jsonl").read_bytes().splitlines(keepends=True)
    (runs / "long" / "tape.jsonl").write_bytes(b"".join(lines[:-1]))
    summary = json.loads((runs / "long" / "run.json").read_text())
    for field in ("tape", "finishedAt", "outputs"):
        summary.pop(field, None)
    (runs / "long" / "run.json").write_text(json.dumps({**summary, "status": "running", "pid": child.pid}))  # a pid gone
    return root


async def test_a_long_killed_run_says_its_whole_step_count_from_the_first_page(client: LanguageClient, workspace: Path) -> None:
    """Only its tape can tell a killed run's steps (run.json says running): the first page, asked
    before the rest of the tape is read, already says them all, as the tape is checked (and
    counted) in full before the first answer about it."""
    page = await request(client, "flowtape/getSteps", {"runId": "long", "from": 1, "limit": 10})
    assert [s["step"] for s in page["steps"]] == list(range(1, 11))
    assert page["total"] == 12_000 and page["live"] is False


async def test_a_run_killed_unwatched_is_reported_left_alone_and_can_be_resumed(client: LanguageClient, workspace: Path) -> None:
    run_dir = workspace / ".flowtape" / "runs" / "killed"
    before = (run_dir / "tape.jsonl").read_bytes(), (run_dir / "run.json").read_bytes()
    listed = await request(client, "flowtape/runs", {})
    killed = [r for r in listed["runs"] if r["runId"] == "killed"]
    assert [r["status"] for r in killed] == ["failed"]
    tape, rebuild = verify(run_dir / "tape.jsonl", warn=False)
    assert rebuild.ended is None and rebuild.step >= 5
    page = await request(client, "flowtape/getSteps", {"runId": "killed", "from": 1, "limit": 1000})
    assert page["total"] == rebuild.step and page["live"] is False
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": "killed"})
    done = await collector(client).finished(resumed["runId"], timeout=30)
    assert done["status"] == "succeeded"
    assert done["outputs"] == {"Result": [2 * i for i in range(1, 201)]}
    replayed = [s for s in collector(client).steps(resumed["runId"]) if s["replayed"]]
    assert len(replayed) == rebuild.step
    assert ((run_dir / "tape.jsonl").read_bytes(), (run_dir / "run.json").read_bytes()) == before
