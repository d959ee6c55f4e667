"""Flowtape: actor-dataflow flows whose every run is a tape you can step through and resume."""

__version__ = "0.1.0"

from .errors import FlowError, FlowtapeError, ResumeRefused, RunFailed, RunStopped, TraceCorruption  # noqa: E402
from .graph import connect, if_, loop, workflow  # noqa: E402
from .model import action, agent, guard, source, task, tool  # noqa: E402
from .ports import File, Map, Port, Resource  # noqa: E402
from .runner import run  # noqa: E402

__all__ = [
    "Port", "File", "Map", "Resource", "task", "source", "action", "guard", "agent", "tool", "workflow", "connect", "loop", "if_", "run",
    "FlowError", "FlowtapeError", "RunFailed", "RunStopped", "ResumeRefused", "TraceCorruption", "__version__",
]
