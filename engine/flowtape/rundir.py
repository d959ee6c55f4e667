"""Run directories: `.flowtape/runs/<run-id>/` with `tape.jsonl` and `run.json`."""

from __future__ import annotations

import datetime as dt
import os
import secrets
from pathlib import Path

import msgspec
from msgspec import Raw

from .errors import TraceCorruption, UsageError
from .guarded import open_regular, read_regular
from .ownership import ProcessStamp, can_tell, is_the_process
from .tape import Diverged, End, ErrorInfo, Header, Tape, decode_record
from .trust import TapeSeal
from .usage import Usage

TAPE = "tape.jsonl"
SUMMARY = "run.json"
DEFAULT_RUNS_DIR = Path(".flowtape") / "runs"
SUMMARY_LIMIT = 256 << 20  # run.json holds the outputs: big, but never unbounded (a planted /dev/zero)
HEADER_LIMIT = 64 << 20


class RunSummary(msgspec.Struct, omit_defaults=True):
    """`run.json`: what listing runs needs, rewritten atomically when the status changes."""

    id: str
    workflow: str
    flowFile: str
    status: str  # running | succeeded | failed | stopped
    startedAt: str
    steps: int = 0
    firings: int = 0
    finishedAt: str | None = None
    outputs: Raw = Raw()
    error: ErrorInfo | None = None
    resumedFrom: str | None = None
    resumedAtStep: int | None = None
    replayStopped: list[Diverged] = []
    pid: int | None = None
    edits: int = 0  # a fork: how many edits it made at resumedAtStep (its tape's `edit` records say what)
    usage: Usage | None = None  # the run's model calls, and what its resume saved
    process: ProcessStamp | None = None  # the pid's start time and command line (ownership.py)
    tape: TapeSeal | None = None  # set when the run ended: lets a resume trust the tape (trust.py)


_enc = msgspec.json.Encoder()


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    """Sorts by time: UTC timestamp to the microsecond, then a short random tail."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S-%f")
    return f"{stamp}-{secrets.token_hex(2)}"


def valid_run_id(run_id: str) -> bool:
    return bool(run_id) and all(c.isalnum() or c in "-_." for c in run_id) and run_id not in (".", "..")


def write_summary(run_dir: Path, summary: RunSummary) -> None:
    tmp = run_dir / f".{SUMMARY}.{os.getpid()}.tmp"
    try:
        tmp.write_bytes(msgspec.json.format(_enc.encode(summary), indent=2))
        os.replace(tmp, run_dir / SUMMARY)
    except OSError:  # a full disk, say: the last run.json stands, and no half-written file is left
        tmp.unlink(missing_ok=True)
        raise


def read_summary(run_dir: Path) -> RunSummary | None:
    try:
        return msgspec.json.decode(read_regular(run_dir / SUMMARY, SUMMARY_LIMIT), type=RunSummary)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def summary_from_tape(run_dir: Path) -> RunSummary | None:
    """A run whose run.json is missing or unreadable, as its tape's header tells it: status
    `unknown` (show and verify read the tape itself)."""
    try:
        with open_regular(run_dir / TAPE) as fh:
            header = decode_record(fh.readline(HEADER_LIMIT).rstrip(b"\n"))
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not isinstance(header, Header):
        return None
    return RunSummary(header.runId, header.workflow, header.flowFile, "unknown", header.startedAt,
                      resumedFrom=header.resumedFrom, resumedAtStep=header.resumedAtStep)


def resolve_run(ref: str | Path, runs_dir: Path | None = None) -> Path:
    """A run directory, given its path or its id (looked up in the runs directory)."""
    path = Path(ref)
    base = runs_dir or DEFAULT_RUNS_DIR
    by_id = base / str(ref) if valid_run_id(str(ref)) and (base / str(ref) / TAPE).is_file() else None
    if (path / TAPE).is_file():
        if by_id is not None and not path.samefile(by_id):  # `r1` is both a folder here and a run id
            raise UsageError(
                f"{str(ref)!r} is both a run directory here and a run id in {base}: "
                f"say ./{ref} for the directory, or {by_id} for the run"
            )
        return path
    if path.name == TAPE and path.is_file():
        return path.parent
    if by_id is not None:
        return by_id
    raise UsageError(f"no run {str(ref)!r}: not a run directory, and no such run id in {base}")


def process_alive(pid: int | None) -> bool:
    """Whether a process of this pid runs on this machine (any process: see runs_process)."""
    if pid is None or not 0 < pid < 2**31:  # 0 and -1 would signal groups; a hand-edited pid, say
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def runs_process(pid: int | None, stamp: ProcessStamp | None) -> ProcessStamp | None:
    """The run's process, if the pid its run.json names (`pid`, `stamp`) is provably it (ownership.py): alive, with
    the start time and command line the run recorded. None for any other process under that pid
    (reused since, or named by a run.json someone wrote), and for a run.json without a stamp."""
    if stamp is None or stamp.pid != pid or not is_the_process(stamp):
        return None
    return stamp


def still_running(summary: RunSummary) -> bool:
    """Whether the run is under way: said `running`, and its recorded process still runs (not
    another process that got the pid of a run killed since). Without /proc, the pid alone."""
    if summary.status != "running":
        return False
    return runs_process(summary.pid, summary.process) is not None if can_tell() else process_alive(summary.pid)


def check_not_cut_short(summary: RunSummary | None, tape: Tape, steps: int) -> None:
    """A tape that holds together but lacks the end record of a run its run.json says ended was
    cut short (truncated, or its tail lost): stepping or resuming it would tell another run."""
    any_end = tape.end is not None or any(isinstance(line.record, End) for line in tape.lines)
    check_ended(summary, tape.end is not None, any_end, len(tape.lines), steps)


def check_ended(summary: RunSummary | None, ends: bool, any_end: bool, lines: int, steps: int) -> None:
    """check_not_cut_short, from what a reader counted: whether the last of the tape's `lines`
    is an end record, and whether any is (one with records after it is not cut short, but
    Rebuild's "the end record is last")."""
    if ends or any_end or summary is None or summary.status == "running":
        return
    raise TraceCorruption(
        f"the tape has no end record, but run.json says the run {summary.status} after {summary.steps} steps "
        f"(the tape holds {steps}): it was cut short", lines + 1, "a finished run's tape ends with its end record",
    )


def list_runs(runs_dir: Path) -> list[tuple[Path, RunSummary]]:
    """Runs newest first."""
    found: list[tuple[Path, RunSummary]] = []
    if not runs_dir.is_dir():
        return found
    for entry in runs_dir.iterdir():
        if not (entry / TAPE).is_file():
            continue  # not a run (show and verify say so too)
        summary = read_summary(entry) or summary_from_tape(entry)
        if summary is not None:
            found.append((entry, summary))
    found.sort(key=lambda pair: (pair[1].startedAt, pair[1].id), reverse=True)
    return found
