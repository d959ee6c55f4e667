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
which copies in order: a kill leaves a prefix of them.

A read(2) is no snapshot either: it copies the file forward while the writer stores, and may
stall at any page (a fault on its own buffer costs microseconds). It can see the front of a line
before the line was stored, and the lines after it once they were: a line holding zeros with
whole lines after it. Every reader of a tape that may be growing reads through `settled`, which
reads such a line again."""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

WINDOW = 1 << 18  # bytes the file grows by at a time (a killed writer's zero tail is at most this)
_PAGE = mmap.ALLOCATIONGRANULARITY
SETTLE_TRIES = 5  # reads again of a line seen half stored, with lines after it, before it is corruption


def settled(data: bytes, fd: int, at: int) -> bytes:
    """`data`, read from offset `at` of the tape open as `fd`, with each whole line in it that
    holds a zero byte read again (see the module's docstring). A line with whole lines after it
    was stored before them: read again, it holds no zero byte, or the tape is corrupt there, and
    it is left for the caller to refuse as the record it cannot read. The last line may still be
    being stored (or its writer was killed storing it): read again once, and left as it reads
    (the caller's torn line)."""
    zero = data.find(b"\0")
    while zero >= 0:
        start = data.rfind(b"\n", 0, zero) + 1
        end = data.find(b"\n", zero)
        if end < 0:
            break  # no whole line: the zero tail, or a line being stored
        last = not data[end + 1 :].strip(b"\0")
        line = data[start:end]
        for attempt in range(1 if last else SETTLE_TRIES):
            if attempt:
                time.sleep(0.001 * attempt)  # (a store seen out of order on a weakly ordered CPU)
            line = os.pread(fd, end - start, at + start)
            if b"\0" not in line:
                break
        if b"\0" in line:
            break  # still holding one: what it is, the caller says
        data = data[:start] + line + data[end:]
        zero = data.find(b"\0", end)
    return data


def read_lines(fh: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """The lines of a tape from where `fh` is, each without its newline and whether it had one
    (only the last may not), read a megabyte at a time through `settled`: few reads, for each one
    lets go of the GIL, and under a busy thread takes long to get it back."""
    rest = b""
    at = fh.tell()
    while chunk := fh.read(1 << 20):
        data = settled(rest + chunk, fh.fileno(), at - len(rest))
        at += len(chunk)
        lines = data.split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line, True
    if rest:
        yield rest, False


class TapeFile:
    """An append-only file written through a mapping of its end (see the module's docstring)."""

    def __init__(self, path: Path, durable: bool = False) -> None:
        self.durable = durable
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._base = self._end = os.fstat(self._fd).st_size  # the window's first and last offsets
        self._map: mmap.mmap | None = None
        self._failed: OSError | None = None  # the window that could not be made: nothing is stored after it
        self.closed = False
        # the window's own write, for a caller that stores whole lines itself (the writer's
        # simple lines): it raises ValueError, having stored nothing, when the window has no room
        # (then `append` it)
        self.store: Callable[[bytes], int] = self._no_room

    @staticmethod
    def _no_room(data: bytes) -> int:
        raise ValueError("no window yet")

    def _refuse(self, data: bytes) -> int:
        """The store of a file that could not grow: a line that fits in what is left of the window
        must not follow the one that did not fit (a gap in the tape), so every line is refused."""
        assert self._failed is not None
        raise OSError(self._failed.errno, f"the tape could not grow earlier ({self._failed.strerror})")

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
        if self._failed is not None:
            self._refuse(data)
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
        if self._failed is not None:
            self._refuse(b"")
        at = self.size
        base = at - at % _PAGE
        end = base + max(WINDOW, -(-(at - base + need) // _PAGE) * _PAGE)
        try:
            os.posix_fallocate(self._fd, base, end - base)  # (OSError: the disk is full)
            window = mmap.mmap(self._fd, end - base, offset=base)
        except OSError as exc:
            self._failed = exc
            self.store = self._refuse
            raise
        if self._map is not None:
            self._map.close()
            self._map, self._end = None, at
        self._map = window
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
