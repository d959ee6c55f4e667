"""Tagged JSON for tape values: encode, decode, digest and preview tokens and actor state.

The tape must stay readable by tools that do not have the flow's code, so values are stored as
plain JSON with small ``{"$t": tag, "v": payload}`` objects for whatever JSON cannot express.
Pickle is never used, and decoding only looks classes up in modules that are already imported:
reading a tape must never import a module or run code named by the data. Objects are rebuilt
(and saved) only for the flow's own classes: an object of the standard library's or of an
installed package, rebuilt with attributes a tape chose, can do anything (delete a file when it
is collected, signal a process), and the tape is not code the user wrote.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from enum import Enum, Flag
from functools import reduce
from operator import or_
from pathlib import Path, PurePath
from typing import Any, cast
from uuid import UUID
from zoneinfo import ZoneInfo

import msgspec

from . import stdstate
from .classrefs import FLOW, NotEncodable, checking, is_own, lookup, not_own, plan_of, ref_of, use_flow_module

__all__ = ["FLOW", "NotEncodable", "Opaque", "canonical", "decode", "encode",
           "from_json", "preview", "preview_json", "preview_raw", "to_json", "use_flow_module"]

TAG = "$t"
MAX_DEPTH = 200
# A reusable Encoder skips per-call option parsing. Keys stay in insertion order, so a dict comes
# back as it was built (its order is something a flow can see); digests sort them (`digest`).
_enc: Callable[[object], bytes] = msgspec.json.Encoder().encode
encode_plain = _enc  # `encode` of a value of plain scalars (SCALARS, and dicts and lists of them): msgspec's own
_enc_sorted: Callable[[object], bytes] = msgspec.json.Encoder(order="sorted").encode
_dec: Callable[[bytes | str], Any] = msgspec.json.Decoder().decode
_SCALAR = SCALARS = frozenset({str, int, bool, type(None)})  # what msgspec writes as the tagged JSON has it
_NUMBERS = frozenset({int, bool, float})
_DEFAULT_PATH = type(Path())
_MISSING = object()


class Opaque:
    """A tagged value whose class is not loaded; keeps the raw JSON so it re-encodes unchanged."""

    __slots__ = ("cls", "data", "raw")

    def __init__(self, cls: str, data: object = None, raw: dict[str, Any] | None = None) -> None:
        self.cls, self.data, self.raw = cls, data, raw

    def __repr__(self) -> str:
        return f"<{self.cls}>" if self.data is None else f"<{self.cls} {preview(self.data, 60)}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Opaque):
            return NotImplemented
        return (self.cls, self.data) == (other.cls, other.data)

    def __hash__(self) -> int:
        # Opaques land in sets and dict keys (e.g. unloaded enum members); data is often a dict.
        return hash((self.cls, self.data)) if type(self.data) is str else hash(self.cls)


def _plain(v: Any, depth: int) -> bool:
    """True when msgspec can write v as is; this check is the whole cost of the common case."""
    t = type(v)
    if t in _SCALAR:
        return True
    if t is float:
        return bool(v - v == 0.0)  # false for nan and +-inf
    if depth >= MAX_DEPTH:
        return False  # also ends cycles; the slow path reports them properly
    if t is list:
        if len(v) > 32:  # set(map(type, ...)) runs in C: worth its setup cost on long lists
            kinds = set(map(type, v))
            if kinds <= _SCALAR:
                return True
            if kinds <= _NUMBERS:
                try:  # any nan or inf makes the sum non-finite; a false alarm takes the slow path
                    total = sum(v)
                except OverflowError:
                    return False
                return bool(total - total == 0)
        items = v
    elif t is dict and TAG not in v:
        for k in v:
            if type(k) is not str:
                return False
        items = v.values()
    else:
        return False
    for x in items:
        tx = type(x)
        if tx not in _SCALAR and not (tx is float and x - x == 0.0) and not _plain(x, depth + 1):
            return False
    return True


def _conv(v: Any, depth: int, active: set[int]) -> object:
    t = type(v)
    if t in _SCALAR:
        return v
    if t is float:
        return v if v - v == 0.0 else {TAG: "float", "v": repr(v)}
    if depth >= MAX_DEPTH:
        raise NotEncodable(f"a value nested deeper than {MAX_DEPTH} levels cannot be saved")
    key = id(v)
    if key in active:
        raise NotEncodable("a cycle cannot be saved (the value contains itself)")
    active.add(key)
    try:
        fn = _BY_TYPE.get(t)
        return fn(v, depth + 1, active) if fn is not None else _conv_other(v, t, depth + 1, active)
    finally:
        active.discard(key)


def _list(items: Iterable[Any], d: int, active: set[int]) -> list[object]:
    out: list[object] = []
    try:
        for x in items:
            out.append(x if type(x) in _SCALAR else _conv(x, d, active))
    except NotEncodable as e:
        raise e.with_prefix(f"[{len(out)}]") from None
    return out


def _dict(v: dict[Any, Any], d: int, active: set[int], attrs: bool = False) -> object:
    # Pair form keeps non-str keys and keeps user dicts from ever looking like tags; like plain
    # objects, pairs keep the dict's insertion order.
    if TAG in v or not all(type(k) is str for k in v):
        return {TAG: "dict", "v": _pairs(v, d, active)}
    out: dict[str, object] = {}
    k: Any = None
    try:
        for k, x in v.items():
            out[k] = x if type(x) in _SCALAR else _conv(x, d, active)
    except NotEncodable as e:
        raise e.with_prefix(f".{k}" if attrs else f"[{preview(k, 40)}]") from None
    return out


def _pairs(v: dict[Any, Any], d: int, active: set[int]) -> list[list[object]]:
    pairs: list[list[object]] = []
    k: Any = None
    in_key = False
    try:
        for k, x in v.items():
            in_key = True
            ck = _conv(k, d, active)
            in_key = False
            pairs.append([ck, _conv(x, d, active)])
    except NotEncodable as e:
        raise e.with_prefix("[<key>]" if in_key else f"[{preview(k, 40)}]") from None
    return pairs


def _std(v: Any, d: int, active: set[int]) -> object:
    def factory(made: Any) -> object:
        if not isinstance(made, type):
            raise NotEncodable(f"a defaultdict whose factory is a {type(made).__name__} cannot be saved (give it a class: list, int...)")
        return _conv(made, d, active)

    return stdstate.encode(v, TAG, lambda m: _pairs(m, d, active), lambda it: _list(it, d, active), factory)


def _set(v: set[Any] | frozenset[Any], d: int, active: set[int]) -> object:
    items = _list(v, d, active)
    items.sort(key=canonical)  # set iteration order depends on hashing; the tape must not
    return {TAG: "set" if type(v) is set else "frozenset", "v": items}


def _clock(tag: str, v: datetime | time) -> object:
    # isoformat drops fold, which decides which of a repeated (DST) hour is meant, and the zone:
    # an offset is not a zone (its DST rules), nor does a time's offset say its zone's name.
    out: dict[str, object] = {TAG: tag, "v": v.isoformat()}
    if v.fold:
        out["fold"] = 1
    zone = v.tzinfo
    if isinstance(zone, ZoneInfo) and zone.key:
        out["tz"] = zone.key
    elif isinstance(zone, timezone) and zone is not UTC:
        name = zone.tzname(None)
        if name != timezone(zone.utcoffset(None)).tzname(None):  # a name of its own: timezone(td, "CET")
            out["tzname"] = name
    return out


# Exact types only: subclasses (IntEnum, NamedTuple, Path...) must keep their class.
_BY_TYPE: dict[type, Callable[[Any, int, set[int]], object]] = {
    list: _list, dict: _dict, set: _set, frozenset: _set,
    tuple: lambda v, d, a: {TAG: "tuple", "v": _list(v, d, a)},
    bytes: lambda v, d, a: {TAG: "bytes", "v": base64.b64encode(v).decode()},
    complex: lambda v, d, a: {TAG: "complex", "v": [_conv(v.real, d, a), _conv(v.imag, d, a)]},
    datetime: lambda v, d, a: _clock("datetime", v), time: lambda v, d, a: _clock("time", v),
    date: lambda v, d, a: {TAG: "date", "v": v.isoformat()},
    timedelta: lambda v, d, a: {TAG: "timedelta", "v": [v.days, v.seconds, v.microseconds]},
    Decimal: lambda v, d, a: {TAG: "decimal", "v": str(v)},
    UUID: lambda v, d, a: {TAG: "uuid", "v": str(v)},
    **dict.fromkeys(stdstate.TYPES, _std),
}


def _conv_other(v: Any, t: type, d: int, active: set[int]) -> object:
    if isinstance(v, Enum):
        name, members = v.name, cast(Any, t).__members__
        if name is not None and (name in members or (isinstance(v, Flag) and all(n in members for n in name.split("|")))):
            return {TAG: "enum", "cls": ref_of(t), "v": name}
        # a member no name tells (a flag's unnamed bits, one that _missing_ made): by its value
        return {TAG: "enum", "cls": ref_of(t), "v": None, "value": _conv(v.value, d + 1, active)}
    if issubclass(t, type):  # not isinstance(v, type): list[int] claims to be a type
        if v.__module__ != "builtins" and not is_own(v):
            raise NotEncodable(not_own(ref_of(v)))  # a tape would refuse to rebuild it: say so when it is put
        return {TAG: "type", "v": ref_of(v)}
    if isinstance(v, PurePath):
        if t is _DEFAULT_PATH:
            return {TAG: "path", "v": str(v)}
        return {TAG: "path", "v": str(v), "cls": ref_of(t)}
    if t is Opaque:
        if v.raw is None:
            raise NotEncodable("an Opaque without its original data cannot be saved")
        return v.raw
    if isinstance(v, tuple) and hasattr(t, "_fields"):  # NamedTuple: must come back as its class
        return {TAG: "namedtuple", "cls": ref_of(t), "v": _list(v, d, active)}
    ref, fields, slots = plan_of(t)
    if stdstate.own_state(t):  # it says its state itself, as pickle would ask it to
        try:
            state = v.__getstate__()
        except Exception as exc:  # noqa: BLE001 - whatever the flow's own __getstate__ raises
            raise NotEncodable(f"{t.__name__}.__getstate__ raised {type(exc).__name__}: {exc}") from None
        return {TAG: "object", "cls": ref, "state": _conv(state, d, active)}
    if fields is not None:
        # Unset init=False fields and empty slots are skipped rather than failing.
        got = {n: x for n in fields if (x := getattr(v, n, _MISSING)) is not _MISSING}
        data: dict[str, object] = {TAG: "dataclass", "cls": ref, "v": _dict(got, d, active, attrs=True)}
        more = {n: x for n, x in getattr(v, "__dict__", {}).items()  # set in __post_init__, say
                if n not in got and not isinstance(getattr(t, n, None), functools.cached_property)}  # (a cache: rebuilt)
        if more:
            data["more"] = _dict(more, d, active, attrs=True)
        return data
    out: dict[str, object] = {TAG: "object", "cls": ref, "v": _dict(getattr(v, "__dict__", {}), d, active, attrs=True)}
    if slots:
        got = {n: x for n in slots if (x := getattr(v, n, _MISSING)) is not _MISSING}
        out["slots"] = _dict(got, d, active, attrs=True)
    return out


def to_json(value: object) -> object:
    """Convert value to JSON-native data, tagging whatever JSON cannot hold."""
    return value if _plain(value, 0) else _conv(value, 0, set())


def encode(value: object) -> bytes:
    """The value's tagged JSON, dicts in their insertion order (sets sorted: they have none)."""
    try:
        if type(value) in _SCALAR:  # most tokens: skip even the check's call
            return _enc(value)
        return _enc(value if _plain(value, 0) else _conv(value, 0, set()))
    except UnicodeEncodeError as exc:  # JSON is UTF-8: a lone surrogate has no encoding
        raise NotEncodable(f"a string with a lone surrogate ({exc.object[exc.start:exc.end]!r}) cannot be saved") from None


