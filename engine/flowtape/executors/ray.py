"""The Ray executor: each live firing of a task or tool runs as a Ray task on a cluster
(`raycluster.py`). An agent's firing runs on the driver, as with threads: a model call waits, it
does not compute, and there it has the run's SDK clients, the run's stop, and the key, which
never goes to the cluster.

Why Ray *tasks*, with the actor's object sent along, rather than one Ray actor per Flowtape
actor: the driver stays the one owner of every actor's state. A guard (which runs on the driver,
under the engine's lock) reads the state the last firing left; a firing whose worker dies is
retried from exactly the state before it (a Ray actor that dies takes its state with it); a
resume puts recorded states back on the driver and replays without touching the cluster; and a
flow of fifty actors needs as many worker processes as the cluster has CPUs, not fifty. The price
is that the object travels with each firing (pickled both ways): keep big read-only data out of
an actor's fields, or load it inside the action.

What stays on the driver: agents (a model call waits) and a source's quick asks (DRIVER_CPU), so
that a resume whose every firing replays starts or joins no cluster, and does not even import Ray."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agents import Agents
from ..errors import UsageError
from ..firing import Outcome, Plan, copy_file_outputs, execute
from ..network import IMMUTABLE, Actor
from ..values import NotEncodable, encode

if TYPE_CHECKING:
    from .raycluster import Cluster

# A firing that takes no token (a source asked whether it has more) runs on the driver while that
# actor's asks compute for less than this (CPU seconds of the driver's thread, so waiting on a file
# or a command does not count): a round trip through Ray costs more than such an ask, and a resume
# at the last step, which asks each source once more, then does no cluster work at all. An ask that
# computes longer sends that actor's later ones to the cluster.
DRIVER_CPU = 0.010


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None, *, base_dir: Path, runs_dir: Path) -> None:
        try:
            found = importlib.util.find_spec("ray") is not None
        except ValueError:  # (a module `ray` without a spec: whatever it is, importing it says)
            found = True
        if not found:  # said before the run starts; importing it waits for the first firing sent
            raise UsageError("--executor ray needs Ray, which is not installed: pip install 'flowtape[ray]'")
        self.address = address
        self.base_dir = base_dir
        self.runs_dir = runs_dir
        self.stopping: Callable[[], bool] = lambda: False
        self._lock = threading.Lock()
        self._cluster: Cluster | None = None
        self._computing: set[str] = set()  # the actors whose token-less firings go to the cluster (DRIVER_CPU)

    def watch(self, stopping: Callable[[], bool]) -> None:
        self.stopping = stopping  # a stop cancels the firings under way on the cluster

    def start(self) -> None:
        self._joined()

    def _joined(self) -> Cluster:
        with self._lock:
            if self._cluster is None:
                # (only now: `import ray` alone takes the better part of a second)
                from .raycluster import Cluster

                self._cluster = Cluster(self.address, base_dir=self.base_dir, runs_dir=self.runs_dir,
                                        stopping=lambda: self.stopping())
            return self._cluster

    def execute(self, actor: Actor, plan: Plan, work_dir: Path, base_dir: Path, agents: Agents | None = None) -> Outcome:
        spec = actor.spec
        assert spec is not None
        if spec.kind == "agent":  # a model call waits, it does not compute: made here, with the run's clients and stop
            return execute(actor, plan, work_dir, base_dir, agents)
        if not plan.takes and actor.path not in self._computing:
            began = time.thread_time()
            try:
                return execute(actor, plan, work_dir, base_dir, agents)
            finally:
                if time.thread_time() - began >= DRIVER_CPU:
                    with self._lock:
                        self._computing.add(actor.path)
        done = self._joined().run(actor, plan, work_dir, base_dir)
        _adopt(actor.obj, done.attrs)
        return copy_file_outputs(actor, Outcome(done.outputs, done.chat), work_dir)  # the file as it is now, in work/

    def close(self) -> None:
        with self._lock:
            cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()


def _adopt(obj: Any, attrs: dict[str, Any]) -> None:
    """The driver's object takes the attributes the worker's copy ended with. One whose value did
    not change keeps the very object it held (the state's rules tell a parameter given anew, or
    changed, by identity and encoding, as with threads)."""
    mine = obj.__dict__
    for key in [k for k in mine if k not in attrs]:
        del mine[key]
    for key, new in attrs.items():
        if key not in mine or not _same(mine[key], new):
            mine[key] = new


def _same(old: Any, new: Any) -> bool:
    if type(old) is not type(new):
        return False
    if type(old) in IMMUTABLE:
        return bool(old == new)
    try:
        return encode(old) == encode(new)
    except NotEncodable:
        return False
