"""The tape's file as its writer sees it: appended to through a shared memory mapping, a window of
it at a time, so that a line costs a copy into memory and no system call.

A store into a shared file mapping is in the kernel's page cache as soon as it is made: a process
killed right after it (SIGKILL included) leaves it in the file, as it would a write(2). The file
is grown a window at a time, its blocks allocated up front (posix_fallocate: a full disk is an
OSError there, never a SIGBUS on a store), and cut to the length written when the writer closes.
So a killed writer leaves the rest of its last window as zero bytes: readers take a zero-filled
tail for the end of the tape (`tape.zero_tail`), and a line cut off in it as a torn line.

A line is stored by one copy, its newline with it. A copy does not store in order, so a reader
(another process following the tape, or whoever reads what a kill left) may see a line's newline
before the rest of it; but what is not stored yet is still the window's zero bytes, and no line
holds a zero byte: a last line with one in it is a line being stored, read as torn
(`tape.being_stored`). Blocks of many lines (a resumed run's copied prefix) go through pwrite(2),
which copies in order: a kill leaves a prefix of them."""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path

WINDOW = 1 << 18  # bytes the file grows by at a time (a killed writer's zero tail is at most this)
_PAGE = mmap.ALLOCATIONGRANULARITY


class TapeFile:
    """An append-only file written through a mapping of its end (see the module's docstring)."""

    def __init__(self, path: Path, durable: bool = False) -> None:
        self.durable = durable
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._base = self._end = os.fstat(self._fd).st_size  # the window's first and last offsets
        self._map: mmap.mmap | None = None
        self.closed = False
        # the window's own write, for a caller that stores whole lines itself (the writer's
        # simple lines): it raises ValueError, having stored nothing, when the window has no room
        # (then `append` it)
        self.store: Callable[[bytes], int] = self._no_room

    @staticmethod
    def _no_room(data: bytes) -> int:
        raise ValueError("no window yet")

    @property
    def size(self) -> int:
        """The bytes written so far."""
        return self._base + self._map.tell() if self._map is not None else self._end

    def line(self, body: bytes) -> None:
        """Append one line: `body` (no newline in it) and its newline."""
        self.append(body + b"\n")

    def append(self, line: bytes) -> None:
        """Append `line`, its newline included."""
        try:
            self.store(line)
        except ValueError:  # no room left in the window: the next one starts where this ends
            self._window(len(line))
            self.store(line)
        if self.durable:
            self.sync()

    def sync(self) -> None:
        """To the disk: fsync writes back what the mapping stored too (the page cache is one)."""
        os.fsync(self._fd)

    def block(self, data: bytes) -> None:
        """Append whole lines at once (a resumed run's copied prefix, say), copied by the kernel."""
        if not data:
            return
        at = self.size
        if at + len(data) > self._end:
            self._window(len(data))
        done = 0
        while done < len(data):
            done += os.pwrite(self._fd, memoryview(data)[done:], at + done)
        assert self._map is not None
        self._map.seek(at + done - self._base)
        if self.durable:
            os.fsync(self._fd)

    def _window(self, need: int) -> None:
        """Map a new window starting at the page the end of the file is in, with room for `need`."""
        if self.closed:  # (a late writer beside a close: its descriptor may be another file's by now)
            raise ValueError("the tape is closed")
        at = self.size
        base = at - at % _PAGE
        end = base + max(WINDOW, -(-(at - base + need) // _PAGE) * _PAGE)
        os.posix_fallocate(self._fd, base, end - base)  # (OSError: the disk is full)
        if self._map is not None:
            self._map.close()
            self._map, self._end = None, at
        self._map = mmap.mmap(self._fd, end - base, offset=base)
        self._map.seek(at - base)
        self._base, self._end = base, end
        self.store = self._map.write

    def close(self) -> None:
        """Unmap, and cut the file to what was written: no zero tail is left."""
        size = self.size
        if self._map is not None:
            self._map.close()
            self._map = None
            self.store = self._no_room
        self._end = size
        os.ftruncate(self._fd, size)
        if self.durable:
            os.fsync(self._fd)
        self.closed = True
        os.close(self._fd)