def set_order(items: set[Any] | frozenset[Any]) -> list[Any]:
    """A set's items in the order its encoding has them (by canonical form): a set iterates in an
    order that differs from process to process (str hashes are salted), so a loop over one would
    not run, resume or compare with a golden tape the same way twice. Items the tape cannot save
    keep the set's own order."""
    try:
        keyed = [(canonical(to_json(x)), i, x) for i, x in enumerate(items)]
    except (NotEncodable, UnicodeEncodeError, TypeError, ValueError):
        return list(items)
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [x for _, _, x in keyed]


def canonical(data: object) -> bytes:
    """Already-tagged JSON data with every object's keys and every dict tag's pairs sorted:
    equal values (by content, not insertion order) give identical bytes."""
    return _enc_sorted(_sorted_pairs(data))


def _sorted_pairs(data: Any) -> Any:
    t = type(data)
    if t is list:
        return [_sorted_pairs(x) for x in data]
    if t is not dict:
        return data
    tag = data.get(TAG)
    if (tag == "dict" or tag in stdstate.UNORDERED) and type(data.get("v")) is list:
        pairs = [_sorted_pairs(p) for p in data["v"]]
        pairs.sort(key=lambda p: _enc_sorted(p[0]) if type(p) is list and p else b"")
        return {**data, "v": pairs}
    if tag in ("set", "frozenset") and type(data.get("v")) is list:  # (items holding dicts sort by canonical form)
        return {**data, "v": sorted((_sorted_pairs(x) for x in data["v"]), key=_enc_sorted)}
    return {k: _sorted_pairs(x) for k, x in data.items()}



