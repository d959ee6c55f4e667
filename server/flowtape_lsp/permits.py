"""What the server may execute: the one rule.

The server runs user code in two ways only, both in child processes: `flowtape run` (a run, a
resume, a rerun) and the checker (`python -m flowtape_lsp.check FILE`, which imports a flow to
report where it does not load). Both execute the file they are given, so:

- the client says how far the folder is trusted, in `initializationOptions.trust`:
  `"workspace"` (the default: files inside the workspace root), `"none"` (an untrusted folder,
  as VS Code's Workspace Trust calls it: nothing is run or imported at all; lenses say why) or
  `"all"` (files outside the root are imported by the checker too);
- the checker imports a file only if its real path (symlinks followed) is inside the root,
  unless the trust is `"all"`;
- a resume or rerun runs the flow file the run's tape names only once that file is, as far as
  can be told without running it, the flow the run ran (`differs`): it binds the recorded
  workflow, and every actor the tape says was created in it is created in it, by its name or
  class. A tape naming some other file of the workspace as its flow is refused, not run."""

from __future__ import annotations

import ast
from pathlib import Path

from flowtape.tape import Header
from pygls.exceptions import JsonRpcException

from .actorlines import FileText, creation_line
from .workspace import read_named, split_lines


class NotTrusted(JsonRpcException):
    """-32004: the folder is not trusted to run code (initializationOptions.trust is "none")."""

    CODE = -32004
    MESSAGE = "Not trusted"


def may_run(trust: str) -> None:
    """Raise NotTrusted unless flows may be run here."""
    if trust == "none":
        raise NotTrusted(message="this folder is not trusted, so Flowtape runs nothing here (no run, resume or rerun, "
                                 "no flow imported to check it): trust the folder to run flows")


def may_import(trust: str, path: Path, root: Path) -> bool:
    """Whether the checker may import `path` (a real path)."""
    return trust == "all" or (trust == "workspace" and path.is_relative_to(root))


def differs(path: Path, header: Header) -> str | None:
    """Why `path` is not the flow the run of `header` ran, told without running it; None when
    it is, as far as its text shows."""
    text = read_named(path)
    if text is None:
        return "it cannot be read"
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        return f"it does not parse ({exc})"
    if header.workflow not in _bound(tree):
        return f"it has no workflow {header.workflow!r}"
    here, elsewhere = [], set()
    for actor in header.actors:
        if not actor.file or actor.file.startswith("<"):
            continue
        try:
            same = Path(actor.file).resolve() == path
        except (OSError, ValueError, RuntimeError):
            same = False
        if same:
            here.append(actor)
        else:
            elsewhere.add(actor.file)
    if not here and elsewhere:
        return f"none of the run's actors was created in it (they were created in {', '.join(sorted(elsewhere)[:3])})"
    lines = FileText(split_lines(text), None)
    missing = [actor.path for actor in here if creation_line(lines, actor) is None]
    if missing:
        return f"no line of it creates {', '.join(missing[:5])}{', …' if len(missing) > 5 else ''}"
    return None


def _bound(tree: ast.Module) -> set[str]:
    """The names a module binds (functions, classes, assignments, imports; in blocks too: a
    workflow made under an `if` or by a factory still counts)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names
