"""What a tape says at a step: the firings of the step, every queue and every actor's state after it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
from msgspec import Raw

from . import trust
from .errors import UsageError
from .rundir import TAPE, read_summary
from .seek import at_step_from_checkpoints, walk_to_step
from .streamed import ends
from .tape import End, Firing, Step, Tape
from .usage import ModelCall
from .values import preview_raw
from .verify import Rebuild, check_summary, verify_run


class Tokens(msgspec.Struct):
    queue: str
    tokens: list[Raw]  # tagged JSON, as on the tape


class Contents(msgspec.Struct):
    queue: str
    size: int
    tokens: list[Raw]


class ActorAfter(msgspec.Struct):
    actor: str
    fireCount: int
    state: Raw | None  # None: it keeps none


class ChatAdded(msgspec.Struct):
    actor: str
    messages: Raw
    calls: list[ModelCall] = []  # the model calls of its firing


class StepHead(msgspec.Struct):
    """What every view of a step starts with."""

    step: int
    actor: str
    kind: str
    fireCount: int
    journalSeq: int
    replayed: bool


class StepDetail(StepHead):
    """One step as the tape tells it, values whole (`show --step N --json` prints it as is)."""

    taken: list[Tokens]
    put: list[Tokens]
    queues: list[Contents]  # every queue after the step
    states: list[ActorAfter]  # every actor after the step
    chat: list[ChatAdded]


class StepLine(StepHead):
    at: int  # microseconds since the run started
    dur: int


class RunDetail(msgspec.Struct):
    """A run as its tape tells it (`show RUN --json`); `end` is None while it runs or when it was killed."""

    runId: str
    workflow: str
    flowFile: str
    resumedFrom: str | None
    resumedAtStep: int | None
    steps: list[StepLine]
    end: End | None


def _previews(tokens: list[Raw], limit: int = 60) -> list[str]:
    return [preview_raw(t, limit) for t in tokens]


def detail_of(run_dir: Path, number: int, progress: Callable[[int, int], None] | None = None) -> StepDetail:
    """Step `number` of a run. A tape this machine wrote and nobody changed (trust.py) is not
    re-verified, and the run at the step is rebuilt from the checkpoint before it; any other tape
    is verified and rebuilt from its first record."""
    summary = read_summary(run_dir)
    if summary is not None and summary.tape is not None and summary.status != "running":
        path = run_dir / TAPE
        if trust.file_sealed(path, summary.tape):
            header, end = ends(path)
            check_summary(summary, header, end)  # (as verify would: run.json edited since is refused)
            if end is not None and not 1 <= number <= end.steps:  # the sealed tape says, not run.json
                raise UsageError(f"step {number} is out of range: run {summary.id} {steps_held(end.steps)}")
            at = at_step_from_checkpoints(path, header, number)
            if at is not None:
                return _describe(at.rebuild, at.step, at.firings)
    return step_detail(load(run_dir, progress), number)


def steps_held(total: int, low: int = 1) -> str:
    """`has steps 1 to N`, or `has no steps` (for an out-of-range message)."""
    return f"has steps {low} to {total}" if total >= low else "has no steps"


def step_detail(tape: Tape, number: int) -> StepDetail:
    """Rebuild the run up to step `number` (1-based) and describe it."""
    header = tape.header
    total = sum(1 for line in tape.lines if isinstance(line.record, Step))
    if not 1 <= number <= total:
        raise UsageError(f"step {number} is out of range: run {header.runId} {steps_held(total)}")
    found = walk_to_step((line.record for line in tape.lines[1:]), Rebuild(header), number)
    if found is None:
        raise UsageError(f"step {number} not found")
    return _describe(found.rebuild, found.step, found.firings)


def _describe(rebuild: Rebuild, step: Step, pending: list[tuple[Firing, list[tuple[int, list[Raw]]]]]) -> StepDetail:
    names = rebuild.header.queues
    return StepDetail(
        step.step, step.actor, step.kind, step.fireCount, step.journalSeq, step.replayed,
        taken=[Tokens(names[i], tokens) for _, took in pending for i, tokens in took],
        put=[Tokens(names[i], tokens) for f, _ in pending for i, tokens in f.produced],
        queues=[Contents(names[i], len(q), list(q)) for i, q in enumerate(rebuild.queues)],
        states=[ActorAfter(a.path, rebuild.fire_counts.get(a.path, 0), rebuild.states.get(a.path)) for a in rebuild.header.actors],
        chat=[ChatAdded(f.actor, f.chat, f.calls) for f, _ in pending if f.chat],
    )


def format_detail(d: StepDetail) -> str:
    lines = [f"step {d.step}: {d.actor} ({d.kind}) fire {d.fireCount}, journalSeq {d.journalSeq}" + ("  [replayed]" if d.replayed else "")]
    lines.append("  took:")
    lines += [f"    {t.queue}: {', '.join(_previews(t.tokens))}" for t in d.taken] or ["    nothing"]
    lines.append("  put:")
    lines += [f"    {t.queue}: {', '.join(_previews(t.tokens))}" for t in d.put] or ["    nothing"]
    lines.append("  queues after the step:")
    for q in d.queues:
        shown = _previews(q.tokens[:5])
        lines.append(f"    {q.queue}: {q.size}" + (f"  [{', '.join(shown)}{', …' if q.size > len(shown) else ''}]" if q.size else ""))
    lines.append("  every actor after the step (fire count, state):")
    for a in d.states:
        state = "no state kept" if a.state is None else preview_raw(a.state, 200)
        lines.append(f"    {a.actor}: fired {a.fireCount} · {state}")
    for c in d.chat:
        lines.append(f"  chat added by {c.actor}: {preview_raw(c.messages, 300)}")
        lines += [f"    model call: {m.model} · {m.inputTokens:,} in / {m.outputTokens:,} out tokens · {m.ms:,} ms" for m in c.calls]
    return "\n".join(lines)


def run_detail(tape: Tape) -> RunDetail:
    h = tape.header
    steps = [StepLine(r.step, r.actor, r.kind, r.fireCount, r.journalSeq, r.replayed, r.at, r.dur)
             for r in tape.records() if isinstance(r, Step)]
    return RunDetail(h.runId, h.workflow, h.flowFile, h.resumedFrom, h.resumedAtStep, steps, tape.end)


def load(run_dir: Path, progress: Callable[[int, int], None] | None = None) -> Tape:
    tape, _ = verify_run(run_dir, progress=progress)
    return tape
