"""An actor's state: which of its attributes are state (its fields, and the parameters it
changes), what the tape keeps of it after a firing, and putting a recorded state back on a resume."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from datetime import date, time, timedelta
from decimal import Decimal
from enum import Enum
from itertools import islice
from pathlib import PurePath
from typing import Any
from uuid import UUID

from msgspec import Raw

from .firing import value_of
from .model import TaskSpec
from .network import IMMUTABLE, LAZY, Actor
from .values import SCALARS, NotEncodable, encode, encode_plain

WATCH_LIMIT = 16 << 10  # bytes: a parameter this big encoded is checked for changes after every firing


def parameters(spec: TaskSpec, obj: Any) -> tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, Any, bytes], ...], tuple[tuple[str, Any, bytes], ...]]:
    """An actor's parameters as given, to tell when one changes: those that cannot change in
    place (`settled`: only being given anew changes them) and those that can (`watched`, with
    their encoding: an actor that pops from the list it was given changes it). A changed
    parameter is state from then on, recorded and restored by a resume; one never changed stays
    out, so that a resume keeps the very object given (a sentinel, a registry). One that cannot be
    saved (a client, a lock) is not watched at all, and one bigger than WATCH_LIMIT encoded is
    only checked at the end of the run (`unwatched`: encoding it at every firing would cost more
    than most firings)."""
    attrs = getattr(obj, "__dict__", {})
    settled: list[tuple[str, Any]] = []
    watched: list[tuple[str, Any, bytes]] = []
    unwatched: list[tuple[str, Any, bytes]] = []
    for name in spec.parameters:
        if name not in attrs:
            continue
        value = attrs[name]
        if _frozen(value, 0):
            settled.append((name, value))
            continue
        try:
            enc = encode(value)
        except NotEncodable:
            continue
        (watched if len(enc) <= WATCH_LIMIT else unwatched).append((name, value, enc))
    return tuple(settled), tuple(watched), tuple(unwatched)


PARTS_LIMIT = 10_000  # objects looked at inside one parameter for parts it shares


def mark_shared(actors: list[Actor]) -> None:
    """A watched parameter object given to several actors, or holding an object another one holds
    (`box={"l": shared}` given to two): a resume restores each actor's copy, not one object they
    share, so a change to it cannot be replayed (see `recorded_state`)."""
    holders: dict[int, list[tuple[Actor, str]]] = {}
    objects: dict[int, Any] = {}
    given: dict[tuple[int, str], int] = {}  # (actor, parameter) -> the id of the object given
    for actor in actors:
        for name, value, _ in actor.watched:
            given[(id(actor), name)] = id(value)
            for part in _mutable_parts(value):
                holders.setdefault(id(part), []).append((actor, name))
                objects[id(part)] = part
    for part_id, group in holders.items():
        group = list(dict.fromkeys(group))
        if len(group) < 2:
            continue
        for actor, name in group:
            actor.shared[name] = ", ".join(f"{a.path}.{n}" for a, n in group if (a, n) != (actor, name))
            parts = actor.shared_parts.setdefault(name, [])
            if given[(id(actor), name)] == part_id:
                actor.shared_parts[name] = None  # the very object given: any change to it counts
            elif parts is not None:  # shared inside it: only a change to the shared part counts
                try:
                    parts.append((objects[part_id], encode(objects[part_id])))
                except NotEncodable:
                    actor.shared_parts[name] = None


def _frozen(value: Any, depth: int) -> bool:
    t = type(value)
    if t in IMMUTABLE or isinstance(value, _FROZEN) or isinstance(value, type):  # (a class comes back as itself)
        return True
    return t in (tuple, frozenset) and depth < 8 and all(_frozen(x, depth + 1) for x in value)


_FROZEN = (Enum, date, time, timedelta, Decimal, UUID, PurePath, complex)


def _mutable_parts(value: Any) -> list[Any]:
    """The objects inside `value` (itself included) that can change in place."""
    found = {id(v): v for v, _ in islice(_places(value, "", set()), PARTS_LIMIT)}
    return list(found.values())


def _aliased(actor: Actor, attrs: dict[str, Any], state: dict[str, Any]) -> str | None:
    """Two places in one actor's state (or a field and a parameter) that hold the very same list,
    dict, set or object, at any depth (`self.view = self.items`, `self.by_name["all"] = self.items`):
    the tape saves each as a value, and a resume would give back two."""
    held: dict[int, tuple[str, str]] = {}  # id -> (where, the field it is under)
    seen: set[int] = set()
    names = list(state) + [n for n in actor.spec.parameters if n in attrs and n not in state] if actor.spec else list(state)
    budget = PARTS_LIMIT
    for name in names:
        for value, where in _places(attrs.get(name, state.get(name)), f"{actor.path}.{name}", seen):
            budget -= 1
            if budget < 0:
                return None
            first = held.setdefault(id(value), (where, name))
            if first[0] != where and (name in state or first[1] in state):
                return f"{first[0]} and {where} are one object: the tape saves each as a value, and a resume would give back two"
    return None


def _places(value: Any, where: str, seen: set[int]) -> Iterator[tuple[Any, str]]:
    """Each object that can change in place inside `value` (itself included), with where it is,
    at each place it is held; what an object holds is looked at once (`seen`)."""
    todo = [(value, where)]
    while todo:
        v, at = todo.pop()
        if _frozen(v, 0):
            continue
        if not _unchangeable(v):  # (a NamedTuple, a frozen dataclass: what they hold may change)
            yield v, at
            if id(v) in seen:
                continue
            seen.add(id(v))
        # (scalars, most of a big state, are passed over in C rather than one by one)
        if isinstance(v, dict):
            if not IMMUTABLE.issuperset(map(type, v.values())):
                todo.extend((x, f"{at}[{_key(k)}]") for k, x in v.items() if type(x) not in IMMUTABLE)
            if not IMMUTABLE.issuperset(map(type, v)):  # an object as a key, held elsewhere too
                todo.extend((k, f"{at} key {_key(k)}") for k in v if type(k) not in IMMUTABLE)
        elif isinstance(v, (list, tuple, set, frozenset, deque)):
            if not IMMUTABLE.issuperset(map(type, v)):
                todo.extend((x, f"{at}[{i}]") for i, x in enumerate(v) if type(x) not in IMMUTABLE)
        else:
            todo.extend((x, f"{at}.{k}") for k, x in _attributes(v))


def _unchangeable(value: Any) -> bool:
    """A value that cannot change in place itself (a tuple, a NamedTuple, a frozenset, a frozen
    dataclass): held twice, it is still one value; what it holds is looked at on its own."""
    if isinstance(value, (tuple, frozenset)):
        return True
    params = getattr(type(value), "__dataclass_params__", None)
    return params is not None and bool(params.frozen)


def _attributes(value: Any) -> list[tuple[str, Any]]:
    """An object's attributes: its `__dict__`'s and its slots'."""
    found = list(getattr(value, "__dict__", {}).items())
    for cls in type(value).__mro__[:-1]:
        slots = vars(cls).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(value, name):
                found.append((name, getattr(value, name)))
    return found


