"""The run registry: every run the server knows by id (those it started, those found in the runs
directory, ones started from a terminal as they appear), each checked sound before its story is
told; flows launched in child processes (child.py), followed as they write (follow.py), stopped
(stopping.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowtape.errors import TraceCorruption
from flowtape.rundir import TAPE, new_run_id, now_iso, read_summary, valid_run_id
from flowtape.streamed import check_run
from flowtape.trust import looks_sealed

from . import child, progress, stopping
from . import protocol as P
from .family import left_behind, reap, started_here
from .follow import Follower
from .run import Run
from .tapeindex import TapeIndex
from .workspace import Locator, path_to_uri

if TYPE_CHECKING:
    from .server import FlowtapeServer

DIR_POLL = 0.2  # how often the runs dir is scanned for runs started elsewhere
PREINDEX = 3  # finished runs read in the background at startup, newest first ...
PREINDEX_MAX_BYTES = 32 << 20  # ... when small: a big tape's last step is answered from its end
CATCH_UP_WAIT = 5.0  # seconds a request about a run found on disk waits for its follower to read what its tape held
CHECK_FIRST_BYTES = 8 << 20  # a tape not sealed here up to this size is checked before the first answer; a bigger one meanwhile


class RunManager:
    def __init__(self, server: FlowtapeServer) -> None:
        self.server = server
        self.runs: dict[str, Run] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.locator = Locator()
        self.listeners: list[Callable[[Run], None]] = []  # called when a run finishes
        self.follower = Follower(server, self.locator, self.listeners, self.spawn, self._live_sessions)
        self._poller: asyncio.Task[None] | None = None

    # ---- places ---------------------------------------------------------------------------------

    @property
    def runs_dir(self) -> Path:
        return self.server.root / ".flowtape" / "runs"

    def run_dir_of(self, run_id: str) -> Path:
        """The directory of run `run_id`, refusing ids that would escape the runs directory."""
        base = self.runs_dir.resolve()
        if "/" in run_id or "\\" in run_id or run_id in (".", ".."):
            raise P.invalid(f"bad run id {run_id[:80]!r}: it escapes the runs directory {base}")
        if not valid_run_id(run_id) or len(run_id) > 200:
            raise P.invalid(f"bad run id {run_id[:80]!r}: a run id is up to 200 letters, digits, '-', '_' and '.'")
        target = (base / run_id).resolve()
        if target.parent != base:
            raise P.invalid(f"bad run id {run_id!r}: it escapes the runs directory {base}")
        return target

    def get(self, run_id: str) -> Run:
        """A known run (discovering it on disk if need be), or a -32001 error."""
        run_dir = self.run_dir_of(run_id)
        run = self.runs.get(run_id)
        if run is not None and self._forget_if_gone(run):
            raise P.not_found(f"run {run_id!r} is gone: {run.run_dir / TAPE} no longer exists")
        if run is None and (run_dir / TAPE).is_file():
            run = self._register(run_id, run_dir, live=False)
            self._take_up(run)
        if run is None:
            raise P.not_found(f"unknown run {run_id!r}: no such run in {self.runs_dir}")
        if run.junk:
            raise P.not_found(f"{run.run_dir} holds no run: no run.json and no readable tape")
        return run

    def listed(self) -> list[Run]:
        """The runs known, less those whose directory was deleted since."""
        return [run for run in list(self.runs.values()) if not run.junk and not self._forget_if_gone(run)]

    def _forget_if_gone(self, run: Run) -> bool:
        """Drop a finished run whose tape was deleted (or moved) since; True if it was."""
        if run.junk or run.live or (run.run_dir / TAPE).is_file() or run.never_started():
            return False
        self.runs.pop(run.run_id, None)
        return True

    async def checked(self, run: Run) -> None:
        """-32003 unless a finished run's tape is sound (verify.check_run: sealed by its writer on
        this machine, else verified in full, once for the file as it is): the stepper never shows
        an edited or cut-short tape's story as the run's. A run being written is the writer's."""
        if run.live or not run.finished:
            return
        try:
            stat = os.stat(run.index.path)
        except OSError:
            return  # no tape: what asks for it says why
        stamp = (stat.st_size, stat.st_mtime_ns)
        async with run.checking:
            if run.verdict is None or run.verdict[0] != stamp:
                summary = read_summary(run.run_dir)
                if stat.st_size > CHECK_FIRST_BYTES or (summary is not None and looks_sealed(run.index.path, summary.tape)):
                    # most likely the sealed tape (one stat), or a big tape from elsewhere: answer
                    # now, and check it meanwhile (in a thread, the tape streamed: verify_streamed);
                    # a tape that fails is refused from then on
                    run.verdict = (stamp, None)
                    self.spawn(self._check(run, stamp, told=True))
                else:
                    await self._check(run, stamp)
        if run.verdict is not None and run.verdict[1] is not None:
            raise P.damaged(run.run_id, run.verdict[1])

    async def _check(self, run: Run, stamp: tuple[int, int], told: bool = False) -> None:
        """Check the run's tape (check_run); `told`: it was answered about meanwhile, so a tape
        found not to hold together is said to the user too, not only refused from now on."""
        try:
            run.checked_steps = await asyncio.to_thread(check_run, run.run_dir)
            run.verdict = (stamp, None)
        except TraceCorruption as exc:
            run.verdict = (stamp, str(exc))
            if told:
                self.server.warn(f"{P.damaged(run.run_id, exc).message}: what was shown of it is not to be trusted, "
                                 "and it is refused from now on")
        except OSError:
            pass  # gone or unreadable meanwhile: what reads it says so

    async def ready(self, run: Run, until_step: int | None = None) -> TapeIndex:
        """The run's index, read up to what is on disk now (or, for a finished run, at least up to
        `until_step`: the first page of a million-step run need not wait for the whole tape)."""
        await self.checked(run)
        if not run.live:
            if run.index.offset and _size(run.index.path) < run.index.offset:
                was, run.index = run.index.offset, TapeIndex(run.run_dir)  # read it again, as it is now, through:
                await asyncio.to_thread(run.index.ingest_all)  # its own step count is the one to tell from now on
                raise P.damaged(run.run_id, f"the tape is shorter than when it was read ({_size(run.index.path)} bytes, "
                                            f"was {was}): it was cut short or replaced; ask again to read it as it is now")
            await asyncio.to_thread(run.index.ingest_all, until_step)
        await self.caught_up(run)
        if run.index.header is None and run.index.corrupt is not None:
            raise P.damaged(run.run_id, run.index.corrupt)
        if run.index.header is None:
            if run.starting():
                raise P.not_found(f"run {run.run_id} is starting: it has no steps yet")
            if run.status == "stopped":
                raise P.not_found(f"run {run.run_id} was stopped before it started, so it has no steps")
            why = run.error or "no tape was written"
            raise P.not_found(f"run {run.run_id} failed before it started, so it has no steps: {why}")
        return run.index

    @staticmethod
    async def caught_up(run: Run) -> None:
        """Wait a little for the follower of a run found on disk to read what its tape held when
        the request came: a run started from a terminal, or copied in, may have ended (or be
        whole) before the directory's poll found it, and a request can come before the follower's
        first reads (they wait their turn in the server's thread pool). The follower alone reads a live tape, so that every step it reads is sent to
        the client. A run this server started streams as it goes: not waited for."""
        if not run.live or run.owned:
            return
        index = run.index
        size = _size(index.path)
        deadline = asyncio.get_running_loop().time() + CATCH_UP_WAIT
        while (run.live and not index.finished and index.corrupt is None and index.offset + index.torn < size
               and asyncio.get_running_loop().time() < deadline):
            await asyncio.sleep(0.02)

    def _register(self, run_id: str, run_dir: Path, live: bool) -> Run:
        run = self.runs[run_id] = Run.on_disk(run_id, run_dir, live)
        return run

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ---- discovering runs -------------------------------------------------------------------------

    def start(self) -> bool:
        """Register the runs already on disk, follow those still going, then watch for new ones.
        False when it was started before."""
        if self._poller is not None:
            return False
        for run_id, run_dir in self._dirs():
            self._take_up(self._register(run_id, run_dir, live=False))
        self._poller = asyncio.ensure_future(self._poll_dir())
        self.spawn(self._preindex())
        return True

    def _take_up(self, run: Run) -> None:
        """A run found on disk that run.json says is running: followed while its process runs,
        else failed (its process died while nobody watched, or the pid is not the run's)."""
        if run.status == "running" and child.alive(run):
            run.live = True
            self.spawn(self.follower.follow(run))
        elif run.status == "running":
            run.status, run.finished = "failed", True
            self.spawn(self._note_dead(run))

    async def _note_dead(self, run: Run) -> None:
        """A run whose process died while no server watched: failed, as far as the editor is told."""
        await asyncio.to_thread(run.index.ingest_all)
        header, end = run.index.header, run.index.end
        if header is None and read_summary(run.run_dir) is None:
            run.junk = True
            return
        if header is not None and not run.uri:  # run.json unreadable: the tape's header says
            run.workflow, run.started_at = header.workflow, header.startedAt
            run.uri = path_to_uri(header.flowFile) if header.flowFile else ""
            run.resumed_from, run.resumed_at = header.resumedFrom, header.resumedAtStep
        if end is not None:  # the tape ended: its end says how, whatever run.json says
            run.status = end.status
            run.error = end.error.message if end.error is not None else None
            return
        await self.follower.close_dead_tape(run)

    async def _preindex(self) -> None:
        """Read the newest finished runs in the background, so that their first step detail is
        answered from the index instead of waiting for a whole tape to be read."""
        await asyncio.sleep(1.0)  # let the editor's first requests go first
        finished = sorted((r for r in self.runs.values() if not r.live), key=lambda r: r.started_at or "", reverse=True)
        for run in finished[:PREINDEX]:
            with contextlib.suppress(OSError):
                if run.index.path.stat().st_size > PREINDEX_MAX_BYTES:
                    continue
            try:
                await asyncio.to_thread(run.index.ingest_all)
            except Exception:  # noqa: BLE001 - a bad tape is reported when someone asks for it
                continue

    def _dirs(self) -> list[tuple[str, Path]]:
        try:
            with os.scandir(self.runs_dir) as entries:
                return [(e.name, Path(e.path)) for e in entries if e.is_dir() and valid_run_id(e.name)]
        except OSError:
            return []

    def _live_sessions(self) -> set[int]:
        """The sessions of the flows this server started that still run (each leads its own)."""
        return {r.proc.pid for r in self.runs.values() if r.proc is not None and r.proc.returncode is None}

    async def _poll_dir(self) -> None:
        polls = 0
        while True:
            await asyncio.sleep(DIR_POLL)
            polls += 1
            if polls % 10 == 0:  # processes flows left behind that exited since: collected, not left as zombies
                await asyncio.to_thread(lambda: reap(list(left_behind(started_here))))
            try:
                for run_id, run_dir in self._dirs():
                    if run_id not in self.runs:
                        run = self._register(run_id, run_dir, live=True)
                        run.finished = False
                        self.spawn(self.follower.follow(run))
            except Exception:  # noqa: BLE001 - the poller must outlive any odd directory
                self.server.log_error("scanning the runs directory failed")

    # ---- starting runs ------------------------------------------------------------------------------

    async def launch(
        self, flow: Path, *, workflow: str | None = None, inputs: dict[str, Any] | None = None,
        max_workers: int | None = None, resume_from: Run | None = None, at_step: int | None = None,
        executor: str | None = None, ray_address: str | None = None,
        edits: list[str] | None = None,
    ) -> Run:
        """Start `flowtape run` in a child process; returns at once, the run streams on its own."""
        if workflow is not None and not workflow.isidentifier():  # (a NUL byte could not even be passed)
            raise P.invalid(f"workflow {workflow!r} is no workflow name: a @workflow function's name is a Python identifier")
        run_id = new_run_id()
        run_dir = self.runs_dir / run_id
        run = Run(run_id, run_dir, TapeIndex(run_dir), uri=path_to_uri(str(flow)), workflow=workflow or "",
                  owned=True, live=True, started_at=now_iso())
        if resume_from is not None:  # (at no step: where it stopped, after its last step)
            run.resumed_from, run.resumed_at = resume_from.run_id, at_step if at_step is not None else resume_from.index.steps
            run.edits = len(edits or [])
        self.runs[run_id] = run
        args = child.command(
            flow, run_id, self.runs_dir, workflow=workflow, inputs=bool(inputs), max_workers=max_workers,
            executor=executor, ray_address=ray_address, at_step=at_step, edits=edits or [],
            resume_from=resume_from.run_dir if resume_from is not None else None,
        )
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            await child.start(run, args, flow.parent, inputs)
        except (OSError, ValueError) as exc:  # (ValueError: a NUL byte in a path or argument)
            del self.runs[run_id]
            raise P.invalid(f"cannot start the flow: {exc}") from None
        self.spawn(child.read_output(run))
        self.spawn(self.follower.follow(run))
        self.spawn(progress.begin(self.server, run))
        return run

    # ---- work-done progress (progress.py) -------------------------------------------------------------

    def run_for_token(self, token: Any) -> Run | None:
        return next((r for r in self.runs.values() if r.progress_token == token), None)

    # ---- stopping ---------------------------------------------------------------------------------------

    async def stop_started(self) -> None:
        """Stop every flow the server started, as `flowtape.stop` does (on `shutdown`)."""
        started = [run for run in self.runs.values() if run.proc is not None and not run.finished]
        await asyncio.gather(*(stopping.stop(run) for run in started))

    def stop_all(self) -> None:
        """Stop every flow the server started, now and without the event loop (on `exit`, or when
        the editor goes away): stopping.stop_now. What reads the tapes stops first."""
        for run in self.runs.values():
            run.index.closing = True
        if self._poller is not None:
            with contextlib.suppress(RuntimeError):  # its loop is gone
                self._poller.cancel()
        stopping.stop_now(self.runs.values())


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0

