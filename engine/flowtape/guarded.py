"""Reading a file that a tape, a `run.json` or a folder names: the one guarded way to do it.

Such a name comes from data someone else may have written. A plain read of it can hang for good
(a FIFO, `/proc/self/fd/0`, a terminal), grow without end (`/dev/zero`), or read a file the user
never pointed Flowtape at (a symlink out of the workspace). So a named file is read only if it is
a regular file (checked on the open descriptor, opened without blocking, so a FIFO never waits
for a writer), inside one of the folders allowed (its real path, symlinks followed), and no
bigger than a bound; anything else is `Unavailable`, with the reason, and the caller goes on
without it."""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

SMALL = 1 << 20  # run.json and the like
SOURCE = 16 << 20  # a Python file read for its lines


class Unavailable(OSError):
    """A named file that is not read: not there, not a regular file, outside, or too big."""


def inside(path: Path | str, roots: Iterable[Path | str]) -> Path:
    """The real path of `path` if it lies inside one of `roots` (real paths too), else Unavailable."""
    try:
        real = Path(os.path.realpath(path))
        for root in roots:
            if real.is_relative_to(os.path.realpath(root)):
                return real
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long
        raise Unavailable(f"{_shown(path)}: no file can have this name ({exc})") from None
    raise Unavailable(f"{_shown(path)} is outside the folders Flowtape reads ({', '.join(map(str, roots))})")


@contextlib.contextmanager
def open_regular(path: Path | str) -> Iterator[io.BufferedReader]:
    """`path` opened for reading if it is a regular file, else Unavailable (never blocks: a FIFO
    is opened without waiting for a writer, then refused). A file that is not there, or may not
    be read, raises the OSError that says so (FileNotFoundError, PermissionError)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except ValueError as exc:  # a NUL byte in the name
        raise Unavailable(f"{_shown(path)}: no file can have this name ({exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Unavailable(f"{_shown(path)} is {_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def read_regular(path: Path | str, limit: int = SMALL, roots: Iterable[Path | str] | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (inside `roots`, when given), else
    Unavailable. Reads at most `limit + 1` bytes, whatever the file claims its size is."""
    if roots is not None:
        path = inside(path, list(roots))
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise Unavailable(f"{_shown(path)} is over {limit:,} bytes: not read")
    return data


def read_text(path: Path | str, limit: int = SOURCE, roots: Iterable[Path | str] | None = None) -> str:
    """read_regular, decoded as UTF-8 (bytes that are not, replaced)."""
    return read_regular(path, limit, roots).decode("utf-8", errors="replace")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def _shown(path: Path | str) -> str:
    return repr(str(path)[:200])
