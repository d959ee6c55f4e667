"""Loading a flow file by path, with errors that name the file and line."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from .errors import FlowError, FlowtapeError
from .graph import WorkflowDef

MODULE_PREFIX = "flowtape_flow_"  # (executors/ray.py imports flow files on workers under these names too)


def load_module(path: Path | str) -> ModuleType:
    """Import a flow file under a stable private name (so tapes can name its classes)."""
    file = Path(path).resolve()
    if not file.is_file():
        kind = "a directory" if file.is_dir() else "a device or special file" if file.exists() else None
        raise FlowError(f"is {kind}, not a flow file" if kind else "no such flow file", str(path))
    name = MODULE_PREFIX + hashlib.blake2b(str(file).encode(), digest_size=6).hexdigest()
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise FlowError("cannot be loaded as Python: a flow file's name ends in .py", str(file))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        raise FlowError(f"syntax error: {exc.msg}", exc.filename or str(file), exc.lineno) from None
    except FlowtapeError:
        del sys.modules[name]
        raise
    except (Exception, SystemExit) as exc:  # sys.exit() at import is the flow's mistake too, not ours to obey
        del sys.modules[name]
        line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            if Path(frame.filename).resolve() == file:
                line = frame.lineno
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "wfpy":
            raise FlowError("imports wfpy: switch the import to flowtape (`from flowtape import ...`), "
                            "which runs wfpy's flow API", str(file), line) from None
        raise FlowError(f"importing the flow raised {type(exc).__name__}: {exc}", str(file), line) from None
    return module


def workflows(module: ModuleType) -> dict[str, WorkflowDef]:
    found = {name: value for name, value in vars(module).items() if isinstance(value, WorkflowDef)}
    return dict(sorted(found.items(), key=lambda item: item[1].site.line))


def pick_workflow(module: ModuleType, wanted: str | None, file: str) -> WorkflowDef:
    """`--workflow NAME`, else `main`, else the last workflow defined in the file."""
    found = workflows(module)
    if not found:
        raise FlowError("defines no @workflow", file)
    if wanted is not None:
        if wanted not in found:
            raise FlowError(f"has no workflow {wanted!r} (it defines: {', '.join(found)})", file)
        return found[wanted]
    if "main" in found:
        return found["main"]
    return list(found.values())[-1]


def load_flow(path: Path | str, wanted: str | None = None) -> WorkflowDef:
    module = load_module(path)
    return pick_workflow(module, wanted, str(path))
