"""`flowtape/stepHints`: a file's inlay hints at given steps, whatever step is selected, placed in
the editor's text and saying which version of it (the VS Code client keeps them to answer its
stepper's keys at once); they are the ones `textDocument/inlayHint` gives once the step is selected."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities

from .conftest import CONFIG, VSCODE_OPTIONS, collector, command, count_flow, request, uri_of, write_flow
from .test_editor import change_doc, line_of, open_doc

INVALID, NOT_FOUND = -32602, -32001


def labels(hints: list[Any]) -> dict[int, str]:
    """{line: label} of hints as JSON (stepHints) or as lsprotocol objects (inlayHint)."""
    return {h["position"]["line"]: h["label"] for h in hints} if hints and isinstance(hints[0], dict) else {
        h.position.line: h.label for h in hints}


async def standard_hints(client: LanguageClient, uri: str, run_id: str, step: int) -> dict[int, str]:
    """The `textDocument/inlayHint` answer once `step` is selected (the server selects in its own time)."""
    client.protocol.notify("flowtape/selectStep", {"runId": run_id, "step": step})
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(500, 0))
    deadline = time.monotonic() + 10
    while True:
        hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=whole))
        if hints and f"at step {step}:" in str(hints[0].tooltip):
            return labels(hints)
        assert time.monotonic() < deadline, hints
        await asyncio.sleep(0.05)


async def test_step_hints_are_the_hints_of_each_step_asked_whatever_is_selected(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(4))
    other = write_flow(workspace, "other.py", "x = 1\n")
    uri = uri_of(flow)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri})
    await col.finished(run["runId"])
    run_id = run["runId"]
    total = len(col.steps(run_id))
    open_doc(client, flow)

    client.protocol.notify("flowtape/selectStep", {"runId": run_id, "step": 1})
    got = await request(client, "flowtape/stepHints", {"runId": run_id, "uri": uri, "steps": [0, 3, total]})
    assert (got["runId"], got["uri"], got["version"], got["shows"]) == (run_id, uri, 1, True)
    assert [s["step"] for s in got["steps"]] == [0, 3, total]
    by_step = {s["step"]: labels(s["hints"]) for s in got["steps"]}
    count, double = line_of(flow, "count = Count("), line_of(flow, "double = Double()")
    assert by_step[0] == {count: "×0", double: "×0"}  # before anything fired
    assert by_step[total][double] == "×4 {'total': 10}"
    for step in (3, total):  # what a plain client sees once the step is selected
        assert by_step[step] == await standard_hints(client, uri, run_id, step)

    # unsaved lines typed above the actors: placed in that text, and its version said
    change_doc(client, flow, "# a\n# b\n" + flow.read_text(), version=2)
    moved = await request(client, "flowtape/stepHints", {"runId": run_id, "uri": uri, "steps": [total]})
    assert moved["version"] == 2 and labels(moved["steps"][0]["hints"])[double + 2] == "×4 {'total': 10}"

    # a file the run creates no actors in: nothing to show there (the client asks the standard way)
    nothing = await request(client, "flowtape/stepHints", {"runId": run_id, "uri": uri_of(other), "steps": [1]})
    assert (nothing["shows"], nothing["steps"], nothing["version"]) == (False, [], None)  # (not open: as saved)


@pytest.mark.parametrize(("params", "code", "words"), [
    ({"runId": "nope", "uri": "URI", "steps": [1]}, NOT_FOUND, "nope"),
    ({"runId": "RUN", "uri": "URI", "steps": [99]}, NOT_FOUND, "step 99 is out of range"),
    ({"runId": "RUN", "uri": "URI", "steps": []}, INVALID, "steps"),
    ({"runId": "RUN", "uri": "URI", "steps": [-1]}, INVALID, "steps"),
    ({"runId": "RUN", "uri": "URI", "steps": list(range(65))}, INVALID, "steps"),
    ({"runId": "RUN", "steps": [1]}, INVALID, "uri"),
])
async def test_bad_step_hints_params_get_clear_errors(
    client: LanguageClient, workspace: Path, params: dict[str, Any], code: int, words: str,
) -> None:
    flow = write_flow(workspace, "count.py", count_flow(2))
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await collector(client).finished(run["runId"])
    filled = {k: (run["runId"] if v == "RUN" else uri_of(flow) if v == "URI" else v) for k, v in params.items()}
    with pytest.raises(JsonRpcException) as info:
        await request(client, "flowtape/stepHints", filled)
    assert info.value.code == code and words in info.value.message
    # the server still answers
    assert (await request(client, "flowtape/stepHints", {"runId": run["runId"], "uri": uri_of(flow), "steps": [1]}))["shows"]


async def refreshing_session(client: LanguageClient, workspace: Path, options: Any) -> None:
    """VS Code's capabilities, with the inlayHint refresh it supports (the preset lacks it)."""
    capabilities = client_capabilities("visual-studio-code")
    assert capabilities.workspace is not None
    capabilities.workspace.inlay_hint = lsp.InlayHintWorkspaceClientCapabilities(refresh_support=True)
    await client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities, root_uri=uri_of(workspace), initialization_options=options,
        workspace_folders=[lsp.WorkspaceFolder(uri=uri_of(workspace), name="ws")],
    ))


@pytest_lsp.fixture(config=CONFIG)
async def vscode_client(lsp_client: LanguageClient, workspace: Path):  # type: ignore[no-untyped-def]
    await refreshing_session(lsp_client, workspace, VSCODE_OPTIONS)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=CONFIG)
async def plain_client(lsp_client: LanguageClient, workspace: Path):  # type: ignore[no-untyped-def]
    await refreshing_session(lsp_client, workspace, None)
    yield
    await lsp_client.shutdown_session()


async def selected_refreshes(client: LanguageClient, workspace: Path) -> int:
    """The inlayHint refreshes a selectStep brings, once its hover shows the step."""
    flow = write_flow(workspace, "count.py", count_flow(3))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await col.finished(run["runId"])
    open_doc(client, flow)
    await col.wait_for(lsp.WORKSPACE_INLAY_HINT_REFRESH)  # (the run's end refreshes every client's)
    await asyncio.sleep(0.3)
    before = len(col.of(lsp.WORKSPACE_INLAY_HINT_REFRESH))
    client.protocol.notify("flowtape/selectStep", {"runId": run["runId"], "step": 1})
    at = lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri_of(flow)), position=lsp.Position(line_of(flow, "double = Double()"), 8))
    deadline = time.monotonic() + 10
    while "step 1 of" not in getattr(await client.text_document_hover_async(at), "contents", lsp.MarkupContent("", "")).value:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    return len(col.of(lsp.WORKSPACE_INLAY_HINT_REFRESH)) - before


async def test_a_client_that_asks_for_its_steps_hints_gets_no_refresh_for_each_step(vscode_client: LanguageClient, workspace: Path) -> None:
    assert await selected_refreshes(vscode_client, workspace) == 0  # (stepHints: its hover still follows the step)


async def test_a_plain_client_is_asked_to_refresh_its_hints_for_each_step(plain_client: LanguageClient, workspace: Path) -> None:
    assert await selected_refreshes(plain_client, workspace) == 1
