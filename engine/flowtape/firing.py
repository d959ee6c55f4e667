"""One live firing: choose what fires (guards peek first), bind tokens, route what it returns."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .agents import Agents
from .errors import FlowtapeError, TraceCorruption
from .model import ActionSpec, TaskSpec
from .network import LAZY, Actor, Item, Queue
from .schedules import STATE_ATTR, moves_now
from .sites import traceback_site
from .tools import run_tool
from .usage import ModelCall
from .values import decode


class ActionError(FlowtapeError):
    """An action (or guard) broke a rule Flowtape enforces, e.g. returned a dict naming an unknown port."""


@dataclass
class Plan:
    """What a firing takes: chosen under the lock, executed outside it."""

    action: ActionSpec | None
    takes: list[tuple[Queue, list[Item]]]
    values: list[Any] = field(default_factory=list)
    entry: Any = None  # a replay entry, when this firing is replayed


def value_of(item: Item) -> Any:
    """The token as a Python object, decoding it from the tape on first use."""
    value, enc = item
    if value is LAZY:
        try:
            return decode(enc if isinstance(enc, bytes) else bytes(enc))
        except (ValueError, RecursionError) as exc:  # a tape written elsewhere, or edited
            raise TraceCorruption(f"a recorded value cannot be rebuilt: {exc}", 0, "values rebuild") from None
    return value


def _peek(q: Queue, count: int) -> list[Any]:
    items = q.items
    return [value_of(items[i]) for i in range(count)]


def _take(q: Queue, count: int) -> list[Item]:
    pop = q.items.popleft
    return [pop() for _ in range(count)]


def select(actor: Actor) -> Plan | None:
    """The first eligible behaviour of `actor`, its tokens taken; None when nothing can fire."""
    spec = actor.spec
    inputs = actor.inputs
    if spec is None:  # a nested workflow: one token per connected input port
        if not inputs:
            return None if actor.static_used else Plan(None, [])
        if any(not q.items for q in inputs.values()):
            return None
        return Plan(None, [(q, _take(q, 1)) for q in inputs.values()])
    if spec.kind != "task":
        if any(port not in inputs or not inputs[port].items for port in spec.inputs):
            return None
        if not spec.inputs and spec.agent is not None and actor.fire_count >= spec.agent.without_input:
            return None  # an agent with no input: only as many firings as it was given
        takes = [(inputs[port], _take(inputs[port], 1)) for port in spec.inputs]
        return Plan(None, takes, [value_of(t[1][0]) for t in takes])
    action = ready_action(actor, spec)
    if action is None:
        return None
    takes = [(inputs[port], _take(inputs[port], count)) for port, count in action.consumes.items()]
    return Plan(action, takes, [value_of(item) for _, items in takes for item in items])


def ready_action(actor: Actor, spec: TaskSpec) -> ActionSpec | None:
    """The task's first action whose tokens are there and whose guard (and schedule) allow it;
    nothing is taken."""
    inputs = actor.inputs
    moves = moves_now(spec.schedule, actor.obj) if spec.schedule is not None else None
    for action in spec.actions:
        if moves is not None and action.name not in moves:
            continue
        ready = True
        for port, count in action.consumes.items():
            q = inputs.get(port)
            if q is None or len(q.items) < count:
                ready = False
                break
        if not ready:
            continue
        if action.guard is not None:
            peeked = [v for port, count in action.consumes.items() for v in _peek(inputs[port], count)]
            try:
                allowed = action.guard(actor.obj, *peeked)
            except Exception as exc:
                raise GuardFailed(actor, action, exc) from exc
            if not allowed:
                continue
        return action
    return None


class GuardFailed(FlowtapeError):
    """An action's guard raised: the actor's firing fails, and the message says it was the guard."""

    def __init__(self, actor: Actor, action: ActionSpec, exc: Exception) -> None:
        self.actor = actor
        self.action = action
        self.original = exc
        site = traceback_site(exc)
        where = f" (line {site.line})" if site is not None else ""
        super().__init__(f"guard of {actor.path}.{action.name} raised {type(exc).__name__}: {exc}{where}")


def give_back(takes: list[tuple[Queue, list[Item]]]) -> None:
    """Atomic firings: what a failed firing took goes back to the head of its queues, in order."""
    for q, items in reversed(takes):
        q.items.extendleft(reversed(items))


def _route(actor: Actor, action: ActionSpec, result: Any) -> list[tuple[str, Any]]:
    if result is None:
        return []
    produces = action.produces
    if produces is None:
        return [(port, result) for port in actor.spec.outputs] if actor.spec else []
    if action.single is not None and not isinstance(result, dict):  # one token on one port: the usual
        return [(action.single, result)]
    ports = list(produces)
    if isinstance(result, dict) and (len(ports) > 1 or set(result) == set(ports)):
        unknown = sorted(set(result) - set(ports))
        if unknown:
            raise ActionError(
                f"{actor.path}.{action.name} returned a dict with key(s) {', '.join(map(repr, unknown))}, "
                f"but it produces on {', '.join(map(repr, ports))}"
            )
        out: list[tuple[str, Any]] = []
        for port in ports:
            if port in result and result[port] is not None:
                out.extend(_spread(port, produces[port], result[port]))
        return out
    if isinstance(result, (tuple, list)) and len(ports) > 1:
        # by position, None included (as in wfpy): ports fed in step stay aligned for a join
        if len(result) > len(ports):  # (wfpy drops the rest unsaid)
            raise ActionError(
                f"{actor.path}.{action.name} returned {len(result)} values by position, but it produces on "
                f"{len(ports)} ports ({', '.join(map(repr, ports))}): the last {len(result) - len(ports)} would be lost"
            )
        return [pair for port, value in zip(ports, result, strict=False) for pair in _spread(port, produces[port], value)]
    return [pair for port in ports for pair in _spread(port, produces[port], result)]


def _spread(port: str, count: int, value: Any) -> list[tuple[str, Any]]:
    if count > 1 and isinstance(value, (list, tuple)) and len(value) == count:
        return [(port, v) for v in value]
    return [(port, value)]


@dataclass
class Outcome:
    outputs: list[tuple[str, Any]]
    chat: list[dict[str, str]] | None = None
    calls: list[ModelCall] | None = None  # an agent's live model calls


def execute(actor: Actor, plan: Plan, work_dir: Path, base_dir: Path, agents: Agents | None = None) -> Outcome:
    """Run the user's code for one firing; what it puts, per output port."""
    spec = actor.spec
    assert spec is not None
    if spec.kind == "task":
        assert plan.action is not None
        result = plan.action.fn(actor.obj, *plan.values)
        if spec.schedule is not None:  # the action fired: its transition's next state
            setattr(actor.obj, STATE_ATTR, moves_now(spec.schedule, actor.obj)[plan.action.name])
        return copy_file_outputs(actor, Outcome(_route(actor, plan.action, result)), work_dir)
    inputs = dict(zip(spec.inputs, plan.values, strict=True))
    if spec.kind == "agent":
        assert agents is not None  # (agents fire where the run's model clients are: never on a remote worker)
        given, actor.answer = actor.answer, None  # a fork's edited answer stands for this one firing
        answer = agents.ask(actor.path, spec, actor.obj, inputs, work_dir, _stem(actor), given)
        outputs = [(port, value) for port, value in answer.outputs.items() if value is not None and port in spec.outputs]
        return copy_file_outputs(actor, Outcome(outputs, answer.chat, answer.calls or None), work_dir)
    written = run_tool(spec, actor.obj, inputs, work_dir, base_dir, _stem(actor), actor.outputs.keys())
    return copy_file_outputs(actor, Outcome(list(written.items())), work_dir)


