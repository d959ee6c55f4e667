"""Commands (`flowtape.run`, `.resumeAtStep`, `.rerunActor`, `.stop`) and the custom requests
(`flowtape/runs`, `flowtape/getSteps`, `flowtape/stepDetail`). Params come in raw and are
validated by the Structs of protocol.py."""

from __future__ import annotations

import asyncio
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from flowtape.errors import TraceCorruption
from flowtape.guarded import read_text
from flowtape.seek import AtStep, at_step_from_checkpoints, find_steps, records_from
from flowtape.show import steps_held
from flowtape.tape import Firing, Header, Step
from flowtape.values import preview_raw
from lsprotocol import types as lsp

from . import inputs, stopping
from . import protocol as P
from .actorlines import creation_line, current_text
from .failures import detail_of
from .follow import step_info
from .outputs import previews
from .permits import differs, may_run
from .run import Run
from .runs import RunManager
from .tapeindex import Filler, last_step_from_end
from .workflows import find_workflows
from .workspace import Locator, client_path, flow_path, path_to_uri, same_file, uri_to_path

if TYPE_CHECKING:
    from .server import FlowtapeServer


SHOWN_RUNS = 10  # runs named in the message of `flowtape.showRuns`


def _previews(tokens: list[msgspec.Raw], limit: int = 60, most: int = 20) -> list[str]:
    shown = [preview_raw(t, limit) for t in tokens[:most]]
    if len(tokens) > most:
        shown.append(f"… {len(tokens) - most} more")
    return shown


def describe(run: Run, at: AtStep, locator: Locator) -> P.StepDetailResult:
    header = at.rebuild.header
    names = header.queues
    rebuild = at.rebuild
    taken = [P.QueueTokens(queue=names[i], tokens=_previews(tokens)) for _, took in at.firings for i, tokens in took]
    put = [P.QueueTokens(queue=names[i], tokens=_previews(tokens)) for f, _ in at.firings for i, tokens in f.produced]
    queues = [P.QueueState(queue=names[i], size=len(q), tokens=_previews(list(islice(q, 5)))) for i, q in enumerate(rebuild.queues)]
    states = [
        P.ActorState(actor=a.path, fireCount=rebuild.fire_counts.get(a.path, 0),
                     state=preview_raw(rebuild.states[a.path], 200) if a.path in rebuild.states else None)
        for a in header.actors
    ]
    chat = [P.ChatEntry(actor=f.actor, chat=preview_raw(f.chat, 300), calls=f.calls or None, **_turn(f.chat))
            for f, _ in at.firings if f.chat]
    s = at.step
    return P.StepDetailResult(
        runId=run.run_id, step=s.step, actor=s.actor, actorKind=s.kind, fireCount=s.fireCount, journalSeq=s.journalSeq,
        replayed=s.replayed, taken=taken, put=put, queues=queues, states=states, chat=chat or None,
        firings=[_firing(header, f, took, locator) for f, took in at.firings],
    )


ASKED_CHARS, ANSWER_CHARS = 400, 1200  # of a firing's question and answer in its step's detail


def _turn(chat: msgspec.Raw) -> dict[str, str]:
    """The question and the answer a firing's chat entry holds, each on its own (an answer after a
    long question, a file's text say, is not cut off with it); nothing for a chat of another shape."""
    try:
        messages = msgspec.json.decode(bytes(chat))
    except msgspec.DecodeError:
        return {}
    said = {m.get("role"): m.get("content") for m in messages if isinstance(m, dict)} if isinstance(messages, list) else {}
    turn = {"asked": said.get("user"), "answer": said.get("assistant")}
    limits = {"asked": ASKED_CHARS, "answer": ANSWER_CHARS}
    return {k: v if len(v) <= limits[k] else v[: limits[k]] + "…" for k, v in turn.items() if isinstance(v, str)}


