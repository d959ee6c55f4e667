"""Diagnostics, code lenses, step detail, hover and inlay hints."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GEN_FLOW
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from .conftest import (
    FLOW_DIVERGE,
    FLOW_FAIL,
    FLOW_MISWIRED,
    collector,
    command,
    count_flow,
    request,
    uri_of,
    write_flow,
)


def line_of(path: Path, text: str) -> int:
    """0-based line of the first line containing `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines()) if text in line)


async def diagnostics_for(client: LanguageClient, uri: str, pred, timeout: float = 15.0):  # type: ignore[no-untyped-def]
    params = await collector(client).wait_for(
        lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda p: p.uri == uri and pred(p.diagnostics), timeout
    )
    return params.diagnostics


def open_doc(client: LanguageClient, path: Path) -> None:
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=uri_of(path), language_id="python", version=1, text=path.read_text(),
    )))


def change_doc(client: LanguageClient, path: Path, text: str, version: int) -> None:
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri_of(path), version=version),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
    ))


async def test_divergence_is_a_warning_on_the_actor_line_and_clears_on_a_clean_run(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "diverge.py", FLOW_DIVERGE)
    data = workspace / "data.json"
    data.write_text("[1, 2, 3]")
    col = collector(client)
    uri = uri_of(flow)
    first = await command(client, "flowtape.run", {"uri": uri})
    assert (await col.finished(first["runId"]))["status"] == "succeeded"
    data.write_text("[1, 5, 3]")
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": first["runId"], "step": 2})
    done = await col.finished(resumed["runId"])
    assert done["replayStopped"][0]["actor"] == "sq" and done["replayStopped"][0]["reason"] == "inputs differ"
    diags = await diagnostics_for(client, uri, lambda ds: any(d.code == "replay-diverged" for d in ds))
    (warning,) = [d for d in diags if d.code == "replay-diverged"]
    assert warning.severity == lsp.DiagnosticSeverity.Warning and warning.source == "flowtape"
    assert warning.range.start.line == line_of(flow, "sq = Square()")
    assert "sq firing 2" in warning.message and "lp.item->sq.In" in warning.message
    assert "recorded 2" in warning.message and "now 5" in warning.message
    diverged_steps = [s["step"] for s in col.steps(resumed["runId"]) if s.get("diverged")]
    assert diverged_steps == [2]
    # the next run of the flow is clean: the warning goes
    clean = await command(client, "flowtape.run", {"uri": uri})
    assert (await col.finished(clean["runId"]))["status"] == "succeeded"
    assert await diagnostics_for(client, uri, lambda ds: not ds) is not None


async def test_a_failed_run_is_an_error_on_the_failing_actor(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "fail.py", FLOW_FAIL)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    done = await col.finished(run["runId"])
    assert done["status"] == "failed" and "two is not allowed" in done["error"]
    assert done["errorDetail"]["actor"] == "picky" and done["errorDetail"]["line"] == line_of(flow, "picky = Picky()")
    diags = await diagnostics_for(client, uri_of(flow), lambda ds: any(d.code == "run-failed" for d in ds))
    error, raised_here = sorted(diags, key=lambda d: d.code != "run-failed")  # and the line that raised: issue 22
    assert raised_here.code == "run-raised" and raised_here.range.start.line == line_of(flow, "raise ValueError")
    assert error.severity == lsp.DiagnosticSeverity.Error
    assert error.range.start.line == line_of(flow, "picky = Picky()")
    raised = line_of(flow, "raise ValueError") + 1
    assert error.message == f"run {run['runId']} failed: picky firing 2: ValueError: two is not allowed (line {raised})"
    assert error.related_information and error.related_information[0].location.range.start.line == line_of(flow, "raise ValueError")
    # the step before the failure: every actor with its fire count, a stateless one with no state
    detail = await request(client, "flowtape/stepDetail", {"runId": run["runId"], "step": 2})
    src, picky = detail["states"]
    assert src["actor"] == "src" and src["state"] == f"{{'i': {src['fireCount']}}}"
    assert picky["actor"] == "picky" and picky["state"] is None and picky["fireCount"] == 2 - src["fireCount"]
    # rerunning the actor that failed resumes where it failed: its failed firing has no record
    again = await command(client, "flowtape.rerunActor", {"runId": run["runId"], "actor": "picky"})
    redone = await col.finished(again["runId"])
    started = col.of("flowtape/runStarted", again["runId"])[0]
    assert started["resumedAtStep"] == done["steps"] and redone["status"] == "failed"
    # a run of the flow that cannot even start replaces that error with its own, not with nothing
    nope = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "nope"})
    assert (await col.finished(nope["runId"]))["status"] == "failed"
    (cannot,) = await diagnostics_for(client, uri_of(flow), lambda ds: any(nope["runId"] in d.message for d in ds))
    assert cannot.code == "run-failed" and "nope" in cannot.message.split(" failed: ", 1)[1], cannot.message
    # fixed, and run under another spelling of its uri: the flow's errors still clear
    flow.write_text(FLOW_FAIL.replace("if x == 2:", "if x == 99:"))
    spelled = uri_of(flow).replace("file:///", "file://localhost/")
    clean = await command(client, "flowtape.run", {"uri": spelled})
    assert (await col.finished(clean["runId"]))["status"] == "succeeded"
    await diagnostics_for(client, uri_of(flow), lambda ds: not any(d.code == "run-failed" for d in ds))


async def test_a_run_error_stands_on_the_actor_line_of_the_text_as_edited(client: LanguageClient, workspace: Path) -> None:
    """Lines typed above the actors and not saved: the run (of the saved file) still puts its
    error on the line that creates the failing actor in the editor's text, as hovers do."""
    flow = write_flow(workspace, "fail.py", FLOW_FAIL)
    open_doc(client, flow)
    change_doc(client, flow, "# one\n# two\n" + flow.read_text(), version=2)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    assert (await collector(client).finished(run["runId"]))["status"] == "failed"
    diags = await diagnostics_for(client, uri_of(flow), lambda ds: any(d.code == "run-failed" for d in ds))
    (error,) = [d for d in diags if d.code == "run-failed"]
    assert error.range.start.line == line_of(flow, "picky = Picky()") + 2
    assert error.range.end.character == len("    picky = Picky()")


SQUARES = """\
from flowtape import Port, task


@task
class Square:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        sq = x * x
        if x == 2:
            raise ValueError("two")
        return sq


def make_square():
    return Square()
"""


async def test_a_run_error_stands_on_its_actor_line_and_not_on_a_look_alike(client: LanguageClient, workspace: Path) -> None:
    """A line that assigns the actor's name but does not create it (`sq = x * x` in a factory's
    module), the same name in another workflow of the file with unsaved lines typed above both,
    and a form feed (a line break for `str.splitlines`, not for Python or LSP)."""
    squares = write_flow(workspace, "squares.py", SQUARES)
    source = FLOW_FAIL.split("@task\nclass Picky")[0]
    factory = write_flow(workspace, "factory.py", source + (
        "from squares import make_square\n\n\n@workflow\ndef main():\n    src = Source()\n    sq = make_square()\n"
        "    connect(src.Out, sq.In)\n    connect(sq.Out, \"Result\")\n"))
    run = await command(client, "flowtape.run", {"uri": uri_of(factory)})
    assert (await collector(client).finished(run["runId"]))["status"] == "failed"
    diags = await diagnostics_for(client, uri_of(squares), lambda ds: any(d.code == "run-failed" for d in ds))
    (error,) = [d for d in diags if d.code == "run-failed"]  # (and "run-raised" on the line that raised)
    assert error.range.start.line == line_of(squares, "return Square()")  # where the actor is created

    smoke = "@workflow\ndef smoke():\n    src = Source()\n    picky = Picky()\n    connect(src.Out, picky.In)\n\n\n"
    text = FLOW_FAIL.replace("@workflow\ndef main", smoke + "\x0c\n@workflow\ndef main")
    flow = write_flow(workspace, "two.py", text)
    open_doc(client, flow)
    change_doc(client, flow, "# one\n# two\n# three\n# four\n" + text, version=2)  # not saved
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    assert (await collector(client).finished(run["runId"]))["status"] == "failed"
    diags = await diagnostics_for(client, uri_of(flow), lambda ds: any(d.code == "run-failed" for d in ds))
    (error,) = [d for d in diags if d.code == "run-failed"]
    saved = text.split("\n")
    main_picky = max(i for i, line in enumerate(saved) if "picky = Picky()" in line)
    assert error.range.start.line == main_picky + 4, (error.range, main_picky)


async def test_hints_of_a_run_on_disk_show_at_once_and_leave_an_actor_whose_line_was_deleted(
    client: LanguageClient, workspace: Path,
) -> None:
    """A finished run the server found on disk and has not read yet is shown from its tape's end
    at the first request; an actor whose line the user deleted (unsaved) has no hint, and its
    neighbour's hint stays its own."""
    flow = write_flow(workspace, "count.py", count_flow(3))
    subprocess.run([sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", "disk"], cwd=workspace,
                   check=True, capture_output=True)
    deadline = time.monotonic() + 15
    while not (await request(client, "flowtape/runs", {}))["runs"]:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    open_doc(client, flow)
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(len(flow.read_text().splitlines()), 0))
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri_of(flow)), range=whole))
    assert [(h.position.line, h.label) for h in hints or []] == [
        (line_of(flow, "count = Count("), "×3 {'i': 3}"), (line_of(flow, "double = Double()"), "×3 {'total': 6}")]
    lines = flow.read_text().splitlines(keepends=True)
    gone = line_of(flow, "count = Count(")
    change_doc(client, flow, "".join(lines[:gone] + lines[gone + 1:]), version=2)
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri_of(flow)), range=whole))
    assert [(h.position.line, h.label) for h in hints or []] == [(gone, "×3 {'total': 6}")]  # double's, moved up


async def test_hovers_in_a_module_that_flows_take_actors_from(client: LanguageClient, workspace: Path) -> None:
    """No selection: the latest run of a flow with actors there that has something to show; with
    selections in two flows, the latest one."""
    squares = write_flow(workspace, "squares.py", SQUARES)
    source = FLOW_FAIL.split("@task\nclass Picky")[0]
    col = collector(client)
    runs = {}
    for name in ("a", "b"):
        flow = write_flow(workspace, f"{name}.py", source + (
            "from squares import make_square\n\n\n@workflow\ndef main():\n    src = Source()\n    sq = make_square()\n"
            "    connect(src.Out, sq.In)\n    connect(sq.Out, \"Result\")\n"))
        runs[name] = await command(client, "flowtape.run", {"uri": uri_of(flow)})
        await col.finished(runs[name]["runId"])
    nope = await command(client, "flowtape.run", {"uri": uri_of(workspace / "b.py"), "workflow": "nope"})
    assert (await col.finished(nope["runId"]))["status"] == "failed"  # the latest run: it has nothing to show
    at = lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri_of(squares)),
                         position=lsp.Position(line_of(squares, "return Square()"), 8))
    hover = await client.text_document_hover_async(at)
    assert hover is not None and f"run `{runs['b']['runId']}`" in hover.contents.value
    for name, step in (("b", 1), ("a", 2)):  # selected in b, then in a: a's is the latest
        client.protocol.notify("flowtape/selectStep", {"runId": runs[name]["runId"], "step": step})
        deadline = time.monotonic() + 10
        while f"run `{runs[name]['runId']}` · step {step} of" not in getattr(hover, "contents", lsp.MarkupContent("", "")).value:
            assert time.monotonic() < deadline, hover
            await asyncio.sleep(0.1)
            hover = await client.text_document_hover_async(at)


async def test_a_flow_that_cannot_load_is_an_error_at_its_line(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "wired.py", FLOW_MISWIRED)
    uri = uri_of(flow)
    open_doc(client, flow)
    diags = await diagnostics_for(client, uri, lambda ds: bool(ds))
    (error,) = diags
    assert error.severity == lsp.DiagnosticSeverity.Error and error.code == "flow-error"
    assert error.range.start.line == line_of(flow, "connect(a.Out, b.In)")
    assert "type mismatch" in error.message
    # a syntax error as it is typed, before any save: on its line and columns (in UTF-16 units, as
    # LSP counts them), beside the saved file's wiring error, which still stands
    broken = FLOW_MISWIRED.replace("b = A()", "b = A() if '😀😀' else A((")
    change_doc(client, flow, broken, 2)
    diags = await diagnostics_for(client, uri, lambda ds: any("syntax error" in d.message for d in ds))
    error, wiring = diags
    assert error.code == "syntax-error" and error.range.start.line == line_of(flow, "b = A()")
    text = broken.splitlines()[error.range.start.line]
    assert error.range.start.character == len(text[: text.index("((") + 1].encode("utf-16-le")) // 2  # the one never closed
    assert wiring.code == "flow-error" and "type mismatch" in wiring.message
    # closed unsaved: the file as saved is checked again (the wiring error)
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    diags = await diagnostics_for(client, uri, lambda ds: [d.code for d in ds] == ["flow-error"])
    assert "type mismatch" in diags[0].message
    # fixed and saved: cleared
    open_doc(client, flow)
    fixed = FLOW_MISWIRED.replace("Port[str]", "Port[int]").replace("return str(x)", "return x")
    fixed += '    connect("In", a.In)\n    connect(b.Out, "Out")\n'
    change_doc(client, flow, fixed, 2)
    flow.write_text(fixed)
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert await diagnostics_for(client, uri, lambda ds: not ds) is not None


async def test_code_lenses(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(3))
    uri = uri_of(flow)
    open_doc(client, flow)
    params = lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    lenses = await client.text_document_code_lens_async(params)
    assert [lens.command.title for lens in lenses] == ["▶ Run"]
    assert lenses[0].command.command == "flowtape.run" and list(lenses[0].command.arguments) == [{"uri": uri, "workflow": "main"}]
    assert lenses[0].range.start.line == line_of(flow, "@workflow")
    run = await command(client, "flowtape.run", {"uri": uri, "workflow": "main"})
    await collector(client).finished(run["runId"])
    lenses = await client.text_document_code_lens_async(params)
    assert [lens.command.title for lens in lenses] == ["▶ Run", "⟲ Resume at step…", "Runs (1)"]
    assert lenses[1].command.command == "flowtape.resumeAtStep" and list(lenses[1].command.arguments) == [{"runId": run["runId"]}]
    assert collector(client).of(lsp.WORKSPACE_CODE_LENS_REFRESH)
    shutil.rmtree(workspace / ".flowtape" / "runs" / run["runId"])  # deleted by hand: no run to count or resume
    lenses = await client.text_document_code_lens_async(params)
    assert [lens.command.title for lens in lenses] == ["▶ Run"]


async def test_step_detail_hover_and_inlay_hints_follow_the_selected_step(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(4))
    uri = uri_of(flow)
    open_doc(client, flow)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri})
    await col.finished(run["runId"])
    steps = col.steps(run["runId"])
    at = next(s for s in steps if s["actor"] == "double" and s["fireCount"] == 2)
    detail = await request(client, "flowtape/stepDetail", {"runId": run["runId"], "step": at["step"]})
    assert detail["actor"] == "double" and detail["fireCount"] == 2 and detail["journalSeq"] == at["journalSeq"]
    assert detail["taken"] == [{"queue": "count.Out->double.In", "tokens": ["2"]}]
    assert detail["put"] == [{"queue": "$.Result", "tokens": ["4"]}]
    states = {s["actor"]: s for s in detail["states"]}
    assert list(states) == ["count", "double"]  # every actor of the flow, in the header's order
    assert states["double"]["state"] == "{'total': 3}" and states["double"]["fireCount"] == 2
    assert any(q["queue"] == "$.Result" and q["size"] == 2 for q in detail["queues"])

    line = line_of(flow, "double = Double()")
    hover_at = lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line, 8))
    hover = await client.text_document_hover_async(hover_at)  # no selection yet: the run's last step
    assert hover is not None and "fired 4 times" in hover.contents.value
    lens_refreshes = len(col.of(lsp.WORKSPACE_CODE_LENS_REFRESH))
    client.protocol.notify("flowtape/selectStep", {"runId": run["runId"], "step": at["step"]})
    for _ in range(100):
        hover = await client.text_document_hover_async(hover_at)
        if hover is not None and f"step {at['step']} " in hover.contents.value:
            break
        await asyncio.sleep(0.02)
    assert hover is not None and "fired 2 times" in hover.contents.value and "'total': 3" in hover.contents.value
    # the lenses of a client that asks for the step do not name it: a step key does not redraw them
    assert len(col.of(lsp.WORKSPACE_CODE_LENS_REFRESH)) == lens_refreshes
    assert f"step {at['step']}" in hover.contents.value
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=lsp.Range(lsp.Position(0, 0), lsp.Position(200, 0)),
    ))
    by_line = {h.position.line: h.label for h in hints}
    assert "×2" in by_line[line] and "total" in by_line[line]
    assert "×" in by_line[line_of(flow, "count = Count(")]
    # no actor on the line: no hover
    none = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(0, 0),
    ))
    assert none is None

    # three lines typed at the top, not saved: hints and hover follow the actors to their new lines
    change_doc(client, flow, "# a\n# b\n# c\n" + flow.read_text(), version=2)
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=lsp.Range(lsp.Position(0, 0), lsp.Position(200, 0)),
    ))
    moved = {h.position.line: h.label for h in hints}
    assert "×2" in moved[line + 3] and "×2" not in str(moved.get(line, ""))
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line + 3, 8),
    ))
    assert hover is not None and "fired 2 times" in hover.contents.value
    # a newer run of the flow takes over from the step selected in the older one
    again = await command(client, "flowtape.run", {"uri": uri})
    await col.finished(again["runId"])
    for _ in range(100):
        hover = await client.text_document_hover_async(lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line + 3, 8),
        ))
        if hover is not None and again["runId"] in hover.contents.value:
            break
        await asyncio.sleep(0.02)
    assert hover is not None and f"run `{again['runId']}`" in hover.contents.value and "fired 4 times" in hover.contents.value


async def test_step_detail_is_fast_on_a_long_tape(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "long.py", count_flow(20_000))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1})
    done = await col.finished(run["runId"], timeout=60)
    assert done["status"] == "succeeded" and done["steps"] == 40_000, done
    streamed = col.steps(run["runId"])
    assert len(streamed) == 40_000 and [s["step"] for s in streamed] == list(range(1, 40_001))
    assert max(len(p["steps"]) for p in col.of("flowtape/steps", run["runId"])) <= 500
    worst = 0.0
    for step in (1, 39_999, 20_000, 33_333, 40_000):
        t0 = time.perf_counter()
        detail = await request(client, "flowtape/stepDetail", {"runId": run["runId"], "step": step})
        worst = max(worst, time.perf_counter() - t0)
        assert detail["step"] == step
    assert worst < 0.25  # a round trip through the client; the server's part is well under 50 ms
    page = await request(client, "flowtape/getSteps", {"runId": run["runId"], "from": 39_990, "limit": 20})
    assert [s["step"] for s in page["steps"]] == list(range(39_990, 40_001))


FLOW_LOCKED = GEN_FLOW.format(body='''
import threading


@task
class Locky:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    guard: object = None

    def action(self, x):
        self.guard = threading.Lock()
        return x


@workflow
def main():
    locky = Locky()
    connect(Gen(n=3).Out, locky.In)
    connect(locky.Out, "Out")
''')


async def test_an_actor_whose_firings_cannot_be_replayed_is_said_at_its_line(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "locked.py", FLOW_LOCKED)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    assert (await col.finished(run["runId"]))["status"] == "succeeded"
    diags = await diagnostics_for(client, uri_of(flow), lambda ds: any(d.code == "not-replayable" for d in ds))
    (info,) = diags
    assert info.severity == lsp.DiagnosticSeverity.Information and info.range.start.line == line_of(flow, "locky = Locky()")
    assert info.message == "3 firing(s) of locky cannot be replayed (locky.guard: a Lock cannot be saved): a resume runs them live"


@pytest.mark.parametrize(("ending", "says"), [
    ("import os\nos._exit(3)\n", "importing the flow ended its process: it exited with code 3"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "importing the flow ended its process: it was killed by signal 11"),
])
async def test_a_flow_whose_import_ends_the_process_is_still_an_error(
    client: LanguageClient, workspace: Path, ending: str, says: str
) -> None:
    """The checker cannot report on a flow that ends its process as it is imported: the server says so itself."""
    flow = write_flow(workspace, "ends.py", "from flowtape import workflow\n" + ending)
    uri = uri_of(flow)
    open_doc(client, flow)
    (error,) = await diagnostics_for(client, uri, lambda ds: bool(ds))
    assert error.code == "flow-error" and error.message.startswith(says) and error.range.start.line == 0


async def test_a_syntax_error_below_a_form_feed_is_where_python_puts_it(client: LanguageClient, workspace: Path) -> None:
    text = "# flowtape: a\x0cpage\nx = '😀😀' $\n"  # (a form feed breaks no line for Python or LSP)
    flow = write_flow(workspace, "ff.py", text)
    open_doc(client, flow)
    (error,) = await diagnostics_for(client, uri_of(flow), bool)
    assert error.code == "syntax-error"
    assert (error.range.start.line, error.range.start.character) == (1, 11)  # UTF-16 units: each emoji is two
