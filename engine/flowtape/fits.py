"""Whether a value given from outside (a workflow's input, a fork's edit) is of its declared type."""

from __future__ import annotations

import types
import typing
from itertools import islice
from typing import Any

from .ports import types_compatible

FITS_CHECKED = 10_000  # items of an input container checked against its declared item type


def shaped(value: Any, expected: Any) -> Any:
    """A JSON list given for a declared tuple, set or frozenset (from `--input`, an editor), as one:
    JSON has no other array."""
    origin = typing.get_origin(expected) or expected
    args = typing.get_args(expected)
    if isinstance(value, list) and origin in (tuple, set, frozenset):
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return tuple(shaped(x, a) for x, a in zip(value, args, strict=False)) + tuple(value[len(args):])
        item = args[0] if args else Any
        items = [shaped(x, item) for x in value]
        try:
            return origin(items)
        except TypeError:  # an unhashable item for a set: said by the type check
            return value
    if isinstance(value, list) and origin is list and args:
        return [shaped(x, args[0]) for x in value]
    if isinstance(value, dict) and origin is dict and len(args) == 2:
        return {k: shaped(x, args[1]) for k, x in value.items()}
    return value


def fits(value: Any, expected: Any) -> bool:
    """Whether an input value is of its declared type, items of `list[int]`, `dict[str, float]`,
    `tuple[int, str]` and members of `int | None` included (true is no int or float a user meant)."""
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arg) for arg in args)
    if origin is None or not args:
        return types_compatible(type(value), expected) and not (type(value) is bool and expected in (int, float))
    if not types_compatible(type(value), origin):
        return False
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return all(fits(k, args[0]) and fits(v, args[1]) for k, v in islice(value.items(), FITS_CHECKED))
    if origin is tuple and isinstance(value, tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return all(fits(x, args[0]) for x in islice(value, FITS_CHECKED))
        return len(args) == len(value) and all(fits(x, a) for x, a in zip(value, args, strict=True))
    if origin in (list, set, frozenset) and len(args) == 1 and isinstance(value, (list, set, frozenset)):
        return all(fits(x, args[0]) for x in islice(value, FITS_CHECKED))
    return True  # a generic of another kind: its outer type is what is checked
