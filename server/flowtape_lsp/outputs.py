"""A run's outputs in the editor: a preview of each output port on the run (`flowtape/runs`), and
every token of them on request (`flowtape/runOutputs`), for a user to open whole."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from flowtape.values import preview_json

from . import protocol as P
from .run import Run

if TYPE_CHECKING:
    from .server import FlowtapeServer

PREVIEW = 120  # characters of a port's preview
_ports = msgspec.json.Decoder(dict[str, list[msgspec.Raw]])
_cache: dict[str, tuple[bytes, list[P.OutputPreview]]] = {}  # run id: (its outputs, their previews)


def previews(run: Run) -> list[P.OutputPreview] | None:
    """Each output port of a finished run: how many tokens, and a short preview of them."""
    if not run.outputs:
        return None
    known = _cache.get(run.run_id)
    if known is not None and known[0] is run.outputs:
        return known[1]
    try:
        ports = _ports.decode(run.outputs)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    shown = [P.OutputPreview(port=port, count=len(tokens), preview=_preview(tokens)) for port, tokens in ports.items()]
    if len(_cache) > 256:
        _cache.clear()
    _cache[run.run_id] = (run.outputs, shown)
    return shown


def _preview(tokens: list[msgspec.Raw]) -> str:
    if len(tokens) == 1:
        return preview_json(msgspec.json.decode(tokens[0]), PREVIEW)
    parts: list[str] = []
    used = 2
    for token in tokens:
        part = preview_json(msgspec.json.decode(token), 40)
        if used + len(part) > PREVIEW:
            parts.append("…")
            break
        parts.append(part)
        used += len(part) + 2
    return "[" + ", ".join(parts) + "]"


def whole(run: Run) -> Any:
    """Every output token, as plain JSON (a tagged value keeps its tags)."""
    return msgspec.json.decode(run.outputs) if run.outputs else {}


def register(server: FlowtapeServer) -> None:
    @server.feature(P.RUN_OUTPUTS)
    async def run_outputs(params: Any) -> Any:
        p = P.decode_params(params, P.RunOutputsParams)
        run = server.manager.get(p.runId)
        if not run.finished:
            raise P.not_found(f"run {run.run_id} is still going: its outputs are known once it finishes")
        return P.RunOutputsResult(runId=run.run_id, outputs=whole(run)).to_json()
