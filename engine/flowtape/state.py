"""An actor's state: what the tape keeps of it after a firing (its fields, and the parameters it
changed), and putting a recorded state back on a resume."""

from __future__ import annotations

from typing import Any

from msgspec import Raw

from .firing import value_of
from .network import LAZY, Actor
from .values import NotEncodable, encode


def recorded_state(actor: Actor) -> tuple[Raw | None, str | None]:
    """The actor's state after a firing, encoded, when it changed."""
    spec = actor.spec
    if spec is None:
        return None, None
    attrs = actor.obj.__dict__
    fixed = actor.fixed
    if len(attrs) == len(fixed) and not actor.state_enc and not actor.watched:
        for name, value in actor.settled:
            if attrs[name] is not value:
                break
        else:
            return None, None  # a stateless actor: nothing but parameters as given and Flowtape's own fields
    state = {k: v for k, v in attrs.items() if k not in fixed}
    try:
        if actor.settled or actor.watched:
            shared = _changed_parameters(actor, attrs, state)
            if shared is not None:
                return None, shared
        enc = encode(state)
    except NotEncodable:
        return None, _problem(actor.path, state)
    if enc == actor.state_enc:
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
            if name in actor.shared:
                return (f"{actor.path}.{name} changed, and it is the very object {actor.shared[name]} is too: "
                        "a resume restores each actor's own copy, never an object actors share")
            given.add(name)
            state[name] = attrs.get(name)
    return None


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
    for key in [k for k in attrs if k not in actor.fixed and k not in state]:
        del attrs[key]
    for key, value in state.items():
        setattr(actor.obj, key, value)
    actor.given = {key for key in state if key in actor.fixed}
    actor.state_enc = bytes(raw)