def _firing(header: Header, f: Firing, took: list[tuple[int, list[msgspec.Raw]]], locator: Locator) -> P.FiringDetail:
    """One firing of a step, what it took and put on its own (a composite step's inner ones apart)."""
    names = header.queues
    uri, rng = locator.actor_range(header, f.actor)
    kind = next((a.kind for a in header.actors if a.path == f.actor), "")
    return P.FiringDetail(
        actor=f.actor, fireCount=f.fireCount, actorKind=kind, seq=f.seq, replayed=f.replayed,
        taken=[P.QueueTokens(queue=names[i], tokens=_previews(tokens)) for i, tokens in took],
        put=[P.QueueTokens(queue=names[i], tokens=_previews(tokens)) for i, tokens in f.produced],
        uri=uri, range=rng, chat=preview_raw(f.chat, 300) if f.chat else None,
    )


def run_info(run: Run, root: Path) -> P.RunInfo:
    steps = run.index.steps if run.live or run.index.finished else _recorded_steps(run, run.index.steps)
    return P.RunInfo(
        runId=run.run_id, workflow=run.workflow, uri=run.uri, status=run.status, steps=steps,
        startedAt=run.started_at, runDir=client_path(run.run_dir), finishedAt=run.finished_at,
        resumedFrom=run.resumed_from, resumedAtStep=run.resumed_at, outputs=previews(run) if run.finished else None,
        error=_failure(run, root), edits=run.edits, usage=run.usage,
    )


def _failure(run: Run, root: Path) -> P.ErrorDetail | None:
    if run.error_info is not None:  # (with the header once it is read: what the firing took, by queue name)
        return detail_of(run.error_info, run.index.header, root)
    if run.error_detail is None and run.status == "failed" and run.error:
        return P.ErrorDetail(message=run.error)
    return run.error_detail


def _recorded_steps(run: Run, read: int) -> int:
    """How many steps a finished run has, before its tape is read through: its run.json says
    (once the whole file is read, the tape says, even cut short)."""
    from flowtape.rundir import read_summary

    if run.index.read_through():
        return read
    if run.checked_steps is not None:  # counted when the tape was checked (a killed run: run.json says running)
        return max(read, run.checked_steps)
    summary = read_summary(run.run_dir)
    return max(read, summary.steps) if summary is not None and summary.status != "running" else read


def _step_in_range(run: Run, step: int, low: int) -> None:
    total = run.index.steps
    if not low <= step <= total:
        raise P.not_found(f"step {step} is out of range: run {run.run_id} {steps_held(total, low)}{_so_far(run)}")


def _so_far(run: Run) -> str:
    return " so far (the run is still going)" if run.live else ""


def last_firing_step(run: Run, actor: str) -> int | None:
    """The top-level step holding the last firing of `actor` (a nested path like `outer/inner/leaf` too)."""
    known = run.index.actor_last_step.get(actor)
    if known is not None:
        return known
    header = run.index.header
    if header is None:
        return None
    last: tuple[str, int] | None = None
    for record in records_from(run.index.path, 0, Filler()):
        if isinstance(record, Firing) and record.actor == actor:
            last = record.within if record.within is not None else (record.actor, record.fireCount)
    if last is None:
        return None
    for record in records_from(run.index.path, 0, Filler()):
        if isinstance(record, Step) and (record.actor, record.fireCount) == tuple(last):
            return record.step
    return None


# what reading a tape that is damaged, or changed or deleted under the server, can raise
READ_ERRORS = (TraceCorruption, msgspec.DecodeError, msgspec.ValidationError, OSError, IndexError)


def unreadable(run: Run, exc: Exception) -> Exception:
    if isinstance(exc, FileNotFoundError):
        return P.not_found(f"run {run.run_id!r} is gone: {exc.filename} no longer exists")
    if isinstance(exc, IndexError):
        return P.damaged(run.run_id, "the tape no longer holds what was read from it: it was cut short or replaced")
    if isinstance(exc, OSError):
        return P.damaged(run.run_id, f"it cannot be read: {exc.strerror or exc}")
    return P.damaged(run.run_id, exc)


