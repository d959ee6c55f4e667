"""`run(flow, inputs=...)`: build the flow, open its tape, fire to quiescence, close the tape."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Raw

from . import __version__, tools, trust
from .agents import Agents, AgentSetupError, calls_model
from .ending import error_info, final_state
from .errors import FlowError, ResumeRefused, RunFailed, RunStopped, TraceCorruption, UsageError
from .executors import Executor, make_executor
from .fits import fits, shaped
from .fork import described, install_answers, plan_fork
from .graph import Graph, WorkflowDef
from .network import IMMUTABLE, LAZY, Item, Network, Queue, build_network
from .ownership import own_stamp
from .ports import type_name
from .replay import ReplayPlan, plan_resume, shape_of, statics_of
from .replayer import restore
from .rundir import (
    DEFAULT_RUNS_DIR,
    SUMMARY,
    TAPE,
    RunSummary,
    new_run_id,
    now_iso,
    resolve_run,
    valid_run_id,
    write_summary,
)
from .scheduler import Engine
from .state import big_parameters_changed
from .tape import FORMAT_VERSION, MAX_WORKERS, Diverged, Edited, End, ErrorInfo, Header, graph_fingerprint
from .usage import Price, PriceTableError, Usage, find_prices
from .values import NotEncodable, decode, encode, preview, use_flow_module
from .verify import outputs_bytes
from .writer import TapeWriter

STOP_GRACE = 10.0
MODEL_WORKERS = 16


@dataclass
class RunResult:
    status: str
    outputs: dict[str, list[Any]]
    run_id: str
    run_dir: Path | None
    steps: int
    firings: int
    error: ErrorInfo | None = None
    replay_stopped: list[Diverged] = field(default_factory=list)
    leftovers: list[tuple[str, int]] = field(default_factory=list)  # the ones that are news: not on a feedback edge
    stuck: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    usage: Usage | None = None  # the model calls it made, and those its resume replayed
    exception: BaseException | None = None  # what the failed actor raised (for `run`'s RunFailed.__cause__)


def fingerprint(net: Network) -> str:
    return graph_fingerprint(*shape_of(net))


def _encode_inputs(inputs: dict[str, Any]) -> dict[str, Item]:
    seeded: dict[str, Item] = {}
    for port, value in inputs.items():
        try:
            # the flow gets the input as it is now, never the caller's object (which it might change)
            seeded[port] = (value if type(value) in IMMUTABLE else LAZY, Raw(encode(value)))
        except NotEncodable as exc:
            raise UsageError(f"input {port!r} cannot be recorded on the tape: {exc}") from None
    return seeded


def _check_inputs(graph: Graph, net: Network, inputs: dict[str, Any]) -> None:
    for port, value in inputs.items():
        if port not in net.seeds and port not in graph.inputs:
            names = ", ".join(graph.inputs) or "none"
            raise UsageError(f"workflow {graph.name} has no input port {port!r} (its inputs: {names})")
        expected = graph.inputs.get(port)
        value = inputs[port] = shaped(value, expected)
        if not fits(value, expected):
            raise UsageError(
                f"input {port!r} of workflow {graph.name} expects {type_name(expected)}, "
                f"not {type(value).__name__} {preview(value, 40)}"
            )


def _feedback(queues: list[Queue]) -> set[Queue]:
    """Those of `queues` on a cycle: their consumer's outputs lead back to their producer. A token
    left in one when the run goes quiet is how a feedback loop ends (the last value fed back, with
    nothing left to pair it with), not news."""
    on_cycle: set[Queue] = set()
    for q in queues:
        seen: set[int] = set()
        todo = [q.consumer]
        while todo and q not in on_cycle:
            a = todo.pop()
            if a is None or a.index in seen:
                continue
            seen.add(a.index)
            for outs in a.outputs.values():
                if q in outs:
                    on_cycle.add(q)
                todo.extend(o.consumer for o in outs)
    return on_cycle


def _stuck(net: Network, quiet: bool) -> tuple[list[tuple[str, int]], list[tuple[str, int]], list[str]]:
    """Tokens left in queues with a consumer; of them, those that are news (not on a feedback
    edge); and, when the run went quiet (`quiet`: it was not stopped and did not fail), the
    actors that hold tokens that are news yet can never fire: every one of their actions lacks an
    input that nothing will fill any more."""
    left = [q for q in net.queues if q.consumer is not None and q.items]
    leftovers = [(q.id, len(q.items)) for q in left]
    feedback = _feedback(left)
    news = [(q.id, len(q.items)) for q in left if q not in feedback]
    stuck: list[str] = []
    for actor in net.actors if quiet else ():
        if not actor.inputs or actor.control or not any(q.items for q in actor.inputs.values() if q not in feedback):
            continue
        actions = actor.spec.actions if actor.spec is not None else []
        wants = [(a.name, a.consumes) for a in actions] or [("", dict.fromkeys(actor.inputs, 1))]
        lacking = [(name, [p for p, n in consumes.items() if p in actor.inputs and len(actor.inputs[p].items) < n])
                   for name, consumes in wants]
        if not all(missing for _, missing in lacking):
            continue  # some action has its inputs: its guard said no, which is no wait on a queue
        holding = ", ".join(f"{p!r} holds {len(q.items)}" for p, q in actor.inputs.items() if q.items)
        if len(lacking) == 1:
            waits = ", ".join(map(repr, lacking[0][1]))
        else:
            waits = "; ".join(f"{name} on {', '.join(map(repr, missing))}" for name, missing in lacking)
        stuck.append(f"{actor.path} waits on {waits}, which nothing will fill ({holding})")
    return leftovers, news, stuck


class _Signals:
    """SIGTERM and Ctrl-C stop the run cleanly: the first asks (no new firing starts), a second one
    interrupts, and so does the end of the grace period after the first (STOP_GRACE): a firing
    that does not end (a hung action, a tool that runs on) cannot keep the run from stopping."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.previous: dict[int, Any] = {}
        self.count = 0
        # while a resume copies its prefix and while the run's end is written, a signal only asks:
        # the tape and run.json must not be left half-told (the run stops at once after the copy)
        self.shielded = False

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        self.engine.stop_requested = True
        if self.shielded:
            return
        if self.count > 1 or signum == signal.SIGALRM:
            raise KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, STOP_GRACE)
        print(f"flowtape: stopping once the firings under way end (at most {STOP_GRACE:g} s; "
              "signal again to stop now)", file=sys.stderr, flush=True)

    def shield(self) -> None:
        self.shielded = True
        if self.previous:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def __exit__(self, *exc: object) -> None:
        if self.previous:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def execute(
    flow: WorkflowDef,
    inputs: dict[str, Any] | None = None,
    *,
    max_workers: int | None = None,
    runs_dir: Path | str | None = None,
    run_id: str | None = None,
    tape: bool = True,
    durable: bool = False,
    resume_from: str | Path | None = None,
    at_step: int | None = None,
    on_step: Callable[[int, int, str], None] | None = None,
    on_start: Callable[[str, Path | None], None] | None = None,
    max_steps: int | None = None,
    on_check: Callable[[int, int], None] | None = None,
    edits: dict[str, Any] | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
) -> RunResult:
    """Run `flow` and record it; returns the result whatever the status (failures included).
    With `max_steps`, a run that reaches that many steps stops there (`stopped`, resumable).
    `edits` (with `resume_from`) forks the run: `{"QUEUE[i]" | "ACTOR.field" | "AGENT.answer": value}`
    are put in place at the step before it goes on (fork.py).
    `resume_from` alone resumes where that run stopped, inside the loop item, if branch or nested
    workflow it stopped in too; with `at_step`, right after that step (replay.py).
    `on_check(records checked, records)` follows the check of a resumed tape that must be verified.
    `executor="ray"` runs the firings on a Ray cluster (`ray_address`; none: a local instance)."""
    if not isinstance(flow, WorkflowDef):
        raise UsageError(f"run() takes a @workflow function, not {type(flow).__name__}")
    if max_workers is not None and not 1 <= max_workers <= MAX_WORKERS:
        raise UsageError(f"max_workers must be from 1 to {MAX_WORKERS}, not {max_workers}")
    if max_steps is not None and max_steps < 1:
        raise UsageError("max_steps must be at least 1")
    use_flow_module(getattr(flow.fn, "__module__", None))  # (its classes are named so on the tape: values.FLOW)
    runs_base = Path(runs_dir) if runs_dir is not None else DEFAULT_RUNS_DIR
    graph = flow.build(runs_base)
    net = build_network(graph)
    plan: ReplayPlan | None = None
    edited: list[Edited] = []  # a fork's edits (fork.py)
    if resume_from is not None:
        if not tape:
            raise UsageError("a resumed run is recorded: it cannot run with the tape off")
        if inputs:
            raise ResumeRefused("cannot give inputs with a resume: a resumed run starts from the recorded run's inputs")
        source = resolve_run(resume_from, runs_base)
        plan = plan_resume(source, at_step, net, graph.name, on_check)
        edited = plan_fork(edits or {}, plan, net)
        seeded = {port: (LAZY, Raw(enc)) for port, enc in _raw_inputs(plan.inputs).items()}
        inputs_raw = plan.inputs
        if max_steps is not None and max_steps <= plan.at_step:
            said = f"{max_steps} is not above the step resumed at ({plan.at_step}): nothing would run"
            raise UsageError(f"max_steps {said}", cli=f"--max-steps {said}")
        max_workers = max_workers or plan.max_workers or None  # the recorded pool: the same order again
    else:
        if at_step is not None:
            raise UsageError("at_step needs resume_from (the run to resume)", cli="--at-step needs --resume-from")
        if edits:
            raise UsageError("edits (--set) need --resume-from: a fork goes on from a recorded run")
        inputs = dict(inputs or {})
        _check_inputs(graph, net, inputs)
        seeded = _encode_inputs(inputs)
        # the header holds the inputs the graph takes (a value given to a port wired to nothing is
        # not used, and said so): a header naming a port the graph lacks fails verification
        used = {port: item[1] for port, item in seeded.items() if net.seeds.get(port)}
        inputs_raw = Raw(msgspec.json.encode(used)) if used else Raw(b"{}")
    _check_agents(net, plan)
    # (agents that call a model wait on the network, not the CPU: by default, one worker each, up to MODEL_WORKERS)
    callers = sum(1 for a in net.actors if a.spec is not None and calls_model(a.spec.agent))
    default = max(min(8, (os.cpu_count() or 1) + 2), min(callers, MODEL_WORKERS))
    workers = max_workers if max_workers is not None else (graph.max_workers or default)
    workers = min(workers, MAX_WORKERS)
    run_id = new_run_id() if run_id is None else run_id
    if not valid_run_id(run_id) or not run_id[0].isalnum():  # `-x` would read as an option to `flowtape show`
        raise UsageError(f"bad run id {run_id!r}: start with a letter or digit, then use letters, digits, '-', '_' and '.'")
    base_dir = Path(graph.site.file).resolve().parent if graph.site.file and not graph.site.file.startswith("<") else Path.cwd()
    backend = make_executor(executor, ray_address=ray_address, base_dir=base_dir, runs_dir=runs_base)
    if plan is None:
        backend.start()  # (a cluster that cannot be reached is said before the run starts; a resume may replay only)
    try:
        return _execute(graph, net, plan, edited, backend, base_dir, runs_base, seeded, inputs_raw, workers, run_id,
                        tape, durable, on_step, on_start, max_steps)
    finally:
        backend.close()


