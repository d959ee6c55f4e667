"""Replaying recorded firings inside a run: take the recorded inputs (checked by digest), put
the recorded outputs, restore the recorded state and chat; stop per actor on a divergence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .digests import digest
from .firing import Plan, give_back, ready_action, value_of
from .network import LAZY, Actor, Item, Queue
from .state import set_state
from .tape import Diverged
from .values import preview

if TYPE_CHECKING:
    from .network import Context
    from .scheduler import Engine


def restore(engine: Engine, snapshot: Any) -> None:
    """Start from a recorded run's state at a step (see replay.Snapshot): queues, fire counts,
    states and chat histories as the tape has them."""
    with engine.cond:
        for q, tokens in zip(engine.net.queues, snapshot.queues, strict=True):
            q.items.extend((LAZY, t) for t in tokens)
        for path, count in snapshot.fire_counts.items():
            actor = engine.net.by_path[path]
            actor.fire_count = count
            actor.static_used = count > 0
        for path, raw in snapshot.states.items():
            set_state(engine.net.by_path[path], raw)
        for path, items in snapshot.loops.items():  # between two items: it goes on with the next
            engine.net.by_path[path].iterator = items
            engine.loops_mid.add(path)
        engine.chats_since = {path: list(chats) for path, chats in snapshot.chats_since.items()}
        engine.outputs_checkpointed.update(snapshot.outputs_checkpointed)
        for path, chats in snapshot.chats.items():
            history = getattr(engine.net.by_path[path].obj, "chat_history", None)
            if isinstance(history, list):
                for raw in chats:
                    history.extend(value_of((LAZY, raw)))
        engine.tally.replayed.merge(snapshot.spent)  # the calls its firings record, replayed all at once
        engine.seq = engine.firings = snapshot.seq
        engine.steps = snapshot.steps
        # The copied records keep the recorded run's times: the live ones follow them on that clock,
        # so a resumed run's timeline never draws a live firing beside a replayed one it came after.
        engine.t0 -= snapshot.clock * 1000
        if snapshot.rounds is not None:  # one worker's round-robin goes on where the recording was
            top = engine.top
            top.round = max(snapshot.rounds.values(), default=0)
            top.heap.clear()  # marked when the engine was made, before the turns below were known
            engine.rounds, engine.last_round = dict(snapshot.rounds), snapshot.round
            for actor in engine.net.actors:
                actor.dirty = False
                if actor.pool is top and actor.fire_count:
                    actor.turn = snapshot.rounds.get(actor.path, 0) + 1
        for actor in engine.net.actors:
            engine._mark(actor)

def replay_plan(engine: Engine, actor: Actor, entry: Any) -> Plan | None:
    """A recorded firing, when its recorded inputs are all there; checks them by digest."""
    if entry.not_replayable:
        _stop_replay(engine, actor, entry, f"notReplayable: {entry.not_replayable}")
        return None
    if entry.fire_count != actor.fire_count + 1:
        _stop_replay(engine, actor, entry, f"out of order: firing {entry.fire_count} recorded, {actor.fire_count + 1} due")
        return None
    for q, count, _ in entry.takes:
        if len(q.items) < count:
            return None
    other = _another_action(engine, actor, entry) if engine.live_queues else None
    if other is not None:
        _stop_replay(engine, actor, entry, other)
        return None
    takes: list[tuple[Queue, list[Item]]] = []
    for q, count, recorded in entry.takes:
        items = [q.items.popleft() for _ in range(count)]
        takes.append((q, items))
        actual = digest([e for _, e in items])
        if actual != recorded:
            give_back(takes)
            _stop_replay(engine, actor, entry, "inputs differ", q, recorded, actual, items)
            return None
    actor.replay.popleft()
    return Plan(None, takes, entry=entry)

def _another_action(engine: Engine, actor: Actor, entry: Any) -> str | None:
    """Why a task's recorded firing must not replay: another of its actions is the one chosen now,
    taking tokens a live firing put, which the recording may not have had there (an edited loop's
    new item before the recorded `finish`). Tokens replayed firings put came as recorded: which
    action had them first was timing, no divergence."""
    spec = actor.spec
    if spec is None or spec.kind != "task" or len(spec.actions) < 2:
        return None
    action = ready_action(actor, spec)
    if action is None or not any(actor.inputs[p].index in engine.live_queues for p in action.consumes):
        return None
    if sorted((actor.inputs[p].index, n) for p, n in action.consumes.items()) == sorted((q.index, n) for q, n, _ in entry.takes):
        return None  # the recorded action itself
    return f"another action is ready now: {action.name}, taking from " + ", ".join(actor.inputs[p].id for p in action.consumes)


def commit_replayed(engine: Engine, actor: Actor, plan: Plan, fire_count: int, ctx: Context | None, start: int) -> None:
    """A replayed firing puts the recorded tokens and restores the recorded state and chat."""
    entry = plan.entry
    if entry.state is not None:
        set_state(actor, entry.state)
    if entry.chat is not None:
        history = getattr(actor.obj, "chat_history", None)
        if isinstance(history, list):
            history.extend(value_of((LAZY, entry.chat)))
    produced = [(q, [(LAZY, e) for e in encs]) for q, encs in entry.puts]
    digests = [(q.index, count, recorded) for q, count, recorded in entry.takes]  # checked on taking
    engine._commit(actor, fire_count, plan.takes, produced, entry.state, entry.chat, ctx, start, True, None, digests,
                   entry.calls)

def _stop_replay(
    engine: Engine,
    actor: Actor,
    entry: Any,
    reason: str,
    queue: Queue | None = None,
    recorded: str | None = None,
    actual: str | None = None,
    items: list[Item] | None = None,
) -> None:
    actor.replay = None
    record = Diverged(
        actor=actor.path,
        fireCount=entry.fire_count,
        reason=reason,
        step=engine.steps + 1,
        queue=queue.id if queue is not None else None,
        recorded=recorded,
        actual=actual,
        recordedPreview=entry.preview(queue) if queue is not None else None,
        actualPreview=_preview_items(items) if items is not None else None,
    )
    engine.diverged.append(record)
    engine._write(record)


def give_up_replay(engine: Engine) -> bool:
    """The run went quiet with firings left to replay: those actors carry on live."""
    left = [a for a in engine.net.actors if a.replay]
    for actor in left:
        entry = actor.replay[0]
        _stop_replay(engine, actor, entry, f"quiescent: the run went quiet with {len(actor.replay)} firing(s) left to replay")
    for actor in engine.net.actors:
        engine._mark(actor)
    return bool(left)


def _preview_items(items: list[Item]) -> str:
    if len(items) == 1:
        return preview(value_of(items[0]))
    return "[" + ", ".join(preview(value_of(i), 30) for i in items) + "]"