def from_json(data: Any) -> object:
    """Inverse of to_json."""
    t = type(data)
    if t is list:
        return [x if type(x) in _SCALAR else from_json(x) for x in data]
    if t is not dict:
        return data
    if TAG not in data:
        return {k: from_json(x) for k, x in data.items()}
    tag = data[TAG]
    if not isinstance(tag, str):
        raise ValueError(f"malformed tagged value: {tag!r} is not a tag")
    try:
        return _untag(tag, data)
    except (TypeError, KeyError, AttributeError, IndexError, ArithmeticError, ValueError) as e:  # (Decimal("abc"), a huge timedelta)
        if isinstance(e, ValueError) and str(e).startswith("malformed "):
            raise  # said where it is
        raise ValueError(f"malformed {_cut(tag, 40)!r} value: {_cut(str(e), 200)}") from None


def decode(raw: bytes | str) -> object:
    """Inverse of encode."""
    data = _dec(raw)
    return from_json(data) if _maybe_tagged(raw) else data


# How deep a value's JSON may nest: encode nests a value at most MAX_DEPTH levels, and each level
# takes at most three in JSON (a dict tag's list of pairs, then a pair). Deeper, no reader could
# walk it within Python's recursion limit.
DEPTH_LIMIT = 3 * MAX_DEPTH + 8