def _execute(
    graph: Graph, net: Network, plan: ReplayPlan | None, edited: list[Edited], backend: Executor, base_dir: Path,
    runs_base: Path,
    seeded: dict[str, Item], inputs_raw: Raw, workers: int, run_id: str, tape: bool, durable: bool,
    on_step: Callable[[int, int, str], None] | None, on_start: Callable[[str, Path | None], None] | None,
    max_steps: int | None,
) -> RunResult:
    """`execute` once the run's executor is ready: its tape, its firings, its end."""
    run_dir: Path | None = None
    writer: TapeWriter | None = None
    actors, queues = shape_of(net)
    started = now_iso()
    summary = RunSummary(
        id=run_id, workflow=graph.name, flowFile=graph.site.file, status="running", startedAt=started,
        resumedFrom=plan.source_id if plan else None, resumedAtStep=plan.at_step if plan else None, pid=os.getpid(),
        edits=len(described(edited)) if plan else 0,
        process=own_stamp(),  # what tells this process from another that gets its pid later (ownership.py)
    )
    if tape:
        run_dir = runs_base / run_id
        try:
            run_dir.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise UsageError(f"run {run_id!r} already exists in {runs_base}") from None
        except OSError as exc:
            raise UsageError(f"cannot create the run directory {run_dir}: {exc.strerror or exc}") from None
        writer = TapeWriter(run_dir / TAPE, durable=durable)
        writer.write(
            Header(
                version=FORMAT_VERSION, runId=run_id, workflow=graph.name, flowFile=graph.site.file,
                graph=fingerprint(net), actors=actors, queues=queues, inputs=inputs_raw,
                flowtapeVersion=__version__, startedAt=started, maxWorkers=workers,
                resumedFrom=summary.resumedFrom, resumedAtStep=summary.resumedAtStep,
                chainFrom=plan.snapshot.chain_from if plan is not None and plan.snapshot is not None else None,
                seededOutputs=[(port, q.index) for port, targets in net.seeds.items() for q in targets if q.consumer is None],
                statics=statics_of(net),
            )
        )
        write_summary(run_dir, summary)
    if on_start is not None:
        on_start(run_id, run_dir)
    work_dir = (run_dir / "work") if run_dir is not None else Path.cwd() / ".flowtape" / "work" / run_id
    if max_steps is not None:
        on_step = _step_limit(max_steps, on_step, lambda: engine)
    engine = Engine(
        net, max_workers=workers, tape=writer, work_dir=work_dir.resolve(), base_dir=base_dir,
        covered=plan.covered if plan else None, unfinished=plan.unfinished if plan else None, on_step=on_step, step_limit=max_steps,
        executor=backend,
    )
    engine.check_actions = plan is not None  # a resume: its replays check their action (replayer.py)
    with _Signals(engine) as signals:
        signals.shield()
        try:
            if plan is not None and plan.snapshot is not None:
                if writer is not None and plan.snapshot.block is not None:
                    writer.copy_prefix(*plan.snapshot.block)
                elif writer is not None:
                    writer.copy_replayed(plan.snapshot.lines)
                if writer is not None:
                    writer.follow(plan.snapshot.steps, plan.snapshot.round, plan.snapshot.states)
                restore(engine, plan.snapshot)
            else:
                engine.seed({port: [item] for port, item in seeded.items()})
            if writer is not None and edited:  # a fork: after the copied prefix (or the header), before anything runs
                writer.write(*edited)
            install_answers(edited, net)
            if plan is not None:  # (after a snapshot: what an unfinished composite recorded past it)
                plan.install(net)
        except TraceCorruption as exc:  # the recorded state holds a value that cannot be rebuilt
            message = f"cannot resume from {plan.source if plan is not None else 'its tape'}: {exc}"
            _abandon(engine, writer, run_dir, summary, message)
            raise ResumeRefused(message) from None
        signals.shielded = False  # (a signal during the copy asked already: the run stops at once)
        interrupted = False
        if plan is not None:
            gc.freeze()  # the plan's long-lived entries: not worth re-scanning on every collection
        try:
            engine.run()
        except KeyboardInterrupt:
            interrupted = True
            engine.stop_requested = True
        try:
            if engine.stop_requested and not interrupted and not engine.wait_in_flight(STOP_GRACE):
                interrupted = True
        except KeyboardInterrupt:  # a second signal while the last firings finish: end the tape now
            interrupted = True
        signals.shield()  # from here the end is written: the tape, its seal and run.json, whole
        if interrupted:
            tools.stop_all()  # a tool a firing left running must not write into the run once it ended
        engine.agents.close()
        if plan is not None:
            gc.unfreeze()
        result = _finish(engine, net, writer, run_dir, summary, interrupted)
    # (a parameter of the workflow function is no input: `def main(n=30)` builds with 30 whatever is given)
    result.warnings[:0] = [f"input {port!r} was given, but nothing in workflow {graph.name} is wired to it: its value was not used"
                           for port in seeded if not net.seeds.get(port)]
    return result


