"""Work-done progress for a run: a progress bar in the editor, begun as the run starts, telling
its step count and current actor, ended with its status. Cancelling it stops the run (commands.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

if TYPE_CHECKING:
    from .run import Run
    from .server import FlowtapeServer

EVERY = 0.1  # seconds between two reports
# How long a run waits for the client to create its progress token. Long: a burst of runs can keep
# this server's own loop busy for seconds before the answer is read.
CREATE_WAIT = 60.0


async def begin(server: FlowtapeServer, run: Run) -> None:
    if not server.supports_progress():
        return
    token = f"flowtape-run-{run.run_id}"
    run.progress_token = token
    created = asyncio.ensure_future(server.work_done_progress.create_async(token))
    # Never cancelled: pygls would fail on the client's late answer to a request cancelled here.
    created.add_done_callback(lambda f: f.cancelled() or f.exception())  # (a refusal is no failure)
    await asyncio.wait({created}, timeout=CREATE_WAIT)
    if not created.done() or created.cancelled() or created.exception() is not None:
        run.progress_token = None  # refused or never answered: no progress bar
        return
    server.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(
        title=f"Flowtape: {run.workflow or Path(run.uri).name or run.run_id}", cancellable=True,
        message=_message(run), percentage=None,
    ))
    run.progress_begun = True
    if run.finished:
        end(server, run)


def _message(run: Run) -> str:
    index = run.index
    last = index.last_step
    if last is None:
        return "starting…"
    return f"{index.steps} steps · {last.actor}" + (" (replayed)" if last.replayed else "")


def report(server: FlowtapeServer, run: Run) -> None:
    if run.progress_token is None or not run.progress_begun or run.progress_ended:
        return
    now = time.monotonic()
    if now - run.progress_at < EVERY:
        return
    run.progress_at = now
    server.work_done_progress.report(run.progress_token, lsp.WorkDoneProgressReport(message=_message(run), cancellable=True))


def end(server: FlowtapeServer, run: Run) -> None:
    if run.progress_token is None or not run.progress_begun or run.progress_ended:
        return
    run.progress_ended = True
    server.work_done_progress.end(run.progress_token, lsp.WorkDoneProgressEnd(message=f"{run.status} · {run.index.steps} steps"))
