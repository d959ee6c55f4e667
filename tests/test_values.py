"""Tests for flowtape.values: tagged JSON encoding, digests, previews."""

from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
import importlib.util
import io
import json
import math
import re
import socket
import sys
import threading
import typing
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path, PurePosixPath, PureWindowsPath
from zoneinfo import ZoneInfo

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if importlib.util.find_spec("flowtape") is None:  # running from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from flowtape.digests import digest, digest_values  # noqa: E402
from flowtape.values import (  # noqa: E402
    NotEncodable,
    Opaque,
    canonical,
    decode,
    encode,
    from_json,
    preview,
    preview_json,
    to_json,
)

MOD = __name__  # classes below are looked up under whatever name pytest imported us as


class Color(enum.Enum):
    RED = 1
    GREEN = "g"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Perm(enum.Flag):
    R = 1
    W = 2


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Frozen:
    name: str
    when: datetime | None = None
    calls: typing.ClassVar[list[str]] = []

    def __post_init__(self) -> None:
        Frozen.calls.append(self.name)


class Bits(enum.IntFlag):
    R = 4
    W = 2


@dataclasses.dataclass
class Priced:
    qty: int
    price: float

    def __post_init__(self) -> None:
        self.total = self.qty * self.price  # not a field: kept as the instance has it


@dataclasses.dataclass
class Rule:
    pattern: str

    @functools.cached_property
    def rx(self) -> typing.Any:  # a cache in the instance's __dict__: not saved, built again when read
        return re.compile(self.pattern)


@dataclasses.dataclass(slots=True)
class Slotted:
    a: int
    b: tuple[int, ...] = ()


class Plain:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)


class WithSlots:
    __slots__ = ("a", "__secret", "unset")

    def __init__(self, a: object, secret: object) -> None:
        self.a = a
        self.__secret = secret

    def secret(self) -> object:
        return self.__secret


class Pair(typing.NamedTuple):
    left: object
    right: object


class Outer:
    class Inner(Plain):
        pass


class AppError(Exception):
    pass


class MultiLine:
    def __repr__(self) -> str:
        return "first\n  second"


class Holder:
    def __init__(self, handle: object) -> None:
        self._handle = handle


def _same(a: object, b: object) -> None:
    assert a == b
    assert type(a) is type(b)


ROUND_TRIP = [
    (1, 2, "x"),
    (),
    ((1,), [2, (3,)]),
    {1, "a", (2, 3), None},
    set(),
    frozenset({b"x", 2.5}),
    b"\x00\xffbytes",
    {1: "one", (2, 3): [4], None: {"x": 1}},
    {"$t": "tuple", "v": [1]},
    {"nested": {"$t": 1, "x": (1, 2)}},
    Path("/tmp/a b"),
    PurePosixPath("a/b"),
    PureWindowsPath(r"C:\x\y"),
    Color.RED,
    Color.GREEN,
    Level.HIGH,
    Perm.R,
    Perm.R | Perm.W,
    Perm(0),
    Bits(8),  # bits no member names: by their value, not as Bits(0)
    Bits.R | 8,
    Priced(2, 1.5),
    Rule("a+"),
    datetime(2024, 3, 30, 12, tzinfo=ZoneInfo("Europe/Paris")),  # a zone, not only its offset of the day
    time(9, tzinfo=ZoneInfo("Europe/Paris")),
    datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=1), "CET")),
    datetime(2024, 5, 6, 7, 8, 9, 123456),
    datetime(2024, 5, 6, 7, 8, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2021, 11, 7, 1, 30, fold=1),
    date(1999, 12, 31),
    time(23, 59, 1, 5, tzinfo=UTC),
    timedelta(days=-3, seconds=5, microseconds=7),
    Decimal("-1.2345678901234567890"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    complex(1.5, -2),
    float("inf"),
    float("-inf"),
    -0.0,
    2**100,
    Point(1, 2, ["a"]),
    Slotted(3, (4, 5)),
    Pair(1, Pair("a", None)),
    Outer.Inner(v=7),
    Plain(a=1, b=[Point(0)], c={"$t": 2}),
    Point,
    Outer.Inner,
    int,
    [Color.RED, {Level.LOW: frozenset({Color.GREEN})}],
]