def _check_agents(net: Network, plan: ReplayPlan | None) -> None:
    """Say before anything runs what keeps an agent from calling its model (no SDK, key or model):
    each agent whose first firing runs live. One a resume replays is checked at its first live
    firing, if it has one: a resume that replays every call needs neither key nor network."""
    recorded: set[str] = set()
    if plan is not None and plan.snapshot is not None:
        recorded = {path for path, count in plan.snapshot.fire_counts.items() if count}
    elif plan is not None:
        recorded = set(plan.entries)
    for actor in net.actors:
        if actor.spec is not None and actor.kind == "agent" and actor.path not in recorded:
            try:
                Agents.check(actor.path, actor.spec)
            except AgentSetupError as exc:
                site = actor.node.created_at
                raise FlowError(str(exc), site.file, site.line) from None


def _step_limit(
    limit: int, inner: Callable[[int, int, str], None] | None, engine: Callable[[], Engine]
) -> Callable[[int, int, str], None]:
    """An on_step that stops the run once it has taken `limit` steps (called under the engine's lock)."""

    def on_step(steps: int, firings: int, actor: str) -> None:
        if inner is not None:
            inner(steps, firings, actor)
        if steps >= limit:
            engine().stop_requested = True

    return on_step


def _abandon(engine: Engine, writer: TapeWriter | None, run_dir: Path | None, summary: RunSummary, message: str) -> None:
    """End a run that could not start: its tape and summary say failed, and why."""
    error = ErrorInfo(message=message)
    end = End(status="failed", outputs=Raw(b"{}"), steps=engine.steps, firings=engine.seq, finishedAt=now_iso(), error=error)
    if writer is not None:
        writer.write(end)
        writer.close()
        summary.tape = trust.seal_file(writer.path, writer.written)
    if run_dir is not None:
        summary.status, summary.finishedAt, summary.error, summary.pid = "failed", end.finishedAt, error, None
        summary.process = None
        summary.steps, summary.firings = engine.steps, engine.seq
        write_summary(run_dir, summary)


