"""What a model is asked and what its answer must be, as wfpy shapes them: the prompt and an
instruction as system text, the firing's inputs and the task's parameters as a JSON user message,
and one JSON object `{"outputs": {"<port>": value}}` back, each value checked against its port."""

from __future__ import annotations

import json
import os
import re
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..ports import Map, is_resource, type_name

if TYPE_CHECKING:
    from ..model import TaskSpec


class BadAnswer(ValueError):
    """The model's answer cannot be used: it is said to the model (a repair), then in the error."""

    def __init__(self, message: str, port: str | None = None) -> None:
        self.port = port
        super().__init__(message)


def to_json(values: Any) -> str:
    """Values as a model reads them: JSON, whole (sets and other non-JSON values as lists or text)."""
    return json.dumps(values, ensure_ascii=False,
                      default=lambda v: sorted(v, key=repr) if isinstance(v, (set, frozenset)) else str(v))


def _port_list(spec: TaskSpec) -> str:
    described = []
    for port, p in spec.outputs.items():
        kind = f"the content of a {p.ext.lstrip('.')} file" if is_resource(p.type) and p.ext else (
            "a file's content" if is_resource(p.type) else type_name(p.type) if p.type not in (None, Any) else "any JSON value")
        described.append(f"{port} ({kind})")
    return ", ".join(described)


def instruction(spec: TaskSpec) -> str:
    """The system text after the prompt: how to answer."""
    return (
        "You are executing a Flowtape (wfpy) @agent task. Use only the JSON payload of the user message as input: "
        "inputs.<port> holds each input token, parameters.<name> each task parameter, and fileInputs.<port> each "
        "file input: its path, and its text as content (truncated: true when it was cut short); resourceInputs.<port> "
        "says what each file or folder input is (kind, exists), and for a folder lists the files under it. "
        'Return only strict JSON in the shape {"outputs": {"<port>": <value>}}, with exactly one value for each '
        f"declared output port: {_port_list(spec)}. "
        "No markdown fences, explanations or text before or after the JSON. "
        "For a file port, give the file's text content inline, not a path."
    )


FILE_INPUT_CHARS = 200_000  # of a file input's text in the user message (wfpy's bound)


def payload(spec: TaskSpec, obj: Any, inputs: dict[str, Any]) -> str:
    """The user message of a firing. A `File` (or `Resource`) input naming a file is given as
    wfpy gives it: under `fileInputs`, with the file's text, so that the model reads what it holds."""
    params = {name: getattr(obj, name, None) for name in spec.parameters}
    plain: dict[str, Any] = {}
    files: dict[str, Any] = {}
    resources: dict[str, Any] = {}
    for port, value in inputs.items():
        declared = spec.inputs.get(port)
        path = _path_of(value) if declared is not None and is_resource(declared.type) else None
        if path is not None:
            resources[port] = _resource_input(path, value)
        read = _file_input(path) if path else None
        if read is None:
            plain[port] = value
        else:
            files[port] = read
    message: dict[str, Any] = {"inputs": plain, "parameters": params}
    if files:
        message["fileInputs"] = files
    if resources:
        message["resourceInputs"] = resources
    return to_json(message)


def _path_of(value: Any) -> str | None:
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    return getattr(value, "path", None) or None  # (a Resource given as one)


LISTING_ENTRIES, LISTING_DEPTH = 200, 4  # of a folder input's listing (wfpy's bounds)


def _resource_input(path: str, value: Any) -> dict[str, Any]:
    """What a `Resource` (or `File`) input is, as wfpy tells the model under `resourceInputs`: its
    kind, whether it exists, and for a folder the tree under it, so the model need not ask."""
    declared = (getattr(value, "kind", "") or "").strip().lower()
    url = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path) is not None
    is_dir, is_file = (False, False) if url else (os.path.isdir(path), os.path.isfile(path))
    kind = _resource_kind(path, declared, is_dir, is_file)
    meta: dict[str, Any] = {"path": path, "kind": kind, "exists": not url and os.path.exists(path),
                            "isDir": is_dir, "isFile": is_file}
    if declared and declared != kind:
        meta["declaredKind"] = declared
    if is_dir:
        meta["listing"] = _listing(path)
    return meta


def _resource_kind(path: str, declared: str, is_dir: bool, is_file: bool) -> str:
    if declared:
        return {"dir": "folder", "directory": "folder", "https": "http"}.get(declared, declared)
    scheme, _, rest = path.strip().partition("://")
    if rest and scheme.lower() in ("http", "https"):
        return "http"
    if rest and scheme:
        return "url"
    if path.endswith("/") or is_dir:
        return "folder"
    return "file" if is_file else ""


def _listing(root: str) -> list[str]:
    """The paths under a folder, relative, folders ending in `/`, sorted, bounded as wfpy bounds them."""
    entries: list[str] = []
    base = Path(root)
    try:
        for item in sorted(base.rglob("*")):
            if len(entries) >= LISTING_ENTRIES:
                entries.append(f"... (truncated at {LISTING_ENTRIES} entries)")
                break
            rel = item.relative_to(base)
            if len(rel.parts) <= LISTING_DEPTH:
                entries.append(str(rel) + ("/" if item.is_dir() else ""))
    except OSError:  # (a folder that went away or cannot be read: what was listed is given)
        pass
    return entries


