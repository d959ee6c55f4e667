"""Diagnostics (source `flowtape`): flows that cannot load (checked in a child process on open and
save), failed runs, replays that diverged, and actors whose firings a resume cannot replay. A flow's run diagnostics are replaced by those of
its next finished run, so they clear when that run is clean."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from flowtape.guarded import read_text
from flowtape.tape import Header
from lsprotocol import types as lsp

from . import protocol as P
from .actorlines import creation_line, current_text
from .family import started_here
from .permits import NotTrusted, may_import
from .run import Run
from .workspace import file_key, find_actor, path_to_uri, split_lines, uri_to_path

if TYPE_CHECKING:
    from .server import FlowtapeServer

SOURCE = "flowtape"
SYNTAX = "syntax-error"  # checked in the server from the editor's text, as typed
CHECK_TIMEOUT = 20.0
RESTORE_MAX_BYTES = 64 << 20  # a latest run's tape read at startup for its diagnostics, when no bigger


def compare_link(recorded: str | None, run_id: str, actor: str) -> str | None:
    """A `command:` link to the client's diff of a resumed run against the run it resumed."""
    if recorded is None:
        return None
    args = json.dumps([{"runA": recorded, "runB": run_id, "actor": actor}], separators=(",", ":"))
    return f"command:{P.CLIENT_COMPARE}?{quote(args)}"


def _range(line: int | None, text_line: str | None = None) -> lsp.Range:
    line0 = max((line or 1) - 1, 0)
    if text_line is not None:
        start = len(text_line) - len(text_line.lstrip())  # (indentation: one UTF-16 unit a character)
        end = len(text_line.encode("utf-16-le")) // 2  # positions count UTF-16 units
        return lsp.Range(lsp.Position(line0, start), lsp.Position(line0, max(end, start)))
    return lsp.Range(lsp.Position(line0, 0), lsp.Position(line0 + 1, 0))


def _is_file(file: str, path: Path) -> bool:
    try:
        return Path(file).resolve() == path
    except (OSError, RuntimeError, ValueError):  # a name no file can have, a loop of symlinks
        return False


