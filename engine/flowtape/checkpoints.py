"""Checkpoints: the run as it stands after a step, written every so often so that a resume
rebuilds the run from the nearest one, not from the first record (docs/tape-format.md)."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from msgspec import Raw

from .tape import Checkpoint

if TYPE_CHECKING:
    from .scheduler import Engine

# A checkpoint at most every this many steps, and only once the tape has grown by this many times
# the last checkpoint's size since it: a resume decodes at most that many steps, and checkpoints
# add a few percent to a tape at most, whatever the size of the queues and states.
CHECKPOINT_STEPS = 1024
CHECKPOINT_GROWTH = 16


def checkpoint_due(engine: Engine) -> Checkpoint | None:
    """The run as it stands after this step, when one is due and the tape can support it: no
    other firing under way (every recorded firing is then covered by a step), no loop between
    two items, nothing unreplayable so far."""
    tape = engine.tape
    written, size = engine._checkpointed
    if tape is None or not engine.can_checkpoint:
        engine.checkpoint_at = 1 << 62
        return None
    if tape.written - written < CHECKPOINT_GROWTH * size:
        engine.checkpoint_at = engine.steps + 64  # the tape grows slowly: look again later
        return None
    if engine.loops_mid or engine.top.in_flight > 1:
        return None  # at the next step, then
    net = engine.net
    outputs = engine.outputs_checkpointed
    queues = [(q.index, [Raw(bytes(e)) for _, e in q.items]) for q in net.queues if q.items and q.index not in outputs]
    gained = []
    for q in net.outputs.values():
        if len(q.items) > outputs[q.index]:
            gained.append((q.index, [Raw(bytes(e)) for _, e in islice(q.items, outputs[q.index], None)]))
            outputs[q.index] = len(q.items)
    checkpoint = Checkpoint(
        step=engine.steps,
        seq=engine.seq,
        queues=queues,
        outputs=gained,
        states=[(a.path, Raw(a.state_enc)) for a in net.actors if a.state_enc],
        fireCounts=[(a.path, a.fire_count) for a in net.actors if a.fire_count],
        rounds=list(engine.rounds.items()),
        round=engine.last_round,
        chats=list(engine.chats_since.items()),
        spent=engine.tally.on_tape(),
    )
    engine.chats_since = {}
    size = sum(len(t) for _, tokens in queues for t in tokens) + sum(len(bytes(s)) for _, s in checkpoint.states)
    engine._checkpointed = (tape.written, 256 + size)
    engine.checkpoint_at = engine.steps + CHECKPOINT_STEPS
    return checkpoint
