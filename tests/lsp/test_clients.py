"""Clients of other kinds: Neovim's capabilities, workspaces named through symlinks or by folders only, uris spelt their own way."""

from __future__ import annotations

from pathlib import Path

import pytest_lsp
from lsprotocol import types as lsp
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient, client_capabilities

from .conftest import (
    CONFIG,
    FLOW_FAIL,
    FLOW_MISWIRED,
    collector,
    command,
    count_flow,
    request,
    uri_of,
    write_flow,
)


async def test_neovim_run_lenses_and_diagnostics(nvim_client: LanguageClient, workspace: Path) -> None:
    client = nvim_client
    flow = write_flow(workspace, "count.py", count_flow(5))
    uri = uri_of(flow)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri, "workflow": "main"})
    done = await col.finished(run["runId"])
    assert done["status"] == "succeeded" and done["outputs"] == {"Result": [2, 4, 6, 8, 10]}
    assert [s["step"] for s in col.steps(run["runId"])] == list(range(1, done["steps"] + 1))
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=flow.read_text(),
    )))
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    # a plain client: no step to resume at worth a lens (the run succeeded, nothing is selected),
    # and the runs are shown by a server command, not a VS Code one
    assert [lens.command.title for lens in lenses] == ["▶ Run", "Runs (1)"]
    assert lenses[1].command.command == "flowtape.showRuns"
    page = await request(client, "flowtape/getSteps", {"runId": run["runId"], "from": 1, "limit": 3})
    assert [s["step"] for s in page["steps"]] == [1, 2, 3]
    bad = write_flow(workspace, "wired.py", FLOW_MISWIRED)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=uri_of(bad), language_id="python", version=1, text=bad.read_text(),
    )))
    params = await col.wait_for(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda p: p.uri == uri_of(bad) and bool(p.diagnostics))
    assert "type mismatch" in params.diagnostics[0].message


@pytest_lsp.fixture(config=CONFIG)
async def linked_client(lsp_client: LanguageClient, workspace: Path):  # type: ignore[no-untyped-def]
    """A client that opened the workspace through a symlink (as /tmp is on macOS)."""
    link = workspace.parent / "linked-ws"
    link.symlink_to(workspace, target_is_directory=True)
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=from_fs_path(str(link)),
    ))
    yield
    await lsp_client.shutdown_session()


async def test_a_workspace_opened_through_a_symlink_gets_its_own_uris(linked_client: LanguageClient, workspace: Path) -> None:
    client, link = linked_client, workspace.parent / "linked-ws"
    write_flow(workspace, "count.py", count_flow(3))
    uri = from_fs_path(str(link / "count.py"))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri, "workflow": "main"})
    done = await col.finished(run["runId"])
    assert done["status"] == "succeeded"
    started = await col.wait_for("flowtape/runStarted", lambda p: p["runId"] == run["runId"])
    assert started["uri"] == uri
    assert run["runDir"] == started["runDir"] == str(link / ".flowtape" / "runs" / run["runId"])  # through the link too
    assert {s["uri"] for s in col.steps(run["runId"])} == {uri}
    runs = await request(client, "flowtape/runs", {"uri": uri})
    assert [r["uri"] for r in runs["runs"]] == [uri]


FLOW_ECHO = """\
from flowtape import Port, connect, task, workflow


@task
class Echo:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[int](direction="out")

    def action(self, s):
        return len(s)


@workflow(inputs={"Text": str})
def main():
    e = Echo()
    connect("Text", e.In)
    connect(e.Out, "Len")
"""


async def test_run_inputs_of_any_size_and_shape_reach_the_flow(client: LanguageClient, workspace: Path) -> None:
    """Inputs go to the flow process as one JSON object: a 300 KB value (past a command line's
    limit) and text that looks like JSON or an option arrive as they were sent."""
    flow = write_flow(workspace, "echo.py", FLOW_ECHO)
    col = collector(client)
    for text in ("x" * 300_000, "42", "--runs-dir"):
        run = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main", "inputs": {"Text": text}})
        done = await col.finished(run["runId"])
        assert done["status"] == "succeeded", done
        assert done["outputs"] == {"Len": [len(text)]}