def _stem(actor: Actor) -> str:
    """How the files of the firing under way are named in `work/`: `a-b__3__Port.ext`."""
    return f"{actor.path.replace('/', '-')}__{actor.fire_count + 1}"  # (no name holds '-': `a__t` is not `a/t`)


def copy_file_outputs(actor: Actor, outcome: Outcome, work_dir: Path) -> Outcome:
    """A token put on a workflow's `File` output is the file as it is now: a copy in `work/` (as a
    tool's outputs are files of their own), so a producer that rewrites one file at each firing
    does not change what the workflow's consumers read. A path that names no file goes as it is."""
    if not actor.file_outs:
        return outcome
    outputs: list[tuple[str, Any]] = []
    counts: dict[str, int] = {}
    for port, value in outcome.outputs:
        copies = actor.file_outs.get(port)
        if copies is not None and isinstance(value, (str, os.PathLike)) and os.path.isfile(value):
            ext = copies[0] or Path(value).suffix
            work_dir.mkdir(parents=True, exist_ok=True)
            if copies[1] is not None:  # one of the run's outputs: `Out.txt`, then `Out__2.txt`, …
                target = _new_file(work_dir, copies[1], ext)
            else:
                n = counts[port] = counts.get(port, -1) + 1
                target = work_dir / f"{_stem(actor)}__{port}{'_' + str(n) if n else ''}{ext}"
            if Path(value).resolve() != target.resolve():  # (a tool's or an agent's own file already)
                shutil.copyfile(value, target)
            value = str(target)
        outputs.append((port, value))
    return Outcome(outputs, outcome.chat)


def _new_file(folder: Path, name: str, ext: str) -> Path:
    """A file of `folder` no one has taken: `name.ext`, else `name__2.ext`, … (made at once, so
    that two firings under way at the same time never take the same one)."""
    n = 1
    while True:
        target = folder / (f"{name}{ext}" if n == 1 else f"{name}__{n}{ext}")
        try:
            with open(target, "xb"):
                return target
        except FileExistsError:
            n += 1
