"""External processes: `@tool` actors and `@tool` functions."""

from __future__ import annotations

import codecs
import contextlib
import functools
import inspect
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import IO, Any

from .errors import FiringStopped
from .model import TaskSpec, ToolConfig
from .reaper import Reaper

_PLACEHOLDER = re.compile(r"\{(in|out|param)(?:\.(\w+))?\}")


class ToolFailed(RuntimeError):
    """The tool exited non-zero or could not start; the message carries the end of its stderr."""


def _substitute(
    template: str, inputs: dict[str, Any], outputs: dict[str, str], params: dict[str, Any], quote: bool = False
) -> str:
    """The template with its placeholders filled (each value shell-quoted with `quote`: a value is
    never shell syntax, whatever it holds)."""

    def replace(match: re.Match[str]) -> str:
        text = _value(match)
        return shlex.quote(text) if quote else text

    def _value(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        table: dict[str, Any] = {"in": inputs, "out": outputs, "param": params}[kind]
        if name is None:
            if len(table) != 1:
                raise ToolFailed(f"placeholder {{{kind}}} needs exactly one {kind} port; use {{{kind}.NAME}}")
            return str(next(iter(table.values())))
        if name not in table:
            raise ToolFailed(f"placeholder {match.group(0)} names no {kind} port or parameter")
        return str(table[name])

    return _PLACEHOLDER.sub(replace, template)


def _tail(text: str, lines: int = 8, chars: int = 2000) -> str:
    kept = "\n".join([line for line in text.strip().splitlines() if line.strip()][-lines:])
    return kept if len(kept) <= chars else "…" + kept[-chars:]


class ToolStopped(FiringStopped):
    """The run's stop killed this tool: its firing did not happen (and a resume runs it)."""


_running: set[subprocess.Popen[str]] = set()  # tools under way, for `stop_all`
_stopped: set[int] = set()  # the pids of those `stop_all` killed
_running_lock = threading.Lock()
_reaper = Reaper()  # for a Flowtape that dies without stop_all


def stop_all() -> None:
    """Kill every tool still running, with whatever it started (a run that ends leaves none)."""
    with _running_lock:
        procs = list(_running)
        _stopped.update(proc.pid for proc in procs)
    for proc in procs:
        _kill(proc)


def _kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: its children go too


def run_tool(
    spec: TaskSpec, obj: Any, inputs: dict[str, Any], work_dir: Path, base_dir: Path, stem: str, wired: Collection[str]
) -> dict[str, Any]:
    """One firing of a tool actor: run the command; each output port gets the path it wrote. A
    port wired to nothing may go unwritten (an optional log, say); a wired one may not."""
    config = spec.tool
    assert config is not None
    params = {name: getattr(obj, name, "") for name in spec.parameters}
    work_dir.mkdir(parents=True, exist_ok=True)
    outputs = {port: str(work_dir / f"{stem}__{port}{p.ext}") for port, p in spec.outputs.items()}
    cmd = _substitute(config.cmd, inputs, outputs, params, quote=config.shell)
    args = [_substitute(a, inputs, outputs, params) for a in config.args]
    cwd = Path(config.cwd) if config.cwd else base_dir
    if not cwd.is_absolute():
        cwd = base_dir / cwd
    executable = shutil.which(cmd, path=os.environ.get("PATH")) or (cmd if os.path.exists(cmd) else None)
    if executable is None and not config.shell:
        raise ToolFailed(f"tool command {cmd!r} not found on PATH")
    # with shell=True the command is shell syntax (pipes, redirections); the args are values
    argv: list[str] | str = " ".join([cmd, *map(shlex.quote, args)]) if config.shell else [executable or cmd, *args]
    env = {**os.environ, **config.env}
    _reaper.start()
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, shell=config.shell, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True,
        )
    except OSError as exc:
        raise ToolFailed(f"tool {cmd!r} could not start: {exc.strerror or exc}") from None
    _reaper.watch(proc.pid)  # at once (its own session: its process group is its pid)
    with _running_lock:
        _running.add(proc)
    try:
        out, err = _output(proc, config.timeout or None, config.inherit_stdio)
    except subprocess.TimeoutExpired:
        raise ToolFailed(f"tool {cmd!r} timed out after {config.timeout}s") from None
    finally:  # timed out, interrupted (a second stop signal), or done: nothing it started lives on
        _kill(proc)
        proc.wait()
        _reaper.forget(proc.pid)
        with _running_lock:
            _running.discard(proc)
            stopped = proc.pid in _stopped
            _stopped.discard(proc.pid)
    if stopped:
        raise ToolStopped(f"tool {cmd!r} was stopped with the run")
    if proc.returncode != 0:
        said = _tail(err) or _tail(out) or "(no output)"
        raise ToolFailed(f"tool {cmd!r} exited with code {proc.returncode}: {said}")
    written = {port: path for port, path in outputs.items() if os.path.exists(path)}
    missing = [port for port in outputs if port in wired and port not in written]
    if missing:
        raise ToolFailed(f"tool {cmd!r} exited 0 but wrote no {', '.join(missing)} ({outputs[missing[0]]})")
    return written


KEEP_CHARS = 64 << 10  # of what a tool prints, the end kept for its error message (a tail is said)
PIPE_GRACE = 0.5  # once a tool exits, how long what it left in its pipes is still read


def _output(proc: subprocess.Popen[str], timeout: float | None, shown: bool) -> tuple[str, str]:
    """The end of what the tool printed on stdout and stderr (its whole output is never held);
    with `shown`, all of it also goes on to ours as it comes (sys.stdout at the time: under
    `run --json` that is stderr). The firing ends when the tool exits, not when its pipes close: a
    process it left in the background with them does not hold the run (its group is killed next)."""
    kept = {"out": "", "err": ""}

    def pump(pipe: IO[str], key: str) -> None:
        stream = sys.stdout if key == "out" else sys.stderr
        raw = pipe.buffer  # type: ignore[attr-defined]  # (bytes as they come: read1 does not wait for a line)
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with contextlib.suppress(ValueError, OSError):  # the pipe closed under us: the tool is done
            while True:
                data = raw.read1(1 << 16)
                chunk = text.decode(data, final=not data)  # (at the end: a cut character as U+FFFD)
                if not data and not chunk:
                    break
                kept[key] = (kept[key] + chunk)[-KEEP_CHARS:]
                if shown:
                    with contextlib.suppress(ValueError, OSError):  # ours closed: the tool still runs to its end
                        stream.write(chunk)
                        stream.flush()

    assert proc.stdout is not None and proc.stderr is not None
    pumps = [threading.Thread(target=pump, args=(pipe, key), daemon=True) for pipe, key in ((proc.stdout, "out"), (proc.stderr, "err"))]
    for pump_thread in pumps:
        pump_thread.start()
    proc.wait(timeout=timeout)
    for pump_thread in pumps:
        pump_thread.join(PIPE_GRACE)
    return kept["out"], kept["err"]


def function_tool(fn: Callable[..., Any], config: ToolConfig) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`@tool(cmd=..., args=[...])` on a function: calling it runs the command with `{name}` filled."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)

        def fill(template: str) -> str:
            return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), m.group(0))), template)

        argv = [fill(config.cmd), *(fill(a) for a in config.args)]
        return subprocess.run(
            shlex.join(argv) if config.shell else argv,
            cwd=config.cwd, env={**os.environ, **config.env}, shell=config.shell,
            capture_output=True, text=True, timeout=config.timeout,
        )

    return call
