"""The Ray side of the Ray executor: joining (or starting) a cluster, sending one firing there as a
Ray task, and what runs on the worker (`fire`). Imported only once a run sends a firing to a
cluster (or starts one that will), so a resume that only replays never pays for `import ray`.

What crosses: the actor's object, the firing's input values and its outputs, through Ray's
object store (big ones are not copied through the driver more than the tape needs: the driver
encodes every output for the tape, as it does with threads; nothing pickled is ever written)."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..errors import FlowtapeError, UsageError
from ..firing import Plan, execute
from ..loader import MODULE_PREFIX
from ..model import TaskSpec, spec_of
from ..network import Actor
from ..sites import REMOTE, Site, traceback_site
from ..tools import ToolStopped

try:
    import ray
    import ray.exceptions as rex
    from ray import cloudpickle
except ImportError as exc:  # said plainly, with the extra to install
    if isinstance(exc, ModuleNotFoundError) and exc.name == "ray":
        raise UsageError("--executor ray needs Ray, which is not installed: pip install 'flowtape[ray]'") from None
    raise UsageError(f"--executor ray: Ray is installed but cannot be imported ({exc}); reinstall it: "
                     "pip install --force-reinstall 'flowtape[ray]'") from None

# A firing whose worker died (its process killed, its node lost) is sent again at most this many
# times. Nothing of it is on the tape yet (a firing is recorded only once its result is back), so
# a retry can never repeat a recorded firing; what its action did outside Flowtape (a file a
# tool wrote, a model call) may happen again.
RETRIES = 2
POLL = 0.1  # seconds between looks at the run's stop flag while firings run remotely
_DIED = (rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError, rex.OwnerDiedError, rex.LocalRayletDiedError)
# never uploaded with the flow's folder: runs, environments, repositories, caches
EXCLUDES = [".flowtape/", ".git/", ".venv/", "venv/", "node_modules/", "__pycache__/", "*.pyc"]
SHARED_MARK = ".flowtape-shared"
PROBE_TIMEOUT = 5.0  # seconds to wait for a head's port to answer


class FiringCancelled(ToolStopped):  # noqa: N818 - like a stopped tool: the firing did not happen
    """The run's stop cancelled this firing on the cluster: its tokens go back, the run ends stopped."""


class WorkerLostError(FlowtapeError):
    """The process (or machine) running a firing died more often than RETRIES allows."""


@dataclass
class Job:
    """One firing, as a worker needs it."""

    path: str
    obj: Any
    action: str | None  # a task's action, by name (an agent or tool has none)
    values: list[Any]
    fire_count: int
    wired: list[str]  # the output ports something consumes
    work_dir: str
    base_dir: str
    shared: str | None = None  # a tool's: the token the run wrote in its work folder


@dataclass
class Done:
    outputs: list[tuple[str, Any]]
    chat: list[dict[str, str]] | None
    attrs: dict[str, Any]  # the actor's attributes as the action left them


@dataclass
class Raised:
    exc: BaseException
    traceback: str
    site: Site | None


@dataclass
class _Stand:
    """On the worker: the few things of a network Actor that firing.execute reads."""

    path: str
    spec: TaskSpec
    obj: Any
    fire_count: int
    outputs: dict[str, None]
    file_outs: dict[str, Any] = field(default_factory=dict)  # (a workflow File output is copied on the driver)


def fire(modules: dict[str, str], payload: bytes, folder: str | None) -> Done | Raised:
    """Runs on a Ray worker: one firing's action, as the thread executor runs it. `modules` are
    the flow files its classes are defined in (loaded by path, under the private names the driver
    gave them), by their paths in the job's working directory (the flow's folder's copy), or
    absolute on a local instance: imported here first, so that the job (`payload`) names their
    classes rather than carrying them. `folder`, on a local instance, is the flow's folder itself:
    the worker runs in it and imports from it, as a worker with its copy does (before the job is
    unpickled, which may import a module of the flow's by name)."""
    if folder is not None:
        if folder not in sys.path:
            sys.path.insert(0, folder)
        if os.getcwd() != folder:
            os.chdir(folder)
    for name, where in modules.items():
        if name not in sys.modules:
            _import_flow(name, Path.cwd() / where)
    job: Job = cloudpickle.loads(payload)
    spec = spec_of(job.obj)
    assert spec is not None
    action = next((a for a in spec.actions if a.name == job.action), None) if job.action is not None else None
    stand = _Stand(job.path, spec, job.obj, job.fire_count, dict.fromkeys(job.wired))
    try:
        if job.shared is not None:
            _check_shared(Path(job.work_dir), job.shared)
        outcome = execute(cast(Actor, stand), Plan(action, [], job.values), Path(job.work_dir), Path(job.base_dir))
    except BaseException as exc:  # noqa: BLE001 - the driver fails the firing with it
        # the user's files as the driver has them, not this worker's copy of the flow's folder
        here, there = str(Path.cwd()), job.base_dir
        story = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).replace(here + os.sep, there + os.sep)
        site = traceback_site(exc)
        if site is not None and site.file.startswith(here + os.sep):
            site = Site(there + site.file[len(here):], site.line)
        return Raised(_portable(exc), story, site)
    return Done(outcome.outputs, outcome.chat, dict(vars(job.obj)))


