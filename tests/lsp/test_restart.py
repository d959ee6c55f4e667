"""After the server restarts (or the window reloads), what the latest runs said is back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from .conftest import FLOW_FAIL, request, uri_of, write_flow
from .test_editor import diagnostics_for, line_of


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace whose flow failed in a run made before the server started."""
    root = tmp_path / "ws"
    root.mkdir()
    flow = write_flow(root, "fail.py", FLOW_FAIL)
    subprocess.run([sys.executable, "-m", "flowtape", "run", str(flow), "--runs-dir", str(root / ".flowtape" / "runs")],
                   cwd=root, capture_output=True, check=False, timeout=60)
    return root


async def test_failed_runs_diagnostics_and_reason_are_back_after_a_restart(client: LanguageClient, workspace: Path) -> None:
    flow = workspace / "fail.py"
    uri = uri_of(flow)
    diags = await diagnostics_for(client, uri, lambda ds: {d.code for d in ds} >= {"run-failed", "run-raised"})
    failed = next(d for d in diags if d.code == "run-failed")
    assert failed.severity == lsp.DiagnosticSeverity.Error and failed.range.start.line == line_of(flow, "picky = Picky()")
    raised = next(d for d in diags if d.code == "run-raised")
    assert raised.range.start.line == line_of(flow, 'raise ValueError("two is not allowed")')
    [run] = (await request(client, "flowtape/runs", {"uri": uri}))["runs"]
    assert run["status"] == "failed" and "two is not allowed" in run["error"]["message"]
    assert run["error"]["actor"] == "picky" and run["error"]["fireCount"] == 2
