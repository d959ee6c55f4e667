"""A flow whose agent calls a model, run through the language server: runFinished, the runs list
and a step's detail carry its usage, and no message the server sends holds the API key."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from pytest_lsp import LanguageClient

from .conftest import collector, command, request, uri_of, write_flow

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from model_server import Event, ModelServer  # noqa: E402

KEY = "sk-lsp-test-SECRET-77d1e0"

FLOW = '''\
from flowtape import Port, agent, connect, task, workflow


@task
class Text:
    sent: bool = False

    class Ports:
        Out = Port[str](direction="out")

    def action(self):
        if self.sent:
            return None
        self.sent = True
        return "a text"


@agent(prompt="Summarise.", transport="openai", model="lsp-model", retries=0)
class Summarise:
    class Ports:
        text = Port[str](direction="in")
        summary = Port[str](direction="out")


@workflow
def main():
    text = Text()
    summarise = Summarise()
    connect(text.Out, summarise.text)
    connect(summarise.summary, "summary")
'''


@pytest.fixture(scope="module")
def model():
    server = ModelServer()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def model_env(model, monkeypatch):
    # set before the server process starts: it, and the runs it starts, call this model
    monkeypatch.setenv("OPENAI_BASE_URL", model.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


async def test_usage_reaches_the_editor_and_the_key_never_does(model: ModelServer, client: LanguageClient, workspace: Path,
                                                               capfd: pytest.CaptureFixture[str]) -> None:
    flow = write_flow(workspace, "agent.py", FLOW)
    col = collector(client)
    started = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    done = await col.finished(started["runId"], timeout=60)
    assert done["status"] == "succeeded", done
    usage = done["usage"]
    assert usage["calls"] == 1 and usage["inputTokens"] > 0 and usage["replayedCalls"] == 0
    detail = await request(client, "flowtape/stepDetail", {"runId": started["runId"], "step": 2})
    [entry] = detail["chat"]
    assert entry["actor"] == "summarise" and "summary of" in entry["chat"]
    assert json.loads(entry["asked"])["inputs"] == {"text": "a text"}  # the question and the answer, each whole
    assert json.loads(entry["answer"]) == {"outputs": {"summary": 'summary of {"text": "a text"}'}}
    assert entry["calls"][0]["model"] == "lsp-model" and entry["calls"][0]["outputTokens"] > 0
    runs = await request(client, "flowtape/runs", {})
    assert next(r for r in runs["runs"] if r["runId"] == started["runId"])["usage"] == usage
    # a failing call whose error body echoes the key (as OpenAI's 401 does)
    model.then(Event(None, 401, f"Incorrect API key provided: {KEY}."))
    failed = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    end = await col.finished(failed["runId"], timeout=60)
    assert end["status"] == "failed" and "answered HTTP 401" in end["error"]
    # nowhere: the notifications, the server's log and messages, its stderr (which pytest-lsp forwards here),
    # what it answers, and any file the runs left in the workspace
    answered = [detail, runs, await request(client, "flowtape/stepDetail", {"runId": failed["runId"], "step": 1})]
    said = json.dumps([[params for _, params in col.items], client.log_messages, client.messages, answered], default=str)
    assert "answered HTTP 401" in said and KEY not in said
    assert KEY not in capfd.readouterr().err
    for path in workspace.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


async def test_the_editors_stop_ends_a_model_call_under_way_and_the_run_resumes(model: ModelServer, client: LanguageClient,
                                                                                  workspace: Path) -> None:
    flow = write_flow(workspace, "agent.py", FLOW)
    col = collector(client)
    model.arrived.clear()
    model.then(Event({"outputs": {"summary": "too late"}}, delay=60))
    started = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    for _ in range(300):  # (the call is under way once the model server has it)
        if model.arrived.is_set():
            break
        await asyncio.sleep(0.1)
    asked = time.monotonic()
    await command(client, "flowtape.stop", {"runId": started["runId"]})
    done = await col.finished(started["runId"], timeout=30)
    assert done["status"] == "stopped", done
    assert time.monotonic() - asked < 8  # the call ended at once, not after the model's 60 s (nor the stop's grace)
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": started["runId"]})
    end = await col.finished(resumed["runId"], timeout=60)
    assert end["status"] == "succeeded", end
    assert end["usage"]["calls"] == 1 and "summary of" in json.dumps(end)
