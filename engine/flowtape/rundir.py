"""Run directories: `.flowtape/runs/<run-id>/` with `tape.jsonl` and `run.json`."""

from __future__ import annotations

import datetime as dt
import os
import secrets
from pathlib import Path

import msgspec
from msgspec import Raw

from .errors import TraceCorruption, UsageError
from .tape import Diverged, ErrorInfo, Header, Tape, decode_record
from .trust import TapeSeal

TAPE = "tape.jsonl"
SUMMARY = "run.json"
DEFAULT_RUNS_DIR = Path(".flowtape") / "runs"


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
        return msgspec.json.decode((run_dir / SUMMARY).read_bytes(), type=RunSummary)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def summary_from_tape(run_dir: Path) -> RunSummary | None:
    """A run whose run.json is missing or unreadable, as its tape's header tells it: status
    `unknown` (show and verify read the tape itself)."""
    try:
        with open(run_dir / TAPE, "rb") as fh:
            header = decode_record(fh.readline().rstrip(b"\n"))
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
    """Whether a run's process (by the pid in its run.json) still runs on this machine."""
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


def still_running(summary: RunSummary) -> bool:
    """Whether the run is under way: said `running`, and its process lives and is older than the
    run (not another process that got the pid of a run killed since)."""
    if summary.status != "running" or not process_alive(summary.pid):
        return False
    try:
        with open(f"/proc/{summary.pid}/stat", "rb") as fh:
            ticks = int(fh.read().rsplit(b")", 1)[-1].split()[19])
        with open("/proc/stat", "rb") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith(b"btime "))
        began = boot + ticks / os.sysconf("SC_CLK_TCK")
        return began <= dt.datetime.fromisoformat(summary.startedAt).timestamp() + 2  # (btime is whole seconds)
    except (OSError, ValueError, IndexError, StopIteration):
        return True  # no /proc to tell: the pid alone


def check_not_cut_short(summary: RunSummary | None, tape: Tape, steps: int) -> None:
    """A tape that holds together but lacks the end record of a run its run.json says ended was
    cut short (truncated, or its tail lost): stepping or resuming it would tell another run."""
    if tape.end is None and summary is not None and summary.status != "running":
        raise TraceCorruption(
            f"the tape has no end record, but run.json says the run {summary.status} after {summary.steps} steps "
            f"(the tape holds {steps}): it was cut short", len(tape.lines) + 1, "a finished run's tape ends with its end record",
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
