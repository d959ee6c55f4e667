"""A run's process: the `flowtape run` child this server starts (its command line, its output
drained, what its last words were), and whether a run's process, ours or one started elsewhere,
still runs and may be signalled."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import msgspec
from flowtape.errors import ErrorReport
from flowtape.ownership import can_tell, is_the_process, stamp_of
from flowtape.rundir import process_alive as _alive
from flowtape.rundir import runs_process

from .family import started_here
from .run import Run

STDERR_KEEP = 16 << 10


def command(
    flow: Path, run_id: str, runs_dir: Path, *, workflow: str | None, inputs: bool, max_workers: int | None,
    executor: str | None, ray_address: str | None, resume_from: Path | None, at_step: int | None, edits: list[str],
) -> list[str]:
    """The `flowtape run` command line of a run (`inputs`: they come on its stdin)."""
    args = [sys.executable, "-m", "flowtape", "run", str(flow), "--json", "--run-id", run_id,
            "--runs-dir", str(runs_dir)]
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
        args += ["--resume-from", str(resume_from)]
        if at_step is not None:
            args += ["--at-step", str(at_step)]
        args += [f"--set={edit}" for edit in edits]  # a fork's (attached: a value may start with '-')
    return args


async def start(run: Run, args: list[str], cwd: Path, inputs: dict[str, Any] | None) -> None:
    """Start the run's process in a session of its own, its inputs written to its stdin. Raises
    OSError or ValueError (a NUL byte in a path or argument) when it cannot start."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    run.proc = await asyncio.create_subprocess_exec(
        *args, cwd=str(cwd), env=env,
        stdin=asyncio.subprocess.PIPE if inputs else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )
    run.process = stamp_of(run.proc.pid)  # (the child has exec'd: its command line is the flow's)
    started_here.add(run.proc.pid)
    if inputs and run.proc.stdin is not None:
        run.proc.stdin.write(msgspec.json.encode(inputs))
        run.proc.stdin.close()


async def read_output(run: Run) -> None:
    """Keep the end of what the flow process prints (its stdout must be drained, or a flow
    with big outputs would block on a full pipe)."""
    assert run.proc is not None and run.proc.stderr is not None and run.proc.stdout is not None

    async def keep(stream: asyncio.StreamReader, name: str) -> None:
        while chunk := await stream.read(8192):
            setattr(run, name, (getattr(run, name) + chunk)[-STDERR_KEEP:])

    await asyncio.gather(keep(run.proc.stderr, "stderr"), keep(run.proc.stdout, "stdout"))


def stderr_line(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
    flowtape = [ln for ln in lines if ln.startswith("flowtape: ") and "warning" not in ln]
    text = flowtape[-1] if flowtape else (lines[-1] if lines else "")
    return text.removeprefix("flowtape: ")[:2000]


def error_report(stdout: bytes) -> ErrorReport | None:
    try:
        return msgspec.json.decode(stdout.strip().rsplit(b"\n", 1)[-1], type=ErrorReport)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def alive(run: Run) -> bool:
    """Whether the run's process runs: our own child until it exits; for a run started
    elsewhere, the pid its run.json names while it is provably the run's (ownership.py: the
    start time and command line it recorded), else the run is gone, whatever has that pid now."""
    if run.proc is not None:
        return run.proc.returncode is None and (run.process is None or is_the_process(run.process))
    if can_tell():
        return runs_process(run.pid, run.process) is not None
    return _alive(run.pid)  # no /proc: its pid on its word, for listing (never signalled: see `signalled`)


def signalled(run: Run) -> int | None:
    """The pid a stop may signal: our own child while it runs, or a run's process that is
    provably the run's. None for anything else: no signal ever reaches a process that a
    reused pid or a planted run.json names."""
    if run.proc is not None:
        return run.proc.pid if run.proc.returncode is None else None
    stamp = runs_process(run.pid, run.process)
    return stamp.pid if stamp is not None else None

