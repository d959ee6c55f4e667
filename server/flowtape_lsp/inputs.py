"""A workflow's declared inputs, read from its source (nothing is imported): what the editor asks
for before a run (`flowtape/workflowInputs`, with the latest run's values to offer again), and
what `flowtape.run` refuses to start without."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from flowtape.tape import Header

from . import protocol as P
from .run import Run
from .workflows import find_workflows
from .workspace import flow_path, same_file

if TYPE_CHECKING:
    from .server import FlowtapeServer

_header = msgspec.json.Decoder(Header)


def declared(text: str, workflow: str | None) -> tuple[str, list[P.InputInfo] | None] | None:
    """The workflow `flowtape run` runs (`workflow`, else `main`, else the last one) and its
    declared inputs (None: not to be told from the source); None when the file has no such workflow."""
    found = {w.name: w.inputs for w in find_workflows(text)}
    name = workflow or ("main" if "main" in found else (list(found)[-1] if found else None))
    if name is None or name not in found:
        return None
    return name, found[name]


def _inputs_of(run: Run) -> dict[str, Any] | None:
    """The inputs a run was given, from its tape's header."""
    header = run.index.header
    if header is None:
        try:
            with open(run.index.path, "rb") as fh:
                header = _header.decode(fh.readline())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
    try:
        given = msgspec.json.decode(header.inputs) if header.inputs else {}
    except msgspec.DecodeError:
        return None
    return given if isinstance(given, dict) else None


def missing(text: str, workflow: str | None, given: dict[str, Any] | None) -> str | None:
    """Why a run of `workflow` with inputs `given` must not start (its required inputs are not
    all given), or None."""
    found = declared(text, workflow)
    if found is None or found[1] is None:
        return None
    name, inputs = found[0], found[1]
    lacking = [i for i in inputs if i.required and i.name not in (given or {})]
    if not lacking:
        return None
    needs = ", ".join(f"{i.name}: {i.type}" if i.type else i.name for i in lacking)
    return (f"workflow {name} needs {'its input' if len(lacking) == 1 else 'its inputs'} {needs}: "
            f"give {'it' if len(lacking) == 1 else 'them'} as `inputs` ({{\"{lacking[0].name}\": …}})")


def register(server: FlowtapeServer) -> None:
    @server.feature(P.WORKFLOW_INPUTS)
    async def workflow_inputs(params: Any) -> Any:
        p = P.decode_params(params, P.WorkflowInputsParams)
        path = flow_path(p.uri, server.root)
        text = await asyncio.to_thread(_text, server, p.uri, path)
        found = declared(text, p.workflow)
        if found is None:
            raise P.not_found(f"{path.name} has no workflow {p.workflow!r}" if p.workflow else f"{path.name} has no @workflow")
        name, inputs = found
        runs = [r for r in server.manager.listed() if r.workflow == name and same_file(r.uri, p.uri) and not r.live]
        runs.sort(key=lambda r: (r.started_at, r.run_id), reverse=True)
        last = None
        for r in runs[:5]:  # the latest run that was given inputs
            last = await asyncio.to_thread(_inputs_of, r)
            if last:
                break
        return P.WorkflowInputsResult(workflow=name, inputs=inputs or [], known=inputs is not None, last=last).to_json()


def _text(server: FlowtapeServer, uri: str, path: Path) -> str:
    """The flow's text as the editor holds it (else as saved)."""
    doc = server.workspace.text_documents.get(uri)
    if doc is not None:
        return doc.source
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise P.invalid(f"{path} cannot be read: {exc.strerror or exc}") from None

