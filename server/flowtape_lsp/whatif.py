"""The what-if requests: fork a run with edits (`flowtape.fork`), diff two runs (`flowtape/diff`),
what a fork may edit at a step (`flowtape/editables`), and the firing "Debug this firing" names
(`flowtape/firingAt`). Forks run in child processes, as every run; diffs and step pictures are
read from the tapes in a thread."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import msgspec
from flowtape.debug import find_target
from flowtape.diff import diff_runs
from flowtape.errors import UsageError
from flowtape.show import StepDetail, detail_of
from pygls.exceptions import JsonRpcException

from . import protocol as P
from .commands import READ_ERRORS, _step_in_range, actor_on_line, unreadable
from .permits import NotTrusted
from .run import Run
from .workspace import client_path, flow_path

if TYPE_CHECKING:
    from .server import FlowtapeServer

_fields = msgspec.json.Decoder(dict[str, Any])


def editables(run: Run, detail: StepDetail, initial: dict[str, dict[str, Any]]) -> P.EditablesResult:
    """Every token waiting in a queue something takes from, every field of every actor's state
    (of one that has none on the tape by then, as it has not fired: the fields it starts with,
    `initial`), and every agent's next answer, at the step."""
    found: list[P.Editable] = []
    for q in detail.queues:
        if "->" not in q.queue:
            continue  # an output of the run: nothing takes from it
        consumer = q.queue.rpartition("->")[2].rpartition(".")[0]
        found += [P.Editable(where=f"{q.queue}[{i}]", kind="token", actor=consumer, queue=q.queue, value=msgspec.json.decode(t))
                  for i, t in enumerate(q.tokens)]
    for s in detail.states:
        fields = _fields.decode(bytes(s.state)) if s.state is not None else initial.get(s.actor, {})
        found += [P.Editable(where=f"{s.actor}.{name}", kind="field", actor=s.actor, value=value)
                  for name, value in fields.items()]
    header = run.index.header
    agents = [a.path for a in header.actors if a.kind == "agent"] if header is not None else []
    found += [P.Editable(where=f"{path}.answer", kind="answer", actor=path) for path in agents]
    return P.EditablesResult(runId=run.run_id, step=detail.step, editables=found)


async def initial_states(server: FlowtapeServer, run: Run) -> dict[str, dict[str, Any]]:
    """The state each actor of the run's flow starts from, by path, as the flow file (and what it
    imports) declares it now: what a fork at a step edits of an actor that has not fired by then.
    Asked of a checking process (the flow is imported there, never here); {} when the flow cannot
    tell (gone, broken, or a folder not trusted to import it), as a fork could not run it either."""
    header = run.index.header
    try:
        flow = flow_path(run.uri, server.root) if run.uri and header is not None else None
    except JsonRpcException:
        return {}
    if flow is None or header is None:
        return {}
    try:
        report = await server.diagnostics.run_checker(flow, "--states", header.workflow)
    except NotTrusted:
        return {}
    states = report.get("states") if report is not None and not report.get("errors") else None
    return states if isinstance(states, dict) else {}


def register(server: FlowtapeServer) -> None:
    manager = server.manager

    @server.command(P.CMD_FORK)
    async def fork(*args: Any) -> Any:
        params = P.command_params(args, P.ForkParams)
        source = manager.get(params.runId)
        index = await manager.ready(source)
        _step_in_range(source, params.step, 1)
        if not params.edits:
            raise P.invalid("a fork edits something: give `edits` as {where: value} (flowtape.resumeAtStep resumes unchanged)")
        header = index.header
        assert header is not None
        flow = flow_path(source.uri, server.root) if source.uri else None
        if flow is None:
            raise P.invalid(f"run {source.run_id} names no flow file")
        # (each edit is checked by the flow's process, before anything runs: a misfit ends the run `failed`, saying why)
        sets = [f"{where}={json.dumps(value, ensure_ascii=False)}" for where, value in params.edits.items()]
        run = await manager.launch(flow, workflow=header.workflow, resume_from=source, at_step=params.step,
                                   max_workers=params.maxWorkers, edits=sets)
        return P.RunStartResult(runId=run.run_id, runDir=client_path(run.run_dir)).to_json()

    @server.feature(P.DIFF)
    async def diff(params: Any) -> Any:
        p = P.decode_params(params, P.DiffParams)
        a, b = manager.get(p.runA), manager.get(p.runB)
        for run in (a, b):
            await manager.checked(run)
        try:
            found = await asyncio.to_thread(diff_runs, a.run_dir, b.run_dir, p.actor)
        except ValueError as exc:  # an actor neither run has
            raise P.invalid(str(exc)) from None
        except READ_ERRORS as exc:
            raise P.TapeDamaged(message=f"cannot compare runs {a.run_id} and {b.run_id}: {exc}") from None
        return msgspec.json.decode(msgspec.json.encode(found))  # (values whole, as the tapes hold them)

    @server.feature(P.EDITABLES)
    async def editables_at(params: Any) -> Any:
        p = P.decode_params(params, P.EditablesParams)
        run = manager.get(p.runId)
        await manager.ready(run)
        _step_in_range(run, p.step, 1)
        try:
            detail = await asyncio.to_thread(detail_of, run.run_dir, p.step)
        except READ_ERRORS as exc:
            raise unreadable(run, exc) from None
        unfired = any(s.state is None for s in detail.states)
        return editables(run, detail, await initial_states(server, run) if unfired else {}).to_json()

    @server.feature(P.FIRING_AT)
    async def firing_at(params: Any) -> Any:
        p = P.decode_params(params, P.FiringAtParams)
        run = manager.get(p.runId)
        index = await manager.ready(run)
        _step_in_range(run, p.step, 1)
        assert index.header is not None
        actor = actor_on_line(server, run.run_id, index.header, p.uri, p.line) if p.uri is not None or p.line is not None else None
        try:
            target = await asyncio.to_thread(find_target, run.run_dir, p.step, actor)
        except UsageError as exc:
            raise P.not_found(str(exc)) from None
        except READ_ERRORS as exc:
            raise unreadable(run, exc) from None
        return P.FiringAtResult(runId=run.run_id, actor=target.actor, fireCount=target.fire_count, step=target.step).to_json()