def _key(k: Any) -> str:
    text = repr(k)
    return text if len(text) <= 30 else text[:29] + "…"


def recorded_state(actor: Actor) -> tuple[Raw | None, str | None]:
    """The actor's state after a firing, encoded, when it changed."""
    spec = actor.spec
    if spec is None:
        return None, None
    attrs = actor.obj.__dict__
    fixed = spec.fixed_attrs
    if len(attrs) == len(fixed) and not actor.state_enc and not actor.watched:
        for name, value in actor.settled:
            if attrs[name] is not value:
                break
        else:
            return None, None  # a stateless actor: nothing but parameters as given and Flowtape's own fields
    state: dict[str, Any] = {}
    if attrs.keys() != fixed:  # (an actor whose fields are all parameters has no others to gather)
        for k, v in attrs.items():  # (a loop, not a comprehension: this runs at every firing, and 3.11 calls one)
            if k not in fixed:
                state[k] = v
    try:
        changed = bool(actor.watched or actor.given)  # (else: has a parameter been given anew?)
        if not changed:
            for name, value in actor.settled:
                if attrs.get(name, value) is not value:
                    changed = True
                    break
        if changed:
            shared = _changed_parameters(actor, attrs, state)
            if shared is not None:
                return None, shared
        flat = True
        for value in state.values():
            if type(value) not in SCALARS:
                flat = False
                break
        # a state of plain scalars (the usual counter or flag) is written by msgspec as it is, and
        # holds nothing that two fields could share
        enc = encode_plain(state) if flat else encode(state)
    except (NotEncodable, UnicodeEncodeError):  # (a lone surrogate: encode says so, encode_plain raises it as it is)
        return None, _problem(actor.path, state)
    last = actor.state_enc
    if not flat and enc.count(b"[") + enc.count(b"{") > 2:  # two containers at least: one may be held twice
        ids = tuple(map(id, state.values()))
        moved, actor.state_ids = ids != actor.state_ids, ids  # (a field given another object: `self.view = self.items`)
        if moved or enc != last:
            aliased = _aliased(actor, attrs, state)
            if aliased is not None:
                return None, aliased
    if enc == last:
        return None, None
    actor.state_enc = enc
    return Raw(enc), None


