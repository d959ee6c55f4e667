"""A tape with every record whole and named in full (`flowtape show RUN --records`): what the
tape leaves out to stay small (a step's actor, kind and source, a firing's seq, a state given as
an edit, queues by index) filled in, for tools that read JSON lines and know nothing of that."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
from msgspec import Raw

from .show import StepLine, Tokens
from .tape import Diverged, Edited, End, Final, Firing, Header, Step, Tape, resolve_state


class Consumed(msgspec.Struct):
    queue: str
    count: int
    digest: str  # over the tokens' canonical encoding (docs/tape-format.md)


class QueueSize(msgspec.Struct):
    queue: str
    size: int  # after the step


class FiringRecord(msgspec.Struct, tag="firing", tag_field="t"):
    seq: int
    actor: str
    fireCount: int
    within: tuple[str, int] | None  # the top-level firing (actor, fire count) this one ran inside
    consumed: list[Consumed]
    produced: list[Tokens]
    state: Raw | None  # the actor's state after the firing, when the firing changed it
    chat: Raw | None  # the chat messages this firing added
    replayed: bool
    notReplayable: str | None


class StepRecord(StepLine, tag="step", tag_field="t"):
    queues: list[QueueSize]  # the queues that changed
    file: str
    line: int


class FinalRecord(msgspec.Struct):
    """An end record's `final`, its queues named."""

    queues: list[Tokens]
    states: list[tuple[str, Raw]]
    fireCounts: list[tuple[str, int]]
    lastTaken: list[Tokens]


class EditRecord(msgspec.Struct, tag="edit", tag_field="t"):
    """A fork's edit (tape.Edited), its queue named."""

    step: int
    what: str
    queue: str | None  # a token's queue (with `index`), else null
    index: int
    actor: str | None  # a field's or an answer's actor, else null
    field: str | None
    answer: bool
    old: str
    new: str
    value: Raw


class EndRecord(End, tag="end", tag_field="t", omit_defaults=True):
    final: FinalRecord | None = None  # type: ignore[assignment]  # (the tape's Final, queues named)


def full_records(tape: Tape) -> Iterator[msgspec.Struct]:
    """The tape's records in order, whole; checkpoints (an index for resumes, nothing happened)
    are left out, and so are the hashes (`flowtape verify` checks them)."""
    header = tape.header
    names = header.queues
    files = {a.path: a.file for a in header.actors}
    states: dict[str, Raw] = {}
    for record in tape.records():
        if isinstance(record, Firing):
            resolve_state(record, states)
            yield FiringRecord(
                record.seq, record.actor, record.fireCount, record.within,
                [Consumed(names[i], n, d) for i, n, d in record.consumed],
                [Tokens(names[i], tokens) for i, tokens in record.produced],
                record.state or None, record.chat or None, record.replayed, record.notReplayable,
            )
        elif isinstance(record, Step):
            yield StepRecord(
                record.step, record.actor, record.kind, record.fireCount, record.journalSeq, record.replayed,
                record.at, record.dur, [QueueSize(names[i], size) for i, size in record.queues],
                files.get(record.actor, ""), record.line,
            )
        elif isinstance(record, End):
            yield EndRecord(**{**msgspec.structs.asdict(record), "h": "", "final": _final(record.final, names)})
        elif isinstance(record, Edited):
            yield EditRecord(record.step, record.what, names[record.queue] if record.queue >= 0 else None, record.index,
                             record.actor or None, record.field or None, record.answer, record.old, record.new, record.value)
        elif isinstance(record, (Header, Diverged)):
            yield msgspec.structs.replace(record, h="")


def _final(final: Final | None, names: list[str]) -> FinalRecord | None:
    if final is None:
        return None
    return FinalRecord(
        [Tokens(names[i], tokens) for i, tokens in final.queues], final.states, final.fireCounts,
        [Tokens(names[i], tokens) for i, tokens in final.lastTaken],
    )
