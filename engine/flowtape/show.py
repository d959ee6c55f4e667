"""What a tape says at a step: the firings of the step, every queue and every actor's state after it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import msgspec

from . import trust
from .errors import UsageError
from .rundir import TAPE, read_summary
from .seek import at_step_from_checkpoints, walk_to_step
from .tape import End, Firing, Header, Step, Tape, decode_record
from .values import preview_json
from .verify import Rebuild, verify


@dataclass
class StepDetail:
    step: Step
    firings: list[Firing]
    taken: list[tuple[str, list[str]]]
    put: list[tuple[str, list[str]]]
    queues: list[tuple[str, int, list[str]]]
    states: list[tuple[str, int, str | None]]  # every actor: path, fire count, state (None: it keeps none)
    chat: list[tuple[str, str]] = field(default_factory=list)


def _previews(tokens: list[msgspec.Raw], limit: int = 60) -> list[str]:
    return [preview_json(msgspec.json.decode(t), limit) for t in tokens]


def detail_of(run_dir: Path, number: int) -> StepDetail:
    """Step `number` of a run. A tape this machine wrote and nobody changed (trust.py) is not
    re-verified, and the run at the step is rebuilt from the checkpoint before it; any other tape
    is verified and rebuilt from its first record."""
    summary = read_summary(run_dir)
    if summary is not None and summary.tape is not None and summary.status != "running":
        path = run_dir / TAPE
        if trust.file_sealed(path, summary.tape):
            with open(path, "rb") as fh:
                header = decode_record(fh.readline().rstrip(b"\n"))
                try:
                    end: object = decode_record(_last_line(fh))
                except (msgspec.DecodeError, msgspec.ValidationError):  # a last line over a megabyte
                    end = None
            if isinstance(end, End) and not 1 <= number <= end.steps:  # the sealed tape says, not run.json
                raise UsageError(f"step {number} is out of range: run {summary.id} {steps_held(end.steps)}")
            at = at_step_from_checkpoints(path, header, number) if isinstance(header, Header) else None
            if at is not None:
                return _describe(at.rebuild, at.step, at.firings)
    return step_detail(load(run_dir), number)


def _last_line(fh: BinaryIO) -> bytes:
    size = fh.seek(0, 2)
    fh.seek(max(size - (1 << 20), 0))
    tail = fh.read()
    return tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]


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


def _describe(rebuild: Rebuild, step: Step, pending: list[tuple[Firing, list[tuple[int, list[msgspec.Raw]]]]]) -> StepDetail:
    names = rebuild.header.queues
    taken = [(names[i], _previews(tokens)) for f, took in pending for i, tokens in took]
    put = [(names[i], _previews(tokens)) for f, _ in pending for i, tokens in f.produced]
    queues = [(names[i], len(q), _previews(list(q)[:5])) for i, q in enumerate(rebuild.queues)]
    states = [
        (a.path, rebuild.fire_counts.get(a.path, 0),
         preview_json(msgspec.json.decode(rebuild.states[a.path]), 200) if a.path in rebuild.states else None)
        for a in rebuild.header.actors
    ]
    chat = [(f.actor, preview_json(msgspec.json.decode(f.chat), 300)) for f, _ in pending if f.chat]
    return StepDetail(step, [f for f, _ in pending], taken, put, queues, states, chat)


def format_detail(detail: StepDetail) -> str:
    s = detail.step
    lines = [f"step {s.step}: {s.actor} ({s.kind}) fire {s.fireCount}, journalSeq {s.journalSeq}" + ("  [replayed]" if s.replayed else "")]
    lines.append("  took:")
    lines += [f"    {q}: {', '.join(t)}" for q, t in detail.taken] or ["    nothing"]
    lines.append("  put:")
    lines += [f"    {q}: {', '.join(t)}" for q, t in detail.put] or ["    nothing"]
    lines.append("  queues after the step:")
    lines += [f"    {q}: {n}" + (f"  [{', '.join(t)}{', …' if n > len(t) else ''}]" if n else "") for q, n, t in detail.queues]
    lines.append("  every actor after the step (fire count, state):")
    lines += [f"    {a}: fired {n} · {'no state kept' if st is None else st}" for a, n, st in detail.states]
    for actor, chat in detail.chat:
        lines.append(f"  chat added by {actor}: {chat}")
    return "\n".join(lines)


def load(run_dir: Path) -> Tape:
    tape, _ = verify(run_dir / "tape.jsonl")
    return tape