def _is(file: str, path: Path) -> bool:
    """Whether a file a tape names is `path` (a name no file can have is none)."""
    try:
        return bool(file) and Path(file).resolve() == path
    except (OSError, ValueError, RuntimeError):
        return False


def _default_workflow(path: Path) -> str:
    """The workflow `flowtape run` picks without --workflow, as the file's text shows it: `main`,
    else the last `@workflow` (a guess for listing only: the run's header has the last word)."""
    try:
        names = [w.name for w in find_workflows(read_text(path))]
    except OSError:
        return ""
    return "main" if "main" in names else (names[-1] if names else "")


def actor_on_line(server: FlowtapeServer, run_id: str, header: Header, uri: str | None, line: int | None) -> str:
    """The actor of the run that line `line` of file `uri` creates, in the text as the editor holds
    it (as hovers find it): inside a loop's body or a nested workflow too, and one whose first
    firing failed."""
    if uri is None or line is None:
        raise P.invalid("name the actor to rerun (or debug): `actor`, or `uri` and `line` (0-based) of the line that creates it")
    path = flow_path(uri, server.root)  # inside the workspace, a file: refused before anything is read
    text = current_text(server.workspace, uri)
    on_line = [a.path for a in header.actors if _is(a.file, path) and creation_line(text, a) == line]
    if not on_line:
        raise P.not_found(f"no actor of run {run_id} is created on line {line + 1} of {path.name}")
    if len(on_line) > 1:
        raise P.invalid(f"line {line + 1} of {path.name} creates {len(on_line)} actors of run {run_id} "
                        f"({', '.join(on_line[:5])}{', …' if len(on_line) > 5 else ''}): name one as `actor`")
    return on_line[0]


async def at_step(manager: RunManager, run: Run, step: int) -> AtStep:
    """The run rebuilt right after `step` (1-based), read as little of the tape as it takes."""
    await manager.checked(run)
    if not run.live and not run.index.finished:  # a finished run not read (through) yet
        fast = await asyncio.to_thread(last_step_from_end, run.index.path, step)  # its last step
        total = _recorded_steps(run, 0)
        if fast is None and total and not 1 <= step <= total:
            raise P.not_found(f"step {step} is out of range: run {run.run_id} {steps_held(total)}")
        if fast is None:
            index = await manager.ready(run, until_step=1)
            if 1 <= step <= index.steps:  # what was read so far answers
                fast = await asyncio.to_thread(index.at_step, step)
            elif index.header is not None and step <= total:  # its checkpoints do
                fast = await asyncio.to_thread(at_step_from_checkpoints, index.path, index.header, step)
        if fast is not None:
            return fast
    await manager.ready(run)
    _step_in_range(run, step, 1)
    return await asyncio.to_thread(run.index.at_step, step)


