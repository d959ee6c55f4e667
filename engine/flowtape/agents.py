"""Agent firings: a mock transport that answers offline, or a callable transport."""

from __future__ import annotations

import json
from typing import Any

from .model import TaskSpec
from .values import preview


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


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else preview(value, 400)


def _payload(prompt: str, inputs: dict[str, Any]) -> str:
    shown = {port: _shown(value) for port, value in inputs.items()}
    return f"{prompt}\n\n{json.dumps(shown, ensure_ascii=False)}" if inputs else prompt


def ask(spec: TaskSpec, obj: Any, inputs: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """One agent firing: its answer per output port, and the chat messages it adds."""
    config = spec.agent
    assert config is not None
    history: list[dict[str, str]] = getattr(obj, "chat_history", [])
    if callable(config.transport):
        answer = config.transport(config.prompt, dict(inputs), list(history))
        if not isinstance(answer, dict):
            answer = {port: answer for port in spec.outputs}
    else:
        answer = {}
        for port, declared in spec.outputs.items():
            if port in config.mock_outputs:
                value = config.mock_outputs[port]
                answer[port] = value(inputs) if callable(value) else value
            else:
                answer[port] = _synthesize(port, declared.type)
    reply = json.dumps({"outputs": {p: _shown(v) for p, v in answer.items()}}, ensure_ascii=False)
    added = [{"role": "user", "content": _payload(config.prompt, inputs)}, {"role": "assistant", "content": reply}]
    history.extend(added)
    obj.chat_history = history
    return answer, added
