"""Code lenses on each `@workflow` function, found by parsing the file (nothing is imported):
"▶ Run", and when the workflow has runs, "⟲ Resume at step…" and "Runs (n)".

A client that implements the runs view and asks for a step itself says so
(`initializationOptions`); any other client gets lenses whose server commands carry all they need:
the resume names its step (the one selected, else the failed run's last), and "Runs (n)" shows
the runs with `flowtape.showRuns`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from flowtape.rundir import TAPE
from lsprotocol import types as lsp

from . import protocol as P
from .commands import run_info
from .run import Run
from .workflows import find_workflows
from .workspace import file_key, same_file, uri_to_path

if TYPE_CHECKING:
    from .server import FlowtapeServer


BIG_TEXT = 200_000  # characters


def register(server: FlowtapeServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
    async def code_lens(params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        uri = params.text_document.uri
        path = uri_to_path(uri)
        if path is None or path.suffix != ".py" or not path.is_relative_to(server.root):
            return []  # "▶ Run" could only answer that the file cannot be run
        try:
            text = server.workspace.get_text_document(uri).source
        except Exception:  # noqa: BLE001 - unreadable: no lenses
            return []
        # a big module takes seconds to parse: not on the loop that streams the steps
        sites = find_workflows(text) if len(text) < BIG_TEXT else await asyncio.to_thread(find_workflows, text)
        lenses: list[lsp.CodeLens] = []
        for wf in sites:
            rng = lsp.Range(lsp.Position(wf.line0, 0), lsp.Position(wf.line0, 0))
            lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(
                title="▶ Run" if server.trust != "none" else "🔒 Run: this folder is not trusted, so Flowtape runs nothing",
                command=P.CMD_RUN, arguments=[{"uri": uri, "workflow": wf.name}],
            )))
            if server.trust == "none":
                continue
            runs = [r for r in server.manager.listed() if r.workflow == wf.name and same_file(r.uri, uri)]
            if not runs:
                continue
            started = [r for r in runs if (r.run_dir / TAPE).is_file()]  # a run that failed to load has no tape
            resume = _resume_lens(server, uri, started)
            if resume is not None:
                lenses.append(lsp.CodeLens(range=rng, command=resume))
            show = P.CLIENT_SHOW_RUNS if server.has_client_command(P.CLIENT_SHOW_RUNS) else P.CMD_SHOW_RUNS
            lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(
                title=f"Runs ({len(runs)})", command=show, arguments=[{"uri": uri, "workflow": wf.name}],
            )))
        return lenses


def _resume_lens(server: FlowtapeServer, uri: str, started: list[Run]) -> lsp.Command | None:
    if not started:
        return None
    latest = max(started, key=lambda r: (r.started_at, r.run_id))
    if server.client_options.asksForStep:
        return lsp.Command(title="⟲ Resume at step…", command=P.CMD_RESUME, arguments=[{"runId": latest.run_id}])
    # A plain client runs the lens as it is: it must name a step worth resuming at. The step
    # selected in one of these runs (the stepper's), else a failed or stopped latest run where it
    # stopped (no step: its last, and inside the composite it stopped in, so its failed firing
    # runs again and nothing the tape holds does); a succeeded run with nothing selected would
    # replay everything and run nothing, so it gets no lens.
    inspector = getattr(server, "inspector", None)
    selected = inspector.selected.get(file_key(uri)) if inspector is not None else None
    if selected is not None:
        chosen = next((r for r in started if r.run_id == selected[0]), None)
        if chosen is not None:
            return lsp.Command(title=f"⟲ Resume at step {selected[1]}", command=P.CMD_RESUME,
                               arguments=[{"runId": chosen.run_id, "step": selected[1]}])
    if latest.status in ("failed", "stopped") and latest.finished:
        last = run_info(latest, server.root).steps
        return lsp.Command(title=f"⟲ Resume at step {last}", command=P.CMD_RESUME, arguments=[{"runId": latest.run_id}])
    return None
