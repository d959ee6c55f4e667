"""The standard library's containers a flow keeps in state or puts as a token — `OrderedDict`,
`Counter`, `defaultdict` with a plain factory, `deque` — and objects of the flow's own classes
that say their state themselves (`__getstate__` / `__setstate__`), as tagged values.

values.py walks a value and owns the tagging rules (what may be rebuilt, depth, paths in
errors); this module knows only these shapes: how each is written and how it is rebuilt
exactly (order, counts, factory, `maxlen`). It imports nothing of Flowtape's, so values.py can
hand it the walk's own steps.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Callable
from typing import Any

# The classes a defaultdict's factory is named by (other classes are `type` values, which values.py
# saves and rebuilds only when builtin or the flow's own; a lambda or a function cannot be saved).
FACTORIES: dict[str, type] = {
    t.__name__: t
    for t in (list, dict, set, frozenset, tuple, int, float, complex, str, bytes, bool, OrderedDict, Counter, deque)
}
_FACTORY_NAMES = {t: name for name, t in FACTORIES.items()}

TYPES = frozenset({OrderedDict, Counter, defaultdict, deque})  # exact types: a subclass keeps its class


def encode(v: Any, tag: str, pairs: Callable[[Any], list[list[object]]], items: Callable[[Any], list[object]],
           factory: Callable[[type], object]) -> object:
    """One of TYPES as a tagged value, given the walk's steps (bound to the value's depth): a
    mapping's items as encoded [key, value] pairs, an iterable's items, a class as a value."""
    t = type(v)
    if t is deque:
        return {tag: "deque", "v": items(v), **({"maxlen": v.maxlen} if v.maxlen is not None else {})}
    if t is defaultdict:
        made = v.default_factory
        name = _FACTORY_NAMES.get(made) if isinstance(made, type) else None
        said = name if name is not None or made is None else factory(made)
        return {tag: "defaultdict", "factory": said, "v": pairs(v)}
    return {tag: "odict" if t is OrderedDict else "counter", "v": pairs(v)}


def rebuild(name: str, d: dict[str, Any], decode: Callable[[Any], Any]) -> object:
    """The container a tag `name` holds (its payload `d["v"]`); a TypeError or ValueError for a
    malformed one (a payload of another shape, a factory no plain class names)."""
    v = d["v"]
    if not isinstance(v, list):
        raise TypeError(f"its payload is {type(v).__name__}, not a list")
    if name == "deque":
        maxlen = d.get("maxlen")
        if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
            raise ValueError(f"maxlen {maxlen!r} is no length")
        return deque([decode(x) for x in v], maxlen)
    got = [(decode(k), decode(x)) for k, x in v]
    if name == "odict":
        return OrderedDict(got)
    if name == "counter":
        return Counter(dict(got))
    factory = d.get("factory")
    if isinstance(factory, str):
        if factory not in FACTORIES:
            raise ValueError(f"{factory!r} is no factory a tape may name")
        made: Any = FACTORIES[factory]
    elif factory is None:
        made = None
    else:
        made = decode(factory)  # a `type` value: values.py rebuilds only the flow's own classes
        if not isinstance(made, type):
            raise ValueError("its factory is no class")
    return defaultdict(made, got)


TAGS = frozenset({"odict", "counter", "defaultdict", "deque"})
UNORDERED = frozenset({"counter", "defaultdict"})  # pairs whose order digests ignore, as a dict's


def own_state(t: type) -> bool:
    """Whether the class says its state itself: it defines `__setstate__`, or a `__getstate__`
    of its own (Python 3.11 gives every object a default one, which says nothing new)."""
    return hasattr(t, "__setstate__") or getattr(t, "__getstate__", object.__getstate__) is not object.__getstate__


def restore_state(obj: Any, state: Any) -> None:
    """Give `obj` (made with object.__new__) its state as pickle would: its own `__setstate__`,
    else a dict of attributes, or a pair (attributes, slots)."""
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    attrs, slots = state if isinstance(state, tuple) and len(state) == 2 else (state, None)
    for part in (attrs, slots):
        if part is None:
            continue
        if not isinstance(part, dict):
            raise TypeError(f"a state of {type(part).__name__} cannot be given without __setstate__")
        for k, x in part.items():
            object.__setattr__(obj, k, x)
