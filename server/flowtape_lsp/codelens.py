"""Code lenses on each `@workflow` function, found by parsing the file (nothing is imported):
"▶ Run", and when the workflow has runs, "⟲ Resume at step…" and "Runs (n)"."""

from __future__ import annotations

import ast
import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowtape.rundir import TAPE
from lsprotocol import types as lsp

from . import protocol as P
from .workspace import same_file, uri_to_path

if TYPE_CHECKING:
    from .server import FlowtapeServer


BIG_TEXT = 200_000  # characters


@dataclass
class WorkflowSite:
    name: str
    line0: int  # the first decorator's line (0-based)
    def_line0: int


def is_workflow(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Name):
        return target.id == "workflow"
    if isinstance(target, ast.Attribute):
        return target.attr == "workflow"
    return False


def find_workflows(text: str) -> list[WorkflowSite]:
    """The `@workflow` functions of a module (top level, or under top-level `if`/`try`)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found: list[WorkflowSite] = []
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = [d for d in node.decorator_list if is_workflow(d)]
            if decorators:
                first = min(d.lineno for d in node.decorator_list)
                found.append(WorkflowSite(node.name, first - 1, node.lineno - 1))
        elif isinstance(node, (ast.If, ast.Try)):
            children: list[ast.stmt] = [*node.body, *node.orelse]
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    children.extend(handler.body)
                children.extend(node.finalbody)
            stack.extend(reversed(children))
    found.sort(key=lambda w: w.line0)
    return found


def register(server: FlowtapeServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
    async def code_lens(params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        uri = params.text_document.uri
        path = uri_to_path(uri)
        if path is None or path.suffix != ".py" or not path.is_relative_to(server.root):
            return []  # "▶ Run" could only answer that the file cannot be run
        try:
            text = server.workspace.get_text_document(uri).source
        except Exception:  # noqa: BLE001 - unreadable: no lenses
            return []
        # a big module takes seconds to parse: not on the loop that streams the steps
        sites = find_workflows(text) if len(text) < BIG_TEXT else await asyncio.to_thread(find_workflows, text)
        lenses: list[lsp.CodeLens] = []
        for wf in sites:
            rng = lsp.Range(lsp.Position(wf.line0, 0), lsp.Position(wf.line0, 0))
            lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(
                title="▶ Run", command=P.CMD_RUN, arguments=[{"uri": uri, "workflow": wf.name}],
            )))
            runs = [r for r in server.manager.listed() if r.workflow == wf.name and same_file(r.uri, uri)]
            if not runs:
                continue
            started = [r for r in runs if (r.run_dir / TAPE).is_file()]  # a run that failed to load has no tape
            if started:
                latest = max(started, key=lambda r: (r.started_at, r.run_id))
                lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(
                    title="⟲ Resume at step…", command=P.CMD_RESUME, arguments=[{"runId": latest.run_id}],
                )))
            lenses.append(lsp.CodeLens(range=rng, command=lsp.Command(
                title=f"Runs ({len(runs)})", command=P.CLIENT_SHOW_RUNS, arguments=[{"uri": uri, "workflow": wf.name}],
            )))
        return lenses