def _syntax_error(text: str, file: str) -> lsp.Diagnostic | None:
    """The text's syntax error, where Python puts it (line and columns); compiling runs nothing."""
    try:
        # (not the file's own name: Python would place the error on the saved file's line instead)
        compile(text, f"<{file}>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        lines = split_lines(text)
        line0 = max((exc.lineno or 1) - 1, 0)
        start = max((exc.offset or 1) - 1, 0)
        end_line = max((exc.end_lineno or exc.lineno or 1) - 1, line0)
        end = max((exc.end_offset or 0) - 1, start + 1) if end_line == line0 else max((exc.end_offset or 1) - 1, 0)
        return lsp.Diagnostic(
            range=lsp.Range(lsp.Position(line0, _utf16(lines, line0, start)), lsp.Position(end_line, _utf16(lines, end_line, end))),
            message=f"syntax error: {exc.msg}", severity=lsp.DiagnosticSeverity.Error, source=SOURCE, code=SYNTAX,
        )
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return lsp.Diagnostic(range=_range(1), message=f"cannot be compiled: {exc}",
                              severity=lsp.DiagnosticSeverity.Error, source=SOURCE, code=SYNTAX)
    return None


def _utf16(lines: list[str], line: int, column: int) -> int:
    """A column in characters as LSP counts it, in UTF-16 code units (an emoji is two)."""
    text = lines[line] if 0 <= line < len(lines) else ""
    return len(text[:column].encode("utf-16-le")) // 2 + max(column - len(text), 0)


class Diagnostics:
    def __init__(self, server: FlowtapeServer) -> None:
        self.server = server
        self.load: dict[str, list[lsp.Diagnostic]] = {}  # flow uri -> its load errors (the file as saved)
        self.syntax: dict[str, list[lsp.Diagnostic]] = {}  # flow uri -> the open text's syntax error
        self.runs: dict[str, dict[str, list[lsp.Diagnostic]]] = {}  # flow file (file_key) -> target uri -> diagnostics
        self._checks: dict[str, asyncio.Task[None]] = {}
        self.published: set[str] = set()

    # ---- publishing --------------------------------------------------------------------------------

    def _collect(self, uri: str) -> list[lsp.Diagnostic]:
        found = list(self.syntax.get(uri, [])) + list(self.load.get(uri, []))
        for targets in self.runs.values():
            found.extend(targets.get(uri, []))
        return found

    def publish(self, uris: set[str]) -> None:
        for uri in sorted(uris):
            diagnostics = self._collect(uri)
            if not diagnostics and uri not in self.published:
                continue
            if diagnostics:
                self.published.add(uri)
            else:
                self.published.discard(uri)
            self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

    def _line_text(self, uri: str, line: int | None) -> str | None:
        if not line:
            return None
        lines = current_text(self.server.workspace, uri).lines
        return lines[line - 1] if 0 < line <= len(lines) else None

    # ---- run diagnostics ---------------------------------------------------------------------------

    def on_run_finished(self, run: Run) -> None:
        if not run.uri:
            return
        header = run.index.header
        targets: dict[str, list[lsp.Diagnostic]] = {}
        end = run.index.end
        if header is not None:
            diverged = end.replayStopped if end is not None and end.replayStopped else run.index.diverged
            for d in diverged:
                uri, line = self._actor_site(header, d.actor, run.uri)
                message = f"replay diverged: {d.actor} firing {d.fireCount} (step {d.step}): {d.detail()}"
                compare = compare_link(run.resumed_from, run.run_id, d.actor)
                if compare is not None:
                    message += " · compare with the recorded run (the link, or Flowtape: Compare with the Recorded Run)"
                targets.setdefault(uri, []).append(lsp.Diagnostic(
                    range=_range(line, self._line_text(uri, line)), message=message,
                    severity=lsp.DiagnosticSeverity.Warning, source=SOURCE, code="replay-diverged",
                    code_description=lsp.CodeDescription(href=compare) if compare is not None else None,
                    data={"runId": run.run_id, "actor": d.actor, "step": d.step, "resumedFrom": run.resumed_from},
                ))
            for actor, (count, reason) in run.index.unreplayable.items():
                uri, line = self._actor_site(header, actor, run.uri)
                targets.setdefault(uri, []).append(lsp.Diagnostic(
                    range=_range(line, self._line_text(uri, line)),
                    message=f"{count} firing(s) of {actor} cannot be replayed ({reason}): a resume runs them live",
                    severity=lsp.DiagnosticSeverity.Information, source=SOURCE, code="not-replayable",
                    data={"runId": run.run_id, "actor": actor},
                ))
        if end is not None and end.status == "failed" and end.error is not None:
            info = end.error
            uri, line = run.uri, info.line
            if info.actor and header is not None and find_actor(header, info.actor) is not None:
                uri, line = self._actor_site(header, info.actor, run.uri)
            elif info.file and info.line:
                uri = path_to_uri(info.file)
            related = []
            if info.raisedFile and info.raisedLine:
                related.append(lsp.DiagnosticRelatedInformation(
                    location=lsp.Location(uri=path_to_uri(info.raisedFile), range=_range(info.raisedLine)),
                    message="raised here",
                ))
            who, what = "", info.message
            if info.actor:
                who = f"{info.actor} firing {info.fireCount}: "
                # the message names the actor, firing and site again: the diagnostic stands at that site
                said = f"{info.actor} failed on firing {info.fireCount}"
                if what.startswith(said):
                    what = what[len(said):].split("): ", 1)[-1] if what[len(said):].startswith(" (") else what[len(said):].removeprefix(": ")
            targets.setdefault(uri, []).append(lsp.Diagnostic(
                range=_range(line, self._line_text(uri, line)), message=f"run {run.run_id} failed: {who}{what}",
                severity=lsp.DiagnosticSeverity.Error, source=SOURCE, code="run-failed",
                related_information=related or None, data={"runId": run.run_id, "actor": info.actor},
            ))
            raised = path_to_uri(info.raisedFile) if info.raisedFile and info.raisedLine and not info.raisedFile.startswith("<") else None
            if raised is not None and (raised, info.raisedLine) != (uri, line):
                # the line that raised is marked too, where the user fixes it (not only related information)
                targets.setdefault(raised, []).append(lsp.Diagnostic(
                    range=_range(info.raisedLine, self._line_text(raised, info.raisedLine)),
                    message=f"run {run.run_id} failed here: {who}{what}",
                    severity=lsp.DiagnosticSeverity.Error, source=SOURCE, code="run-raised",
                    related_information=[lsp.DiagnosticRelatedInformation(
                        location=lsp.Location(uri=uri, range=_range(line)), message=f"{info.actor or 'the actor'} is created here",
                    )] if info.actor else None,
                    data={"runId": run.run_id, "actor": info.actor},
                ))
        elif end is None and run.status == "failed" and run.error_detail is not None:  # it could not start, or died
            detail = run.error_detail
            uri = detail.uri or run.uri
            line = detail.line + 1 if detail.line is not None else None
            targets.setdefault(uri, []).append(lsp.Diagnostic(
                range=_range(line, self._line_text(uri, line)), message=f"run {run.run_id} failed: {detail.message}",
                severity=lsp.DiagnosticSeverity.Error, source=SOURCE, code="run-failed", data={"runId": run.run_id},
            ))
        flow = file_key(run.uri)  # the next run of the flow replaces these, however it spells the flow's uri
        old = set(self.runs.get(flow, {}))
        self.runs[flow] = targets
        self.publish(old | set(targets))

    async def restore(self) -> None:
        """After a restart (of the server, or of the window), each flow's latest finished run says
        again what it said when it finished: its failure, its divergences."""
        latest: dict[str, Run] = {}
        for run in self.server.manager.listed():
            if run.finished and not run.live and run.uri:
                key = file_key(run.uri)
                known = latest.get(key)
                if known is None or (run.started_at, run.run_id) > (known.started_at, known.run_id):
                    latest[key] = run
        for key, run in latest.items():
            if key in self.runs:
                continue  # a run of it finished since: that one's diagnostics stand
            try:
                if os.path.getsize(run.index.path) > RESTORE_MAX_BYTES:
                    continue
                await asyncio.to_thread(run.index.ingest_all)
            except Exception:  # noqa: BLE001 - a tape gone or damaged: the stepper says why when asked
                continue
            if key not in self.runs:
                self.on_run_finished(run)

    def _actor_site(self, header: Header, path: str, fallback: str) -> tuple[str, int | None]:
        """The line (1-based) that creates the actor in its file's text as the editor holds it now
        (lines added above it since the run move it), as hovers and inlay hints find it."""
        actor = find_actor(header, path)
        if actor is None or not actor.file or actor.file.startswith("<"):
            return fallback, None
        uri = path_to_uri(actor.file)
        line0 = creation_line(current_text(self.server.workspace, uri), actor)
        return uri, (line0 + 1 if line0 is not None else actor.line)

    # ---- load errors ---------------------------------------------------------------------------------

    def schedule_check(self, uri: str, delay: float = 0.0) -> None:
        """Check a flow file: its syntax (the open editor's text, as typed), then, when that is
        what is saved, whether it loads and builds (in a child process). `delay`: after typing."""
        path = uri_to_path(uri)
        if path is None or path.suffix != ".py":
            return
        previous = self._checks.pop(uri, None)
        if previous is not None:
            previous.cancel()
        task = asyncio.ensure_future(self._check(uri, path, delay))
        self._checks[uri] = task
        task.add_done_callback(lambda t: self._checks.pop(uri, None) if self._checks.get(uri) is t else None)

    async def _check(self, uri: str, path: Path, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)  # a newer change cancels this one
        try:
            saved: str | None = await asyncio.to_thread(read_text, path)  # (a FIFO is refused, not waited on)
        except (OSError, ValueError):  # gone (deleted, renamed), or a name no file can have
            saved = None
        doc = self.server.workspace.text_documents.get(unquote(uri))
        text = doc.source if doc is not None else saved
        if text is None or "flowtape" not in text:  # no flow (any more): nothing to import, nothing to report
            if [self.load.pop(uri, None), self.syntax.pop(uri, None)] != [None, None]:
                self.publish({uri})
            return
        if saved is None and self.load.pop(uri, None) is not None:
            self.publish({uri})  # the file that failed to load is gone: only the editor's text is left
        syntax = await asyncio.to_thread(_syntax_error, text, str(path))
        if (self.syntax.get(uri) or None) != ([syntax] if syntax else None):
            self.syntax[uri] = [syntax] if syntax else []
            self.publish({uri})
        if syntax is not None and text == saved and self.load.pop(uri, None):
            self.publish({uri})  # what is saved does not parse: an older load error of it is gone
        if syntax is not None or text != saved:
            return  # the child imports what is saved: how unsaved text loads is seen on save
        if not may_import(self.server.trust, path, self.server.root):
            return  # importing runs the file: not one outside the workspace, nothing in an untrusted folder
        result = await self.run_checker(path)
        if result is None:
            return
        diagnostics: list[lsp.Diagnostic] = []
        for error in result.get("errors", []):
            file = str(error.get("file") or path)
            line = error.get("line") if isinstance(error.get("line"), int) else None
            here = file.startswith("<") or _is_file(file, path)  # (however the client spells the uri)
            target = uri if here else path_to_uri(file)
            diag = lsp.Diagnostic(
                range=_range(line, self._line_text(target, line)), message=str(error.get("message", "")),
                severity=lsp.DiagnosticSeverity.Error, source=SOURCE, code="flow-error",
            )
            if here:
                diagnostics.append(diag)
            else:  # the error is in a module the flow imports: show it at the top of the flow
                diagnostics.append(lsp.Diagnostic(
                    range=_range(1), message=f"{file}:{line or '?'}: {diag.message}",
                    severity=lsp.DiagnosticSeverity.Error, source=SOURCE, code="flow-error",
                ))
        self.load[uri] = diagnostics
        self.publish({uri})

    async def run_checker(self, path: Path, *extra: str) -> dict[str, Any] | None:
        """`python -m flowtape_lsp.check FILE [extra]` in a process of its own: its JSON report.
        NotTrusted when the file may not be imported (permits.py: it runs the file)."""
        if not may_import(self.server.trust, path, self.server.root):
            raise NotTrusted(message=f"{path} is not imported: " + (
                "this folder is not trusted, so Flowtape runs nothing here" if self.server.trust == "none"
                else "it is outside the workspace (initializationOptions.trust \"all\" lets the checker import it)"))
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "flowtape_lsp.check", str(path), *extra, cwd=str(path.parent),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"), start_new_session=True,
            )
        except OSError:
            return None
        started_here.add(proc.pid)  # (what it leaves behind is told apart from it: family.py)
        try:
            return await self._report(proc, path)
        finally:
            started_here.discard(proc.pid)

    async def _report(self, proc: asyncio.subprocess.Process, path: Path) -> dict[str, Any] | None:
        try:
            out, err = await asyncio.wait_for(proc.communicate(), CHECK_TIMEOUT)
        except (TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, 9)
            with contextlib.suppress(Exception):
                await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            return _unchecked(path, f"importing the flow took over {CHECK_TIMEOUT:g} s and was stopped: does it wait on something as it is imported?")
        try:
            data = json.loads(out.decode(errors="replace").strip().splitlines()[-1])
        except (ValueError, IndexError):
            code = proc.returncode or 0
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            said = err.decode(errors="replace").strip().splitlines()[-1:]
            return _unchecked(path, f"importing the flow ended its process: it {how}" + (f" ({said[0][:300]})" if said else ""))
        return data if isinstance(data, dict) else None


def _unchecked(path: Path, message: str) -> dict[str, Any]:
    """The checker's own report of a flow whose import never let it report (os._exit, a crash, a hang)."""
    return {"errors": [{"file": str(path), "line": None, "message": message}], "workflows": []}
