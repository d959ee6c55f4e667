"""Golden tapes: a deterministic run with clock times and ids stripped, committed and compared.
A difference names the first step that moved and the fields that changed."""

from __future__ import annotations

import tempfile
from collections import deque
from pathlib import Path
from typing import Any

import msgspec

from . import edits
from .diff import NONE, FiringView, Put, Taken, explain
from .diff import compare as compare_firings
from .digests import digest
from .errors import FlowtapeError, RunStopped, UsageError
from .graph import WorkflowDef
from .runner import execute
from .tape import Edited, End, Firing, Step, read_tape, resolve_state
from .verify import seeded


class GoldenMismatch(FlowtapeError):
    """The run no longer matches its golden tape."""


RUN_DIR = "<run>"  # what a golden says for the run's own directory (a tool's output paths are under it)
FLOW_DIR = "<flow>"  # and for the flow file's folder (a `File` input of the checkout): a checkout moves


def snapshot(flow: WorkflowDef, inputs: dict[str, Any] | None = None, **fork: Any) -> dict[str, Any]:
    """A run of `flow` with one worker, as comparable data: steps with their firings, the end.
    The run's directory, a new temporary one each time, is written `<run>` (a tool's outputs are
    files in it), and the digests are those of the tokens so written. `fork` (`resume_from`,
    `at_step`, `edits`) makes it a resume or a fork of a recorded run (its path)."""
    with tempfile.TemporaryDirectory() as tmp:
        result = execute(flow, inputs, max_workers=1, runs_dir=tmp, run_id="golden", **fork)
        assert result.run_dir is not None
        tape = read_tape(result.run_dir / "tape.jsonl", warn=False)
        places = {str(result.run_dir): RUN_DIR, str(result.run_dir.resolve()): RUN_DIR}
    local = [(_json_text(place), _json_text(places[place])) for place in sorted(places, key=len, reverse=True)]
    # The flow's folder only where a string starts with it (a path), never inside another string (a URL)
    folder = Path(tape.header.flowFile).absolute().parent
    for at in sorted({str(folder), str(folder.resolve())}, key=len, reverse=True):
        local += [(b'"' + _json_text(at + "/"), b'"' + _json_text(FLOW_DIR + "/")),
                  (b'"' + _json_text(at) + b'"', b'"' + _json_text(FLOW_DIR) + b'"')]

    def plain(raw: bytes | msgspec.Raw) -> bytes:
        data = bytes(raw)
        for place, mark in local:
            data = data.replace(place, mark)
        return data

    header = tape.header
    queues = header.queues
    held: list[deque[bytes]] = [deque() for _ in queues]
    for index, token in seeded(header):
        held[index].append(plain(token))
    steps: list[dict[str, Any]] = []
    firings: list[dict[str, Any]] = []
    end: dict[str, Any] = {}
    states: dict[str, msgspec.Raw] = {}
    for record in tape.records():
        if isinstance(record, Firing):
            resolve_state(record, states)  # (a state may be written as an edit of the last one)
            consumed = []
            for i, n, _ in record.consumed:
                consumed.append([queues[i], n, digest([held[i].popleft() for _ in range(n)])])
            produced = []
            for i, tokens in record.produced:
                raws = [plain(t) for t in tokens]
                held[i].extend(raws)
                produced.append([queues[i], [msgspec.json.decode(t) for t in raws]])
            firings.append({
                "actor": record.actor, "fireCount": record.fireCount, "consumed": consumed, "produced": produced,
                **({"state": msgspec.json.decode(plain(record.state))} if record.state else {}),
                **({"chat": msgspec.json.decode(plain(record.chat))} if record.chat else {}),  # an agent's prompt and answers
            })
        elif isinstance(record, Step):
            steps.append({
                "step": record.step, "actor": record.actor, "kind": record.kind, "fireCount": record.fireCount,
                "journalSeq": record.journalSeq, "queues": [[queues[i], n] for i, n in record.queues],
                "firings": firings,
            })
            firings = []
        elif isinstance(record, Edited):  # a fork's: the tokens and states from then on are the edited ones
            edits.apply(record, held, queues, states, {})
        elif isinstance(record, End):
            end = {"status": record.status, "outputs": msgspec.json.decode(plain(record.outputs)), "steps": record.steps}
            if record.error is not None:  # (paths of the flow's folder are written relative: a checkout moves)
                end["error"] = record.error.message.replace(str(result.run_dir), RUN_DIR).replace(f"{folder}/", "")
    return {"workflow": header.workflow, "inputs": msgspec.json.decode(plain(header.inputs)), "steps": steps, "end": end}


