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
from flowtape.show import detail_of

from . import protocol as P
from .commands import READ_ERRORS, _step_in_range, actor_on_line, unreadable
from .run import Run
from .workspace import client_path, flow_path

if TYPE_CHECKING:
    from .server import FlowtapeServer

_fields = msgspec.json.Decoder(dict[str, Any])


def editables(run: Run, step: int) -> P.EditablesResult:
    """Every token waiting in a queue something takes from, every field of every actor's state,
    and every agent's next answer, at the step."""
    detail = detail_of(run.run_dir, step)
    found: list[P.Editable] = []
    for q in detail.queues:
        if "->" not in q.queue:
            continue  # an output of the run: nothing takes from it
        consumer = q.queue.rpartition("->")[2].rpartition(".")[0]
        found += [P.Editable(where=f"{q.queue}[{i}]", kind="token", actor=consumer, queue=q.queue, value=msgspec.json.decode(t))
                  for i, t in enumerate(q.tokens)]
    for s in detail.states:
        if s.state is not None:
            found += [P.Editable(where=f"{s.actor}.{name}", kind="field", actor=s.actor, value=value)
                      for name, value in _fields.decode(bytes(s.state)).items()]
    header = run.index.header
    agents = [a.path for a in header.actors if a.kind == "agent"] if header is not None else []
    found += [P.Editable(where=f"{path}.answer", kind="answer", actor=path) for path in agents]
    return P.EditablesResult(runId=run.run_id, step=step, editables=found)


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
            return (await asyncio.to_thread(editables, run, p.step)).to_json()
        except READ_ERRORS as exc:
            raise unreadable(run, exc) from None

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
