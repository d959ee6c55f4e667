"""Agent firings: a mock transport that answers offline, or a callable transport."""

from __future__ import annotations

import json
from typing import Any

from .model import TaskSpec


def _synthesize(port: str, port_type: Any) -> Any:
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


def _json(values: dict[str, Any]) -> str:
    """Values as a model reads them: JSON, whole (sets and other non-JSON values as lists or text)."""
    return json.dumps(values, ensure_ascii=False, default=lambda v: sorted(v, key=repr) if isinstance(v, (set, frozenset)) else str(v))


def _payload(prompt: str, inputs: dict[str, Any]) -> str:
    return f"{prompt}\n\n{_json(inputs)}" if inputs else prompt


def _declared(spec: TaskSpec, ports: dict[str, Any], who: str) -> None:
    unknown = [port for port in ports if port not in spec.outputs]
    if unknown:
        names = ", ".join(spec.outputs) or "none"
        raise ValueError(f"{who} {', '.join(map(repr, unknown))}, which is no output port of {spec.name} (its outputs: {names})")


def ask(
    spec: TaskSpec, obj: Any, inputs: dict[str, Any], given: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """One agent firing: its answer per output port, and the chat messages it adds. A `given`
    answer (a fork's edit) stands for the transport's."""
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
    reply = _json({"outputs": answer})
    added = [{"role": "user", "content": _payload(config.prompt, inputs)}, {"role": "assistant", "content": reply}]
    history.extend(added)
    obj.chat_history = history
    return answer, added