def _raw_inputs(raw: Raw) -> dict[str, bytes]:
    decoded = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    return {port: bytes(value) for port, value in decoded.items()}


def _finish(engine: Engine, net: Network, writer: TapeWriter | None, run_dir: Path | None, summary: RunSummary, interrupted: bool) -> RunResult:
    with engine.settled():
        status = "failed" if engine.failure is not None else ("stopped" if engine.stop_requested or interrupted else "succeeded")
        outputs_items = {port: list(q.items) for port, q in net.outputs.items()}
        outputs_raw = Raw(outputs_bytes({port: [Raw(bytes(e)) for _, e in items] for port, items in outputs_items.items()}))
        error = error_info(engine.failure) if engine.failure is not None else None
        if engine.broken is not None:
            status = "failed"
            error = ErrorInfo(message=f"Flowtape could not go on: {type(engine.broken).__name__}: {engine.broken}")
        leftovers, news, stuck = _stuck(net, status == "succeeded")
        engine.tally.add(engine.agents.lost, False)
        usage = engine.tally.usage(_prices(net))
        end = End(
            status=status, outputs=outputs_raw, steps=engine.steps, firings=engine.seq, finishedAt=now_iso(),
            error=error, replayStopped=list(engine.diverged), leftovers=leftovers, stuck=stuck,
            final=final_state(engine) if writer is not None else None, usage=usage,
        )
        if writer is not None:
            try:
                writer.write(end)
                writer.close()  # (cut to its length: what the seal covers)
                summary.tape = trust.seal_file(writer.path, writer.written)
            except OSError:  # the disk is full, say: the tape stays as a killed run's, readable
                writer.close()
        engine.tape = None
    outputs = {port: [decode(bytes(e)) if v is LAZY else v for v, e in items] for port, items in outputs_items.items()}
    if run_dir is not None:
        summary.status = status
        summary.finishedAt = end.finishedAt
        summary.steps = engine.steps
        summary.firings = engine.seq
        summary.outputs = outputs_raw
        summary.error = error
        summary.replayStopped = list(engine.diverged)
        summary.usage = usage
        summary.pid = summary.process = None
        write_summary(run_dir, summary)
    return RunResult(
        status, outputs, summary.id, run_dir, engine.steps, engine.seq, error, list(engine.diverged), news, stuck,
        big_parameters_changed(net.actors) + [
            f"{count} firing(s) of {path} cannot be replayed ({reason}): a resume runs them live"
            for path, (count, reason) in engine.unreplayable.items()
        ],
        usage,
        engine.failure.raised_by if engine.failure is not None else None,
    )