def check(raw: bytes) -> None:
    """Raise ValueError, saying why, unless `raw` is a value every reader can rebuild: JSON in
    UTF-8 with numbers in range, nested at most DEPTH_LIMIT levels, each tag of the shape its
    payload must have (a timedelta's three whole numbers, base64 bytes, a decimal's digits...).
    Classes other than builtins are not looked up (an object of one is taken as it would be
    without its class loaded): the verdict is the same whatever the process has imported."""
    try:
        data = _dec(raw)
    except RecursionError:
        raise ValueError(f"it is nested deeper than {DEPTH_LIMIT} levels") from None
    except msgspec.DecodeError as exc:
        raise ValueError(f"it is no JSON value: {exc}") from None
    if raw.count(b"[") + raw.count(b"{") > DEPTH_LIMIT and _depth(data) > DEPTH_LIMIT:
        raise ValueError(f"it is nested deeper than {DEPTH_LIMIT} levels")
    if not _maybe_tagged(raw):
        return
    checking.on = True
    try:
        from_json(data)
    except RecursionError:
        raise ValueError(f"it is nested deeper than {DEPTH_LIMIT} levels") from None
    finally:
        checking.on = False


def _depth(data: Any) -> int:
    """How deep JSON data nests, walked without recursion."""
    deepest = 0
    todo = [(data, 1)]
    while todo:
        x, d = todo.pop()
        if type(x) is list:
            items: Iterable[Any] = x
        elif type(x) is dict:
            items = x.values()
        else:
            continue
        deepest = max(deepest, d)
        if d > DEPTH_LIMIT:
            return d
        todo.extend((y, d + 1) for y in items if type(y) in (list, dict))
    return deepest