@pytest.mark.parametrize("value", ROUND_TRIP, ids=lambda v: type(v).__name__)
def test_round_trip(value: object) -> None:
    raw = encode(value)
    _same(decode(raw), value)
    _same(decode(raw.decode()), value)
    _same(from_json(to_json(value)), value)
    assert msgspec.json.encode(json.loads(raw)) == raw  # plain JSON: what any reader reads back, byte for byte
    assert canonical(json.loads(canonical(json.loads(raw)))) == canonical(json.loads(raw))
    back: typing.Any = decode(raw)
    if isinstance(value, datetime | time):
        assert back.fold == value.fold and back.tzinfo == value.tzinfo and back.tzname() == value.tzname()
    if isinstance(value, Priced):
        assert back.total == value.total


def test_a_dataclass_cache_is_not_saved() -> None:
    rule = Rule("a+")
    assert rule.rx.match("aa")  # cached now, a Pattern, which cannot be saved
    back = typing.cast(Rule, decode(encode(rule)))
    assert "rx" not in vars(back) and back == rule and back.rx.match("aa")


def test_exceptions_are_not_encodable() -> None:
    with pytest.raises(NotEncodable, match="a AppError cannot be saved"):
        encode({"err": AppError("bad")})


def test_nan_round_trip() -> None:
    back = decode(encode([float("nan"), complex(float("nan"), 1)]))
    assert isinstance(back, list) and math.isnan(back[0]) and math.isnan(back[1].real)


def test_frozen_dataclass_rebuilt_without_init() -> None:
    value = Frozen("f", datetime(2020, 1, 1))
    Frozen.calls.clear()
    back = decode(encode(value))
    _same(back, value)
    assert Frozen.calls == []  # __post_init__ did not run again
    assert hash(back) == hash(value)


def test_slots_object_round_trip() -> None:
    back = decode(encode(WithSlots([1, (2,)], {"k": b"v"})))
    assert isinstance(back, WithSlots)
    assert back.a == [1, (2,)] and back.secret() == {"k": b"v"}
    assert not hasattr(back, "unset")


def test_tags_are_as_documented() -> None:
    assert to_json((1, 2)) == {"$t": "tuple", "v": [1, 2]}
    assert to_json(b"hi") == {"$t": "bytes", "v": "aGk="}
    assert to_json({2: "b", 1: "a"}) == {"$t": "dict", "v": [[2, "b"], [1, "a"]]}  # insertion order
    assert to_json({"$t": 1}) == {"$t": "dict", "v": [["$t", 1]]}
    assert to_json(Color.RED) == {"$t": "enum", "cls": f"{MOD}:Color", "v": "RED"}
    assert to_json(Path("a")) == {"$t": "path", "v": "a"}
    assert to_json(PurePosixPath("a")) == {"$t": "path", "v": "a", "cls": "pathlib:PurePosixPath"}
    assert to_json(Point(1)) == {"$t": "dataclass", "cls": f"{MOD}:Point", "v": {"x": 1, "y": 0, "tags": []}}
    assert to_json(Outer.Inner) == {"$t": "type", "v": f"{MOD}:Outer.Inner"}
    assert to_json(float("nan")) == {"$t": "float", "v": "nan"}


def test_plain_values_take_the_fast_path() -> None:
    value = {"b": [1, 2.5, "x", None, True], "a": {"c": []}}
    assert to_json(value) is value
    assert encode(value) == msgspec.json.encode(value)
    assert decode(encode(value)) == value


@dataclasses.dataclass(frozen=True)
class Keyed:
    name: str
    meta: dict = dataclasses.field(compare=False, hash=False)


def test_dicts_keep_their_order_and_digests_ignore_it() -> None:
    """A dict's order is something a flow sees: it is kept. Equal dicts still give equal digests."""
    assert encode({"b": 1, "a": 2}) == b'{"b":1,"a":2}' and list(decode(encode({"b": 1, "a": 2}))) == ["b", "a"]
    assert list(decode(encode({3: "c", 1: "a", 2: "b"}))) == [3, 1, 2]
    assert digest_values([{"b": 1, "a": {"y": [{"q": 1, "p": 2}], "x": 0}}]) == digest_values([{"a": {"x": 0, "y": [{"p": 2, "q": 1}]}, "b": 1}])
    assert digest_values([{i: str(i) for i in range(20)}]) == digest_values([{i: str(i) for i in reversed(range(20))}])
    assert digest_values(["{b, a}"]) == digest([b"\"{b, a}\""])  # a brace in a string changes nothing
    words = [f"w{i}" for i in range(50)]
    assert encode(set(words)) == encode(set(reversed(words)))
    # equal sets whose items hold dicts built in other orders (a field left out of equality)
    first = {Keyed("x", {2: "b", 1: "a"}), Keyed("y", {1: "c"})}
    second = {Keyed("x", {1: "a", 2: "b"}), Keyed("y", {1: "c"})}
    assert first == second and digest_values([first]) == digest_values([second])
    assert digest_values([frozenset(words), 1]) == digest_values([frozenset(reversed(words)), 1])
    assert digest_values([1, 2]) != digest_values([2, 1])