def register(server: FlowtapeServer) -> None:
    manager = server.manager

    @server.command(P.CMD_RUN)
    async def run_flow(*args: Any) -> Any:
        params = P.command_params(args, P.RunParams)
        may_run(server.trust)
        path = flow_path(params.uri, server.root)
        try:  # the saved file is what runs
            why = inputs.missing(await asyncio.to_thread(path.read_text, encoding="utf-8", errors="replace"),
                                 params.workflow, params.inputs)
        except OSError:
            why = None  # (launching says why it cannot be read)
        if why is not None:
            raise P.invalid(why)
        run = await manager.launch(path, workflow=params.workflow, inputs=params.inputs, max_workers=params.maxWorkers,
                                   executor=params.executor, ray_address=params.rayAddress)
        if not run.workflow:  # listed by the name the flow will most likely run, until its tape's header says
            run.workflow = _default_workflow(path)
        return P.RunStartResult(runId=run.run_id, runDir=client_path(run.run_dir)).to_json()

    @server.command(P.CMD_RESUME)
    async def resume_at_step(*args: Any) -> Any:
        params = P.command_params(args, P.ResumeAtStepParams)
        may_run(server.trust)
        source = manager.get(params.runId)
        await manager.ready(source)  # (its index read: the step is checked against it, and launch names its last)
        if params.step is not None:
            _step_in_range(source, params.step, 0)
        return await _resume(source, params.step, params.maxWorkers, params.executor, params.rayAddress)  # (no step: where the run stopped)

    @server.command(P.CMD_RERUN_ACTOR)
    async def rerun_actor(*args: Any) -> Any:
        params = P.command_params(args, P.RerunActorParams)
        may_run(server.trust)
        source = manager.get(params.runId)
        index = await manager.ready(source)
        assert index.header is not None
        actor = params.actor if params.actor is not None else actor_on_line(server, source.run_id, index.header, params.uri, params.line)
        if not any(a.path == actor for a in index.header.actors):
            names = ", ".join(a.path for a in index.header.actors)
            raise P.invalid(f"run {source.run_id} has no actor {actor!r} (its actors: {names})")
        end = index.end
        if end is not None and end.error is not None and end.error.actor == actor:
            return await _resume(source, None, None, params.executor, params.rayAddress)  # where it failed: its failed firing has no record
        if index.firing_after_last_step(actor):  # its last firing is in the composite the run stopped in
            return await _resume(source, index.steps, None, params.executor, params.rayAddress)  # at the last step: that composite runs again, live
        step = await asyncio.to_thread(last_firing_step, source, actor)
        if step is None:
            raise P.not_found(f"actor {actor!r} never fired in run {source.run_id}")
        return await _resume(source, step - 1, None, params.executor, params.rayAddress)

    async def _resume(
        source: Run, step: int | None, max_workers: int | None = None, executor: str | None = None, ray_address: str | None = None,
    ) -> Any:
        header = source.index.header
        assert header is not None
        if not header.flowFile:
            raise P.invalid(f"run {source.run_id} names no flow file")
        flow = flow_path(path_to_uri(header.flowFile), server.root)  # the flow its tape says it ran
        problem = await asyncio.to_thread(differs, flow, header)
        if problem is not None:  # refused before anything of it runs
            raise P.invalid(f"not resumed: {flow} is not the flow run {source.run_id} ran, as its tape records it: "
                            f"{problem}. A resume runs the flow the run ran; run the file afresh to run it")
        run = await manager.launch(flow, workflow=header.workflow, resume_from=source, at_step=step, max_workers=max_workers,
                                   executor=executor, ray_address=ray_address)
        return P.RunStartResult(runId=run.run_id, runDir=client_path(run.run_dir)).to_json()

    @server.command(P.CMD_STOP)
    async def stop(*args: Any) -> Any:
        params = P.command_params(args, P.StopParams)
        run = manager.get(params.runId)
        stopped = await stopping.stop(run)
        return P.StopResult(runId=run.run_id, stopped=stopped, status=run.status).to_json()

    def _runs_of(uri: str | None, workflow: str | None = None) -> list[Run]:
        if uri is not None:
            flow_path(uri, server.root)
        found = [r for r in manager.listed() if (uri is None or same_file(r.uri, uri))
                 and (workflow is None or r.workflow == workflow)]
        found.sort(key=lambda r: (r.started_at, r.run_id), reverse=True)
        return found

    @server.feature(P.RUNS)
    async def runs(params: Any) -> Any:
        p = P.decode_params(params, P.RunsParams)
        return P.RunsResult(runs=[run_info(r, server.root) for r in _runs_of(p.uri)]).to_json()

    @server.command(P.CMD_SHOW_RUNS)
    async def show_runs(*args: Any) -> Any:
        """The "Runs (n)" lens of a client without a runs view of its own: the runs, newest
        first, in a message the user sees, and as the result for a client that reads it."""
        p = P.command_params(args, P.ShowRunsParams)
        infos = [run_info(r, server.root) for r in _runs_of(p.uri, p.workflow)]
        lines = [f"{i.runId}  {i.status} · {i.steps} step{'s' if i.steps != 1 else ''}"
                 + (f" · resumed from {i.resumedFrom} @ {i.resumedAtStep}" if i.resumedFrom else "") for i in infos[:SHOWN_RUNS]]
        if len(infos) > SHOWN_RUNS:
            lines.append(f"… and {len(infos) - SHOWN_RUNS} older")
        title = f"Flowtape: {len(infos)} run{'s' if len(infos) != 1 else ''} of {p.workflow or Path(uri_to_path(p.uri) or p.uri).name}"
        server.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info, message="\n".join([title, *lines])))
        return P.RunsResult(runs=infos).to_json()

    @server.feature(P.GET_STEPS)
    async def get_steps(params: Any) -> Any:
        p = P.decode_params(params, P.GetStepsParams)
        run = manager.get(p.runId)
        try:
            return await _get_steps(run, p)
        except READ_ERRORS as exc:
            raise unreadable(run, exc) from None

    async def _get_steps(run: Run, p: P.GetStepsParams) -> Any:
        # `live` as it was before the page was read: a run that ends while it is read says `live`
        # once more, so a client polling until `live` is false asks again and gets the last steps
        await manager.caught_up(run)
        was_live = run.live
        if p.from_ == 1 and run.starting():  # no steps yet, and no failure either: an empty first page
            return P.GetStepsResult(runId=run.run_id, steps=[], total=0, live=True).to_json()
        if not run.live and not run.index.finished and p.from_ > run.index.steps:
            # a page of a finished run beyond what was read: bisect the file rather than read it all
            index = await manager.ready(run, until_step=1)
            total = _recorded_steps(run, index.steps)
            if index.header is not None and p.from_ <= total:
                found = await asyncio.to_thread(find_steps, index.path, index.header, p.from_, p.limit)
                if found is not None:
                    await asyncio.to_thread(manager.locator.prepare, index.header)
                    infos = [step_info(run, s, manager.locator) for s in found]
                    return P.GetStepsResult(runId=run.run_id, steps=infos, total=total, live=False).to_json()
        index = await manager.ready(run, until_step=p.from_ + p.limit - 1)
        total = index.steps if run.live or index.finished else _recorded_steps(run, index.steps)
        if p.from_ > total + 1:
            raise P.not_found(f"step {p.from_} is out of range: run {run.run_id} {steps_held(total)}{_so_far(run)}")
        if p.from_ > index.steps:  # past what was read so far: read the rest
            index = await manager.ready(run)
        steps = await asyncio.to_thread(index.read_steps, p.from_, p.limit)
        if index.header is not None:
            await asyncio.to_thread(manager.locator.prepare, index.header)  # the files its steps are placed in
        if steps:  # a live run's tape is read on meanwhile: the page may hold steps past the count taken before
            total = max(total, steps[-1].step)
        return P.GetStepsResult(
            runId=run.run_id, steps=[step_info(run, s, manager.locator) for s in steps], total=total, live=was_live,
        ).to_json()

    @server.feature(P.STEP_DETAIL)
    async def step_detail(params: Any) -> Any:
        p = P.decode_params(params, P.StepDetailParams)
        run = manager.get(p.runId)
        try:
            return await _step_detail(run, p)
        except READ_ERRORS as exc:
            raise unreadable(run, exc) from None

    async def _step_detail(run: Run, p: P.StepDetailParams) -> Any:
        return describe(run, await at_step(manager, run, p.step), manager.locator).to_json()

    @server.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    async def cancel_progress(params: lsp.WorkDoneProgressCancelParams) -> None:
        run = manager.run_for_token(params.token)
        if run is not None and not run.finished:
            await stopping.stop(run)