_NEEDLES: Any = ("$", "$t", "$\\u", "\\", "\\u0024")
_BNEEDLES: Any = tuple(n.encode() for n in _NEEDLES)


def _maybe_tagged(raw: bytes | str) -> bool:
    # A tag key needs a "$" or an escaped one, so most tokens skip the from_json walk. Single
    # characters are searched first (memchr-fast); find() because bytes `in` is oddly slow.
    dollar, tag, esc_t, backslash, esc_dollar = _NEEDLES if isinstance(raw, str) else _BNEEDLES
    find = raw.find
    return ((find(dollar) >= 0 and (find(tag) >= 0 or find(esc_t) >= 0))
            or (find(backslash) >= 0 and find(esc_dollar) >= 0))


# Tags decoded with the standard library alone: no class lookup, so previews may use them too.
_LEAVES: dict[str, Callable[[Any], object]] = {
    "float": float, "date": date.fromisoformat, "decimal": Decimal, "uuid": UUID,
    "bytes": lambda v: base64.b64decode(v, validate=True),
    "complex": lambda v: complex(_number(v[0]), _number(v[1])),
    "timedelta": lambda v: timedelta(*v),
}


def _number(x: Any) -> float:
    """A part of a complex: a number, or a tagged float (nan, inf); nothing else is decoded."""
    if type(x) in _NUMBERS:
        return cast(float, x)
    if type(x) is dict and x.get(TAG) == "float":
        return float(x["v"])
    raise TypeError(f"{x!r} is not a number")