async def test_a_file_uri_naming_localhost_is_the_same_file(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(2))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow).replace("file:///", "file://localhost/", 1)})
    assert (await col.finished(run["runId"]))["status"] == "succeeded"


@pytest_lsp.fixture(config=CONFIG)
async def folder_client(lsp_client: LanguageClient, workspace: Path):  # type: ignore[no-untyped-def]
    """A client that names its workspace only as a folder, through a symlink, in a folder whose
    name has a space and non-ASCII letters, with a symlinked subfolder inside."""
    real = workspace / "my flows" / "ünï"
    real.mkdir(parents=True)
    (workspace / "my flows" / "alias").symlink_to(real, target_is_directory=True)
    link = workspace.parent / "linked ws"
    link.symlink_to(workspace, target_is_directory=True)
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=None,
        workspace_folders=[lsp.WorkspaceFolder(uri=from_fs_path(str(link)) or "", name="ws")],
    ))
    yield
    await lsp_client.shutdown_session()


async def test_files_are_named_as_the_client_names_them(folder_client: LanguageClient, workspace: Path) -> None:
    client, col = folder_client, collector(folder_client)
    link = workspace.parent / "linked ws"
    # a run of a flow through the symlinked subfolder: every message names it that way
    fail = write_flow(workspace / "my flows" / "ünï", "fail.py", FLOW_FAIL.replace("picky = Picky()", "picky = Picky()  # ✨ 🚀🚀"))
    uri = from_fs_path(str(link / "my flows" / "alias" / "fail.py")) or ""
    run = await command(client, "flowtape.run", {"uri": uri})
    done = await col.finished(run["runId"])
    started = await col.wait_for("flowtape/runStarted", lambda p: p["runId"] == run["runId"])
    assert started["uri"] == uri and {s["uri"] for s in col.steps(run["runId"])} == {uri}
    assert done["status"] == "failed" and done["errorDetail"]["uri"] == uri
    params = await col.wait_for(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda p: p.uri == uri and bool(p.diagnostics))
    assert sorted(d.code for d in params.diagnostics) == ["run-failed", "run-raised"]  # the raising line: named as the client names it too
    (error,) = [d for d in params.diagnostics if d.code == "run-failed"]
    text = fail.read_text().splitlines()[error.range.start.line]
    assert "picky = Picky()" in text and error.range.end.character == len(text.encode("utf-16-le")) // 2  # UTF-16 units
    # a flow error of a file the client opened by a uri spelt its own way (unencoded): on its line
    wired = write_flow(workspace / "my flows" / "ünï", "wired.py", FLOW_MISWIRED)
    own = "file://" + str(link / "my flows" / "ünï" / "wired.py")
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=own, language_id="python", version=1, text=wired.read_text(),
    )))
    params = await col.wait_for(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda p: p.uri == own and bool(p.diagnostics))
    (error,) = params.diagnostics
    assert error.code == "flow-error" and "type mismatch" in error.message and not error.message.startswith("/")
    assert error.range.start.line == FLOW_MISWIRED.splitlines().index("    connect(a.Out, b.In)")


async def test_step_ranges_follow_a_file_changed_on_disk_without_a_save(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(2))
    col = collector(client)
    for text in (flow.read_text(), "# a\n# b\n" + flow.read_text().replace("double = Double()", "double = Double()  # longer now")):
        flow.write_text(text)  # (as a checkout or a script would: no didSave)
        run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
        await col.finished(run["runId"])
        (step,) = [s for s in col.steps(run["runId"]) if s["actor"] == "double"][:1]
        line = text.splitlines()[step["range"]["start"]["line"]]
        assert "double = Double()" in line and step["range"]["end"]["character"] == len(line)
