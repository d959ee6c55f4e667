"""A task's own action order, declared as in wfpy by two optional inner classes:

    class Schedule:                      # a state machine over the actions
        initial = "s1"
        transitions = [("s1", "a", "s2"), ("s2", "b", "s1")]   # (state, action, next state)

    class Priority:                      # the order actions are tried in
        rules = [["urgent"], ["normal", "bulk"]]

In a state, only the actions with a transition from it may fire, and firing one moves the task
to that transition's next state. The current state is part of the actor's state
(`_ft_schedule_state`), so the tape records it and a resume restores it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import FlowError
from .sites import Site

STATE_ATTR = "_ft_schedule_state"


@dataclass(frozen=True)
class Schedule:
    initial: str
    moves: dict[str, dict[str, str]]  # state -> action name -> next state


def collect_schedule(cls: type, names: list[str], site: Site) -> Schedule | None:
    inner = getattr(cls, "Schedule", None)
    if inner is None:
        return None

    def refuse(what: str) -> FlowError:
        return FlowError(f"{cls.__name__}.Schedule: {what}", site.file, site.line)

    initial = getattr(inner, "initial", None)
    if not isinstance(initial, str) or not initial.strip():
        raise refuse("`initial` must be a state's name (a non-empty string)")
    transitions = getattr(inner, "transitions", None)
    if not isinstance(transitions, (list, tuple)):
        raise refuse("`transitions` must be a list of (state, action, next state)")
    moves: dict[str, dict[str, str]] = {}
    for index, move in enumerate(transitions):
        if not (isinstance(move, (list, tuple)) and len(move) == 3 and all(isinstance(x, str) and x.strip() for x in move)):
            raise refuse(f"transitions[{index}] must be (state, action, next state), three non-empty strings")
        state, name, after = (x.strip() for x in move)
        if name not in names:
            raise refuse(f"transitions[{index}] names no action of the task: {name!r} (its actions: {', '.join(names)})")
        if name in moves.get(state, {}):
            raise refuse(f"two transitions for action {name!r} in state {state!r}")
        moves.setdefault(state, {})[name] = after
    return Schedule(initial.strip(), moves)


def by_priority(cls: type, actions: list[Any], site: Site) -> list[Any]:
    """The actions in the order a `Priority` inner class gives (the others after, as defined)."""
    inner = getattr(cls, "Priority", None)
    if inner is None:
        return actions
    rules = getattr(inner, "rules", None)
    if not isinstance(rules, (list, tuple)) or not all(isinstance(group, (list, tuple)) for group in rules):
        raise FlowError(f"{cls.__name__}.Priority: `rules` must be a list of lists of action names", site.file, site.line)
    names = [a.name for a in actions]
    rank: dict[str, int] = {}
    for name in (str(n).strip() for group in rules for n in group):
        if name not in names:
            raise FlowError(f"{cls.__name__}.Priority names no action of the task: {name!r}", site.file, site.line)
        if name in rank:
            raise FlowError(f"{cls.__name__}.Priority names {name!r} twice", site.file, site.line)
        rank[name] = len(rank)
    return sorted(actions, key=lambda a: (rank.get(a.name, len(rank)), names.index(a.name)))


def moves_now(schedule: Schedule, obj: Any) -> dict[str, str]:
    """The actions that may fire now, each with the state it leads to."""
    return schedule.moves.get(vars(obj).get(STATE_ATTR, schedule.initial), {})