def _prices(net: Network) -> dict[str, Price] | None:
    """The price table of the flow's project (usage.find_prices), when it has agents that call a model."""
    if not any(calls_model(a.spec.agent) for a in net.actors if a.spec is not None):
        return None
    file = net.graph.site.file
    try:
        return find_prices(Path(file).resolve().parent if file and not file.startswith("<") else Path.cwd())
    except PriceTableError as exc:
        print(f"flowtape: warning: {exc}", file=sys.stderr)
        return None


# wfpy's run() options that mean nothing here: `run` takes them and leaves them
WFPY_IGNORED = frozenset({"verbose", "queue_trace", "keep_work_dir", "keep_intermediates", "source_path", "work_dir", "validate"})


def run(
    flow: WorkflowDef,
    inputs: dict[str, Any] | None = None,
    max_workers: int | None = None,
    *,
    runs_dir: Path | str | None = None,
    run_id: str | None = None,
    tape: bool = True,
    durable: bool = False,
    resume_from: str | Path | None = None,
    at_step: int | None = None,
    edits: dict[str, Any] | None = None,
    out_dir: Any = None,
    executor: str | None = None,
    ray_address: str | None = None,
    **wfpy_options: Any,
) -> dict[str, list[Any]]:
    """Run a workflow; returns `{output port: [tokens]}`. With `resume_from`, `edits` forks the
    run at the step (`{"double.In[0]": 7, "report.approved": [], "reviewer.answer": {...}}`, as
    `--set` takes them; fork.py). Raises RunFailed when an actor fails
    (the error names its path, firing and line; what the actor raised is its `__cause__`) and
    RunStopped on Ctrl-C/SIGTERM. `out_dir` and wfpy's WFPY_IGNORED options are accepted for wfpy
    compatibility and ignored: every run is recorded. `out_dir` is wfpy's name for `runs_dir`. `executor="ray"`
    fires the actors on a Ray cluster: `ray_address` (`auto`, `ray://host:10001`, or the address
    `ray start --head` printed), or none for a local instance started for the run."""
    unknown = sorted(set(wfpy_options) - WFPY_IGNORED)
    if unknown:
        raise TypeError(f"run() got an unexpected keyword argument {unknown[0]!r}")
    if out_dir is not None:
        if runs_dir is not None and Path(runs_dir) != Path(out_dir):
            raise TypeError("run() got both runs_dir and out_dir (wfpy's name for runs_dir): give one")
        runs_dir = out_dir
    result = execute(
        flow, inputs, max_workers=max_workers, runs_dir=runs_dir, run_id=run_id, tape=tape, durable=durable,
        resume_from=resume_from, at_step=at_step, edits=edits, executor=executor, ray_address=ray_address,
    )
    if result.status == "failed":
        assert result.error is not None
        raise RunFailed(
            result.error.message, result.error.actor or "", result.error.fireCount or 0,
            result.error.file, result.error.line, result.outputs, str(result.run_dir) if result.run_dir else None,
        ) from result.exception
    if result.status == "stopped":
        raise RunStopped(f"run {result.run_id} was stopped")
    return result.outputs


__all__ = ["run", "execute", "RunResult", "FlowError", "SUMMARY"]
