"""The tools' reaper: a small watcher process that kills the tools still running (each in its own
process group, with whatever they started) when Flowtape dies without stopping them itself, on a
SIGKILL or a crash of the interpreter. A clean stop kills them first (tools.stop_all).

It learns of each tool's process group on a pipe and sees the pipe close when Flowtape dies,
however it dies: the kernel closes it. Started at the first tool of a process (before the tool), so
flows without tools never pay for it. This file runs as a script with nothing but the standard library."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from typing import IO


class Reaper:
    """Flowtape's end of the pipe: `watch` a tool's process group when it starts, `forget` it
    once it is gone (so that a reused group id is never killed)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None  # kept: it runs as long as this process
        self._pipe: IO[bytes] | None = None
        self._tried = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the watcher now, before a tool: a Flowtape killed right after starting one must
        find it already running (starting it takes a while; the tool would outlive that gap)."""
        with self._lock:
            self._start_once()

    def watch(self, pgid: int) -> None:
        self._say(b"+%d\n" % pgid)

    def forget(self, pgid: int) -> None:
        self._say(b"-%d\n" % pgid)

    def _say(self, line: bytes) -> None:
        with self._lock:
            self._start_once()
            if self._pipe is None:
                return
            try:
                self._pipe.write(line)
                self._pipe.flush()
            except OSError:  # the reaper is gone (killed by hand): the tools run unwatched, as before
                self._pipe = None

    def _start_once(self) -> None:
        if self._tried:
            return
        self._tried = True
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,  # a Ctrl-C at the terminal is Flowtape's to handle
            )
        except OSError:  # the tools run unwatched, as they would without it
            return
        self._pipe = self._proc.stdin


def _reap(lines: IO[bytes]) -> None:
    """The watcher's loop: keep the groups said, and on end of input kill those left."""
    groups: set[int] = set()
    for line in lines:
        with contextlib.suppress(ValueError):
            pgid = int(line[1:])
            if line.startswith(b"+"):
                groups.add(pgid)
            else:
                groups.discard(pgid)
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the end of the pipe ends it
    _reap(sys.stdin.buffer)
