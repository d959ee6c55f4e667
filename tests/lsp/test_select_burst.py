"""`flowtape/selectStep`: the latest selection sent is the one hovers and inlay hints show,
whatever the order in which the server finishes building the views (a step far from a checkpoint
takes longer to rebuild than the last step, which the index holds)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from .conftest import count_flow, request, uri_of, write_flow

STEPS = 15_000  # count_flow(n) takes 2n steps


async def _hover(client: LanguageClient, uri: str, line: int) -> str:
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line, 8)))
    return hover.contents.value if hover is not None and isinstance(hover.contents, lsp.MarkupContent) else ""


async def test_the_last_selection_of_a_burst_wins_against_a_large_run(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(STEPS // 2))
    subprocess.run([sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", "big", "--max-workers", "1"],
                   cwd=workspace, check=True, capture_output=True)
    deadline = time.monotonic() + 30
    while (page := await request(client, "flowtape/getSteps", {"runId": "big", "limit": 1}))["live"] or page["total"] < STEPS:
        assert time.monotonic() < deadline  # (the server may have found it while it ran, and follows it)
        await asyncio.sleep(0.1)
    uri = uri_of(flow)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=flow.read_text())))
    line = next(i for i, text in enumerate(flow.read_text().splitlines()) if "double = Double()" in text)
    for attempt in range(3):  # (each burst ends on a step no earlier one in it selects)
        last = STEPS - attempt
        # following a live run, or a script: steps far from the checkpoints (every 1,024), then the end
        burst = [1023 + 1024 * k for k in range(13, 1, -1)] + [13_805, last]
        for step in burst:
            client.protocol.notify("flowtape/selectStep", {"runId": "big", "step": step})
        deadline = time.monotonic() + 30
        while f"step {last} of {STEPS}" not in (shown := await _hover(client, uri, line)):
            assert time.monotonic() < deadline, shown
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # every view of the burst built by now: none may take over
        shown = await _hover(client, uri, line)
        assert f"step {last} of {STEPS}" in shown and f"fired {last // 2} times" in shown, shown
        hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=lsp.Range(lsp.Position(0, 0), lsp.Position(200, 0))))
        assert hints and any(h.position.line == line and f"×{last // 2}" in str(h.label) for h in hints), hints