def _import_flow(name: str, path: Path) -> None:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FlowtapeError(f"the flow file {path.name} is not in this worker's copy of the flow's folder")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def _check_shared(work_dir: Path, token: str) -> None:
    mark = work_dir / SHARED_MARK
    try:
        seen = mark.read_text(encoding="utf-8")
    except OSError:
        seen = ""
    if seen != token:
        raise FlowtapeError(
            f"this worker ({ray.util.get_node_ip_address()}) does not see the run's work folder {work_dir}: a @tool "
            "actor on a cluster writes its files there, so the runs directory (--runs-dir) must be on a folder every "
            "node shares at the same path"
        )


def _portable(exc: BaseException) -> BaseException:
    """The exception itself when it can travel back to the driver, else one that says the same."""
    try:
        cloudpickle.dumps(exc)
        return exc
    except Exception:  # noqa: BLE001 - whatever pickling an odd exception raises
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class Cluster:
    """The run's connection to Ray: joined (or a local instance started) once, left at the run's end."""

    def __init__(self, address: str | None, *, base_dir: Path, runs_dir: Path, stopping: Callable[[], bool]) -> None:
        self.address = address
        self.base_dir = base_dir
        self.runs_dir = runs_dir
        self.stopping = stopping
        self._lock = threading.Lock()
        self._ours = False  # whether this run connected (so it disconnects, and stops a local instance it started)
        # A local instance of the run's own is this machine alone: its workers read the flow's folder
        # itself, with no copy to make (a runtime environment costs each worker a second start-up)
        self._local = False
        self._shared: str | None = None
        self._in_flight: set[Any] = set()
        self._closed = threading.Event()
        if not ray.is_initialized():  # (else: the caller's own Ray session, used as it is)
            try:
                self._init()
            except (OSError, ValueError, RuntimeError) as exc:  # (ConnectionError, TimeoutError: OSErrors)
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise UsageError(f"cannot start the run on {where}: {_first_line(exc)}") from None
            self._ours = True
        self._remote = ray.remote(max_retries=0, num_cpus=1)(fire)
        threading.Thread(target=self._watch, name="flowtape-ray-stop", daemon=True).start()

    def _init(self) -> None:
        # ray.init, in the main thread, takes SIGTERM for itself: the run's own stop (runner._Signals) keeps it
        kept = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
        try:
            if self.address is None:  # a fresh local instance, never one someone else started on this machine
                ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING)
                self._local = True
            else:
                _reachable(self.address)
                runtime_env = {"working_dir": str(self.base_dir), "excludes": EXCLUDES + self._runs_excluded()}
                ray.init(address=self.address, runtime_env=runtime_env, logging_level=logging.WARNING)
        finally:
            if kept is not None:
                signal.signal(signal.SIGTERM, kept)

    def _runs_excluded(self) -> list[str]:
        try:
            inside = self.runs_dir.resolve().relative_to(self.base_dir)
        except ValueError:
            return []
        return [f"/{inside.as_posix()}/"] if inside.parts else []

    def run(self, actor: Actor, plan: Plan, work_dir: Path, base_dir: Path) -> Done:
        """One firing on the cluster, sent again if its worker dies (RETRIES); raises what it raised."""
        assert actor.spec is not None
        job = Job(
            actor.path, actor.obj, plan.action.name if plan.action is not None else None, plan.values,
            actor.fire_count, list(actor.outputs), str(work_dir), str(base_dir),
            self._shared_token(work_dir) if actor.spec.kind == "tool" else None,
        )
        folder = str(self.base_dir) if self._local else None
        modules = self._flow_files(type(actor.obj))
        for attempt in range(RETRIES + 1):
            try:
                ref = self._remote.remote(modules, cloudpickle.dumps(job), folder)
            except Exception as exc:  # noqa: BLE001 - pickling the object or an input failed
                raise FlowtapeError(f"{actor.path} cannot be sent to a Ray worker (on Ray an actor, its inputs and "
                                    f"what it returns are pickled): {_unpicklable(job, exc)}") from None
            try:
                result = self._wait(ref)
            except _DIED as exc:
                if attempt < RETRIES:
                    print(f"flowtape: {actor.path} firing {actor.fire_count + 1}: its Ray worker died "
                          f"({type(exc).__name__}); sending it again", file=sys.stderr, flush=True)
                    continue
                raise WorkerLostError(
                    f"its Ray worker died {RETRIES + 1} times ({type(exc).__name__}: {_first_line(exc)}); "
                    f"a firing is sent again at most {RETRIES} times"
                ) from None
            if isinstance(result, Raised):
                setattr(result.exc, REMOTE, (result.traceback, result.site))
                raise result.exc
            return result
        raise AssertionError("unreachable")

    def _wait(self, ref: Any) -> Done | Raised:
        with self._lock:
            self._in_flight.add(ref)
        try:
            if self.stopping():
                raise FiringCancelled()
            return cast("Done | Raised", ray.get(ref))  # (a stop cancels it: see _watch)
        except rex.TaskCancelledError:
            raise FiringCancelled() from None
        except _DIED:
            raise
        except rex.RayError as exc:  # the worker could not even run it: the flow's code is not importable there, say
            cause = getattr(exc, "cause", None)  # (a RayTaskError's own first line is only `ray::fire() (pid=…)`)
            why = f"{type(cause).__name__}: {_first_line(cause)}" if isinstance(cause, BaseException) else _first_line(exc)
            raise FlowtapeError(f"a Ray worker could not run it: {why} (what must be importable on the "
                                "workers: see the README, Running on a cluster)") from None
        finally:
            with self._lock:
                self._in_flight.discard(ref)

    def _watch(self) -> None:
        """Cancel the firings in flight once the run is asked to stop. (A firing blocks on its result:
        polling it with a timeout costs Ray several milliseconds a firing.)"""
        while not self._closed.wait(POLL):
            if self.stopping():
                with self._lock:
                    refs = list(self._in_flight)
                for ref in refs:
                    with contextlib.suppress(Exception):  # one already finished, or its worker gone
                        ray.cancel(ref, force=True)

    def _flow_files(self, cls: type) -> dict[str, str]:
        """The flow file a class is defined in, when the loader imported it by path: by its private
        name, and its path in the job's working directory (absolute on a local instance). (One
        outside that folder goes by value.)"""
        module = sys.modules.get(cls.__module__)
        if module is None or not cls.__module__.startswith(MODULE_PREFIX) or not getattr(module, "__file__", None):
            return {}
        path = Path(module.__file__ or "").resolve()
        if self._local:
            return {cls.__module__: str(path)}
        try:
            return {cls.__module__: path.relative_to(self.base_dir).as_posix()}
        except ValueError:
            cloudpickle.register_pickle_by_value(module)
            return {}

    def _shared_token(self, work_dir: Path) -> str:
        """A tool's files go to the run's work folder: the token every worker must find there."""
        with self._lock:
            if self._shared is None:
                work_dir.mkdir(parents=True, exist_ok=True)
                self._shared = secrets.token_hex(8)
                (work_dir / SHARED_MARK).write_text(self._shared, encoding="utf-8")
            return self._shared

    def close(self) -> None:
        self._closed.set()
        if self._ours:
            with contextlib.suppress(Exception):  # a cluster already gone has nothing to let go of
                ray.shutdown()
            self._ours = False


def _reachable(address: str) -> None:
    """A head's HOST:PORT that answers: Ray itself would try to reach one that does not for minutes."""
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return  # `auto`, or `ray://`: Ray says soon enough when there is nothing there
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc.strerror or exc}): is `ray start --head` running there?") from None


def _unpicklable(job: Job, exc: BaseException) -> str:
    """What of a firing cannot be pickled, named: `holder.lock: cannot pickle '_thread.lock' object`."""
    named = [(f"{job.path}.{k}", v) for k, v in vars(job.obj).items()] + [
        (f"its input {i + 1}", v) for i, v in enumerate(job.values)]
    for where, value in named:
        try:
            cloudpickle.dumps(value)
        except Exception as inner:  # noqa: BLE001 - whatever pickling raises
            return f"{where}: {_first_line(inner)}"
    while exc.__cause__ is not None or exc.__context__ is not None:  # the root of Ray's own message
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
