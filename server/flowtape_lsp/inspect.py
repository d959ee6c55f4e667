"""What the flow's actors were at the selected step (`flowtape/selectStep`): a hover on the line
that creates an actor shows its fire count and state; inlay hints at the end of those lines show
a short preview. Without a selection, the flow's latest run at its last step is shown. A client
that follows its own stepper asks for the hints at the steps it shows (`flowtape/stepHints`)."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from flowtape.rundir import read_summary
from flowtape.tape import ActorInfo, Header
from flowtape.values import preview_raw
from lsprotocol import types as lsp
from lsprotocol.converters import get_converter

from . import protocol as P
from .actorlines import FileText, creation_line, current_text
from .run import Run
from .tapeindex import last_step_from_end
from .workspace import file_key, uri_to_path

if TYPE_CHECKING:
    from .server import FlowtapeServer

HINT_STATE = 40
HINT_ACTORS = 4  # labels on one line; the rest are counted
TRIED_RUNS = 5  # a hover looks back this many runs for one with something to show
_LSP = get_converter()  # LSP structures to JSON (flowtape/stepHints answers standard InlayHints)


@dataclass
class ActorView:
    actor: ActorInfo
    fire_count: int
    state: str | None  # full-ish preview


@dataclass
class View:
    run_id: str
    step: int
    total: int
    actors: list[ActorView]
    files: frozenset[Path]  # where its actors are created


def _resolved(file: str) -> Path:
    return _resolve(file) if file else Path()


@functools.lru_cache(maxsize=4096)
def _resolve(file: str) -> Path:
    return Path(file).resolve()


_files: dict[int, tuple[Header, frozenset[Path]]] = {}


def _files_of(header: Header) -> frozenset[Path]:
    """The files a run's actors are created in (once per header: a hover asks every time)."""
    known = _files.get(id(header))
    if known is None or known[0] is not header:
        if len(_files) > 64:
            _files.clear()
        known = _files[id(header)] = (header, frozenset(_resolved(a.file) for a in header.actors if a.file))
    return known[1]


def _view(run: Run, step: int) -> View:
    """The actors' fire counts and states right after `step` (0: before anything fired)."""
    index = run.index
    header = index.header
    assert header is not None
    if step == 0:
        counts: dict[str, int] = {}
        states: dict[str, msgspec.Raw] = {}
    elif step == index.steps and index.rebuild is not None:
        with index.lock:
            counts = dict(index.rebuild.fire_counts)
            states = dict(index.rebuild.states)
    else:
        at = index.at_step(step)
        counts, states = at.rebuild.fire_counts, at.rebuild.states
    return _view_of(run.run_id, header, step, index.steps, counts, states)


def _view_of(run_id: str, header: Header, step: int, total: int, counts: dict[str, int], states: dict[str, msgspec.Raw]) -> View:
    actors = []
    for actor in header.actors:
        raw = states.get(actor.path)
        state = preview_raw(raw, 300) if raw else None
        actors.append(ActorView(actor, counts.get(actor.path, 0), state))
    return View(run_id, step, total, actors, _files_of(header))


def _last_view(run: Run) -> View | None:
    """A finished run's view after its last step from the two ends of its tape, not read through."""
    summary = read_summary(run.run_dir)
    if summary is None or summary.status == "running" or not summary.steps:
        return None
    at = last_step_from_end(run.index.path, summary.steps)
    if at is None:
        return None
    return _view_of(run.run_id, at.rebuild.header, summary.steps, summary.steps, at.rebuild.fire_counts, at.rebuild.states)


