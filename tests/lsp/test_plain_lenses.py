"""Lenses for a client that implements nothing of its own (Neovim's built-in client, any other):
every lens carries a server command that does what its title says, with all it needs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from .conftest import FLOW_FAIL, collector, command, count_flow, request, uri_of, write_flow


def _open(client: LanguageClient, path: Path) -> str:
    uri = uri_of(path)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=path.read_text(),
    )))
    return uri


async def _lenses(client: LanguageClient, uri: str) -> list[lsp.CodeLens]:
    return await client.text_document_code_lens_async(lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))


async def _run_lens_command(client: LanguageClient, lens: lsp.CodeLens) -> object:
    """What a plain client does with a lens: execute its command, arguments as they are."""
    assert lens.command is not None
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command=lens.command.command, arguments=list(lens.command.arguments or [])))


async def test_plain_client_resumes_at_the_selected_step_it_names(nvim_client: LanguageClient, workspace: Path) -> None:
    client = nvim_client
    flow = write_flow(workspace, "count.py", count_flow(4))
    uri = _open(client, flow)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri, "workflow": "main"})
    done = await col.finished(run["runId"])
    assert [lens.command.title for lens in await _lenses(client, uri)] == ["▶ Run", "Runs (1)"]

    client.protocol.notify("flowtape/selectStep", {"runId": run["runId"], "step": 3})
    for _ in range(100):  # a notification: the lens shows the selection once the server has it
        lenses = await _lenses(client, uri)
        if len(lenses) == 3:
            break
        await asyncio.sleep(0.05)
    assert [lens.command.title for lens in lenses] == ["▶ Run", "⟲ Resume at step 3", "Runs (1)"]
    assert lenses[1].command is not None and lenses[1].command.command == "flowtape.resumeAtStep"
    assert list(lenses[1].command.arguments or []) == [{"runId": run["runId"], "step": 3}]

    resumed = await _run_lens_command(client, lenses[1])
    assert isinstance(resumed, dict)
    again = await col.finished(resumed["runId"])
    assert again["status"] == "succeeded" and again["outputs"] == done["outputs"]
    marks = [s["replayed"] for s in col.steps(resumed["runId"])]
    assert marks[:3] == [True, True, True] and marks[3:] and not any(marks[3:])  # the rest ran live


async def test_plain_client_retries_a_failed_run_from_its_last_step(nvim_client: LanguageClient, workspace: Path) -> None:
    client = nvim_client
    flow = write_flow(workspace, "fail.py", FLOW_FAIL)
    uri = _open(client, flow)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri})
    done = await col.finished(run["runId"])
    assert done["status"] == "failed"
    lenses = await _lenses(client, uri)
    resume = [lens for lens in lenses if lens.command and lens.command.command == "flowtape.resumeAtStep"]
    assert len(resume) == 1 and resume[0].command is not None
    # no step: where it stopped (its last step, inside the composite it failed in too)
    assert list(resume[0].command.arguments or []) == [{"runId": run["runId"]}]
    assert resume[0].command.title == f"⟲ Resume at step {done['steps']}"


async def test_plain_client_runs_lens_shows_the_runs(nvim_client: LanguageClient, workspace: Path) -> None:
    client = nvim_client
    flow = write_flow(workspace, "count.py", count_flow(2))
    uri = _open(client, flow)
    col = collector(client)
    first = await command(client, "flowtape.run", {"uri": uri})
    await col.finished(first["runId"])
    second = await command(client, "flowtape.run", {"uri": uri})
    await col.finished(second["runId"])
    lenses = await _lenses(client, uri)
    runs_lens = lenses[-1]
    assert runs_lens.command is not None and runs_lens.command.title == "Runs (2)"
    assert runs_lens.command.command == "flowtape.showRuns"
    shown = await _run_lens_command(client, runs_lens)
    assert isinstance(shown, dict) and [r["runId"] for r in shown["runs"]] == [second["runId"], first["runId"]]
    message = client.messages[-1]
    assert message.type == lsp.MessageType.Info
    assert "2 runs of main" in message.message and first["runId"] in message.message and "succeeded" in message.message
    listed = await request(client, "flowtape/runs", {"uri": uri})
    assert [r["runId"] for r in listed["runs"]] == [r["runId"] for r in shown["runs"]]


async def test_vscode_options_keep_the_client_side_lenses(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(2))
    uri = _open(client, flow)
    run = await command(client, "flowtape.run", {"uri": uri})
    await collector(client).finished(run["runId"])
    lenses = await _lenses(client, uri)
    assert [(lens.command.title, lens.command.command) for lens in lenses if lens.command] == [
        ("▶ Run", "flowtape.run"), ("⟲ Resume at step…", "flowtape.resumeAtStep"), ("Runs (1)", "flowtape.view.refresh")]


async def test_show_runs_refuses_bad_params(nvim_client: LanguageClient, workspace: Path) -> None:
    import pytest
    from pygls.exceptions import JsonRpcException

    with pytest.raises(JsonRpcException) as err:
        await command(nvim_client, "flowtape.showRuns", {"uri": "file:///elsewhere/x.py"})
    assert "-32602" in str(err.value) or "outside" in str(err.value)
    with pytest.raises(JsonRpcException):
        await command(nvim_client, "flowtape.showRuns", {"wrokflow": "main"})
