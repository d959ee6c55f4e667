"""Composite firings: a nested workflow runs its child flow; a loop fires once per item and
once when done; an if runs one branch. Each is one step, and its inner firings say `within`."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from msgspec import Raw

from .digests import digest
from .firing import Plan, value_of
from .midloop import iterate
from .network import IMMUTABLE, LAZY, Actor, Context, Item, Queue, own_copy, placeholder
from .recording import write_start, write_step
from .values import NotEncodable, encode

if TYPE_CHECKING:
    from .scheduler import Engine, Pool


_NONE_ENC = Raw(encode(None))


def fire_subflow(engine: Engine, actor: Actor, plan: Plan, fire_count: int, ctx: Context | None, start: int) -> None:
    """A nested workflow: its inputs go to the child's queues, then the child runs to quiescence."""
    actor.static_used = True
    produced: dict[int, tuple[Queue, list[Item]]] = {}
    for q, items in plan.takes:
        for i, target in enumerate(actor.seeds.get(q.port, [])):
            produced.setdefault(target.index, (target, []))[1].extend(items if i == 0 else [own_copy(item) for item in items])
    inner = ctx or _context(actor, fire_count)
    _commit_start(engine, actor, fire_count, plan.takes, list(produced.values()), ctx, inner)
    _scope_anew(actor.pools[""])
    engine._work(actor.pools[""], inner)
    _finish_composite(engine, actor, fire_count, ctx, inner, start)

def _scope_anew(pool: Pool) -> None:
    """A scope runs anew (a loop's item, an if's branch, a nested workflow's firing): the static
    loops and ifs and the input-less nested workflows in it fire once again, once in each run of
    the scope, not once in the whole run (`with loop(items)` inside a loop runs for every item)."""
    for member in pool.members:
        if member.static_used:
            member.static_used = False
            pool.mark(member)  # (a nested workflow without inputs is no control: it waits to be chosen)


def _commit_start(
    engine: Engine,
    actor: Actor,
    fire_count: int,
    takes: list[tuple[Queue, list[Item]]],
    produced: list[tuple[Queue, list[Item]]],
    ctx: Context | None,
    inner: Context,
) -> None:
    """A composite's own record, written when it starts: what it took and what it handed in.
    Replayed only if the recorded run's firing handed in the same: a loop over an edited list
    (or anything a static loop or if reads anew) runs live from the first item that differs."""
    recorded = engine.covered.get((actor.path, fire_count))
    covered = recorded is not None and recorded == sorted((q.index, digest([e for _, e in items])) for q, items in produced)
    actor.fire_count = fire_count
    engine.firings += 1
    engine._put(produced)
    engine.seq += 1
    inner.taken.extend(takes)
    inner.touched.update(q for q, _ in takes)
    inner.touched.update(q for q, _ in produced)
    if not covered:
        inner.any_live = True
        if engine.check_actions:
            engine.live_queues.update(q.index for q, _ in produced)
    # A top-level firing recorded without its step (it failed, was stopped or killed inside) is
    # entered again: the firings it recorded replay, but it, and so its step, is new.
    again = ctx is None and (actor.path, fire_count) in engine.unfinished
    if again:
        inner.any_live = True
    if actor.kind == "loop":  # handing in an item: the loop is between two items until it is done
        item = f"{actor.path}.item->"
        if any(q.id.startswith(item) for q, _ in produced):
            engine.loops_mid.add(actor.path)
        else:
            engine.loops_mid.discard(actor.path)
    if engine.tape is None:
        return
    if covered and not again:  # (replayed: as the recorded run wrote it, by its Struct)
        engine.tape.write(engine._firing_record(actor, fire_count, takes, produced, ctx, True))
    else:
        write_start(engine, actor, fire_count, takes, produced, ctx)