def test_digest_format() -> None:
    items = [encode(1), encode("a")]
    d = digest(items)
    assert len(d) == 16 and int(d, 16) >= 0
    assert d == digest(iter(items)) == digest_values([1, "a"])


def test_lock_in_attribute_names_the_path() -> None:
    value = Plain(items=[1, 2, Holder(threading.Lock())])
    with pytest.raises(NotEncodable) as info:
        encode(value)
    assert info.value.path == ".items[2]._handle"
    assert str(info.value) == ".items[2]._handle: a Lock cannot be saved"
    prefixed = info.value.with_prefix("review")
    assert prefixed.path == "review.items[2]._handle"
    assert str(prefixed) == "review.items[2]._handle: a Lock cannot be saved"


def test_top_level_not_encodable_has_empty_path() -> None:
    with pytest.raises(NotEncodable) as info:
        encode(threading.Lock())
    assert info.value.path == "" and str(info.value) == "a Lock cannot be saved"


def _gen() -> typing.Iterator[int]:
    yield 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: threading.RLock(),
        lambda: io.StringIO("x"),
        lambda: open(__file__),
        lambda: _gen(),
        lambda: sys,
        lambda: (lambda: 1),
        lambda: len,
        lambda: socket.socket(),
        lambda: threading.Event(),
        lambda: Point.__init__,
        lambda: list[int],
    ],
)
def test_not_encodable(make: typing.Callable[[], object]) -> None:
    value = make()
    try:
        with pytest.raises(NotEncodable, match="cannot be saved"):
            encode({"k": [value]})
    finally:
        if hasattr(value, "close"):
            value.close()


def test_local_class_not_encodable() -> None:
    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.raises(NotEncodable, match="defined inside a function") as info:
        encode([Local(1)])
    assert info.value.path == "[0]"
    with pytest.raises(NotEncodable):
        encode(Local)


def test_dict_key_and_value_paths() -> None:
    with pytest.raises(NotEncodable) as info:
        encode({"a": {1: threading.Lock()}})
    assert info.value.path == "['a'][1]"
    with pytest.raises(NotEncodable) as info:
        encode({(1, threading.Lock()): 1})
    assert info.value.path == "[<key>][1]"


def test_cycles_are_reported_not_recursion_errors() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    with pytest.raises(NotEncodable, match="cycle") as info:
        encode(loop)
    assert info.value.path == "[1]"
    obj = Plain()
    obj.me = {"x": obj}  # type: ignore[attr-defined]
    with pytest.raises(NotEncodable, match="cycle") as info:
        encode(obj)
    assert info.value.path == ".me['x']"
    shared = [1, 2]
    assert decode(encode((shared, shared))) == ([1, 2], [1, 2])  # sharing is not a cycle


def test_depth_limit() -> None:
    deep: object = 1
    for _ in range(150):
        deep = [deep]
    assert decode(encode(deep)) == deep
    for _ in range(100):
        deep = (deep,)
    with pytest.raises(NotEncodable, match="deeper"):
        encode(deep)


def test_unknown_module_gives_opaque_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    imported: list[str] = []
    real_import = builtins.__import__

    def spy(name: str, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "xml.dom.minidom", raising=False)
    monkeypatch.setattr(builtins, "__import__", spy)
    monkeypatch.setattr(importlib, "import_module", spy)
    raw = (b'[{"$t":"object","cls":"xml.dom.minidom:Document","v":{"a":1}},'
           b'{"$t":"type","v":"no_such_mod_x:Thing"},'
           b'{"$t":"enum","cls":"no_such_mod_x:Color","v":"RED"}]')
    imported.clear()  # monkeypatch itself imports lazily
    back = decode(raw)
    assert imported == []
    assert "xml.dom.minidom" not in sys.modules
    monkeypatch.undo()
    assert isinstance(back, list)
    doc, typ, col = back
    assert doc == Opaque("xml.dom.minidom:Document", {"a": 1})
    assert typ == Opaque("no_such_mod_x:Thing")
    assert col == Opaque("no_such_mod_x:Color", "RED")
    assert encode(back) == raw  # Opaques keep their raw form, so re-encoding is lossless
    assert len({col, Opaque("no_such_mod_x:Color", "RED")}) == 1


