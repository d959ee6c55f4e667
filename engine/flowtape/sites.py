"""Where things are in the user's files: the first frame outside Flowtape."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Site:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


UNKNOWN = Site("<unknown>", 0)
# An exception raised on another machine (executors/ray.py) carries its traceback, as text, and
# the site that raised: (traceback, Site | None), under this attribute.
REMOTE = "__flowtape_remote__"


def _is_internal(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIR) or filename.startswith("<frozen")


def caller_site(skip: int = 1) -> Site:
    """The file and line of the innermost frame that is user code."""
    frame = sys._getframe(skip)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_internal(filename):
            return Site(os.path.abspath(filename) if not filename.startswith("<") else filename, frame.f_lineno)
        frame = frame.f_back  # type: ignore[assignment]
    return UNKNOWN


def class_site(cls: type) -> Site:
    """Where `class X` is written, found without importing or executing anything."""
    import linecache

    filename = _file_of(cls)
    if not filename:
        return UNKNOWN
    needle = f"class {cls.__name__}"
    for number, text in enumerate(linecache.getlines(filename), start=1):
        stripped = text.lstrip()
        if stripped.startswith(needle) and stripped[len(needle) : len(needle) + 1] in ("(", ":", " "):
            return Site(os.path.abspath(filename), number)
    return Site(os.path.abspath(filename), 0)


def _file_of(cls: type) -> str | None:
    """The file a class is written in: its module's, or (a module loaded by hand, never put in
    sys.modules) the file its methods were compiled from."""
    filename = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if filename:
        return str(filename)
    for value in vars(cls).values():
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        if code is not None and not code.co_filename.startswith("<") and not _is_internal(code.co_filename):
            return str(code.co_filename)
    return None


def traceback_site(exc: BaseException) -> Site | None:
    """The innermost traceback frame in user code: the line that raised."""
    remote = getattr(exc, REMOTE, None)
    if remote is not None:
        return remote[1]
    tb = exc.__traceback__
    found: Site | None = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not _is_internal(filename) and not filename.startswith("<"):
            found = Site(os.path.abspath(filename), tb.tb_lineno)
        tb = tb.tb_next
    return found


def traceback_text(exc: BaseException) -> str:
    """The traceback as Python prints it (where the exception was raised, on a worker too)."""
    import traceback

    remote = getattr(exc, REMOTE, None)
    if remote is not None:
        return str(remote[0])
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
