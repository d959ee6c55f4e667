"""The run registry: flows run in child processes, tapes followed as they are written (ours and
those of runs started from a terminal), steps batched to the client, work-done progress, stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from flowtape.errors import ErrorReport, TraceCorruption
from flowtape.ownership import ProcessStamp, can_tell, is_the_process, stamp_of
from flowtape.rundir import TAPE, new_run_id, now_iso, read_summary, runs_process, valid_run_id
from flowtape.rundir import process_alive as _alive
from flowtape.streamed import check_run
from flowtape.tape import ErrorInfo, Step
from flowtape.trust import looks_sealed
from flowtape.usage import Usage

from . import progress
from . import protocol as P
from .failures import detail_of, not_started
from .family import Family, clear_left_behind, family_of, left_behind, reap, started_here, take_down
from .tapeindex import TapeIndex
from .workspace import Locator, client_path, path_to_uri

if TYPE_CHECKING:
    from .server import FlowtapeServer

TICK = 0.02  # how often a live tape is polled
FLUSH_AGE = 0.05  # a batch of steps waits at most this long
FLUSH_SIZE = 500  # ... or is sent once this many steps are pending
DIR_POLL = 0.2  # how often the runs dir is scanned for runs started elsewhere
NO_RUN_GRACE = 2.0  # a new directory in the runs dir with neither run.json nor a tape header this long is no run
STOP_GRACE = 2.0  # after SIGTERM, before a second SIGTERM; as long again before SIGKILL
STDERR_KEEP = 16 << 10
PREINDEX = 3  # finished runs read in the background at startup, newest first ...
PREINDEX_MAX_BYTES = 32 << 20  # ... when small: a big tape's last step is answered from its end
CHECK_FIRST_BYTES = 8 << 20  # a tape not sealed here up to this size is checked before the first answer; a bigger one meanwhile


@dataclass(eq=False)
class Run:
    run_id: str
    run_dir: Path
    index: TapeIndex
    uri: str = ""  # the flow file
    workflow: str = ""
    owned: bool = False  # started by this server
    live: bool = False  # being streamed
    proc: asyncio.subprocess.Process | None = None
    pid: int | None = None  # an external run's process, from run.json
    process: ProcessStamp | None = None  # its stamp (run.json's; for a child of ours, taken as it started)
    status: str = "running"
    started_at: str = ""
    finished_at: str | None = None
    resumed_from: str | None = None
    resumed_at: int | None = None
    edits: int = 0  # a fork's edits (run.json says; flowtape.fork knows them at once)
    usage: Usage | None = None  # its model calls, once it ended (run.json, or the end record)
    announced: bool = False
    finished: bool = False
    stopping: bool = False
    stderr: bytes = b""
    stdout: bytes = b""  # the end of what `flowtape run --json` printed: an ErrorReport when it could not start
    error: str | None = None
    error_detail: P.ErrorDetail | None = None  # as runFinished said it (or run.json, for a run found on disk)
    error_info: ErrorInfo | None = None  # how the tape (or run.json) tells its failure
    outputs: bytes = b""  # a finished run's outputs, encoded
    junk: bool = False  # a directory of the runs dir that holds no run (no run.json, no readable tape): not listed
    progress_token: str | None = None
    progress_begun: bool = False
    progress_ended: bool = False
    progress_at: float = 0.0
    pid_checked: float = 0.0
    gone_since: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    family: Family = field(default_factory=dict)  # what the flow had started when it was stopped
    # whether the finished tape is sound, for the file as it was then (size, mtime): None, or why not
    verdict: tuple[tuple[int, int], str | None] | None = None
    checked_steps: int | None = None  # how many steps the checked tape holds (a killed run's run.json cannot say)
    checking: asyncio.Lock = field(default_factory=asyncio.Lock)


class RunManager:
    def __init__(self, server: FlowtapeServer) -> None:
        self.server = server
        self.runs: dict[str, Run] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.locator = Locator()
        self.listeners: list[Callable[[Run], None]] = []  # called when a run finishes
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
        if run.junk or run.live or (run.run_dir / TAPE).is_file() or self.never_started(run):
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
        if run.index.header is None and run.index.corrupt is not None:
            raise P.damaged(run.run_id, run.index.corrupt)
        if run.index.header is None:
            if self.starting(run):
                raise P.not_found(f"run {run.run_id} is starting: it has no steps yet")
            if run.status == "stopped":
                raise P.not_found(f"run {run.run_id} was stopped before it started, so it has no steps")
            why = run.error or "no tape was written"
            raise P.not_found(f"run {run.run_id} failed before it started, so it has no steps: {why}")
        return run.index

    @staticmethod
    def starting(run: Run) -> bool:
        """A live run whose process has not written its tape's header yet (it imports the flow)."""
        return run.live and not run.finished and run.index.header is None and run.index.corrupt is None

    @staticmethod
    def never_started(run: Run) -> bool:
        """A run this server started that failed before writing its tape (a flow that does not
        load, a bad input): kept, so that asking for its steps says why there are none."""
        return run.owned and run.finished and run.index.header is None and not run.index.offset

    def _register(self, run_id: str, run_dir: Path, live: bool) -> Run:
        run = Run(run_id, run_dir, TapeIndex(run_dir), live=live)
        summary = read_summary(run_dir)
        if summary is not None:
            run.status = summary.status
            run.workflow = summary.workflow
            run.uri = path_to_uri(summary.flowFile) if summary.flowFile else ""
            run.started_at = summary.startedAt
            run.finished_at = summary.finishedAt
            run.resumed_from = summary.resumedFrom
            run.resumed_at = summary.resumedAtStep
            run.edits = summary.edits
            run.usage = summary.usage
            run.pid, run.process = summary.pid, summary.process
            run.finished = summary.status != "running"
            run.outputs = bytes(summary.outputs) if summary.outputs else b""
            if summary.error is not None:
                run.error, run.error_info = summary.error.message, summary.error
        self.runs[run_id] = run
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
        if run.status == "running" and self.alive(run):
            run.live = True
            self.spawn(self._follow(run))
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
        await self._close_dead_tape(run)

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
                        self.spawn(self._follow(run))
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
        args = [sys.executable, "-m", "flowtape", "run", str(flow), "--json", "--run-id", run_id,
                "--runs-dir", str(self.runs_dir)]
        if workflow:
            args.append(f"--workflow={workflow}")  # attached: a name that starts with '-' is not an option
        if inputs:
            args += ["--inputs-json", "-"]  # on stdin: no command-line size limit, nothing taken for an option
        if max_workers is not None:
            args += ["--max-workers", str(max_workers)]
        if executor is not None:
            args.append(f"--executor={executor}")
        if ray_address is not None:
            args.append(f"--ray-address={ray_address}")  # (attached: an address is never taken for an option)
        if resume_from is not None:
            args += ["--resume-from", str(resume_from.run_dir)]
            if at_step is not None:
                args += ["--at-step", str(at_step)]
            args += [f"--set={edit}" for edit in edits or []]  # a fork's (attached: a value may start with '-')
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            run.proc = await asyncio.create_subprocess_exec(
                *args, cwd=str(flow.parent), env=env,
                stdin=asyncio.subprocess.PIPE if inputs else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )
            run.process = stamp_of(run.proc.pid)  # (the child has exec'd: its command line is the flow's)
            started_here.add(run.proc.pid)
            if inputs and run.proc.stdin is not None:
                run.proc.stdin.write(msgspec.json.encode(inputs))
                run.proc.stdin.close()
        except (OSError, ValueError) as exc:  # (ValueError: a NUL byte in a path or argument)
            del self.runs[run_id]
            raise P.invalid(f"cannot start the flow: {exc}") from None
        self.spawn(self._read_output(run))
        self.spawn(self._follow(run))
        self.spawn(progress.begin(self.server, run))
        return run

    async def _read_output(self, run: Run) -> None:
        """Keep the end of what the flow process prints (its stdout must be drained, or a flow
        with big outputs would block on a full pipe)."""
        assert run.proc is not None and run.proc.stderr is not None and run.proc.stdout is not None

        async def keep(stream: asyncio.StreamReader, name: str) -> None:
            while chunk := await stream.read(8192):
                setattr(run, name, (getattr(run, name) + chunk)[-STDERR_KEEP:])

        await asyncio.gather(keep(run.proc.stderr, "stderr"), keep(run.proc.stdout, "stdout"))

    # ---- following a run ------------------------------------------------------------------------------

    async def _follow(self, run: Run) -> None:
        try:
            await self._stream(run)
        except Exception as exc:  # noqa: BLE001 - one broken run must not take the others down
            self.server.log_error(f"following run {run.run_id} failed: {exc!r}")
            if not run.finished:
                run.error = run.error or f"the server stopped following the run: {exc}"
                await self._finish(run, "failed")

    async def _stream(self, run: Run) -> None:
        index = run.index
        pending: list[Step] = []
        last_flush = time.monotonic()
        exit_seen = False
        while True:
            before = index.offset
            new = await asyncio.to_thread(index.ingest)
            progressed = index.offset != before
            if index.header is not None and not run.announced:
                await asyncio.to_thread(self.locator.prepare, index.header)  # (reads files: not on the event loop)
                self._announce(run)
            pending.extend(new)
            now = time.monotonic()
            while len(pending) >= FLUSH_SIZE:
                self._send_steps(run, pending[:FLUSH_SIZE])
                del pending[:FLUSH_SIZE]
                last_flush = now
            if pending and (now - last_flush >= FLUSH_AGE or index.finished):
                self._send_steps(run, pending)
                pending = []
                last_flush = now
            if new:
                progress.report(self.server, run)
            if index.finished:
                break
            if progressed:
                await asyncio.sleep(0)
                continue
            if exit_seen:  # the process is gone and its tape is read to the end: it has no end record
                if run.proc is not None:  # what it started goes with it, as on a stop
                    await asyncio.to_thread(clear_left_behind, run.proc.pid, self._live_sessions())
                await self._close_dead_tape(run)
                pending.extend(await asyncio.to_thread(index.ingest))
                for i in range(0, len(pending), FLUSH_SIZE):
                    self._send_steps(run, pending[i : i + FLUSH_SIZE])
                break
            if await self._process_gone(run, now):
                exit_seen = True  # read once more: what it wrote last may not be read yet
                continue
            await asyncio.sleep(TICK)
        if run.announced or run.owned:
            if not run.announced:
                self._announce(run)
            end = index.end
            await self._finish(run, end.status if end is not None else ("stopped" if run.stopping else "failed"))
        else:  # a directory that never became a run
            run.junk, run.finished, run.live = True, True, False

    async def _process_gone(self, run: Run, now: float) -> bool:
        if run.proc is not None:
            if run.proc.returncode is None:
                return False
            await run.proc.wait()
            await asyncio.sleep(0.05)  # let the stderr reader take the last bytes
            return True
        if now - run.pid_checked < 0.5:
            return False
        run.pid_checked = now
        summary = read_summary(run.run_dir)
        if summary is not None and summary.pid is not None:
            run.pid, run.process = summary.pid, summary.process
        if run.pid is not None:
            return not self.alive(run)
        if summary is None and run.index.header is None:  # a run writes both as it starts: this is no run
            run.gone_since = run.gone_since or now
            return now - run.gone_since > NO_RUN_GRACE
        # no pid known: gone once run.json says it finished and the tape still has no end a while later
        if summary is not None and summary.status != "running":
            run.gone_since = run.gone_since or now
            return now - run.gone_since > 1.0
        return False

    async def _close_dead_tape(self, run: Run) -> None:
        """The process died without an end record: seal the tape `stopped` or `failed`."""
        code = run.proc.returncode if run.proc is not None else None
        status = "stopped" if run.stopping else "failed"
        detail = _stderr_line(run.stderr)
        if run.stopping:
            message = None
        elif code is not None:
            message = f"the flow process exited with code {code} before the run finished" + (f": {detail}" if detail else "")
        else:
            message = "the flow process is gone and its tape has no end record"
        run.error = message if status == "failed" else None
        if run.index.header is None:
            run.error = detail or message or "the run did not start"
            return
        if run.proc is None:
            # not a flow this server started: said, never written to (its process may live on in
            # another pid namespace or on another host that shares the directory)
            summary = read_summary(run.run_dir)
            if summary is not None and summary.status != "running":
                run.error = f"the tape has no end record, though run.json says the run {summary.status}: it was cut short"
            return
        await asyncio.to_thread(run.index.seal_run, status, message)

    def step_info(self, run: Run, step: Step) -> P.StepInfo:
        header = run.index.header
        assert header is not None
        uri, rng = self.locator.actor_range(header, step.actor)
        return P.StepInfo(
            step=step.step, actor=step.actor, actorKind=step.kind, fireCount=step.fireCount,
            journalSeq=step.journalSeq, replayed=step.replayed, uri=uri, range=rng, durationMs=step.dur / 1000.0,
            startMs=step.at / 1000.0, diverged=step.step in run.index.diverged_steps,
        )

    def _announce(self, run: Run) -> None:
        run.announced = True
        header = run.index.header
        if header is not None:
            run.workflow = header.workflow
            run.uri = path_to_uri(header.flowFile) if header.flowFile else run.uri
            run.started_at = header.startedAt
            run.resumed_from, run.resumed_at = header.resumedFrom, header.resumedAtStep
            if header.resumedFrom and not run.edits:  # a fork started elsewhere: its run.json counts its edits
                summary = read_summary(run.run_dir)
                run.edits = summary.edits if summary is not None else 0
            if run.proc is None and run.progress_token is None:
                self.spawn(progress.begin(self.server, run))
        self.server.send(P.RUN_STARTED, P.RunStarted(
            runId=run.run_id, uri=run.uri, workflow=run.workflow, runDir=client_path(run.run_dir),
            resumedFrom=run.resumed_from, resumedAtStep=run.resumed_at, edits=run.edits,
        ))

    def _send_steps(self, run: Run, steps: list[Step]) -> None:
        if steps:
            self.server.send(P.STEPS, P.Steps(runId=run.run_id, steps=[self.step_info(run, s) for s in steps]))

    async def _finish(self, run: Run, status: str) -> None:
        if run.proc is not None and run.proc.returncode is not None:
            started_here.discard(run.proc.pid)
        run.finished = True
        run.live = False
        run.status = status
        end = run.index.end
        run.finished_at = end.finishedAt if end is not None else now_iso()
        run.usage = end.usage if end is not None else None
        error: str | None = None
        detail: P.ErrorDetail | None = None
        if end is not None and end.error is not None:
            error, run.error_info = end.error.message, end.error
            detail = detail_of(end.error, run.index.header, self.server.root)
        elif status == "failed":
            error = run.error or _stderr_line(run.stderr) or "the run failed"
            detail = not_started(error, _error_report(run.stdout) if run.index.header is None else None)
        run.error_detail = detail
        run.outputs = bytes(end.outputs) if end is not None and end.outputs else b""
        outputs = msgspec.json.decode(run.outputs) if run.outputs else {}
        diverged = [d.plain() for d in (end.replayStopped if end else run.index.diverged)]
        self.server.send(P.RUN_FINISHED, P.RunFinished(
            runId=run.run_id, status=status, outputs=outputs, steps=run.index.steps, error=error,
            errorDetail=detail, replayStopped=diverged or None, usage=run.usage,
        ))
        progress.end(self.server, run)
        run.done.set()
        for listener in self.listeners:
            try:
                listener(run)
            except Exception:  # noqa: BLE001
                self.server.log_error(f"a run listener failed for {run.run_id}")

    # ---- work-done progress (progress.py) -------------------------------------------------------------

    def run_for_token(self, token: Any) -> Run | None:
        return next((r for r in self.runs.values() if r.progress_token == token), None)

    # ---- stopping ---------------------------------------------------------------------------------------

    @staticmethod
    def alive(run: Run) -> bool:
        """Whether the run's process runs: our own child until it exits; for a run started
        elsewhere, the pid its run.json names while it is provably the run's (ownership.py: the
        start time and command line it recorded), else the run is gone, whatever has that pid now."""
        if run.proc is not None:
            return run.proc.returncode is None and (run.process is None or is_the_process(run.process))
        if can_tell():
            return runs_process(run.pid, run.process) is not None
        return _alive(run.pid)  # no /proc: its pid on its word, for listing (never signalled: see `signalled`)

    @staticmethod
    def signalled(run: Run) -> int | None:
        """The pid a stop may signal: our own child while it runs, or a run's process that is
        provably the run's. None for anything else: no signal ever reaches a process that a
        reused pid or a planted run.json names."""
        if run.proc is not None:
            return run.proc.pid if run.proc.returncode is None else None
        stamp = runs_process(run.pid, run.process)
        return stamp.pid if stamp is not None else None

    async def stop(self, run: Run) -> bool:
        """SIGTERM, a second SIGTERM after a grace period, then SIGKILL. True if it was running.
        A run whose process is not provably its own is not signalled: it is reported gone (its
        follower finds it so and finishes it `failed`)."""
        if run.finished or not run.live:
            return False
        pid = self.signalled(run)
        if pid is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(run.done.wait(), 5.0)
            return False
        run.stopping = True
        if run.proc is not None:
            run.family = await asyncio.to_thread(family_of, pid)
        for sig, wait in ((signal.SIGTERM, STOP_GRACE), (signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, STOP_GRACE)):
            if not self._signal(run, sig):
                break
            if await self._exited(run, wait):
                break
        take_down(run.proc.pid if run.proc is not None else None, run.family)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(run.done.wait(), 5.0)
        return True

    def _signal(self, run: Run, sig: int) -> bool:
        pid = self.signalled(run)  # asked again before each signal: the process may have gone meanwhile
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

    async def _exited(self, run: Run, wait: float) -> bool:
        if run.proc is not None:
            try:
                await asyncio.wait_for(run.proc.wait(), wait)
                return True
            except TimeoutError:
                return False
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not self.alive(run):
                return True
            await asyncio.sleep(0.05)
        return False

    async def stop_started(self) -> None:
        """Stop every flow the server started, as `flowtape.stop` does (on `shutdown`)."""
        started = [run for run in self.runs.values() if run.proc is not None and not run.finished]
        await asyncio.gather(*(self.stop(run) for run in started))

    @staticmethod
    def _child_alive(run: Run) -> bool:
        """Whether our own child still runs, told without the event loop (its returncode may never
        be set now): the process under its pid is still the one it started as."""
        assert run.proc is not None
        return is_the_process(run.process) if run.process is not None else _alive(run.proc.pid)

    def stop_all(self) -> None:
        """Stop every flow the server started, now and without the event loop (on `exit`, or when
        the editor goes away): SIGTERM, a second one, then SIGKILL, as `stop` does. A flow that
        had to be killed gets its tape sealed `stopped` here, as the server will not follow it."""
        for run in self.runs.values():
            run.index.closing = True
        if self._poller is not None:
            with contextlib.suppress(RuntimeError):  # its loop is gone
                self._poller.cancel()
        # os.kill and polling, not the asyncio process: this also runs after the event loop has closed
        live = [run for run in self.runs.values() if run.proc is not None and self._child_alive(run)]
        asked = {id(run) for run in live if run.stopping}  # `stop` sent these their first SIGTERM
        for run in live:
            assert run.proc is not None
            run.family.update(family_of(run.proc.pid))
        for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGKILL):
            for run in live:
                assert run.proc is not None
                if id(run) in asked:
                    asked.discard(id(run))
                elif self._child_alive(run):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        (os.killpg if sig == signal.SIGKILL else os.kill)(run.proc.pid, sig)
                run.stopping = True
            deadline = time.monotonic() + STOP_GRACE
            while live and time.monotonic() < deadline:
                time.sleep(0.05)
                live = [run for run in live if self._child_alive(run)]
            if not live:
                break
        for run in self.runs.values():
            if run.stopping:
                take_down(run.proc.pid if run.proc is not None else None, run.family)
        for run in self.runs.values():
            if run.proc is not None and run.stopping and not run.finished and run.index.header is not None:
                run.index.closing = False
                run.index.seal_run("stopped", None)


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _stderr_line(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
    flowtape = [ln for ln in lines if ln.startswith("flowtape: ") and "warning" not in ln]
    text = flowtape[-1] if flowtape else (lines[-1] if lines else "")
    return text.removeprefix("flowtape: ")[:2000]


def _error_report(stdout: bytes) -> ErrorReport | None:
    try:
        return msgspec.json.decode(stdout.strip().rsplit(b"\n", 1)[-1], type=ErrorReport)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
