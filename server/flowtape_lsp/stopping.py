"""Stopping a run's process: SIGTERM, a second SIGTERM after a grace period, then SIGKILL, and
what the flow started taken down with it; on `stop`, through the event loop, and on the server's
exit without it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterable

from flowtape.ownership import is_the_process
from flowtape.rundir import process_alive as _alive

from .child import alive, signalled
from .family import family_of, take_down
from .run import Run

STOP_GRACE = 2.0  # after SIGTERM, before a second SIGTERM; as long again before SIGKILL


async def stop(run: Run) -> bool:
    """SIGTERM, a second SIGTERM after a grace period, then SIGKILL. True if it was running.
    A run whose process is not provably its own is not signalled: it is reported gone (its
    follower finds it so and finishes it `failed`)."""
    if run.finished or not run.live:
        return False
    pid = signalled(run)
    if pid is None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(run.done.wait(), 5.0)
        return False
    run.stopping = True
    if run.proc is not None:
        run.family = await asyncio.to_thread(family_of, pid)
    for sig, wait in ((signal.SIGTERM, STOP_GRACE), (signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, STOP_GRACE)):
        if not _signal(run, sig):
            break
        if await _exited(run, wait):
            break
    take_down(run.proc.pid if run.proc is not None else None, run.family)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(run.done.wait(), 5.0)
    return True


def _signal(run: Run, sig: int) -> bool:
    pid = signalled(run)  # asked again before each signal: the process may have gone meanwhile
    if pid is None:
        return False
    try:
        if sig == signal.SIGKILL and run.proc is not None:
            os.killpg(pid, sig)  # the child runs in its own session: take its tools down too
        else:
            os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def _exited(run: Run, wait: float) -> bool:
    if run.proc is not None:
        try:
            await asyncio.wait_for(run.proc.wait(), wait)
            return True
        except TimeoutError:
            return False
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if not alive(run):
            return True
        await asyncio.sleep(0.05)
    return False


def _child_alive(run: Run) -> bool:
    """Whether our own child still runs, told without the event loop (its returncode may never
    be set now): the process under its pid is still the one it started as."""
    assert run.proc is not None
    return is_the_process(run.process) if run.process is not None else _alive(run.proc.pid)


def stop_now(known: Iterable[Run]) -> None:
    """Stop every flow of `known` the server started, now and without the event loop: SIGTERM, a
    second one, then SIGKILL, as `stop` does. A flow that had to be killed gets its tape sealed
    `stopped` here, as the server will not follow it."""
    runs = list(known)
    # os.kill and polling, not the asyncio process: this also runs after the event loop has closed
    live = [run for run in runs if run.proc is not None and _child_alive(run)]
    asked = {id(run) for run in live if run.stopping}  # `stop` sent these their first SIGTERM
    for run in live:
        assert run.proc is not None
        run.family.update(family_of(run.proc.pid))
    for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGKILL):
        for run in live:
            assert run.proc is not None
            if id(run) in asked:
                asked.discard(id(run))
            elif _child_alive(run):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    (os.killpg if sig == signal.SIGKILL else os.kill)(run.proc.pid, sig)
            run.stopping = True
        deadline = time.monotonic() + STOP_GRACE
        while live and time.monotonic() < deadline:
            time.sleep(0.05)
            live = [run for run in live if _child_alive(run)]
        if not live:
            break
    for run in runs:
        if run.stopping:
            take_down(run.proc.pid if run.proc is not None else None, run.family)
    for run in runs:
        if run.proc is not None and run.stopping and not run.finished and run.index.header is not None:
            run.index.closing = False
            run.index.seal_run("stopped", None)
