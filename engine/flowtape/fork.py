"""Forking a run with edits: at the step resumed at, a token waiting in a queue, a field of an
actor's state or the answer an agent gives next (the recorded run's answer there, changed) is given
another value, then the run goes on live.

Every edit is checked before anything runs (the queue, the index, the actor, the field, the
value's type) and refused naming what is wrong. Each becomes an `edit` record (tape.Edited)
written right after the copied prefix, applied to the restored run by `edits.apply`, as verify
applies it: a forked tape tells its own story and verifies."""

from __future__ import annotations

import json
import re
import typing
from collections import deque
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import Raw

from . import edits
from .agents.prompts import BadAnswer, answered
from .errors import ResumeRefused, UsageError
from .fits import FITS_CHECKED, fits, shaped
from .network import Actor, Network, Queue
from .ports import type_name
from .replay import ReplayPlan, Snapshot
from .rundir import TAPE
from .state import recorded_state
from .tape import Edited, Firing, Step, Tape, read_tape
from .values import NotEncodable, encode, preview

if TYPE_CHECKING:
    from .model import TaskSpec

_TOKEN = re.compile(r"(?P<queue>.+)\[(?P<index>-?\d+)\]")


def parse_set(text: str) -> tuple[str, Any]:
    """`--set WHERE=VALUE`: VALUE is JSON, else the text itself (as `--input` takes it)."""
    where, sep, raw = text.partition("=")
    if not sep or not where.strip():
        raise UsageError(f"--set takes WHERE=VALUE (QUEUE[i]=JSON, ACTOR.field=JSON or AGENT.answer=JSON), not {text!r}")
    try:
        return where.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return where.strip(), raw