def _json_text(text: str) -> bytes:
    """`text` as it stands inside a JSON string."""
    return msgspec.json.encode(text)[1:-1]


def _in_checkout(inputs: Any, flow: WorkflowDef) -> Any:
    """A golden's inputs with its `<flow>` paths in the flow's folder of this checkout."""
    folder = str(Path(flow.site.file).resolve().parent)
    data = msgspec.json.encode(inputs).replace(b'"' + _json_text(FLOW_DIR + "/"), b'"' + _json_text(folder + "/"))
    return msgspec.json.decode(data.replace(b'"' + _json_text(FLOW_DIR) + b'"', b'"' + _json_text(folder) + b'"'))


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
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise UsageError(f"{path} is not a golden file (one `flowtape golden record` writes): {exc}") from None
    return expected


def record(flow: WorkflowDef, path: Path | str, inputs: dict[str, Any] | None = None, **fork: Any) -> dict[str, Any]:
    """Write the golden of a fresh run to `path`: a new file, or a golden file already there
    (never a flow, a tape or any other file, which would be lost)."""
    path = Path(path)
    if path.suffix in (".py", ".jsonl") or (path.exists() and (not path.is_file() or _read(path) is None)):
        raise UsageError(f"will not write a golden over {path}: give a new .json path, or an existing golden file")
    data = snapshot(flow, inputs, **fork)
    if data["end"].get("status") not in ("succeeded", "failed"):
        raise RunStopped(f"the run was stopped before its end: no golden written (a golden is a whole run); {path} is as it was")
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
    step = _first_step_apart(old, new)
    if step is not None:
        before, after = {s["actor"] for s in old}, {s["actor"] for s in new}
        gone, came = sorted(before - after), sorted(after - before)
        if not gone and not came:
            return step
        said = [f"{', '.join(map(repr, gone))} no longer {'fire' if len(gone) > 1 else 'fires'}"] if gone else []
        said += [f"{', '.join(map(repr, came))} {'fire' if len(came) > 1 else 'fires'} now"] if came else []
        renamed = " (renamed?)" if gone and came else ""
        return f"the actors that fire changed: {' and '.join(said)}{renamed}; {step}"
    for key in ("workflow", "inputs", "end"):
        if not _same(expected.get(key), actual.get(key)):
            return f"{key} changed: {_apart(expected.get(key), actual.get(key))}"
    return None