def _file_input(path: str) -> dict[str, Any] | None:
    """A file's text for the model (None when it is no file that can be read: its path is given as it is)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(FILE_INPUT_CHARS + 1)
        size = os.path.getsize(path)
    except (OSError, ValueError):  # (a folder, a URL, a file gone)
        return None
    return {"path": path, "content": text[:FILE_INPUT_CHARS], "sizeBytes": size, "truncated": len(text) > FILE_INPUT_CHARS}


def repair(error: BadAnswer, spec: TaskSpec) -> str:
    """The user message that asks again, saying what was wrong."""
    return (f"Your answer could not be used: {error}. Answer again with exactly one JSON object "
            f'{{"outputs": {{...}}}} holding one value for each output port: {_port_list(spec)}.')


def _type_schema(t: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if t is None or t is Any:
        return {}
    if is_resource(t):
        return {"type": "string", "description": "the file's text content"}
    if t is Map or isinstance(t, Map):
        return {"type": "object"}
    try:
        schema = msgspec.json.schema(t)
    except (TypeError, ValueError):  # a type msgspec cannot describe: any value, checked no further
        return {}
    defs.update(schema.pop("$defs", {}))
    return schema


def schema(spec: TaskSpec) -> dict[str, Any]:
    """The JSON Schema of an answer, built from the output ports' types (msgspec writes each)."""
    defs: dict[str, Any] = {}
    ports = {port: _type_schema(p.type, defs) for port, p in spec.outputs.items()}
    outputs = {"type": "object", "properties": ports, "required": list(ports), "additionalProperties": False}
    whole: dict[str, Any] = {"type": "object", "properties": {"outputs": outputs}, "required": ["outputs"],
                             "additionalProperties": False}
    if defs:
        whole["$defs"] = defs
    return whole


_FENCED = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)


def _object_in(text: str) -> dict[str, Any] | None:
    """The JSON object a text holds: the whole text, a fenced block, or from its first brace to
    its last (a prefix such as "Here it is:" and a closing remark left aside)."""
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCED.finditer(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _preview(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "…")


def outputs_of(spec: TaskSpec, text: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The answer's value for each output port, checked against its type: from `data` (a
    structured answer) or parsed from `text`. BadAnswer saying what is wrong."""
    outputs = answered(spec, text, data)
    missing = [port for port in spec.outputs if port not in outputs]
    if missing:
        raise BadAnswer(f"it gives no value for output port {', '.join(map(repr, missing))}", missing[0])
    return {port: _checked(port, p.type, outputs[port]) for port, p in spec.outputs.items()}


def answered(spec: TaskSpec, text: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The values an answer gives by port, as they are (not checked, perhaps not every port)."""
    answer = data if data is not None else _object_in(text)
    if answer is None:
        only = list(spec.outputs.items())
        if len(only) == 1 and is_resource(only[0][1].type) and text.strip():
            return {only[0][0]: text}  # one file port: plain text is its content (as in wfpy)
        raise BadAnswer(f"it is no JSON object ({_preview(text) if text.strip() else 'the answer was empty'})")
    return _outputs_in(spec, answer)


def _outputs_in(spec: TaskSpec, answer: dict[str, Any]) -> dict[str, Any]:
    """The answer's values by port, read as wfpy reads them: its "outputs" object, with any port
    the model put beside it; without one, the ports at the top; for a single port, its key, else
    the one value, else the whole object (each checked against the port's type after)."""
    outputs = answer.get("outputs")
    if isinstance(outputs, dict):
        beside = {k: v for k, v in answer.items() if k in spec.outputs and k not in outputs}
        return {**outputs, **beside}
    ports = list(spec.outputs)
    if len(ports) == 1:
        port = ports[0]
        return {port: answer[port] if port in answer else next(iter(answer.values())) if len(answer) == 1 else answer}
    if any(k in spec.outputs for k in answer):
        return answer
    raise BadAnswer(f'the JSON object has no "outputs" object, nor a key naming an output port (its keys: '
                    f'{", ".join(map(repr, answer)) or "none"})')


def _checked(port: str, t: Any, value: Any) -> Any:
    """The value as its port's type has it (a list for a `tuple[...]` port made a tuple, say)."""
    if t is None or t is Any:
        return value
    if is_resource(t):
        if not isinstance(value, str):
            raise BadAnswer(f"output port {port!r} is a file: its value must be the file's text, not "
                            f"{type(value).__name__} {_preview(to_json(value), 60)}", port)
        return value
    if t is Map or isinstance(t, Map):
        t = dict
    try:
        return msgspec.convert(value, t)
    except msgspec.ValidationError as exc:
        raise BadAnswer(f"output port {port!r} expects {type_name(t)}, but the answer gives "
                        f"{_preview(to_json(value), 60)} ({exc})", port) from None
    except TypeError:  # a type msgspec cannot check (a class of the flow's own): taken as given
        if isinstance(t, type) and not typing.get_args(t) and not isinstance(value, t):
            raise BadAnswer(f"output port {port!r} expects {type_name(t)}, but the answer gives "
                            f"{_preview(to_json(value), 60)}", port) from None
        return value
