"""The editor's graph view: `flowtape/graph` (a run's flow from its tape header, or a flow file's,
built in a child process without running it) and `flowtape/queueTokens` (a queue's tokens, whole,
after a step: what clicking an edge shows)."""

from __future__ import annotations

import asyncio
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from flowtape.flowgraph import FlowGraph, graph_of_header, header_of_tape
from flowtape.rundir import TAPE

from . import protocol as P
from .commands import READ_ERRORS, at_step, unreadable
from .workspace import flow_path, path_to_uri

if TYPE_CHECKING:
    from .server import FlowtapeServer


def _files(graph: FlowGraph) -> dict[str, str]:
    files = {a.file for a in graph.actors if a.file} | ({graph.flowFile} if graph.flowFile else set())
    return {f: path_to_uri(f) for f in sorted(files)}


def _result(graph: FlowGraph) -> Any:
    return P.GraphResult(graph=graph, files=_files(graph)).to_json()


def register(server: FlowtapeServer) -> None:
    manager = server.manager

    @server.feature(P.GRAPH)
    async def graph(params: Any) -> Any:
        p = P.decode_params(params, P.GraphParams)
        if (p.runId is None) == (p.uri is None):
            raise P.invalid("give either runId (a run's graph) or uri (a flow file's), not both or neither")
        if p.runId is not None:
            if p.workflow is not None:
                raise P.invalid("workflow is for a flow file: a run has its own")
            run = manager.get(p.runId)
            header = run.index.header
            if header is None:
                try:
                    header = await asyncio.to_thread(header_of_tape, run.run_dir / TAPE)
                except FileNotFoundError:
                    raise P.not_found(f"run {run.run_id} has no tape yet: it failed or was stopped before it started") from None
                except READ_ERRORS as exc:
                    raise unreadable(run, exc) from None
            return _result(graph_of_header(header))
        assert p.uri is not None
        path = flow_path(p.uri, server.root)
        report = await server.diagnostics.run_checker(path, "--graph", *([p.workflow] if p.workflow else []))
        if report is None:
            raise P.FlowBroken(message=f"{path.name} could not be checked: its checking process did not start")
        errors = report.get("errors") or []
        if errors or "graph" not in report:
            first = errors[0] if errors else {"message": "the checker gave no graph"}
            where = f"{Path(str(first.get('file') or path)).name}:{first.get('line') or '?'}"
            raise P.FlowBroken(message=f"the flow does not build: {where}: {first.get('message')}")
        try:
            built = msgspec.convert(report["graph"], FlowGraph)
        except msgspec.ValidationError as exc:
            raise P.FlowBroken(message=f"the checker's graph is malformed: {exc}") from None
        return _result(built)

    @server.feature(P.QUEUE_TOKENS)
    async def queue_tokens(params: Any) -> Any:
        p = P.decode_params(params, P.QueueTokensParams)
        run = manager.get(p.runId)
        try:
            at = await at_step(manager, run, p.step)
        except READ_ERRORS as exc:
            raise unreadable(run, exc) from None
        queues = at.rebuild.header.queues
        if p.queue >= len(queues):
            raise P.invalid(f"queue {p.queue} is out of range: run {run.run_id} has queues 0 to {len(queues) - 1}")
        held = at.rebuild.queues[p.queue]
        tokens = [msgspec.json.decode(t) for t in islice(held, p.limit)]
        return P.QueueTokensResult(runId=run.run_id, step=p.step, queue=p.queue, id=queues[p.queue],
                                   size=len(held), tokens=tokens).to_json()
