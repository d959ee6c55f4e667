"""Following a run's tape as it is written (ours, or a run started from a terminal): its steps sent
to the client in batches, its progress reported, its end told, and a tape whose process died
without an end record closed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import msgspec
from flowtape.rundir import now_iso, read_summary
from flowtape.tape import Step

from . import progress
from . import protocol as P
from .child import alive, error_report, stderr_line
from .failures import detail_of, not_started
from .family import clear_left_behind, started_here
from .run import Run
from .workspace import Locator, client_path, path_to_uri

if TYPE_CHECKING:
    from .server import FlowtapeServer

TICK = 0.02  # how often a live tape is polled
FLUSH_AGE = 0.05  # a batch of steps waits at most this long
FLUSH_SIZE = 500  # ... or is sent once this many steps are pending
NO_RUN_GRACE = 2.0  # a new directory in the runs dir with neither run.json nor a tape header this long is no run


class Follower:
    """Follows runs to their end, telling the client; `listeners` are called as each one finishes."""

    def __init__(self, server: FlowtapeServer, locator: Locator, listeners: list[Callable[[Run], None]],
                 spawn: Callable[[Coroutine[Any, Any, Any]], None], live_sessions: Callable[[], set[int]]) -> None:
        self.server = server
        self.locator = locator
        self.listeners = listeners
        self.spawn = spawn
        self.live_sessions = live_sessions  # the sessions of the flows this server started that still run

    async def follow(self, run: Run) -> None:
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
                    await asyncio.to_thread(clear_left_behind, run.proc.pid, self.live_sessions())
                await self.close_dead_tape(run)
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
            return not alive(run)
        if summary is None and run.index.header is None:  # a run writes both as it starts: this is no run
            run.gone_since = run.gone_since or now
            return now - run.gone_since > NO_RUN_GRACE
        # no pid known: gone once run.json says it finished and the tape still has no end a while later
        if summary is not None and summary.status != "running":
            run.gone_since = run.gone_since or now
            return now - run.gone_since > 1.0
        return False

    async def close_dead_tape(self, run: Run) -> None:
        """The process died without an end record: seal the tape `stopped` or `failed`."""
        code = run.proc.returncode if run.proc is not None else None
        status = "stopped" if run.stopping else "failed"
        detail = stderr_line(run.stderr)
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
            self.server.send(P.STEPS, P.Steps(runId=run.run_id, steps=[step_info(run, s, self.locator) for s in steps]))

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
            error = run.error or stderr_line(run.stderr) or "the run failed"
            detail = not_started(error, error_report(run.stdout) if run.index.header is None else None)
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


def step_info(run: Run, step: Step, locator: Locator) -> P.StepInfo:
    """A step as the client is told it: placed in the file and line of its actor."""
    header = run.index.header
    assert header is not None
    uri, rng = locator.actor_range(header, step.actor)
    return P.StepInfo(
        step=step.step, actor=step.actor, actorKind=step.kind, fireCount=step.fireCount,
        journalSeq=step.journalSeq, replayed=step.replayed, uri=uri, range=rng, durationMs=step.dur / 1000.0,
        startMs=step.at / 1000.0, diverged=step.step in run.index.diverged_steps,
    )

