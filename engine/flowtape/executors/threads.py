"""The default executor: a firing runs in the engine's worker thread that chose it (the pool of
`max_workers` threads the scheduler starts), in this process, on the actor's own object."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..agents import Agents
from ..firing import Outcome, Plan, execute
from ..network import Actor


class ThreadExecutor:
    name = "threads"

    def watch(self, stopping: Callable[[], bool]) -> None:
        pass  # a stop lets the firings under way end (the runner's grace period)

    def start(self) -> None:
        pass

    def execute(self, actor: Actor, plan: Plan, work_dir: Path, base_dir: Path, agents: Agents | None = None) -> Outcome:
        return execute(actor, plan, work_dir, base_dir, agents)

    def close(self) -> None:
        pass