def _first_step_apart(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> str | None:
    for index in range(max(len(old), len(new))):
        if index >= len(old):
            return f"step {index + 1} is new: {new[index]['actor']} fire {new[index]['fireCount']}"
        if index >= len(new):
            return f"step {index + 1} ({old[index]['actor']} fire {old[index]['fireCount']}) is gone"
        if not _same(old[index], new[index]):
            fields = sorted(k for k in set(old[index]) | set(new[index]) if not _same(old[index].get(k), new[index].get(k)))
            details = "; ".join(f"{k}: {_apart(old[index].get(k), new[index].get(k))}" for k in fields)
            return f"step {index + 1} moved ({old[index]['actor']} fire {old[index]['fireCount']}): {details}"
    return None


def _same(old: Any, new: Any) -> bool:
    """Equal as JSON, not as Python: `1`, `1.0` and `true` are three values (Python's == says one)."""
    return _sorted_json(old) == _sorted_json(new)


_sorted_json = msgspec.json.Encoder(order="sorted").encode


def _apart(old: Any, new: Any, limit: int = 160) -> str:
    """`old -> new`, each cut to `limit` characters around where the two first differ."""
    a, b = msgspec.json.encode(old).decode(), msgspec.json.encode(new).decode()
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, at - limit // 3)

    def cut(text: str) -> str:
        part = text[start : start + limit]
        return ("…" if start else "") + part + ("…" if start + limit < len(text) else "")

    return f"{cut(a)} -> {cut(b)}"


def firings_of(golden: dict[str, Any]) -> list[FiringView]:
    """A golden's firings as `flowtape diff` compares them (inputs by digest: a golden keeps no more)."""
    views: list[FiringView] = []
    states: dict[str, msgspec.Raw] = {}
    for step in golden.get("steps", []):
        for f in step.get("firings", []):
            if "state" in f:
                states[f["actor"]] = msgspec.Raw(msgspec.json.encode(f["state"]))
            views.append(FiringView(
                f["actor"], f["fireCount"], step.get("step", 0),
                inputs=[Taken(queue, d) for queue, _, d in f.get("consumed", [])],
                outputs=[Put(queue, [msgspec.Raw(msgspec.json.encode(v)) for v in values]) for queue, values in f.get("produced", [])],
                state=states.get(f["actor"], NONE),
                chat=msgspec.Raw(msgspec.json.encode(f["chat"])) if "chat" in f else NONE,
            ))
    return views


def first_firing_apart(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """The first firing that differs, as `flowtape diff` tells it (golden = a, this run = b)."""
    outputs = tuple(msgspec.Raw(msgspec.json.encode((g.get("end") or {}).get("outputs", {}))) for g in (expected, actual))
    found = compare_firings(firings_of(expected), firings_of(actual), (outputs[0], outputs[1]), ("golden", "now")).first
    return "\n".join(explain(found, ("golden", "now"))) if found is not None else None


def check(flow: WorkflowDef, path: Path | str, inputs: dict[str, Any] | None = None, **fork: Any) -> None:
    """Raise GoldenMismatch unless a fresh run (or the same fork: `resume_from`, `at_step`,
    `edits`) matches the golden at `path`."""
    expected = _read(Path(path))
    if expected is None:
        raise UsageError(f"no golden at {path}: record one with `flowtape golden record`")
    given = None if fork.get("resume_from") is not None else inputs or _in_checkout(expected.get("inputs"), flow) or None
    try:
        actual = snapshot(flow, given, **fork)
    except UsageError as exc:
        if inputs:
            raise
        raise UsageError(f"{path}: the inputs it holds do not fit the flow: {exc}") from None
    end, was = actual["end"], expected.get("end") or {}
    if end.get("status") not in ("succeeded", "failed"):  # Ctrl-C or SIGTERM: no verdict either way
        raise RunStopped(f"the run was stopped before its end: {path} not checked")
    if expected.get("inputs") != actual.get("inputs"):  # said first: every step after would move
        raise GoldenMismatch(f"{path}: the inputs differ: {_apart(expected.get('inputs'), actual.get('inputs'))}")
    difference = compare(expected, actual)
    if difference is not None:
        failed = f"; the run failed: {end.get('error')}" if end.get("status") == "failed" and end != was else ""
        firing = first_firing_apart(expected, actual)
        said = f"\nfirst firing that differs (a = the golden, b = this run): {firing}" if firing is not None else ""
        raise GoldenMismatch(f"{path}: {difference}{failed}{said}")


def assert_golden(flow: WorkflowDef, path: Path | str, inputs: dict[str, Any] | None = None, **fork: Any) -> None:
    """The pytest helper: `assert_golden(my_flow, "tests/golden/my_flow.json")`."""
    try:
        check(flow, Path(path), inputs, **fork)
    except GoldenMismatch as exc:
        raise AssertionError(str(exc)) from None