def _finish_composite(engine: Engine, actor: Actor, fire_count: int, ctx: Context | None, inner: Context, start: int) -> None:
    if ctx is None and not engine.halted:
        engine.last_taken = inner.taken
        if engine.tape is None:
            engine.count_step(actor, start)
        elif inner.any_live:
            write_step(engine, actor, fire_count, inner.touched, start)
        else:  # (replayed: by its Struct, as the recorded run's)
            engine.tape.write(engine._step(actor, fire_count, True, inner.touched, start))


def fire_control(engine: Engine, pool: Pool, ctx: Context | None) -> bool:
    """Fire the first loop or if of `pool` that can fire; nothing else runs meanwhile."""
    for actor in pool.controls:
        started = _control_start(engine, actor)
        if started is None:
            continue
        takes, produced, branch = started
        fire_count = actor.fire_count + 1
        start = time.perf_counter_ns()
        inner = ctx or _context(actor, fire_count)
        me = threading.current_thread()
        owner = engine.exclusive
        if ctx is None:
            engine.exclusive = me
        actor.running = True
        pool.in_flight += 1
        try:
            _commit_start(engine, actor, fire_count, takes, produced, ctx, inner)
            if branch is not None and branch in actor.pools:
                _scope_anew(actor.pools[branch])
                engine._work(actor.pools[branch], inner)
            _finish_composite(engine, actor, fire_count, ctx, inner, start)
        finally:
            actor.running = False
            pool.in_flight -= 1
            if ctx is None:
                engine.exclusive = owner
            if engine._wake or engine.halted:  # idle workers care only about top-level news
                engine._wake = False
                engine.cond.notify_all()
        return True
    return False


def _control_start(engine: Engine, actor: Actor) -> tuple[list[tuple[Queue, list[Item]]], list[tuple[Queue, list[Item]]], str | None] | None:
    takes: list[tuple[Queue, list[Item]]] = []
    if actor.kind == "loop":
        if actor.iterator is None:
            source = actor.inputs.get("iter")
            if source is not None and source.items:
                item = source.items.popleft()
                takes.append((source, [item]))
                iterable = value_of(item)
            elif not actor.static_used and actor.obj.iterable is not None:
                actor.static_used = True
                iterable = actor.obj.iterable
            else:
                return None
            try:
                actor.iterator = iterate(iterable)
            except TypeError:
                engine._fail(actor, actor.fire_count + 1, TypeError(f"loop {actor.path} got a {type(iterable).__name__}, which is not iterable"))
                return None
        try:
            value = next(actor.iterator)
        except StopIteration:
            actor.iterator = None
            return takes, [(q, [(None, _NONE_ENC)]) for q in actor.outputs.get("out", [])], None
        except Exception as exc:  # noqa: BLE001 - a failing user iterator fails the run
            actor.iterator = None
            engine._fail(actor, actor.fire_count + 1, exc)
            return None
        item = _token(actor, value)
        return takes, [(q, [item]) for q in actor.outputs.get("item", [])], "body"
    source = actor.inputs.get("cond")
    if source is not None and source.items:
        token = source.items.popleft()
        takes.append((source, [token]))
        condition = value_of(token)
    elif not actor.static_used and actor.obj.condition is not None and source is None:
        actor.static_used = True
        condition = actor.obj.condition
        token = _token(actor, condition)
    else:
        return None
    # `out` reaches its consumers outside the if, and inside it only those of the branch that runs
    skipped = {id(m) for m in actor.branches.get("else" if condition else "then", [])}
    produced = [(q, [own_copy(token)]) for q in actor.outputs.get("out", []) if id(q.consumer) not in skipped]
    return takes, produced, "then" if condition else "else"

def _token(actor: Actor, value: Any) -> Item:
    """A value a loop or an if puts, as a token: the value as it is now (each consumer decodes its
    own copy of a mutable one, as for any token)."""
    try:
        return (value if type(value) in IMMUTABLE else LAZY, Raw(encode(value)))
    except NotEncodable:
        return placeholder(actor.path, value)

def _context(actor: Actor, fire_count: int) -> Context:
    return Context(actor, fire_count)
