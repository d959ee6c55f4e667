"""A flow process's family: every process it started, however far down, found by their parents.

Stopping a flow kills its process group, but an actor may start a process in a session of its
own (`start_new_session=True`), out of the group's reach, and once the flow has exited such a
process has another parent: so the family is taken down before the flow is signalled, and killed
after it (by pid and start time, so that a pid reused since is never hit)."""

from __future__ import annotations

import contextlib
import os
import signal

Family = dict[int, int]  # pid -> its start time (clock ticks since boot)


def _stat(pid: int) -> tuple[int, int] | None:
    """A process's parent and start time, from /proc; None when it is gone (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def family_of(pid: int) -> Family:
    """The processes descended from `pid` now (not `pid` itself)."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    children: dict[int, list[tuple[int, int]]] = {}
    for p in pids:
        stat = _stat(p)
        if stat is not None:
            children.setdefault(stat[0], []).append((p, stat[1]))
    found: Family = {}
    todo = [pid]
    while todo:
        for child, started in children.get(todo.pop(), []):
            if child not in found:
                found[child] = started
                todo.append(child)
    return found


def kill_family(family: Family) -> None:
    """SIGKILL the members still running (the same process: the same start time)."""
    for pid, started in family.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def take_down(pgid: int | None, family: Family) -> None:
    """What a stopped flow started goes with it, even when the flow itself ended at a SIGTERM: its
    process group (it runs in a session of its own, with its tools), then the family members in
    sessions of their own."""
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    kill_family(family)
