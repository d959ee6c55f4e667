"""Agent firings. What the engine calls: `Agents` (one per run) answers a firing from its
transport: a model over HTTP (`openai_chat`, `anthropic_messages`, configured by `config`), the
mock, or a callable the flow gives. A model's answer is shaped and checked by `prompts`; a bad
one is asked again (`repair=` times) with what was wrong, then the firing fails."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import FlowtapeError
from ..ports import is_resource
from ..usage import ModelCall
from .config import AgentSetupError, Settings, resolve
from .mock import ask as ask_offline
from .prompts import BadAnswer, instruction, outputs_of, payload, repair, schema, to_json
from .transport import ModelCallFailed, ModelCallStopped, Request, Transport, call

if TYPE_CHECKING:
    from ..model import AgentConfig, TaskSpec

LIVE = frozenset({"http", "openai", "anthropic"})  # transports that call a model (names.TRANSPORTS' values)

__all__ = ["Agents", "Answer", "AgentSetupError", "AnswerUnusable", "ModelCallFailed", "ModelCallStopped", "calls_model"]


class AnswerUnusable(FlowtapeError):
    """The model's answer stayed unusable after the repairs: the firing fails (its inputs go back)."""


@dataclass
class Answer:
    outputs: dict[str, Any]  # per output port
    chat: list[dict[str, str]]  # the messages this firing adds to the actor's chat
    calls: list[ModelCall] = field(default_factory=list)  # the live calls it made


def calls_model(config: AgentConfig | None) -> bool:
    """Whether an agent with this configuration calls a model (not the mock, not a callable)."""
    return config is not None and not callable(config.transport) and config.transport in LIVE


def _transport(settings: Settings) -> Transport:
    if settings.sdk == "anthropic":
        from .anthropic_messages import AnthropicMessages

        return AnthropicMessages(settings)
    from .openai_chat import OpenAIChat

    return OpenAIChat(settings)


class Agents:
    """A run's agents: each actor's transport, made at its first live firing (one per endpoint
    and settings, shared: an SDK client holds a pool of connections and takes a while to make),
    and the calls that cost something but were recorded by no firing (one that failed, or was
    stopped)."""

    def __init__(self, stopping: Callable[[], bool]) -> None:
        self.stopping = stopping
        self.transports: dict[str, Transport] = {}  # by actor
        self.shared: dict[Settings, Transport] = {}
        self.lost: list[ModelCall] = []
        self.lock = threading.Lock()

    @staticmethod
    def check(who: str, spec: TaskSpec) -> None:
        """Say now (AgentSetupError) what would keep agent `who` from calling its model."""
        if calls_model(spec.agent):
            assert spec.agent is not None
            resolve(spec.agent, spec.agent.transport, who)

    def _transport_of(self, who: str, config: AgentConfig) -> Transport:
        transport = self.transports.get(who)
        if transport is None:
            settings = resolve(config, config.transport, who)
            with self.lock:  # (one client per settings, made once, however many agents ask at once)
                transport = self.shared.get(settings)
                if transport is None:
                    transport = self.shared[settings] = _transport(settings)
                self.transports[who] = transport
        return transport

    def ask(
        self, who: str, spec: TaskSpec, obj: Any, inputs: dict[str, Any], work_dir: Path, stem: str,
        given: dict[str, Any] | None = None,
    ) -> Answer:
        """One firing of agent `who`: its answer per output port, and the chat messages it adds.
        A `given` answer (a fork's edit) stands for the model's: no call is made."""
        config = spec.agent
        assert config is not None
        if given is not None or not calls_model(config):
            outputs, added = ask_offline(spec, obj, inputs, work_dir, stem, given)
            return Answer(outputs, added)
        transport = self._transport_of(who, config)
        history: list[dict[str, str]] = getattr(obj, "chat_history", [])
        user = {"role": "user", "content": payload(spec, obj, inputs)}
        request = Request([config.prompt, instruction(spec)], [*_recent(history, config.context_budget), user], schema(spec))
        calls: list[ModelCall] = []
        try:
            for attempt in range(config.repair + 1):
                reply = call(transport, request, self.stopping)
                calls.append(reply.call)
                said = reply.text if reply.data is None else to_json(reply.data)
                try:
                    outputs = outputs_of(spec, reply.text, reply.data)
                    break
                except BadAnswer as exc:
                    if reply.note:  # (a cut-off answer: the model is told, and so is the user)
                        exc = BadAnswer(f"{exc}; {reply.note}", exc.port)
                    if attempt == config.repair:
                        tries = f"after {config.repair} repair(s)" if config.repair else "(repair=0)"
                        raise AnswerUnusable(f"the model's answer is unusable {tries}: {exc}") from None
                    request.messages = [*request.messages, {"role": "assistant", "content": said or "(no answer)"},
                                        {"role": "user", "content": repair(exc, spec)}]
        except BaseException:
            self.lost.extend(calls)  # they cost what they cost, though no firing records them
            raise
        outputs = _files(spec, outputs, work_dir, stem)
        added = [user, {"role": "assistant", "content": said}]
        history.extend(added)
        obj.chat_history = history
        return Answer(outputs, added, calls)

    def close(self) -> None:
        with self.lock:
            transports, self.shared, self.transports = list(self.shared.values()), {}, {}
        for transport in transports:
            transport.close()


def _recent(history: list[dict[str, str]], budget: int) -> list[dict[str, str]]:
    """The latest `budget` messages of a chat, from a user message on (as wfpy trims it)."""
    recent = history[-budget:] if budget else []
    while recent and recent[0].get("role") != "user":
        recent = recent[1:]
    return recent


def _files(spec: TaskSpec, outputs: dict[str, Any], work_dir: Path, stem: str) -> dict[str, Any]:
    """A file port's content, written into the run's work/: its token is the file's path."""
    done = dict(outputs)
    for port, p in spec.outputs.items():
        if is_resource(p.type) and isinstance(done.get(port), str):
            work_dir.mkdir(parents=True, exist_ok=True)
            path = work_dir / f"{stem}__{port}{p.ext or '.txt'}"
            path.write_text(done[port], encoding="utf-8")
            done[port] = str(path)
    return done
