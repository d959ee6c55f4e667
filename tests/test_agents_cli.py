"""Agents that call a model, in real child processes: the CLI's last line, a stop during a call,
the key absent from everything a run leaves, a missing SDK, the example against a local server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from agent_flows import (
    ENV_VARS,
    KEY,
    _cli_env,
    _flow,
    _flowtape,
)
from flowtape.rundir import read_summary
from model_server import Event

pytestmark = pytest.mark.usefixtures("clean_env")


def test_the_key_never_reaches_anything_a_run_leaves(server, write_flow, tmp_path):
    flow = _flow(write_flow, extra=", repair=1")
    # an API that echoes the key in its error, as OpenAI's 401 does; then a bad answer, then one that fails
    server.then(Event({"outputs": {"draft": "x"}}),
                Event({"outputs": {"score": 3}}),
                Event(None, 401, f"Incorrect API key provided: {KEY}. You can find your API key at ..."))
    env = _cli_env(server)
    run = _flowtape("run", str(flow), "--input", "ticket=hi", "--runs-dir", "runs", "--run-id", "leak", "--verbose",
                    env=env, cwd=tmp_path)
    assert run.returncode != 0 and "answered HTTP 401" in run.stderr and "[key]" in run.stderr
    shown = _flowtape("show", "leak", "--runs-dir", "runs", env=env, cwd=tmp_path)
    said = run.stdout + run.stderr + shown.stdout + shown.stderr
    assert KEY not in said
    for path in tmp_path.rglob("*"):  # the runs, their work/, and anything else the run left where it ran
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_the_cli_says_what_a_resume_saved_on_its_last_line(server, write_flow, tmp_path):
    flow = _flow(write_flow)
    env = _cli_env(server)
    first = _flowtape("run", str(flow), "--input", "ticket=hi", "--runs-dir", "runs", "--run-id", "first", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "called models 3 times" in first.stderr.splitlines()[-1]
    env.pop("OPENAI_API_KEY")
    again = _flowtape("run", str(flow), "--resume-from", "first", "--runs-dir", "runs", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    usage = read_summary(tmp_path / "runs" / "first").usage
    assert again.stderr.splitlines()[-1] == f"replayed 3 model calls, saved {usage.inputTokens + usage.outputTokens:,} tokens"


def test_a_stop_ends_a_call_under_way_and_the_run_resumes(server, write_flow, tmp_path):
    flow = _flow(write_flow)
    server.then(Event({"outputs": {"draft": "late"}}, delay=60))
    env = _cli_env(server)
    proc = subprocess.Popen([sys.executable, "-m", "flowtape", "run", str(flow), "--input", "ticket=hi", "--runs-dir", "runs",
                             "--run-id", "stopped"], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert server.arrived.wait(30)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=8)  # not the stop's 10 s grace: the call ended at once
    finally:
        proc.kill()
    summary = read_summary(tmp_path / "runs" / "stopped")
    assert summary.status == "stopped", err
    assert summary.steps == 0
    resumed = _flowtape("run", str(flow), "--resume-from", "stopped", "--runs-dir", "runs", env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "verdict:" in resumed.stdout and len(server.requests) == 4


def test_a_missing_sdk_says_which_extra_to_install(write_flow, tmp_path):
    flow = _flow(write_flow, "anthropic", "claude-test")
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    blocked = ("import sys; sys.modules['anthropic'] = None; from flowtape.cli import main; "  # (as if not installed)
               f"sys.exit(main(['run', {str(flow)!r}, '--input', 'ticket=hi', '--runs-dir', 'runs']))")
    proc = subprocess.run([sys.executable, "-c", blocked], env={**env, "ANTHROPIC_API_KEY": KEY}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert ("agent draft calls anthropic through the anthropic SDK, which is not installed: "
            "pip install 'flowtape[anthropic]'") in proc.stderr
    assert not (tmp_path / "runs").exists()  # said before anything ran


def test_the_agents_example_calls_an_openai_compatible_server(server, tmp_path):
    from conftest import EXAMPLES

    server.model = lambda seen: {"outputs": {"verdict": "approve", "note": "fine"}}
    env = {**_cli_env(server), "MODEL": "example-model"}
    proc = _flowtape("run", str(EXAMPLES / "agents.py"), "--json", "--runs-dir", "runs", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["outputs"] == {"notes": ["fine", "fine"], "summary": ["2 drafts reviewed: 2 approved, 0 to revise"]}
    assert {r.body["model"] for r in server.requests} == {"example-model"} and len(server.requests) == 2
    assert result["usage"]["calls"] == 2
