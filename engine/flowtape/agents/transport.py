"""The interface a model transport gives the engine: one request in, one reply out, and the
engine's stop ending a call under way. The SDKs do the HTTP (and its retries, honouring
retry-after); what they raise is said here, naming the endpoint and never the key."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import FiringStopped, FlowtapeError
from ..usage import ModelCall
from .config import Settings

STOP_POLL = 0.05  # seconds between two looks at the run's stop while a call is under way


@dataclass
class Request:
    system: list[str]  # the prompt, then the instruction
    messages: list[dict[str, str]]  # the history, then this firing's user message (and repairs)
    schema: dict[str, Any]  # of the answer: asked for as structured output where the endpoint has it


@dataclass
class Reply:
    text: str
    data: dict[str, Any] | None  # the answer as a structured output gave it, when one did
    call: ModelCall = field(default_factory=lambda: ModelCall(""))
    note: str = ""  # why the answer may be unusable, as the API said it (cut off at the token limit, a refusal)


class Transport(Protocol):
    settings: Settings

    def complete(self, request: Request) -> Reply:
        """One answer (the SDK retrying what is worth retrying); ModelCallFailed when none came."""
        ...

    def close(self) -> None:
        """Let go of the connections (a call under way may end with an error: nobody waits for it)."""
        ...


class ModelCallFailed(FlowtapeError):
    """No usable reply: the endpoint could not be reached, refused, or answered an error."""


class ModelCallStopped(FiringStopped):
    """The run was stopped while the call was under way: the firing did not happen."""


def masked(text: str, secret: str) -> str:
    """`text` with the secret, should an error body echo it, blanked out."""
    return text.replace(secret, "[key]") if len(secret) >= 4 else text


_NOT_REACHED = frozenset({"ConnectError", "ConnectTimeout"})  # the HTTP client's errors for an endpoint not reached


def failure(exc: Exception, sdk: Any, settings: Settings) -> ModelCallFailed:
    """What an SDK raised, said as one line naming the endpoint and the model."""
    where = settings.endpoint
    tries = f" (tried {settings.retries + 1} times)" if settings.retries else ""
    if isinstance(exc, sdk.APITimeoutError):
        said = f"{where} did not answer within {settings.timeout:g} s{tries}"
    elif isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        reason = f": {cause}" if cause is not None and str(cause) else ""
        # (told by name: the SDKs' HTTP client is httpx, or a fork of it, depending on their version)
        if cause is None or any(c.__name__ in _NOT_REACHED for c in type(cause).__mro__):
            said = f"cannot reach {where}{reason}{tries}"
        else:  # it was reached, and the answer broke off (a dropped connection, a truncated body)
            said = f"the connection to {where} broke off before its answer came whole{reason}{tries}"
    elif isinstance(exc, sdk.APIStatusError):
        said = f"{where} answered HTTP {exc.status_code} for model {settings.model}: {_error_text(exc)}"
        if exc.status_code == 429 or exc.status_code >= 500:
            said += tries
    else:
        said = f"calling {where} failed: {type(exc).__name__}: {exc}"
    return ModelCallFailed(masked(said, settings.key))


def _error_text(exc: Any) -> str:
    """The error an API gave: its body's message when it has one (both APIs nest it so)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    response = getattr(exc, "response", None)
    text = getattr(response, "text", "") if response is not None else ""
    return _clipped(text or str(exc)) or "no message"


def _clipped(text: str, limit: int = 300) -> str:
    """A body as a message can hold it: an HTML page's text (a proxy's error page), on one line, cut short."""
    if text.lstrip().startswith("<"):
        text = re.sub(r"<(script|style)\b.*?</\1>|<[^>]*>", " ", text, flags=re.S | re.I)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def unreadable(response: Any, what: str, settings: Settings, detail: str = "") -> ModelCallFailed:
    """A reply that is no `what` (a chat completion, a Messages API reply), said with the error
    it holds, when it holds one (some gateways answer errors with status 200), or how it begins."""
    body = response.to_dict() if hasattr(response, "to_dict") else response
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("message") or error
    if error:
        detail = f"its error: {_clipped(str(error))}"
    elif not detail:
        detail = _beginning(body)
    return ModelCallFailed(masked(f"{settings.endpoint} answered something that is no {what}: {detail}", settings.key))


def _beginning(body: Any) -> str:
    if isinstance(body, (str, bytes)):
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return repr(_clipped(text, 120)) if text.strip() else "an empty body"
    return _clipped(json.dumps(body, default=str), 120)


def call(transport: Transport, request: Request, stopping: Callable[[], bool]) -> Reply:
    """`transport.complete(request)`, ended early when `stopping()` turns true: the call runs on
    a thread of its own, so a stop need not wait for a slow model (or the SDK's retries)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def complete() -> None:
        try:
            box["reply"] = transport.complete(request)
        except BaseException as exc:  # noqa: BLE001 - handed to the firing's thread
            box["error"] = exc
        finally:
            done.set()

    began = time.perf_counter()
    threading.Thread(target=complete, name="flowtape-model-call", daemon=True).start()
    while not done.wait(STOP_POLL):
        if stopping():
            transport.close()
            raise ModelCallStopped(f"the call to {transport.settings.endpoint} was ended by the run's stop")
    if "error" in box:
        if stopping():  # (another call's stop closed the client this one shared)
            raise ModelCallStopped(f"the call to {transport.settings.endpoint} was ended by the run's stop")
        raise box["error"]
    reply: Reply = box["reply"]
    reply.call.ms = int((time.perf_counter() - began) * 1000)
    return reply
