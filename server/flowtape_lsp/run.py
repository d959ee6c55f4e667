"""What the server knows of one run: its place, its tape's index, its process, how it ended, and
what the editor was told of it (announced, its progress bar). runs.py keeps them by id."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from flowtape.ownership import ProcessStamp
from flowtape.rundir import read_summary
from flowtape.tape import ErrorInfo
from flowtape.usage import Usage

from . import protocol as P
from .family import Family
from .tapeindex import TapeIndex
from .workspace import path_to_uri


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

    @classmethod
    def on_disk(cls, run_id: str, run_dir: Path, live: bool) -> Run:
        """A run found in the runs directory, as far as its run.json tells (its tape's header tells the rest)."""
        run = cls(run_id, run_dir, TapeIndex(run_dir), live=live)
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
        return run

    def starting(self) -> bool:
        """A live run whose process has not written its tape's header yet (it imports the flow)."""
        return self.live and not self.finished and self.index.header is None and self.index.corrupt is None

    def never_started(self) -> bool:
        """A run this server started that failed before writing its tape (a flow that does not
        load, a bad input): kept, so that asking for its steps says why there are none."""
        return self.owned and self.finished and self.index.header is None and not self.index.offset
