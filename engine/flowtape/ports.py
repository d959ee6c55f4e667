"""Typed ports: `Port[T](direction=...)` declared in a task's inner `class Ports:`."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Any

# An `inout` port with one of these names is an output; wfpy's rule, kept for compatibility.
_OUTPUT_NAMES = frozenset({"out", "output", "result", "report", "summary"})


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
    lines = _attribute_lines(holder)
    ports: dict[str, PortSpec] = {}
    for attr, value in vars(holder).items():
        if isinstance(value, PortFactory):
            value = PortSpec(name=attr, type=value.type, attr=attr)
        if isinstance(value, PortSpec):
            if not value.attr:
                value.attr = attr
            value.line = lines.get(attr, 0)
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
    return getattr(t, "__name__", None) or repr(t)


def types_compatible(produced: Any, expected: Any) -> bool:
    """False only when a mismatch is certain from plain classes; generics and Any pass."""
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
    if typing.get_origin(expected) in unions:
        return any(types_compatible(produced, arm) for arm in typing.get_args(expected))
    if typing.get_origin(produced) in unions:
        return all(types_compatible(arm, expected) for arm in typing.get_args(produced))
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
