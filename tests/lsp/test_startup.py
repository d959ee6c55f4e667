"""What the server finds on disk when it starts: a run whose process was killed while no server
watched gets its end record, so that it can be stepped through and resumed."""

from __future__ import annotations

import asyncio
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
    while time.monotonic() < deadline and (not tape.exists() or tape.read_bytes().count(b'"t":"s"') < 5):
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert json.loads((runs / "killed" / "run.json").read_text())["status"] == "running"
    return root


async def test_a_run_killed_unwatched_is_sealed_and_can_be_resumed(client: LanguageClient, workspace: Path) -> None:
    run_dir = workspace / ".flowtape" / "runs" / "killed"
    for _ in range(200):
        summary = json.loads((run_dir / "run.json").read_text())
        if summary["status"] != "running":
            break
        await asyncio.sleep(0.05)
    assert summary["status"] == "failed" and summary["steps"] >= 5
    tape, rebuild = verify(run_dir / "tape.jsonl", warn=False)
    assert rebuild.ended is not None and rebuild.ended.status == "failed"
    listed = await request(client, "flowtape/runs", {})
    assert [r["status"] for r in listed["runs"] if r["runId"] == "killed"] == ["failed"]
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": "killed"})
    done = await collector(client).finished(resumed["runId"], timeout=30)
    assert done["status"] == "succeeded"
    assert done["outputs"] == {"Result": [2 * i for i in range(1, 201)]}
    replayed = [s for s in collector(client).steps(resumed["runId"]) if s["replayed"]]
    assert len(replayed) == summary["steps"]
