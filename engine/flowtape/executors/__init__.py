"""Where a live firing's action runs: the executor the scheduler hands each one to.

The driver (the scheduler) keeps everything that makes a run a tape: choosing what fires, the
queues, atomic firings and the tape itself. An executor only runs the user's code of one firing
and gives back its Outcome, the actor's object updated as the action left it; a failure is raised
and the scheduler gives the firing's tokens back. `threads` runs it in the worker thread that
chose it (the default), `ray` on a Ray cluster (`flowtape[ray]`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..agents import Agents
from ..errors import UsageError
from ..firing import Outcome, Plan
from ..network import Actor
from .threads import ThreadExecutor

EXECUTORS = ("threads", "ray")


class Executor(Protocol):
    """What the scheduler calls; `execute` runs outside the engine's lock, several at once."""

    name: str

    def watch(self, stopping: Callable[[], bool]) -> None:
        """Told once by the engine: `stopping()` is true once the run was asked to stop."""

    def start(self) -> None:
        """Be ready to fire (connect to a cluster, say): a problem here is the user's, said before the run starts."""

    def execute(self, actor: Actor, plan: Plan, work_dir: Path, base_dir: Path, agents: Agents | None = None) -> Outcome:
        """Run one firing's action; raises what it raised (or why it could not run)."""

    def close(self) -> None:
        """Let go of whatever `start` took (once the run's end is written)."""


def make_executor(name: str | None, *, ray_address: str | None = None, base_dir: Path, runs_dir: Path) -> Executor:
    """The executor a run asked for (`threads` when none was named)."""
    if name in (None, "threads"):
        if ray_address is not None:
            raise UsageError("--ray-address (ray_address) needs --executor ray")
        return ThreadExecutor()
    if name != "ray":
        raise UsageError(f"unknown executor {name!r} (choose from: {', '.join(EXECUTORS)})")
    from .ray import RayExecutor  # (only now: ray is an optional extra)

    return RayExecutor(ray_address, base_dir=base_dir, runs_dir=runs_dir)


__all__ = ["EXECUTORS", "Executor", "ThreadExecutor", "make_executor"]
