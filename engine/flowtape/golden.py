"""Golden tapes: a deterministic run with clock times and ids stripped, committed and compared.
A difference names the first step that moved and the fields that changed."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec

from .errors import FlowtapeError, UsageError
from .graph import WorkflowDef
from .runner import execute
from .tape import End, Firing, Step, read_tape


class GoldenMismatch(FlowtapeError):
    """The run no longer matches its golden tape."""


def snapshot(flow: WorkflowDef, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run of `flow` with one worker, as comparable data: steps with their firings, the end."""
    with tempfile.TemporaryDirectory() as tmp:
        result = execute(flow, inputs, max_workers=1, runs_dir=tmp, run_id="golden")
        assert result.run_dir is not None
        tape = read_tape(result.run_dir / "tape.jsonl", warn=False)
    queues = tape.header.queues
    steps: list[dict[str, Any]] = []
    firings: list[dict[str, Any]] = []
    end: dict[str, Any] = {}
    for record in tape.records():
        if isinstance(record, Firing):
            firings.append({
                "actor": record.actor, "fireCount": record.fireCount,
                "consumed": [[queues[i], n, d] for i, n, d in record.consumed],
                "produced": [[queues[i], [msgspec.json.decode(t) for t in toks]] for i, toks in record.produced],
                **({"state": msgspec.json.decode(record.state)} if record.state else {}),
            })
        elif isinstance(record, Step):
            steps.append({
                "step": record.step, "actor": record.actor, "kind": record.kind, "fireCount": record.fireCount,
                "journalSeq": record.journalSeq, "queues": [[queues[i], n] for i, n in record.queues],
                "firings": firings,
            })
            firings = []
        elif isinstance(record, End):
            end = {"status": record.status, "outputs": msgspec.json.decode(record.outputs), "steps": record.steps}
            if record.error is not None:
                end["error"] = record.error.message
    return {"workflow": tape.header.workflow, "inputs": msgspec.json.decode(tape.header.inputs), "steps": steps, "end": end}


class _Step(msgspec.Struct):
    actor: str
    fireCount: int


class _Golden(msgspec.Struct):
    """What a golden file must hold to be compared (the steps' other fields are compared as they are)."""

    workflow: str
    steps: list[_Step]
    inputs: dict[str, Any] | None = None
    end: dict[str, Any] | None = None


def _read(path: Path) -> dict[str, Any] | None:
    """The golden at `path`; None when there is none; UsageError when the file is not one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read the golden {path}: {exc.strerror}") from None
    try:
        expected = msgspec.json.decode(data)
        msgspec.convert(expected, _Golden)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise UsageError(f"{path} is not a golden file (one `flowtape golden record` writes): {exc}") from None
    return expected


def record(flow: WorkflowDef, path: Path, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the golden of a fresh run to `path`: a new file, or a golden file already there
    (never a flow, a tape or any other file, which would be lost)."""
    if path.suffix in (".py", ".jsonl") or (path.exists() and (not path.is_file() or _read(path) is None)):
        raise UsageError(f"will not write a golden over {path}: give a new .json path, or an existing golden file")
    data = snapshot(flow, inputs)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_bytes(msgspec.json.format(msgspec.json.encode(data), indent=1) + b"\n")
        tmp.replace(path)
    except OSError as exc:
        raise UsageError(f"cannot write the golden {path}: {exc.strerror}") from None
    return data


def compare(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """None when equal, else a message naming the first step that moved and what changed."""
    old, new = expected.get("steps", []), actual.get("steps", [])
    for index in range(max(len(old), len(new))):
        if index >= len(old):
            return f"step {index + 1} is new: {new[index]['actor']} fire {new[index]['fireCount']}"
        if index >= len(new):
            return f"step {index + 1} ({old[index]['actor']} fire {old[index]['fireCount']}) is gone"
        if old[index] != new[index]:
            fields = sorted(k for k in set(old[index]) | set(new[index]) if old[index].get(k) != new[index].get(k))
            details = "; ".join(f"{k}: {_short(old[index].get(k))} -> {_short(new[index].get(k))}" for k in fields)
            return f"step {index + 1} moved ({old[index]['actor']} fire {old[index]['fireCount']}): {details}"
    for key in ("workflow", "inputs", "end"):
        if expected.get(key) != actual.get(key):
            return f"{key} changed: {_short(expected.get(key))} -> {_short(actual.get(key))}"
    return None


def _short(value: Any, limit: int = 160) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check(flow: WorkflowDef, path: Path, inputs: dict[str, Any] | None = None) -> None:
    """Raise GoldenMismatch unless a fresh run matches the golden at `path`."""
    expected = _read(Path(path))
    if expected is None:
        raise GoldenMismatch(f"no golden at {path}: record one with `flowtape golden record`")
    difference = compare(expected, snapshot(flow, inputs or expected.get("inputs") or None))
    if difference is not None:
        raise GoldenMismatch(f"{path}: {difference}")


def assert_golden(flow: WorkflowDef, path: Path | str, inputs: dict[str, Any] | None = None) -> None:
    """The pytest helper: `assert_golden(my_flow, "tests/golden/my_flow.json")`."""
    try:
        check(flow, Path(path), inputs)
    except GoldenMismatch as exc:
        raise AssertionError(str(exc)) from None
