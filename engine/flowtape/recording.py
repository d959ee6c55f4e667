"""What a committed firing writes on the tape: its line, filled into a format made once per actor
and shape (lines.py) for most firings, else its record's Struct; the step a top-level firing is;
and a composite's own record and step.

The usual firing (one token taken, one value put) is committed here whole
(`commit_simple`); the others by Engine._commit, which calls `write_spread` or `write_record`. All
run for every firing of a taped run, with the engine's lock held, so they are written out for
speed: what they do beyond the untaped run is what the tape costs (docs/tape-format.md, *What the
tape costs*)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from msgspec import Raw

from .checkpoints import checkpoint_due
from .digests import digest, taken_mark
from .lines import line_format, spread_format, start_format, step_format
from .network import IMMUTABLE, Actor, Item, Queue
from .tape import Firing, SimpleFiring, touched_queues
from .usage import ModelCall
from .values import SCALARS, NotEncodable, encode, encode_plain

if TYPE_CHECKING:
    from .firing import Outcome
    from .network import Context
    from .scheduler import Engine


def commit_simple(engine: Engine, actor: Actor, takes: list[tuple[Queue, list[Item]]], outcome: Outcome, fire_count: int,
                 state: Raw | None, ctx: Context | None, start: int, ended: int) -> bool:
    """Commit a live firing of the usual shape in one go: at most one token taken, at most one
    value put on a port wired to one queue (a value that cannot change), no chat or model calls,
    its state (if any) saved. What Engine._commit does, for this shape: put the token, count the
    firing and its step, and write the line, filled into the actor's format for the shape
    (lines.py). A firing of several queues goes to `commit_spread`. False, having done nothing,
    for a firing neither commits (a value that can change or has no encoding, a chat, ...):
    Engine._commit does."""
    if outcome.chat is not None or outcome.calls is not None:
        return False
    outputs = outcome.outputs
    q_in = q_out = None
    took: bytes = b""  # (what a shape without a take or a put writes nothing of: lines.py's %.0s)
    put: bytes = b""
    size_in: int | bytes = b""
    size_out: int | bytes = b""
    i = o = -1
    if outputs:
        if len(outputs) != 1:
            return commit_spread(engine, actor, takes, outputs, fire_count, state, ctx, start)
        port, value = outputs[0]
        queues = actor.outputs.get(port)
        kind = type(value)
        if kind not in IMMUTABLE:
            return False
        if queues is None or len(queues) != 1:
            return commit_spread(engine, actor, takes, outputs, fire_count, state, ctx, start)
        try:
            put = encode_plain(value) if kind in SCALARS else encode(value)
        except (UnicodeEncodeError, NotEncodable):  # (a string with a lone surrogate: Engine._commit says why)
            return False
        q_out = queues[0]
        o = q_out.index
    if takes:
        if len(takes) != 1 or len(takes[0][1]) != 1:
            return commit_spread(engine, actor, takes, outputs, fire_count, state, ctx, start)
        q_in, taken = takes[0]
        if q_in is q_out:
            return False
        i = q_in.index
    elif q_out is None:
        return False  # a source that gave nothing: no firing at all
    # committed from here on
    actor.fire_count = fire_count
    engine.firings += 1
    if q_out is not None:
        q_out.items.append((value, Raw(put)))
        if q_out.consumer is not None:
            engine._mark(q_out.consumer)
        if engine.check_actions:
            engine.live_queues.add(o)
        size_out = len(q_out.items)
    actor.pool.progress += 1
    seq = engine.seq = engine.seq + 1
    if q_in is not None:
        taken_value, token = taken[0]
        if token is not engine.taken_token:  # (a token fanned out is one object in each queue: digested once)
            engine.taken_named = taken_mark(taken_value, token)
            engine.taken_token = token
        took = engine.taken_named
        size_in = len(q_in.items)
    line = actor.formats.get((i, o)) or _format(actor, i, o, ctx)
    tape = engine.tape
    assert tape is not None
    state_part = tape.state_part(actor.path, state) if state is not None else b""
    at, dur = (start - engine.t0) // 1000, (ended - start) // 1000
    if ctx is not None:  # a nested firing: its top-level firing's step says what it touched
        ctx.taken.extend(takes)
        if q_in is not None:
            ctx.touched.add(q_in)
        if q_out is not None:
            ctx.touched.add(q_out)
        ctx.any_live = True
        tape.simple(line % (b"" if seq == tape.step + 1 else b',"seq":%d' % seq, fire_count, took, put, state_part,
                            ctx.fire_count, at, dur), tape.step, tape.round)
        return True
    # its step (Engine.count_step, written out: a top-level firing's round is the pool's round it was chosen in)
    engine.last_taken = takes
    steps = engine.steps = engine.steps + 1
    round_ = engine.last_round = actor.turn - 1
    if round_:
        engine.rounds[actor.path] = round_
    if engine.on_step is not None:
        engine.on_step(steps, engine.firings, actor.path)
    engine.last_step_seq = seq
    a, b = (size_in, size_out) if i < o else (size_out, size_in)  # (in the queues' order; one lacking goes first)
    tape.simple(line % (steps, b"" if seq == steps else b',"seq":%d' % seq, fire_count, took, put, a, b,
                        b"" if round_ == tape.round else b',"r":%d' % round_, at, dur, state_part), steps, round_)
    if steps >= engine.checkpoint_at:
        _checkpoint(engine)
    return True


def commit_spread(engine: Engine, actor: Actor, takes: list[tuple[Queue, list[Item]]], outputs: list[tuple[str, Any]],
                  fire_count: int, state: Raw | None, ctx: Context | None, start: int) -> bool:
    """Commit a live firing of several queues (a join, a fan-out) or several tokens of one, whose
    values cannot change, each put on its own port: each value encoded once, the same token in
    every queue its port feeds (as Engine._encode_outputs would put them), committed by
    Engine._commit. False, having done nothing, for another (a value that can change, or has no
    encoding; a port put twice; nothing taken or put)."""
    produced: list[tuple[Queue, list[Item]]] = []
    for port, value in outputs:
        queues = actor.outputs.get(port)
        if not queues:
            continue
        kind = type(value)
        if kind not in IMMUTABLE:
            return False
        try:
            item = (value, Raw(encode_plain(value) if kind in SCALARS else encode(value)))
        except (UnicodeEncodeError, NotEncodable):
            return False
        produced += [(q, [item]) for q in queues]
    if len(outputs) > 1 and len({port for port, _ in outputs}) != len(outputs):
        return False  # (a port put twice: its queue gets both, which Engine._encode_outputs gathers)
    if not produced and not takes:
        return False
    engine._commit(actor, fire_count, takes, produced, state, None, ctx, start, False)
    return True


def _within(ctx: Context, takes: list[tuple[Queue, list[Item]]], produced: list[tuple[Queue, list[Item]]], live: bool) -> None:
    """A nested firing's part in its top-level firing's step: what it took and touched."""
    ctx.taken.extend(takes)
    ctx.touched.update([q for q, _ in takes] + [q for q, _ in produced])
    if live:
        ctx.any_live = True


def _checkpoint(engine: Engine) -> None:
    """After a step: a checkpoint, when one is due."""
    checkpoint = checkpoint_due(engine)
    if checkpoint is not None and engine.tape is not None:
        engine.tape.write(checkpoint)


def _format(actor: Actor, q_in: int, q_out: int, ctx: Context | None) -> bytes:
    """The actor's format for a shape (-1: no queue), made at its first firing of that shape."""
    made = actor.formats[q_in, q_out] = line_format(
        actor.path, q_in if q_in >= 0 else None, q_out if q_out >= 0 else None, ctx.actor.path if ctx is not None else None
    )
    return made


