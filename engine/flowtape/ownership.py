"""Whether a process is a run's: the one rule for trusting a pid that a run directory names.

A `run.json` names its run's pid, but a pid is only a number: once the run is gone it may be
any other process of the user's (pids are reused), and a `run.json` dropped into a folder may
name any pid at all. So a run records its process's *stamp* as well, its start time (clock
ticks since boot) and a digest of its command line, and a pid counts as the run's only while
the process under it has that very stamp. Only such a process is signalled by a stop; any other
is "gone" as far as the run is concerned. (Without /proc no stamp can be taken or checked: a
run's pid is then taken on its word for listing, but nothing is ever signalled by it.)"""

from __future__ import annotations

import hashlib
import os

import msgspec


class ProcessStamp(msgspec.Struct):
    """A process told apart from any other that gets its pid later."""

    pid: int
    started: int  # clock ticks since boot (/proc/PID/stat, field 22)
    cmdline: str  # sha256 of /proc/PID/cmdline, first 32 hex digits


def stamp_of(pid: int) -> ProcessStamp | None:
    """The stamp of the live process `pid`; None when it is gone, a zombie, or there is no /proc."""
    if not 0 < pid < 2**31:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read(1 << 20)
    except (OSError, IndexError):
        return None
    if fields[0] == b"Z" or not cmdline:  # exited (not reaped yet), or a kernel thread
        return None
    try:
        started = int(fields[19])
    except (IndexError, ValueError):
        return None
    return ProcessStamp(pid, started, hashlib.sha256(cmdline).hexdigest()[:32])


def own_stamp() -> ProcessStamp | None:
    return stamp_of(os.getpid())


def is_the_process(stamp: ProcessStamp | None) -> bool:
    """Whether the process `stamp` was taken of still runs (the same start and command line)."""
    return stamp is not None and stamp_of(stamp.pid) == stamp


def can_tell() -> bool:
    """Whether this machine can take stamps at all (it has /proc)."""
    return os.path.isdir("/proc/self")
