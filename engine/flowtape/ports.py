"""Typed ports: `Port[T](direction=...)` declared in a task's inner `class Ports:`."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Any

# An `inout` port with one of these names is an output; wfpy's rule, kept for compatibility.
_OUTPUT_NAMES = frozenset({"out", "output", "result", "report", "summary"})


# wfpy's port types for what is not a plain value. They only describe a port: a `Resource`'s (or
# `File`'s) token is its path, a string; a `Map`'s is a dict. `Port[File(ext=".md")]` also names
# the extension of a file a tool writes on that port.
@dataclass(frozen=True)
class Resource:
    """A port carrying a locator (a file, a folder, a URL) as a string: `Port[Resource]`."""

    path: str = ""
    ext: str = ""
    validate: list[str] = field(default_factory=list)
    kind: str = ""

    def __post_init__(self) -> None:
        if not self.ext and self.path.startswith(".") and "/" not in self.path:  # File(".md"): an extension
            object.__setattr__(self, "ext", self.path)
            object.__setattr__(self, "path", "")

    def __class_getitem__(cls, params: Any) -> type[Resource]:
        return cls

    def __str__(self) -> str:  # what a tool's `{in.X}` gets: the path
        return self.path or f"{type(self).__name__}(ext={self.ext!r})"


@dataclass(frozen=True)
class File(Resource):
    """A port carrying a file's path: `Port[File]`, or `Port[File(ext=".md")]`."""

    kind: str = "file"


@dataclass(frozen=True)
class Map:
    """A port carrying a JSON-style dict: `Port[Map]`."""

    data: dict[str, Any] = field(default_factory=dict)

    def __class_getitem__(cls, params: Any) -> type[Map]:
        return cls


def is_resource(t: Any) -> bool:
    """Whether `t` is `Resource` or `File`, or one with options (`File(ext=".md")`)."""
    return isinstance(t, Resource) or (isinstance(t, type) and issubclass(t, Resource))


def _token_type(t: Any) -> Any:
    """The type of the tokens a port of type `t` carries (a `File` port's are strings)."""
    if is_resource(t):
        return str
    if isinstance(t, Map) or t is Map:
        return dict
    return t


@dataclass
class PortSpec:
    """One declared port of a task class."""

    name: str | None
    type: Any
    direction: str = "inout"
    ext: str = ""
    attr: str = ""
    line: int = 0

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = name
        if self.name is None:
            self.name = name

    @property
    def port_name(self) -> str:
        return self.name or self.attr

    @property
    def is_output(self) -> bool:
        if self.direction == "out":
            return True
        if self.direction == "in":
            return False
        return self.port_name.lower() in _OUTPUT_NAMES


@dataclass
class PortFactory:
    """What `Port[T]` gives: call it (or leave it bare) to declare a port."""

    type: Any
    extra: dict[str, Any] = field(default_factory=dict)

    def __call__(
        self,
        name: str | None = None,
        *,
        direction: str = "inout",
        ext: str = "",
        validate: list[str] | None = None,
    ) -> PortSpec:
        if direction not in ("in", "out", "inout"):
            raise ValueError(f"Port direction must be 'in', 'out' or 'inout', not {direction!r}")
        if not ext and isinstance(self.type, Resource):
            ext = self.type.ext
        return PortSpec(name=name, type=self.type, direction=direction, ext=ext)


class _PortMeta(type):
    def __getitem__(cls, item: Any) -> PortFactory:
        return PortFactory(item)


class Port(metaclass=_PortMeta):
    """`In = Port[int](direction="in")`: a typed port declaration."""


def collect_ports(cls: type) -> dict[str, PortSpec]:
    """The ports of `cls.Ports`, keyed by port name, in declaration order."""
    holder = getattr(cls, "Ports", None)
    if holder is None:
        return {}
    ports: dict[str, PortSpec] = {}
    by_attr: dict[str, str] = {}  # attribute -> port name: a subclass's `Ports` may redeclare one
    # a `Ports` that extends a base task's (`class Ports(Base.Ports)`) has its ports too, the base's first
    for klass in reversed([k for k in holder.__mro__ if k is not object]):
        lines = _attribute_lines(klass)
        for attr, value in vars(klass).items():
            if isinstance(value, PortFactory):
                value = value(attr)
            if isinstance(value, PortSpec):
                if not value.attr:
                    value.attr = attr
                value.line = lines.get(attr, 0)
                ports.pop(by_attr.get(attr, ""), None)
                by_attr[attr] = value.port_name
                ports[value.port_name] = value
    return ports


def _attribute_lines(holder: type) -> dict[str, int]:
    import inspect

    try:
        source, start = inspect.getsourcelines(holder)
    except (OSError, TypeError):
        return {}
    found: dict[str, int] = {}
    for offset, text in enumerate(source):
        stripped = text.strip()
        name = stripped.split("=", 1)[0].split(":", 1)[0].strip()
        if name.isidentifier() and name not in found:
            found[name] = start + offset
    return found


def type_name(t: Any) -> str:
    if isinstance(t, Resource | Map):
        return repr(t)
    if typing.get_origin(t) is not None:  # `Optional[int]`, `list[str]`, `int | None`: not just `Optional`
        return repr(t).replace("typing.", "")
    return getattr(t, "__name__", None) or repr(t)


def types_compatible(produced: Any, expected: Any) -> bool:
    """False only when a mismatch is certain from plain classes; generics and Any pass."""
    produced, expected = _token_type(produced), _token_type(expected)
    if produced is None or expected is None or produced is Any or expected is Any:
        return True
    if produced is object or expected is object:
        return True
    if typing.get_origin(produced) is not None or typing.get_origin(expected) is not None:
        return _generic_compatible(produced, expected)
    if not isinstance(produced, type) or not isinstance(expected, type):
        return True
    if expected is float and produced is int:
        return True
    try:
        return issubclass(produced, expected)
    except TypeError:
        return True


def _generic_compatible(produced: Any, expected: Any) -> bool:
    unions = (typing.Union, types.UnionType)
    if typing.get_origin(produced) in unions:
        # a mismatch is certain only when no token it may put fits; `None` is never put (returning
        # None puts nothing), so `Optional[T]` feeds a `T`
        return any(types_compatible(arm, expected) for arm in typing.get_args(produced) if arm is not type(None))
    if typing.get_origin(expected) in unions:
        return any(types_compatible(produced, arm) for arm in typing.get_args(expected))
    left = typing.get_origin(produced) or produced
    right = typing.get_origin(expected) or expected
    if isinstance(left, type) and isinstance(right, type):
        try:
            return issubclass(left, right)
        except TypeError:
            return True
    return True


@dataclass(eq=False)
class PortRef:
    """A port of one actor (or control node) in a workflow being built: what `connect` takes."""

    owner: Any
    name: str
    is_output: bool
    type: Any = None

    def __repr__(self) -> str:
        owner_name = getattr(self.owner, "_ft_name", None) or type(self.owner).__name__
        return f"{owner_name}.{self.name}"

    def __rshift__(self, other: PortRef | str) -> PortRef | str:
        from .graph import connect

        connect(self, other)
        return other