def _changed_parameters(actor: Actor, attrs: dict[str, Any], state: dict[str, Any]) -> str | None:
    """Add to `state` the parameters changed so far: given anew, or (`watched`) changed in place.
    A changed one that other actors were given too makes the firing unreplayable: the reason."""
    given = actor.given
    for name, value in actor.settled:
        if name in given or attrs.get(name, value) is not value:
            given.add(name)
            state[name] = attrs.get(name)
    for name, value, enc in actor.watched:
        if name in given or attrs.get(name, value) is not value or encode(attrs[name]) != enc:
            if name in actor.shared and _shared_part_changed(actor, name):
                return (f"{actor.path}.{name} changed, and {actor.shared[name]} holds the very same object: "
                        "a resume restores each actor's own copy, never an object actors share")
            given.add(name)
            state[name] = attrs.get(name)
    return None


def _shared_part_changed(actor: Actor, name: str) -> bool:
    """Whether what `name` shares with other actors changed: the parameter itself when it is the
    very object another was given, else the parts inside it others hold too."""
    parts = actor.shared_parts.get(name)
    if parts is None:
        return True
    try:
        return any(encode(part) != enc for part, enc in parts)
    except NotEncodable:
        return True


def _problem(path: str, state: dict[str, Any]) -> str:
    """Name the attribute that cannot be saved: `review._handle: a Lock cannot be saved`."""
    for key, value in state.items():
        try:
            encode(value)
        except NotEncodable as exc:
            return str(exc.with_prefix(f"{path}.{key}"))
    return f"{path}: the state cannot be saved"


def set_state(actor: Actor, raw: Any) -> None:
    """Put an actor's recorded state back: its fields as recorded (one the firing deleted goes),
    and the parameters it had changed by then (those it had not keep the very object given)."""
    state = value_of((LAZY, raw))
    attrs = actor.obj.__dict__
    fixed = actor.spec.fixed_attrs if actor.spec is not None else frozenset()
    for key in [k for k in attrs if k not in fixed and k not in state]:
        del attrs[key]
    for key, value in state.items():
        setattr(actor.obj, key, value)
    actor.given = {key for key in state if key in fixed}
    actor.state_enc = bytes(raw)


def big_parameters_changed(actors: list[Actor]) -> list[str]:
    """Parameters too big to watch at every firing (network.WATCH_LIMIT) that changed anyway."""
    said = []
    for actor in actors:
        for name, value, enc in actor.unwatched:
            now = actor.obj.__dict__.get(name)
            try:
                changed = now is not value or encode(now) != enc
            except NotEncodable:
                changed = True
            if changed:
                said.append(f"parameter {actor.path}.{name} ({len(enc) >> 10} KB) changed during the run, but one that "
                            "big is not watched at every firing: the tape does not hold the change and a resume would "
                            "not see it (keep data an actor changes in a field with a default)")
    return said