def _untag(tag: str, d: dict[str, Any]) -> object:
    v: Any = d.get("v")
    if tag == "tuple":
        return tuple([from_json(x) for x in v])
    if tag == "dict":
        return {from_json(k): from_json(x) for k, x in v}
    if tag == "set":
        return {from_json(x) for x in v}
    if tag == "frozenset":
        return frozenset([from_json(x) for x in v])
    leaf = _LEAVES.get(tag)
    if leaf is not None:
        return leaf(v)
    if tag in stdstate.TAGS:
        if isinstance(d.get("factory"), dict) and getattr(checking, "on", False):
            from_json(d["factory"])  # (a class not looked up while checking: the factory is checked as a value)
            d = {**d, "factory": None}
        return stdstate.rebuild(tag, d, from_json)
    if tag == "datetime" or tag == "time":
        got = (datetime if tag == "datetime" else time).fromisoformat(v)
        if isinstance(d.get("tz"), str):
            got = got.replace(tzinfo=ZoneInfo(d["tz"]))
        elif isinstance(d.get("tzname"), str) and got.tzinfo is not None:
            got = got.replace(tzinfo=timezone(got.utcoffset() or timedelta(0), d["tzname"]))
        return got.replace(fold=1) if d.get("fold") else got
    if tag == "path" and "cls" not in d:
        return Path(v)
    if tag == "type":
        found = lookup(v)
        if found is not None and found.__module__ != "builtins" and not is_own(found):
            raise ValueError(not_own(str(v)))  # a class handed to the flow is a class it may call
        return found if found is not None else Opaque(str(v), None, d)
    ref = d.get("cls")
    if not isinstance(ref, str):
        ref = f"?{tag}"  # unknown tag from a newer writer: keep it as Opaque, never guess
    if tag == "object" and "state" in d:
        return _with_state(ref, d)
    payload = from_json(v)
    extra: Any = from_json(d.get("slots") or {})
    if isinstance(d.get("more"), dict):
        extra = {**cast(dict[str, Any], from_json(d["more"])), **extra}
    cls = lookup(ref)
    if tag == "enum" and "value" in d and cls is not None and issubclass(cls, Enum):
        try:
            return cls(from_json(d["value"]))
        except (ValueError, TypeError):
            pass  # no member has that value any more: show it
    if cls is not None and tag in ("dataclass", "object") and not is_own(cls):
        raise ValueError(not_own(ref))
    if cls is not None:
        try:
            return _rebuild(tag, cls, payload, extra)
        except (TypeError, AttributeError, KeyError, ValueError):
            pass  # the loaded class no longer fits the data: show it rather than fail the tape
    if extra and isinstance(payload, dict):
        payload = {**payload, **extra}
    return Opaque(ref, payload, d)


def _with_state(ref: str, d: dict[str, Any]) -> object:
    """An object of a class that says its state itself, given that state (its `__setstate__`)."""
    state = from_json(d["state"])
    cls = lookup(ref)
    if cls is None:
        return Opaque(ref, state, d)
    if not is_own(cls):
        raise ValueError(not_own(ref))
    obj: Any = object.__new__(cls)
    try:
        stdstate.restore_state(obj, state)
    except Exception as exc:  # noqa: BLE001 - whatever the flow's own __setstate__ raises
        raise ValueError(f"{ref}.__setstate__ raised {type(exc).__name__}: {exc}") from None
    return obj


def _rebuild(tag: str, cls: type, payload: Any, extra: dict[str, Any]) -> object:
    # object.__new__ + object.__setattr__: no __init__/__post_init__ runs and frozen classes work.
    if tag == "enum" and issubclass(cls, Enum):
        if issubclass(cls, Flag) and payload not in cls.__members__:  # combined: "R|W", or None
            return reduce(or_, (cls.__members__[n] for n in (payload or "").split("|") if n), cls(0))
        return cls.__members__[payload]
    if tag == "path" and issubclass(cls, PurePath):
        return cls(payload)
    if tag == "namedtuple" and issubclass(cls, tuple):
        return tuple.__new__(cls, payload)
    if tag in ("dataclass", "object"):
        obj: Any = object.__new__(cls)
        if tag == "dataclass":
            extra = {**payload, **extra}
        elif payload:
            object.__getattribute__(obj, "__dict__").update(payload)
        for k, x in extra.items():
            object.__setattr__(obj, k, x)
        return obj
    raise TypeError(f"{tag} does not fit {cls!r}")


def _cut(s: str, limit: int) -> str:
    if "\n" in s:
        s = " ".join(s.split())  # previews live on one line
    return s if len(s) <= limit else s[: max(limit - 1, 0)] + "…"


def _join(parts: Iterable[str], open_: str, close: str, limit: int) -> str:
    # parts is lazy: stop rendering children once the preview is already too long.
    out = open_
    for i, p in enumerate(parts):
        out += f", {p}" if i else p
        if len(out) > limit:
            return out
    return out + close