def test_missing_name_or_member_gives_opaque() -> None:
    assert isinstance(decode(f'{{"$t":"dataclass","cls":"{MOD}:Nope","v":{{}}}}'), Opaque)
    assert decode(f'{{"$t":"enum","cls":"{MOD}:Color","v":"PURPLE"}}') == Opaque(f"{MOD}:Color", "PURPLE")
    # Only module dicts are consulted: a module __getattr__ is never triggered.
    assert isinstance(decode('{"$t":"type","v":"typing:NoSuchThing"}'), Opaque)


def test_unknown_tag_is_kept() -> None:
    raw = b'{"$t":"future","v":[1,2]}'
    back = decode(raw)
    assert isinstance(back, Opaque) and back.data == [1, 2]
    assert encode(back) == raw


def test_malformed_tag_raises_value_error() -> None:
    with pytest.raises(ValueError):
        decode('{"$t":"tuple","v":5}')
    with pytest.raises(ValueError):
        decode('{"$t":3}')


def test_opaque_repr() -> None:
    assert repr(Opaque("m:Cls", {"a": 1})) == "<m:Cls {'a': 1}>"
    assert repr(Opaque("m:Cls")) == "<m:Cls>"
    long = repr(Opaque("m:Cls", {"a": "x" * 200}))
    assert long.startswith("<m:Cls {'a': 'xxx") and "…" in long and len(long) < 80


def test_file_loaded_module_and_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "flow.py"
    src.write_text("import dataclasses\n@dataclasses.dataclass\nclass Msg:\n    text: str\n")
    spec = importlib.util.spec_from_file_location("flowtape_flow_xyz", src)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "flowtape_flow_xyz", mod)
    spec.loader.exec_module(mod)
    raw = encode(mod.Msg("hi"))
    assert decode(raw) == mod.Msg("hi")
    monkeypatch.delitem(sys.modules, "flowtape_flow_xyz")
    assert decode(raw) == Opaque("flowtape_flow_xyz:Msg", {"text": "hi"})

    main_cls = type("MainThing", (), {"__module__": "__main__"})
    monkeypatch.setattr(sys.modules["__main__"], "MainThing", main_cls, raising=False)
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(tmp_path / "script.py"), raising=False)  # a user's script
    obj: typing.Any = main_cls()
    obj.n = 3
    back: typing.Any = decode(encode(obj))
    assert type(back) is main_cls and vars(back) == {"n": 3}


def test_unregistered_module_class_fails_at_encode_time() -> None:
    ghost = type("Ghost", (), {"__module__": "not_registered_mod"})
    with pytest.raises(NotEncodable, match="cannot be found"):
        encode(ghost())


def test_preview() -> None:
    assert preview([1, "a", (2,)]) == "[1, 'a', (2,)]"
    assert preview({"k": frozenset(), 2: {3}}) == "{'k': frozenset(), 2: {3}}"
    long = preview(list(range(1000)), limit=20)
    assert len(long) == 20 and long.endswith("…") and long.startswith("[0, 1, 2")
    assert preview("x" * 10_000, limit=10) == "'xxxxxxxx…"
    assert preview(Point(1)) == "Point(x=1, y=0, tags=[])"
    assert preview("a\nb") == "'a\\nb'"
    assert preview(MultiLine()) == "first second"


def test_preview_never_raises() -> None:
    class BadRepr:
        def __repr__(self) -> str:
            raise RuntimeError("boom")

    assert preview(BadRepr()) == "<BadRepr>"
    assert preview([BadRepr()]) == "<list>"


def test_preview_json() -> None:
    assert preview_json(to_json((1, 2))) == "(1, 2)"
    assert preview_json(to_json((1,))) == "(1,)"
    assert preview_json(to_json({3})) == "{3}"
    assert preview_json(to_json(frozenset())) == "frozenset()"
    assert preview_json(to_json({1: b"x"})) == "{1: b'x'}"
    assert preview_json(to_json({"a": [None, True]})) == "{'a': [None, True]}"
    assert preview_json(to_json(Decimal("1.5"))) == "Decimal('1.5')"
    assert preview_json(to_json(float("inf"))) == "inf"
    assert preview_json(to_json(Color.RED)) == "Color.RED"
    assert preview_json(to_json(Point(1, 2))) == "Point(x=1, y=2, tags=[])"
    assert preview_json(to_json(Pair(1, 2))) == "Pair(1, 2)"
    unloaded = {"$t": "object", "cls": "gone_mod:Thing", "v": {"a": (1, 2)}}
    assert preview_json(to_json(unloaded)).startswith("{'$t': 'object'")  # a user dict, shown as one
    assert preview_json({"$t": "object", "cls": "gone_mod:Thing", "v": {"a": 1}}) == "Thing(a=1)"
    assert preview_json({"$t": "future", "v": 1}) == '{"$t":"future","v":1}'
    assert preview_json({"$t": "tuple", "v": 5}) == '{"$t":"tuple","v":5}'
    cut = preview_json(to_json(tuple(range(100))), limit=12)
    assert cut == "(0, 1, 2, 3…" and len(cut) == 12