def write_spread(engine: Engine, actor: Actor, fire_count: int, takes: list[tuple[Queue, list[Item]]],
                 produced: list[tuple[Queue, list[Item]]], state: Raw | None, ctx: Context | None, start: int) -> bool:
    """Write the line of a live firing of several queues (a join, a fan-out), several tokens of
    one, or a slow firing's of any shape, filled into the actor's format for its queues
    (lines.spread_format), and count its step; False, having done nothing, for one that takes from
    a queue it puts into (or touches none)."""
    key = (tuple([(q.index, len(items)) for q, items in takes]), tuple([q.index for q, _ in produced]))
    found = actor.spreads.get(key)
    if found is None:
        taken = [index for index, _ in key[0]]
        touched = set(taken) | set(key[1])
        if not touched or len(touched) != len(taken) + len(key[1]):
            return False
        found = actor.spreads[key] = (spread_format(actor.path, *key, ctx.actor.path if ctx is not None else None),
                                      [engine.net.queues[i] for i in sorted(touched)])
    line, touched_queues_ = found
    fields: list[object] = [taken_mark(items[0][0], items[0][1]) if len(items) == 1 else digest([e for _, e in items]).encode()
                            for _, items in takes]
    fields += [items[0][1] if len(items) == 1 else b",".join([e for _, e in items]) for _, items in produced]
    tape = engine.tape
    assert tape is not None
    state_part = tape.state_part(actor.path, state) if state is not None else b""
    seq = engine.seq
    if ctx is not None:
        _within(ctx, takes, produced, True)
        tape.simple(line % (b"" if seq == tape.step + 1 else b',"seq":%d' % seq, fire_count, *fields, state_part,
                            ctx.fire_count, (start - engine.t0) // 1000, (time.perf_counter_ns() - start) // 1000),
                    tape.step, tape.round)
        return True
    engine.last_taken = takes
    steps, round_, at, dur = engine.count_step(actor, start)
    tape.simple(line % (steps, b"" if seq == steps else b',"seq":%d' % seq, fire_count, *fields,
                        encode_plain([len(q.items) for q in touched_queues_]),
                        b"" if round_ == tape.round else b',"r":%d' % round_, at, dur, state_part), steps, round_)
    if steps >= engine.checkpoint_at:
        _checkpoint(engine)
    return True


def write_start(engine: Engine, actor: Actor, fire_count: int, takes: list[tuple[Queue, list[Item]]],
                produced: list[tuple[Queue, list[Item]]], ctx: Context | None) -> None:
    """A live composite firing's own record, as it starts (composites.py), filled into the
    composite's format for its queues (lines.start_format): the bytes its Firing's Struct gives."""
    # (a loop handing in an item takes nothing and puts one token: no comprehension for what is not there)
    key = (tuple([q.index for q, _ in takes]) if takes else (), tuple([q.index for q, _ in produced]) if produced else ())
    line = actor.starts.get(key)
    if line is None:
        line = actor.starts[key] = start_format(actor.path, *key, ctx.actor.path if ctx is not None else None)
    fields: list[object] = []
    for _, items in takes:
        fields += (len(items), digest([e for _, e in items]).encode())
    fields += [items[0][1] if len(items) == 1 else b",".join([e for _, e in items]) for _, items in produced]
    if ctx is not None:
        fields.append(ctx.fire_count)
    tape = engine.tape
    assert tape is not None
    seq = engine.seq
    tape.simple(line % (b"" if seq == tape.step + 1 else b',"seq":%d' % seq, fire_count, *fields), tape.step, tape.round)


def write_step(engine: Engine, actor: Actor, fire_count: int, touched: set[Queue], start: int) -> None:
    """A live top-level composite firing's step, written once all it ran is (composites.py), filled
    into the composite's step format (lines.step_format): the bytes its Step's Struct gives."""
    steps, round_, at, dur = engine.count_step(actor, start)
    tape = engine.tape
    assert tape is not None
    line = actor.step_line
    if not line:
        line = actor.step_line = step_format(actor.path)
    sizes = sorted([(q.index, len(q.items)) for q in touched])
    tape.simple(line % (steps, engine.seq, fire_count, b',"q":' + encode_plain(sizes) if sizes else b"",
                        b"" if round_ == tape.round else b',"r":%d' % round_, at, dur), steps, round_)


def write_record(engine: Engine, actor: Actor, fire_count: int, takes: list[tuple[Queue, list[Item]]],
                 produced: list[tuple[Queue, list[Item]]], state: Raw | None, chat: Raw | None, ctx: Context | None,
                 start: int, replayed: bool, not_replayable: str | None, digests: list[tuple[int, int, str]] | None,
                 calls: list[ModelCall] | None) -> None:
    """Write any committed firing's record by its Struct (and count its step, at the top level):
    a replayed one (`digests`: what it took, as recorded), one of many tokens, with a chat or
    model calls, or one the tape cannot replay."""
    consumed = digests if digests is not None else [(q.index, len(items), digest([e for _, e in items])) for q, items in takes]
    encoded = [(q.index, [e for _, e in items]) for q, items in produced]
    tape = engine.tape
    assert tape is not None
    record: Firing | SimpleFiring
    simple: SimpleFiring | None = None
    if ctx is None:  # a top-level firing: it and its step go on one line
        engine.last_taken = takes
        queues = engine.net.queues
        sizes = [len(queues[i].items) for i in touched_queues(consumed, encoded)]
        steps, round_, at, dur = engine.count_step(actor, start)
        record = simple = SimpleFiring(
            replayed=replayed, step=steps, seq=engine.seq, actor=actor.path, fireCount=fire_count, consumed=consumed,
            produced=encoded, sizes=sizes, round=round_, at=at, dur=dur,
        )
    else:
        record = Firing(
            replayed=replayed, seq=engine.seq, actor=actor.path, fireCount=fire_count, consumed=consumed,
            produced=encoded, within=(ctx.actor.path, ctx.fire_count),
            at=(start - engine.t0) // 1000, dur=(time.perf_counter_ns() - start) // 1000,
        )
    if not_replayable:
        record.notReplayable = not_replayable
        engine.can_checkpoint = False
        count, reason = engine.unreplayable.get(actor.path, (0, not_replayable))
        engine.unreplayable[actor.path] = (count + 1, reason)
    if state is not None:
        record.state = state
    if calls:
        record.calls = calls
    if chat is not None:
        record.chat = chat
        engine.chats_since.setdefault(actor.path, []).append(chat)
    if simple is not None:  # (the record, typed without an isinstance's call)
        tape.fired(simple, checkpoint_due(engine) if engine.steps >= engine.checkpoint_at else None)
    elif ctx is not None:  # (always, then: a nested firing)
        _within(ctx, takes, produced, not replayed)
        tape.write(record)