_SHAPES: dict[object, tuple[str, str]] = {
    list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}"), frozenset: ("frozenset({", "})"),
    "tuple": ("(", ")"), "set": ("{", "}"), "frozenset": ("frozenset({", "})"),
}


def _show(x: Any, limit: int, depth: int, tagged: bool) -> str:
    """Render Python values (tagged=False) or tagged JSON (tagged=True) like repr, lazily."""
    t = type(x)
    if depth > 12:
        return "…"
    if t is str or t is bytes:
        return repr(x[: limit + 1])  # slicing first: a huge string is never copied whole
    if t in _SHAPES and x:
        open_, close = _SHAPES[t]
        close = ",)" if t is tuple and len(x) == 1 else close
        return _join((_show(y, limit, depth + 1, tagged) for y in x), open_, close, limit)
    if t is not dict:
        return repr(x)
    if tagged and TAG in x:
        try:
            return _show_tag(x[TAG], x, x.get("v"), limit, depth + 1)
        except Exception:
            return _enc(x).decode()  # unknown or malformed: compact JSON says the most
    pairs = (f"{_show(k, limit, depth + 1, tagged)}: {_show(y, limit, depth + 1, tagged)}"
             for k, y in x.items())
    return _join(pairs, "{", "}", limit)


def _show_tag(tag: str, x: dict[str, Any], v: Any, limit: int, depth: int) -> str:
    name = str(x.get("cls", "")).rpartition(":")[2]
    if tag in _LEAVES or tag in ("datetime", "time"):
        return _show(_untag(tag, x), limit, depth, False)  # stdlib-only decoding, nothing to run
    if tag in _SHAPES or tag == "namedtuple":
        if not v and tag in ("set", "frozenset"):
            return f"{tag}()"
        open_, close = _SHAPES.get(tag, (f"{name}(", ")"))
        close = ",)" if tag == "tuple" and len(v) == 1 else close
        return _join((_show(y, limit, depth, True) for y in v), open_, close, limit)
    if tag == "dict" or tag in stdstate.TAGS:
        label = {"odict": "OrderedDict(", "counter": "Counter(", "defaultdict": "defaultdict(", "deque": "deque("}.get(tag, "")
        if tag == "deque":
            return _join((_show(y, limit, depth, True) for y in v), "deque([", "])", limit)
        pairs = (f"{_show(k, limit, depth, True)}: {_show(y, limit, depth, True)}" for k, y in v)
        return _join(pairs, label + "{", "}" + (")" if label else ""), limit)
    if tag == "path":
        return f"{name or 'Path'}({v!r})"
    if tag == "enum":
        return f"{name}.{v}" if v is not None else f"{name}({_show(x.get('value'), limit, depth, True)})"
    if tag == "type":
        return f"<class '{str(v).replace(':', '.')}'>"
    if tag in ("dataclass", "object") and type(v) is dict and TAG not in v:
        return _join((f"{k}={_show(y, limit, depth, True)}" for k, y in v.items()), f"{name}(", ")", limit)
    raise ValueError(tag)


def preview(value: object, limit: int = 80, *, _tagged: bool = False) -> str:
    """Short one-line repr-like text; never raises."""
    try:
        return _cut(_show(value, limit, 0, _tagged), limit)
    except Exception:  # a broken __repr__ must not break whoever is showing the value
        return _cut(f"<{type(value).__name__}>", limit)


def preview_json(data: object, limit: int = 80) -> str:
    """Preview tagged JSON without decoding it (its classes may not be loaded); never raises."""
    return preview(data, limit, _tagged=True)


def preview_raw(raw: bytes | msgspec.Raw, limit: int = 80) -> str:
    """Preview a recorded value from its encoding; never raises (an encoding that is no JSON, a
    tape's edit, say, is said to be one)."""
    try:
        data = _dec(raw)
    except (msgspec.DecodeError, RecursionError):
        return "<a value that cannot be read>"
    return preview(data, limit, _tagged=True)