class Inspector:
    def __init__(self, server: FlowtapeServer) -> None:
        self.server = server
        self.selected: dict[str, tuple[str, int]] = {}  # flow file (file_key) -> (run id, step)
        self._views: dict[str, View] = {}  # flow file (file_key) -> view of the selection
        self._last: dict[str, View] = {}  # finished runs' views at their last step, by run id
        # Selections are numbered as they arrive; one is shown only if it is still the latest of
        # its flow once its view is built. Views take their own time (a step far from a checkpoint
        # is rebuilt for longer than the last step), so the last selection to finish need not be
        # the last one sent, and it is the last one sent that the stepper shows.
        self._sent = 0
        self._latest: dict[str, int] = {}  # flow file (file_key) -> number of its latest selection

    def arrived(self, run: Run) -> int:
        """Number a selection in `run`'s flow as it arrives (before anything is awaited)."""
        self._sent += 1
        self._latest[file_key(run.uri)] = self._sent
        return self._sent

    def superseded(self, run: Run, ticket: int) -> bool:
        return self._latest.get(file_key(run.uri)) != ticket

    async def select(self, run: Run, step: int, ticket: int) -> None:
        if self.superseded(run, ticket):
            return  # a newer one came in while this one waited: not worth building
        view = await asyncio.to_thread(_view, run, step)
        if self.superseded(run, ticket):
            return
        self.selected[file_key(run.uri)] = (run.run_id, step)
        self._views.pop(file_key(run.uri), None)  # (the latest selection is found first)
        self._views[file_key(run.uri)] = view
        # The lenses name the selected step only for a client that does not ask for it (codelens.py),
        # and a client that asks for its stepper's hints itself redraws them as its keys go (a
        # refresh would have it ask again, with the step it already shows).
        options = self.server.client_options
        self.server.refresh_views(lenses=not options.asksForStep, hints=not options.stepHints)

    def on_run_finished(self, run: Run) -> None:
        """A newer run of a flow takes over its hovers and hints from a step selected in an older
        one, as a debugger's new session does (the stepper selects again to go back)."""
        flow = file_key(run.uri)
        selected = self.selected.get(flow)
        if selected is not None and selected[0] != run.run_id:
            del self.selected[flow]
            self._views.pop(flow, None)

    async def view_for(self, uri: str) -> tuple[View, Path] | None:
        """The view of the actors created in file `uri` (a flow, or a module a flow's actors come
        from): the latest selection of a flow that has actors there, else the latest run of such
        a flow that has anything to show (not one still starting, or one that never started)."""
        path = uri_to_path(uri)
        if path is None:
            return None
        for flow, view in reversed(self._views.items()):
            if flow == str(path) or path in view.files:
                return view, path
        candidates = [
            r for r in self.server.manager.runs.values()
            if (r.uri and uri_to_path(r.uri) == path) or (r.index.header is not None and path in _files_of(r.index.header))
        ]
        candidates.sort(key=lambda r: (r.started_at, r.run_id), reverse=True)
        for run in candidates[:TRIED_RUNS]:
            if run.starting() or run.never_started():
                continue  # still importing its flow, or failed before its tape began: nothing to show
            shown = await self._last_view(run)
            if shown is not None:
                return shown, path
        return None

    async def _last_view(self, run: Run) -> View | None:
        known = self._last.get(run.run_id)
        if known is not None and run.finished and not run.live:
            return known  # a finished run's last step does not change: not rebuilt for every hover
        view = await self._build_last_view(run)
        if view is not None and run.finished and not run.live:
            if len(self._last) > 16:
                self._last.clear()
            self._last[run.run_id] = view
        return view

    async def _build_last_view(self, run: Run) -> View | None:
        try:
            await self.server.manager.checked(run)
        except Exception:  # noqa: BLE001 - a damaged tape: nothing to show (the stepper says why)
            return None
        if not run.live and not run.index.finished:  # a long tape is not read through for a hover
            fast = await asyncio.to_thread(_last_view, run)
            if fast is not None:
                return fast
        try:
            index = await self.server.manager.ready(run)
        except Exception:  # noqa: BLE001 - a run without a tape: nothing to show
            return None
        return await asyncio.to_thread(_view, run, index.steps)


def _by_line(view: View, path: Path, text: FileText) -> dict[int, list[ActorView]]:
    """The actors created in file `path`, by the line that creates them in its `text` now."""
    by_line: dict[int, list[ActorView]] = {}
    for a in view.actors:
        if a.actor.file and _resolved(a.actor.file) == path:
            line0 = creation_line(text, a.actor)
            if line0 is not None:
                by_line.setdefault(line0, []).append(a)
    return by_line


