"""`python -m flowtape_lsp.check FLOW.py`: import a flow file and build every workflow in it, in
a process of its own (user code never runs inside the language server). Prints one JSON object
on stdout: `{"errors": [{"file", "line", "message"}], "workflows": [names]}`.

`python -m flowtape_lsp.check FLOW.py --graph [WORKFLOW]` builds one workflow (nothing fires) and
prints `{"errors": [...], "graph": FlowGraph}` instead, for the editor's graph view; with
`--states [WORKFLOW]`, `{"errors": [...], "states": {actor: {field: tagged JSON}}}`: each actor's
state before its first firing, which `flowtape/editables` lists for an actor that has not fired."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any


def check(path: str) -> dict[str, Any]:
    from flowtape.errors import FlowError, FlowtapeError
    from flowtape.loader import load_module, workflows

    errors: list[dict[str, Any]] = []
    names: list[str] = []
    try:
        module = load_module(path)
    except FlowError as exc:
        errors.append({"file": exc.file or path, "line": exc.line, "message": exc.message})
        return {"errors": errors, "workflows": names}
    except FlowtapeError as exc:
        errors.append({"file": path, "line": None, "message": str(exc)})
        return {"errors": errors, "workflows": names}
    for name, flow in workflows(module).items():
        names.append(name)
        try:
            flow.build()
        except FlowError as exc:
            errors.append({"file": exc.file or path, "line": exc.line, "message": exc.message, "workflow": name})
        except Exception as exc:  # noqa: BLE001 - a builder that raises is the user's error to see
            line = _line_in(exc, path)
            errors.append({"file": path, "line": line or flow.site.line, "workflow": name,
                           "message": f"building workflow {name} raised {type(exc).__name__}: {exc}"})
    return {"errors": errors, "workflows": names}


def graph(path: str, workflow: str | None) -> dict[str, Any]:
    def build() -> dict[str, Any]:
        import msgspec
        from flowtape.flowgraph import graph_of_flow

        return {"graph": msgspec.to_builtins(graph_of_flow(path, workflow))}

    return _built(path, build)


def states(path: str, workflow: str | None) -> dict[str, Any]:
    """Each actor's state before its first firing, as the flow declares it now (tagged JSON, by
    path): what a fork edits of an actor that has not fired by its step."""

    def build() -> dict[str, Any]:
        import msgspec
        from flowtape.flowgraph import network_of_flow
        from flowtape.fork import initial_states

        _, net = network_of_flow(path, workflow)
        return {"states": {actor: msgspec.json.decode(state) for actor, state in initial_states(net).items()}}

    return _built(path, build)


def _built(path: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """What `build` (which builds one workflow) gives, or the errors that stopped it."""
    from flowtape.errors import FlowError, FlowtapeError

    try:
        return {"errors": [], **build()}
    except FlowError as exc:
        return {"errors": [{"file": exc.file or path, "line": exc.line, "message": exc.message}]}
    except FlowtapeError as exc:
        return {"errors": [{"file": path, "line": None, "message": str(exc)}]}
    except Exception as exc:  # noqa: BLE001 - a builder that raises is the user's error to see
        return {"errors": [{"file": path, "line": _line_in(exc, path),
                            "message": f"building the workflow raised {type(exc).__name__}: {exc}"}]}


def _line_in(exc: BaseException, path: str) -> int | None:
    import traceback

    wanted = os.path.realpath(path)
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.realpath(frame.filename) == wanted:
            line = frame.lineno
    return line


def main() -> None:
    args = sys.argv[1:]
    one = {"--graph": graph, "--states": states}.get(args[1]) if len(args) in (2, 3) else None
    if not (len(args) == 1 or one is not None):
        print("usage: python -m flowtape_lsp.check FLOW.py [--graph | --states [WORKFLOW]]", file=sys.stderr)
        sys.exit(2)
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the flow prints goes to stderr, not into our JSON
    sys.stdout = sys.stderr
    try:
        result = one(args[0], args[2] if len(args) == 3 else None) if one is not None else check(args[0])
    except BaseException as exc:  # noqa: BLE001 - even SystemExit from user code becomes a report
        result = {"errors": [{"file": sys.argv[1], "line": None,
                              "message": f"loading the flow raised {type(exc).__name__}: {exc}"}], "workflows": []}
    out.write(json.dumps(result) + "\n")
    out.flush()
    os._exit(0)  # skip user atexit handlers and lingering non-daemon threads


if __name__ == "__main__":
    main()