def parse_sets(texts: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for text in texts:
        where, value = parse_set(text)
        if where in found:
            raise UsageError(f"--set {where} is given twice: give each edit once")
        found[where] = value
    return found


@dataclass
class _Token:
    queue: Queue
    index: int


@dataclass
class _Field:
    actor: Actor
    name: str


@dataclass
class _Answer:
    actor: Actor
    port: str | None  # one output port's answer; None: the answer on every port (a dict by port, or one value)


def _refuse(what: str, why: str) -> ResumeRefused:
    return ResumeRefused(f"cannot fork: --set {what}: {why}")


def _queue_named(name: str, net: Network, what: str) -> Queue:
    """A queue by its id (`a.Out->b.In`) or by its consumer's input port (`b.In`: one edge feeds it)."""
    if name in net.by_id:
        return net.by_id[name]
    fed = [q for q in net.queues if q.id.endswith("->" + name)]
    if len(fed) == 1:
        return fed[0]
    waiting = ", ".join(q.id for q in net.queues if q.consumer is not None) or "none"
    raise _refuse(what, f"no queue {name!r} (queues: {waiting})")


def _target(what: str, net: Network) -> _Token | _Field | _Answer:
    token = _TOKEN.fullmatch(what)
    if token is not None:
        queue = _queue_named(token["queue"], net, what)
        if queue.consumer is None:
            raise _refuse(what, f"{queue.id} is an output of the run: nothing takes from it, so nothing would see the edit")
        return _Token(queue, int(token["index"]))
    path, dot, rest = what.rpartition(".")  # (an actor's path has no dot: `outer/inner/leaf`)
    if not dot:
        raise _refuse(what, "name a token (QUEUE[i]), a field (ACTOR.field) or an agent's answer (AGENT.answer)")
    if ".answer." in what or what.endswith(".answer"):  # AGENT.answer[.PORT]
        path, _, port = what.partition(".answer")
        actor = _actor(path, net, what)
        if actor.kind != "agent":
            raise _refuse(what, f"{actor.path} is a {actor.kind}, not an agent: only an agent has a recorded answer")
        name = port[1:] or None
        assert actor.spec is not None
        if name is not None and name not in actor.spec.outputs:
            raise _refuse(what, f"{actor.spec.name} has no output port {name!r} (its outputs: {', '.join(actor.spec.outputs)})")
        return _Answer(actor, name)
    actor = _actor(path, net, what)
    return _Field(actor, rest)


def _actor(path: str, net: Network, what: str) -> Actor:
    actor = net.by_path.get(path)
    if actor is None:
        raise _refuse(what, f"no actor {path!r} (actors: {', '.join(a.path for a in net.actors)})")
    if actor.spec is None:
        raise _refuse(what, f"{actor.path} is a {actor.kind}: it keeps no state to edit")
    return actor


def _encoded(what: str, value: Any, expected: Any, where: str) -> tuple[Any, bytes]:
    value = shaped(value, expected)
    if expected is not None and not fits(value, expected):
        raise _refuse(what, f"{where} takes {type_name(expected)}, not {type(value).__name__} {preview(value, 40)}")
    try:
        return value, encode(value)
    except NotEncodable as exc:
        raise _refuse(what, f"the value cannot be recorded on the tape: {exc}") from None


def _takers(queue: Queue) -> list[tuple[str, Any]]:
    """The typed ports a token of the queue reaches, and their types: its consumer's, or, for a
    nested workflow's input, those of the actors inside it that it feeds."""
    consumer = queue.consumer
    if consumer is None:
        return []
    if consumer.spec is not None:
        port = consumer.spec.inputs.get(queue.port)
        return [(f"port {queue.port} of {consumer.path}", port.type)] if port is not None else []
    return [taker for inner in consumer.seeds.get(queue.port, []) for taker in _takers(inner)]


def _check_items(what: str, loop: Actor, value: Any) -> None:
    """A loop's `iter` token is what it goes over: a collection, whose items fit the ports it
    hands them to."""
    if not isinstance(value, (list, tuple, set, frozenset, dict, str)):
        raise _refuse(what, f"loop {loop.path} goes over its iter token: a list (or another collection), "
                            f"not {type(value).__name__} {preview(value, 40)}")
    for queue in loop.outputs.get("item", []):
        for where, expected in _takers(queue):
            for item in islice(value, FITS_CHECKED):
                if not fits(shaped(item, expected), expected):
                    raise _refuse(what, f"loop {loop.path} hands each item to {where}, which takes {type_name(expected)}, "
                                        f"not {type(item).__name__} {preview(item, 40)}")


def initial_state(actor: Actor) -> Raw | None:
    """The state an actor that has not fired by the step starts from, encoded (it has none on the
    tape): its class's fields as the flow declares them, each at its default. None: it has none."""
    return recorded_state(actor)[0]


def initial_states(net: Network) -> dict[str, Raw]:
    """Every actor's initial_state, by path, for those that have one (what `flowtape/editables`
    lists of an actor that has not fired: the language server asks a child process for it)."""
    return {actor.path: state for actor in net.actors if (state := initial_state(actor)) is not None}


def _field_type(actor: Actor, name: str) -> Any:
    assert actor.spec is not None
    try:
        return typing.get_type_hints(actor.spec.cls).get(name)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: the type goes unchecked
        return None


class _Fork:
    """The edits of one fork, planned on the snapshot at its step, in the order given: each sees
    the ones before it."""

    def __init__(self, plan: ReplayPlan, net: Network) -> None:
        self.plan, self.net = plan, net
        self.snap = plan.snapshot or Snapshot([], [[] for _ in net.queues], {}, {}, {}, 0, 0)  # (only answers without one)
        self.queues: list[deque[Raw]] = [deque(q) for q in self.snap.queues]
        self.ids = [q.id for q in net.queues]
        self.records: list[Edited] = []
        self.answers: dict[str, Raw] = {}  # the agents' next answers, by path

    def add(self, record: Edited) -> None:
        edits.apply(record, self.queues, self.ids, self.snap.states, self.answers)
        self.records.append(record)

    def token(self, what: str, t: _Token, value: Any) -> None:
        held = self.queues[t.queue.index]
        index = t.index + len(held) if t.index < 0 else t.index
        if not 0 <= index < len(held):
            raise _refuse(what, f"{t.queue.id} holds {len(held)} token(s) at step {self.plan.at_step}"
                          + (f" (0 to {len(held) - 1})" if held else ": there is no token to edit"))
        consumer = t.queue.consumer
        if consumer is not None and consumer.kind == "loop" and t.queue.port == "iter":
            _check_items(what, consumer, value)
        enc = b""
        for where, expected in _takers(t.queue) or [(f"port {t.queue.port} of {consumer.path if consumer else '?'}", None)]:
            _, enc = _encoded(what, value, expected, where)
        self.add(Edited(step=self.plan.at_step, what=what, queue=t.queue.index, index=index,
                        old=edits.digest_of(held[index]), new=edits.digest_of(enc), value=Raw(enc)))

    def field(self, what: str, f: _Field, value: Any) -> None:
        actor, spec = f.actor, f.actor.spec
        assert spec is not None
        recorded = self.snap.states.get(actor.path)
        before = recorded if recorded is not None else initial_state(actor)
        fields = msgspec.json.decode(bytes(before), type=dict[str, Raw]) if before else {}
        if f.name not in fields and f.name not in spec.state_defaults:
            known = sorted(set(fields) | set(spec.state_defaults))
            said = f"its fields: {', '.join(known)}" if known else "it has none"
            param = " (a parameter it never changed is no state)" if f.name in spec.parameters else ""
            raise _refuse(what, f"{actor.path} ({spec.name}) has no field {f.name!r} in its state{param}; {said}")
        _, enc = _encoded(what, value, _field_type(actor, f.name), f"field {f.name} of {spec.name}")
        state = msgspec.json.encode({**fields, f.name: Raw(enc)})
        self.add(Edited(step=self.plan.at_step, what=what, actor=actor.path, field=f.name,
                        old=edits.field_digest(recorded, f.name), new=edits.digest_of(enc),
                        value=Raw(state)))

    def answer(self, what: str, a: _Answer, value: Any) -> None:
        """The agent's next answer, the first after the step: given here instead of asked of its
        transport (its chat records it, as any answer). `old` is the digest of the answer the
        recorded run's firing gave there, when it had one."""
        actor, spec = a.actor, a.actor.spec
        assert spec is not None
        by_port = a.port is None and isinstance(value, dict) and bool(value) and set(value) <= set(spec.outputs)
        given = {a.port: value} if a.port is not None else (dict(value) if by_port else dict.fromkeys(spec.outputs, value))
        recorded = _recorded_answer(self.plan, actor.path, spec)
        answer = {**{p: v for p, v in (recorded or {}).items() if p in spec.outputs}, **given} if a.port is not None else given
        for port, port_value in given.items():
            _encoded(what, port_value, spec.outputs[port].type, f"output {port} of {spec.name}")
        _, enc = _encoded(what, answer, None, "an answer")
        old = edits.digest_of(encode(recorded)) if recorded is not None else ""
        self.add(Edited(step=self.plan.at_step, what=what, actor=actor.path, answer=True, old=old,
                        new=edits.digest_of(enc), value=Raw(enc)))

    def finish(self) -> None:
        if self.plan.snapshot is not None:
            self.snap.queues = [list(q) for q in self.queues]


def _recorded_answer(plan: ReplayPlan, path: str, spec: TaskSpec) -> dict[str, Any] | None:
    """What the agent's first firing after the step answered in the recorded run, by output port
    (from its chat entry: the model's text, read as agents.ask read it); None when it did not fire again."""
    tape = read_tape(plan.source / TAPE, warn=False)
    steps = 0
    for record in tape.records():
        if isinstance(record, Step):
            steps = record.step
        elif isinstance(record, Firing) and record.actor == path and steps >= plan.at_step and record.chat:
            entry = msgspec.json.decode(bytes(record.chat))
            try:
                return answered(spec, str(entry[-1]["content"]))
            except (BadAnswer, IndexError, KeyError, TypeError):
                return None
    return None


def install_answers(records: list[Edited], net: Network) -> None:
    """Each agent whose next answer was edited gives it at its next firing (firing.execute)."""
    for record in records:
        if record.answer:
            net.by_path[record.actor].answer = msgspec.json.decode(bytes(record.value))


def plan_fork(edit_values: dict[str, Any], plan: ReplayPlan, net: Network) -> list[Edited]:
    """Check every edit against the run at the step and apply them to the plan's snapshot; the
    records the fork's tape holds. ResumeRefused, naming what does not fit, before anything runs."""
    if not edit_values:
        return []
    if plan.at_step == 0:
        raise ResumeRefused("cannot fork at step 0: nothing has run yet; give other inputs instead (--input)")
    fork = _Fork(plan, net)
    for what, value in edit_values.items():
        target = _target(what, net)
        if isinstance(target, _Answer):
            fork.answer(what, target, value)
            continue
        if plan.snapshot is None:  # an answer is given at the agent's next live firing; a value must be put in place
            why = plan.no_snapshot or "it cannot be restored from its tape in one go"
            raise ResumeRefused(
                f"cannot fork run {plan.source_id} at step {plan.at_step} with --set {what}: editing a token or a field "
                f"needs the run as it stood at that step, whole, and there {why}; fork at another step "
                f"(`flowtape show {plan.source_id}` lists them), or edit an agent's answer (AGENT.answer), which needs no more"
            )
        if isinstance(target, _Token):
            fork.token(what, target, value)
        else:
            fork.field(what, target, value)
    fork.finish()
    return fork.records


def described(records: list[Edited]) -> list[str]:
    """What each edit asked for, once (an answer edit is several records)."""
    return list(dict.fromkeys(r.what for r in records))


def fork_edits(tape: Tape) -> int:
    """How many edits the tape's run made itself: those at the step it resumed at (a resume of a
    fork copies its source's edits, made at an earlier step)."""
    at = tape.header.resumedAtStep
    return len(described([r for r in tape.records() if isinstance(r, Edited) and r.step == at]))

