"""Agents that call no model: the mock transport, which answers offline, or a callable transport."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..model import TaskSpec
from ..ports import is_resource
from .prompts import to_json


def _synthesize(port: str, port_type: Any) -> Any:
    if is_resource(port_type):  # a file's content: written out as a file (_as_files), as a model's answer is
        return f"mock output for {port}\n"
    if port_type is bool:
        return False
    if port_type is int:
        return 0
    if port_type is float:
        return 0.0
    if port_type is dict:
        return {}
    if port_type is list:
        return []
    return f"mock:{port}"


def _payload(prompt: str, inputs: dict[str, Any]) -> str:
    return f"{prompt}\n\n{to_json(inputs)}" if inputs else prompt


def _declared(spec: TaskSpec, ports: dict[str, Any], who: str) -> None:
    unknown = [port for port in ports if port not in spec.outputs]
    if unknown:
        names = ", ".join(spec.outputs) or "none"
        raise ValueError(f"{who} {', '.join(map(repr, unknown))}, which is no output port of {spec.name} (its outputs: {names})")


def _as_files(spec: TaskSpec, answer: dict[str, Any], work_dir: Path, stem: str) -> dict[str, Any]:
    """The answer with each `File` (or `Resource`) port's value made a file in the run's `work/`,
    as wfpy does: a path that names a file is copied (the token is the file as it is now), text is
    the file's content, a dict or list its JSON. A consumer gets a path it can open."""
    out = dict(answer)
    for port, value in answer.items():
        declared = spec.outputs.get(port)
        if declared is None or value is None or not is_resource(declared.type):
            continue
        work_dir.mkdir(parents=True, exist_ok=True)
        target = work_dir / f"{stem}__{port}{declared.ext or '.txt'}"
        if isinstance(value, (str, os.PathLike)) and os.path.isfile(value):
            shutil.copyfile(value, target)
        elif isinstance(value, (dict, list)):
            target.write_text(json.dumps(value, indent=2, default=str), encoding="utf-8")
        else:
            target.write_text(str(value), encoding="utf-8")
        out[port] = str(target)
    return out


def ask(
    spec: TaskSpec, obj: Any, inputs: dict[str, Any], work_dir: Path, stem: str, given: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """One agent firing: its answer per output port (a `File` port's as a file in `work_dir`,
    named from `stem`), and the chat messages it adds. A `given` answer (a fork's edit) stands
    for the transport's."""
    config = spec.agent
    assert config is not None
    history: list[dict[str, str]] = getattr(obj, "chat_history", [])
    if given is not None:
        answer = dict(given)
    elif callable(config.transport):
        answer = config.transport(config.prompt, dict(inputs), list(history))
        if not isinstance(answer, dict):
            answer = {port: answer for port in spec.outputs}
        _declared(spec, answer, "its transport answered")
    else:  # (mock_outputs names only output ports: @agent checked)
        answer = {}
        for port, declared in spec.outputs.items():
            if port in config.mock_outputs:
                value = config.mock_outputs[port]
                answer[port] = value(inputs) if callable(value) else value
            else:
                answer[port] = _synthesize(port, declared.type)
    reply = to_json({"outputs": answer})
    added = [{"role": "user", "content": _payload(config.prompt, inputs)}, {"role": "assistant", "content": reply}]
    history.extend(added)
    obj.chat_history = history
    return _as_files(spec, answer, work_dir, stem), added
