"""The errors Flowtape raises for user mistakes: each one prints as one clear line."""

from __future__ import annotations

import os

import msgspec


class FlowtapeError(Exception):
    """Base of every error that is the user's to fix, never a bug in Flowtape."""


class FlowError(FlowtapeError):
    """A flow that cannot be built: wiring, ports, arity, types. Names the file and line."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.file = file
        self.line = line
        where = f"{file}:{line}: " if file and line else (f"{file}: " if file else "")
        super().__init__(f"{where}{message}")


class NoSuchPort(FlowError, AttributeError):
    """An attribute a task does not have is taken for a port it does not have: a wiring mistake
    while building, and still an AttributeError, so `hasattr` and `getattr(obj, name, default)`
    inside an action answer as they do on any object (as in wfpy)."""


class FlowTypeError(FlowError, TypeError):
    """A flow calls something with arguments it does not take: a TypeError too, as in wfpy."""


class RunFailed(FlowtapeError):
    """An actor raised: the run failed. Names the actor path, its firing number and source lines."""

    def __init__(
        self,
        message: str,
        actor: str = "",
        fire_count: int = 0,
        file: str | None = None,
        line: int | None = None,
        outputs: dict[str, list[object]] | None = None,
        run_dir: str | None = None,
    ) -> None:
        self.message = message
        self.actor = actor
        self.fire_count = fire_count
        self.file = file
        self.line = line
        self.outputs = outputs or {}
        self.run_dir = run_dir
        super().__init__(message)


class RunStopped(FlowtapeError):
    """The run was stopped by Ctrl-C or SIGTERM; its tape ends `stopped`."""


class ResumeRefused(FlowtapeError, ValueError):
    """A resume that cannot be sound is refused before anything runs. A ValueError, as wfpy's
    refusals are, so code written for wfpy catches it."""


class TraceCorruption(FlowtapeError):
    """A tape that cannot support its own story: names the line and the broken rule."""

    def __init__(self, message: str, line: int = 0, rule: str = "") -> None:
        self.line = line
        self.rule = rule
        super().__init__(f"line {line}: {rule}: {message}" if line else message)


class UsageError(FlowtapeError, ValueError):
    """A bad argument, unknown run id, out-of-range step and the like: a ValueError, as wfpy's are.
    Worded with `run()`'s keywords; `cli` is the same said with the command line's options."""

    def __init__(self, message: str, cli: str | None = None) -> None:
        self.cli = cli
        super().__init__(message)


class ErrorReport(msgspec.Struct, omit_defaults=True):
    """A command that could not do its work, as `--json` prints it (the language server reads
    it): the message, and the flow's file and line when the flow is at fault."""

    status: str  # always "error"
    error: str
    file: str | None = None
    line: int | None = None

    @classmethod
    def of(cls, message: str, exc: BaseException | None = None) -> ErrorReport:
        if isinstance(exc, FlowError) and exc.file and os.path.isfile(exc.file):
            return cls("error", message, exc.file, exc.line)
        return cls("error", message)


class FiringStopped(Exception):  # noqa: N818 - no error: the run was stopped while the firing ran
    """The run's stop ended this firing under way (a tool killed, a model call ended): it did not
    happen, and a resume runs it."""