# Hashable values for set members and dict keys; nested values for everything else.
_leaves = (st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.binary(max_size=8)
           | st.floats(allow_nan=False))
_hashable = st.recursive(
    _leaves, lambda c: st.tuples(c, c) | st.frozensets(c, max_size=3), max_leaves=8)


def _nested(leaves: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    keys = st.text(max_size=4) | st.sampled_from(["$t", "v", "cls"])
    return st.recursive(
        leaves | _hashable,
        lambda c: (st.lists(c, max_size=4) | st.lists(c, max_size=4).map(tuple)
                   | st.sets(_hashable, max_size=4) | st.dictionaries(keys, c, max_size=4)
                   | st.dictionaries(st.integers(), c, max_size=4)),
        max_leaves=25,
    )


@settings(max_examples=300)
@given(_nested(_leaves | st.floats()))
def test_the_canonical_form_ignores_insertion_order(value: object) -> None:
    raw = encode(value)
    assert msgspec.json.encode(json.loads(raw)) == raw  # plain JSON: what any reader reads back, byte for byte
    flipped = encode(_reversed_dicts(value))
    assert canonical(json.loads(flipped)) == canonical(msgspec.json.decode(raw))
    assert digest([flipped]) == digest([raw])


def _reversed_dicts(value: object) -> object:
    """An equal value whose every dict was built in the reverse order."""
    if type(value) is dict:
        return {k: _reversed_dicts(v) for k, v in reversed(list(value.items()))}
    if type(value) in (list, tuple):
        return type(value)(_reversed_dicts(v) for v in value)
    return value


@settings(max_examples=300)
@given(_nested(_leaves))
def test_round_trip_property(value: object) -> None:
    raw = encode(value)
    assert decode(raw) == value
    assert encode(decode(raw)) == raw
    assert digest_values([value]) == digest([raw])


def test_only_the_flows_own_classes_are_saved_and_rebuilt(tmp_path: Path) -> None:
    """An object of the standard library (or of an installed package) rebuilt with attributes a
    tape chose can do anything: this one would delete a file when collected."""
    import argparse
    import tempfile

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    forged = {"$t": "object", "cls": "tempfile:_TemporaryFileCloser", "v": {"name": str(victim), "delete": True}}
    with pytest.raises(ValueError, match="not the flow's own"):
        from_json(forged)
    with pytest.raises(ValueError, match="not the flow's own"):
        from_json({"$t": "type", "v": "subprocess:Popen"})  # a class handed to the flow may be called
    with pytest.raises((TypeError, ValueError)):
        from_json({"$t": "complex", "v": [forged, 0]})  # a leaf decodes numbers, nothing else
    import gc

    gc.collect()
    assert victim.read_text() == "keep me"
    assert "tempfile" in sys.modules and tempfile.gettempdir()
    with pytest.raises(NotEncodable, match="not the flow's own"):
        encode(tempfile.TemporaryDirectory(dir=tmp_path))  # and none is written, so a resume re-runs it
    for plain in (argparse.Namespace(x="y"),):
        assert decode(encode(plain)) == plain
    assert from_json({"$t": "type", "v": "builtins:int"}) is int
    assert decode(encode(1 + 2j)) == 1 + 2j and str(decode(encode(complex("nan+1j")))) == "(nan+1j)"


def test_a_lone_surrogate_and_a_foreign_class_are_refused_when_put_not_when_read() -> None:
    """JSON is UTF-8, which has no lone surrogates; and a class a tape would refuse to rebuild
    (not the flow's own, not a builtin) is refused as it is put, where the run can say where."""
    import collections

    with pytest.raises(NotEncodable, match="lone surrogate"):
        encode("a\ud800b")
    with pytest.raises(NotEncodable, match="lone surrogate"):
        encode({"k\udcff": 1})
    with pytest.raises(NotEncodable, match="collections:OrderedDict is not the flow's own"):
        encode([collections.OrderedDict])
    assert decode(encode([int, str])) == [int, str]  # builtins are fine
