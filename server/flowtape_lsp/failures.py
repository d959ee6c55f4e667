"""Why a run failed, as the editor shows it: the failed firing (actor, fire count, what it took,
the error), where its actor is created, the line that raised, and the traceback with the flow's
own frames told apart from Flowtape's and installed packages' (those are the ones to click)."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

import flowtape
import msgspec
from flowtape.errors import ErrorReport
from flowtape.tape import ErrorInfo, Header
from flowtape.values import preview_json

from . import protocol as P
from .workspace import path_to_uri

_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_ENGINE = Path(flowtape.__file__).resolve().parent
_INSTALLED = {Path(p).resolve() for key in ("purelib", "platlib", "stdlib", "platstdlib")
              if (p := sysconfig.get_path(key))}
MAX_FRAMES = 60
MAX_TOKENS = 20


def _own(file: Path, root: Path) -> bool:
    """A frame of the workspace's code: not Flowtape's, not the standard library's or a package's."""
    if file.is_relative_to(_ENGINE) or any(file.is_relative_to(p) for p in _INSTALLED):
        return False
    return file.is_relative_to(root) and not any(part in ("site-packages", "dist-packages") for part in file.parts)


def frames(traceback: str | None, root: Path) -> list[P.Frame]:
    """The frames of a formatted traceback, innermost last (the chained exceptions' too, in order)."""
    if not traceback:
        return []
    found: list[P.Frame] = []
    lines = traceback.splitlines()
    for i, text in enumerate(lines):
        m = _FRAME.match(text)
        if m is None:
            continue
        name = m["file"]
        code = lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1].startswith("    ") else None
        if name.startswith("<"):
            found.append(P.Frame(file=name, line=int(m["line"]) - 1, function=m["function"], own=False, code=code))
            continue
        try:
            path = Path(name).resolve()
        except (OSError, RuntimeError, ValueError):
            continue
        found.append(P.Frame(file=str(path), line=int(m["line"]) - 1, function=m["function"], own=_own(path, root),
                             uri=path_to_uri(str(path)), code=code))
    return found[-MAX_FRAMES:]


def detail_of(info: ErrorInfo, header: Header | None, root: Path) -> P.ErrorDetail:
    """The failure a tape's (or run.json's) error record tells."""
    file, line = info.file, info.line
    if (file is None or line is None) and info.actor and header is not None:
        actor = next((a for a in header.actors if a.path == info.actor), None)
        if actor is not None:
            file, line = actor.file, actor.line
    taken = None
    if info.taken and header is not None:
        taken = [P.QueueTokens(queue=header.queues[i] if 0 <= i < len(header.queues) else f"queue {i}",
                               tokens=[preview_json(msgspec.json.decode(t), 200) for t in tokens[:MAX_TOKENS]])
                 for i, tokens in info.taken]
    raised = info.raisedFile is not None and info.raisedLine is not None and not info.raisedFile.startswith("<")
    return P.ErrorDetail(
        message=info.message, actor=info.actor, fireCount=info.fireCount,
        uri=path_to_uri(file) if file and not file.startswith("<") else None, line=line - 1 if line else None,
        raisedUri=path_to_uri(info.raisedFile) if raised and info.raisedFile else None,
        raisedLine=info.raisedLine - 1 if raised and info.raisedLine else None,
        taken=taken, traceback=frames(info.traceback, root) or None,
    )


def not_started(message: str, report: ErrorReport | None) -> P.ErrorDetail:
    """A run that failed before its tape began: the flow is at fault where the report says."""
    detail = P.ErrorDetail(message=message)
    if report is not None and report.file:
        detail.uri, detail.line = path_to_uri(report.file), report.line - 1 if report.line else None
    return detail
