"""A flow process's family: every process it started, however far down, found by their parents.

Stopping a flow kills its process group, but an actor may start a process in a session of its
own (`start_new_session=True`), out of the group's reach, and once the flow has exited such a
process has another parent: so the family is taken down before the flow is signalled, and killed
after it (by pid and start time, so that a pid reused since is never hit)."""

from __future__ import annotations

import contextlib
import os
import signal
import time

Family = dict[int, int]  # pid -> its start time (clock ticks since boot)
started_here: set[int] = set()  # the children this server started itself (flows, checkers): never "left behind"


def _fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat after the command's name (state, ppid, pgrp, session, …); None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _stat(pid: int) -> tuple[int, int] | None:
    """A process's parent and start time, from /proc; None when it is gone (or no /proc)."""
    fields = _fields(pid)
    try:
        return (int(fields[1]), int(fields[19])) if fields is not None else None
    except (IndexError, ValueError):
        return None


def become_subreaper() -> bool:
    """Have the processes that flows leave behind (their parent gone) become this process's
    children instead of init's, so that a flow that died can still be found out by what it left
    (Linux's PR_SET_CHILD_SUBREAPER). False where that cannot be done."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def left_behind(known: set[int]) -> dict[int, tuple[int, int]]:
    """This process's children that it did not start (`known`: those it did): what dead flows
    left behind, handed to it as their subreaper. pid -> (session, start time)."""
    me = os.getpid()
    found: dict[int, tuple[int, int]] = {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        fields = _fields(pid) if pid not in known else None
        try:
            if fields is not None and int(fields[1]) == me:
                found[pid] = (int(fields[3]), int(fields[19]))
        except (IndexError, ValueError):
            continue
    return found


def clear_left_behind(dead: int, live_sessions: set[int]) -> None:
    """What the flow process `dead` (a session leader, now gone) left behind goes: its process
    group, and every process handed to this server since (see become_subreaper) with whatever
    it started, but those in the session of a flow still running. Then they are collected."""
    victims = {pid: started for pid, (session, started) in left_behind(started_here).items() if session not in live_sessions}
    family: Family = dict(victims)
    for pid in victims:
        family.update(family_of(pid))
    take_down(dead, family)
    for pid in victims:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # one in a session of its own leads its group (a tool)
    deadline = time.monotonic() + 2.0
    while victims and time.monotonic() < deadline:
        reap(list(victims))
        victims = {pid: s for pid, s in victims.items() if _stat(pid) is not None}
        time.sleep(0.02)


def reap(pids: list[int]) -> None:
    """Collect those of `pids` (children handed to this process) that have exited."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


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