def register(server: FlowtapeServer) -> None:
    inspector = Inspector(server)
    server.inspector = inspector  # type: ignore[attr-defined]
    server.manager.listeners.insert(0, inspector.on_run_finished)  # before the views are refreshed

    @server.feature(P.SELECT_STEP)
    async def select_step(params: Any) -> None:
        try:
            p = P.decode_params(params, P.SelectStepParams)
            run = server.manager.get(p.runId)
            ticket = inspector.arrived(run)  # in the order sent: nothing was awaited yet
            index = await server.manager.ready(run)
            if p.step > index.steps:
                raise P.not_found(f"step {p.step} is out of range: run {run.run_id} has steps 0 to {index.steps}")
            await inspector.select(run, p.step, ticket)
        except Exception as exc:  # noqa: BLE001 - a notification has no response: tell the user instead
            message = getattr(exc, "message", None) or str(exc)
            server.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Warning, message=f"flowtape/selectStep: {message}"))

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(params: lsp.HoverParams) -> lsp.Hover | None:
        found = await inspector.view_for(params.text_document.uri)
        if found is None:
            return None
        view, path = found
        actors = _by_line(view, path, current_text(server.workspace, params.text_document.uri)).get(params.position.line)
        if not actors:
            return None
        parts = [f"**Flowtape** · run `{view.run_id}` · step {view.step} of {view.total}", ""]
        for a in actors:
            info = a.actor
            fired = f"fired {a.fire_count} time{'s' if a.fire_count != 1 else ''}"
            parts.append(f"- `{info.path}` ({info.cls}, {info.kind}): {fired}")
            if a.state is not None:
                parts.append(f"  state: `{a.state}`")
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n".join(parts)))

    @server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=False))
    async def inlay_hints(params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        found = await inspector.view_for(params.text_document.uri)
        if found is None:
            return []
        view, path = found
        now = current_text(server.workspace, params.text_document.uri)
        return _hints(view, path, now, params.range.start.line, params.range.end.line)

    @server.feature(P.STEP_HINTS)
    async def step_hints(params: Any) -> Any:
        p = P.decode_params(params, P.StepHintsParams)
        run = server.manager.get(p.runId)
        index = await server.manager.ready(run)
        beyond = [s for s in p.steps if s > index.steps]
        if beyond:
            raise P.not_found(f"step {beyond[0]} is out of range: run {run.run_id} has steps 0 to {index.steps}")
        path = uri_to_path(p.uri)
        now = current_text(server.workspace, p.uri)  # (the text and its version, read together)
        views = await asyncio.to_thread(lambda: [_view(run, s) for s in p.steps])
        steps: list[P.StepHints] = []
        # the flow's own file, or a module its actors are created in (as view_for picks a view)
        shows = path is not None and (uri_to_path(run.uri) == path or path in views[0].files)
        if shows and path is not None:
            steps = [P.StepHints(step=v.step, hints=[_LSP.unstructure(h) for h in _hints(v, path, now)]) for v in views]
        return P.StepHintsResult(runId=run.run_id, uri=p.uri, version=now.version, shows=shows, steps=steps).to_json()


def _hints(view: View, path: Path, now: FileText, first: int = 0, last: int | None = None) -> list[lsp.InlayHint]:
    """The hints of the actors created in file `path` (on its lines `first` to `last`) at `view`'s step."""
    lines = now.lines
    hints: list[lsp.InlayHint] = []
    for line0, actors in sorted(_by_line(view, path, now).items()):
        if line0 < first or (last is not None and line0 > last) or line0 >= len(lines):
            continue
        text = lines[line0]
        labels = []
        for a in actors:
            label = f"{a.actor.path if len(actors) > 1 else ''}{' ' if len(actors) > 1 else ''}×{a.fire_count}"
            if a.state is not None:
                state = a.state if len(a.state) <= HINT_STATE else a.state[: HINT_STATE - 1] + "…"
                label += f" {state}"
            labels.append(label)
        if len(labels) > HINT_ACTORS:  # (one line creating thousands of actors: a list comprehension)
            labels[HINT_ACTORS:] = [f"+{len(labels) - HINT_ACTORS} more"]
        tooltip = f"run {view.run_id} at step {view.step}: " + "; ".join(
            f"{a.actor.path} fired {a.fire_count}" + (f", state {a.state}" if a.state else "") for a in actors[:HINT_ACTORS * 5]
        ) + (f"; and {len(actors) - HINT_ACTORS * 5} more" if len(actors) > HINT_ACTORS * 5 else "")
        hints.append(lsp.InlayHint(
            position=lsp.Position(line0, len(text.encode("utf-16-le")) // 2), label=" · ".join(labels),
            padding_left=True, tooltip=tooltip,
        ))
    return hints
