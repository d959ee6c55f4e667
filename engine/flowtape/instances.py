"""wfpy's workflow instances: a nested workflow answered by a run that already happened.

`child(instance=RUN)` inside a builder stands for `child` without running it: the node puts each
output token that run recorded, once, and nothing of the child runs (it is not even built). RUN
is a run directory, a run id (in the runs folder), the run's `run.json` or tape, or a wfpy run
(its directory or its `run.wf-run.json`); a relative path is read from the file that calls
`child`, as wfpy reads it. Refused where wfpy refuses it, with wfpy's kinds of error (a TypeError
outside a workflow or for a child with inputs; a ValueError for a run of another workflow, one
that did not succeed or cannot be read; a FileNotFoundError for no run there), each a FlowError
naming the file and line of the call.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from .errors import FlowError, TraceCorruption
from .model import SPEC_ATTR, action, guard, task
from .ports import Port
from .rundir import DEFAULT_RUNS_DIR, SUMMARY, TAPE, valid_run_id
from .sites import Site
from .streamed import check_run, ends
from .values import decode

if TYPE_CHECKING:
    from .graph import WorkflowDef

WFPY_RECORD = "run.wf-run.json"


class InstanceTypeError(FlowError, TypeError):
    """`instance=` where no recorded run can stand for the child (outside a workflow, a child with inputs)."""


class InstanceValueError(FlowError, ValueError):
    """A recorded run that cannot answer for the child: another workflow's, not succeeded, unreadable."""


class InstanceNotFound(FlowError, FileNotFoundError):
    """No recorded run where `instance=` points."""


def answer(wf: WorkflowDef, ref: Any, site: Site, runs_dir: Path | None) -> Any:
    """The actor that stands for `wf` in the workflow being built: a source of the outputs the
    run `ref` recorded (made, like any task, inside the builder, where it registers itself)."""
    where = f"{wf.name}(instance=...)"
    if wf.inputs:  # (declared: the child is not built, so its wiring cannot tell)
        raise InstanceTypeError(f"{where}: an instance has no inputs, but {wf.name} declares {', '.join(sorted(wf.inputs))}. "
                                "A workflow fed by its parent must run again", site.file, site.line)
    found = _find(ref, site, runs_dir)
    if found is None:
        raise InstanceNotFound(f"{where}: no run at {ref!s} (no {SUMMARY} and {TAPE} of a Flowtape run there, "
                               f"nor a {WFPY_RECORD} of wfpy's)", site.file, site.line)
    try:
        workflow, ok, outputs = _read_wfpy(found) if found.name == WFPY_RECORD else _read_tape(found)
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InstanceValueError(f"{where}: cannot read the run at {found.parent}: {exc}", site.file, site.line) from None
    if not ok:
        raise InstanceValueError(f"{where}: the run at {found.parent} did not succeed", site.file, site.line)
    if workflow != wf.name:
        raise InstanceValueError(f"{where}: the run at {found.parent} is of {workflow!r}, not {wf.name!r}", site.file, site.line)
    declared = wf.outputs if wf.declared_outputs else {port: None for port in outputs}
    recorded = {port: outputs.get(port, []) for port in declared}
    return _source(wf, recorded, declared, site)()


def _find(ref: Any, site: Site, runs_dir: Path | None) -> Path | None:
    """The tape (or wfpy's run record) of the run `ref` names; None when there is none."""
    text = os.fspath(ref) if isinstance(ref, (str, os.PathLike)) else ""
    if not text:
        return None
    path = Path(text).expanduser()
    tries = [path] if path.is_absolute() else [Path(site.file).parent / path, path]
    if valid_run_id(text):
        tries.append((runs_dir or DEFAULT_RUNS_DIR) / text)
    for at in tries:
        if at.is_file() and at.name in (SUMMARY, TAPE, WFPY_RECORD):
            at = at.parent if at.name != WFPY_RECORD else at
        if at.is_dir():
            for name in (TAPE, WFPY_RECORD):
                if (at / name).is_file():
                    return (at / name).resolve()
        elif at.is_file():
            return at.resolve()
    return None


def _read_tape(tape: Path) -> tuple[str, bool, dict[str, list[Any]]]:
    """A Flowtape run's workflow, whether it succeeded, and its outputs, from its tape (held to
    what verify holds it to, unless this machine wrote it and nobody changed it since)."""
    try:
        check_run(tape.parent)
    except TraceCorruption as exc:
        raise ValueError(f"its tape fails verification: {exc}") from None
    header, end = ends(tape)
    if end is None:
        return header.workflow, False, {}  # killed, or still running: no outputs it vouches for
    outputs = msgspec.json.decode(end.outputs, type=dict[str, list[msgspec.Raw]])
    return header.workflow, end.status == "succeeded", {port: [decode(bytes(t)) for t in tokens] for port, tokens in outputs.items()}


def _read_wfpy(record: Path) -> tuple[str, bool, dict[str, list[Any]]]:
    """A wfpy run's workflow, whether it succeeded and its outputs, from its run record (plain
    JSON values: wfpy's own tags are left as they are)."""
    data = json.loads(record.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{WFPY_RECORD} holds no object")
    outputs = data.get("outputs") or {}
    if not isinstance(outputs, dict):
        raise ValueError("its outputs are no object")
    return (str(data.get("workflowName")), not data.get("error"),
            {port: v if isinstance(v, list) else [v] for port, v in outputs.items() if v is not None})


def _source(wf: WorkflowDef, recorded: dict[str, list[Any]], types: dict[str, Any], site: Site) -> type:
    """A task class named as the child workflow: one output port per output of the child, and
    one action that puts every recorded token, once (its state says it did: a resume keeps that)."""
    ports = type("Ports", (), {port: Port[t if t is not None else Any](direction="out") for port, t in types.items()})
    produces = {port: len(tokens) for port, tokens in recorded.items() if tokens}

    def put(self: Any) -> Any:
        self._ft_emitted = True
        return {port: tokens[0] if len(tokens) == 1 else list(tokens) for port, tokens in recorded.items() if tokens}

    cls = type(wf.name, (), {
        "__module__": wf.fn.__module__, "__qualname__": wf.name, "__doc__": f"workflow {wf.name}, answered by a recorded run",
        "__annotations__": {"_ft_emitted": bool}, "_ft_emitted": False, "Ports": ports,
        "put": action(consumes={}, produces=produces)(guard(lambda self: not self._ft_emitted)(put)),
    })
    klass = task(cls)
    getattr(klass, SPEC_ATTR).defined_at = wf.site
    return klass
