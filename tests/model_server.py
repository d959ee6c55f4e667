"""A model server for the agent tests: real HTTP on 127.0.0.1 speaking OpenAI's chat-completions
(`POST /v1/chat/completions`) and Anthropic's Messages (`POST /v1/messages`) wire formats, as the
services do, errors included. The SDKs under test make real requests to it.

What it answers is scripted: `then(...)` queues what the next calls get (an answer, an error
with its body and headers, a slow answer, a body that is no JSON); once the queue is empty,
`model(request)` answers. Every request is kept (`requests`) for the tests to look at."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float

    @property
    def provider(self) -> str:
        return "anthropic" if self.path.endswith("/messages") else "openai"

    def payload(self) -> dict[str, Any]:
        """The firing's user message as the JSON it is (the last such: a repair's message is text)."""
        for message in reversed(self.body["messages"]):
            if message["role"] == "user":
                try:
                    return json.loads(message["content"])
                except ValueError:
                    continue
        raise AssertionError("no user message holds a JSON payload")

    def system(self) -> list[str]:
        """The system text: the agent's prompt, then how to answer."""
        if self.provider == "openai":
            return [m["content"] for m in self.body["messages"] if m["role"] == "system"]
        return [block["text"] for block in self.body.get("system", [])]

    def schema(self) -> dict[str, Any] | None:
        """The answer's JSON Schema, as asked for (a response format, or the answer tool)."""
        if "response_format" in self.body:
            return self.body["response_format"]["json_schema"]["schema"]
        tools = self.body.get("tools") or []
        return tools[0]["input_schema"] if tools else None


@dataclass
class Event:
    """What one call gets: content (text, or a structured answer: a dict), or an error."""

    content: str | dict[str, Any] | None = None
    status: int = 200
    error: str = ""  # the error's message, in the provider's error body
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None  # a body sent as it is (JSON or not)
    kind: str = "text/html"  # the raw body's content type
    cut: bool = False  # the connection is closed halfway through the body (a dropped answer)
    finish: str = ""  # the answer's finish_reason (OpenAI) or stop_reason (Anthropic), when not the usual one
    refusal: str = ""  # OpenAI's refusal: the message has no content, only this


def outputs_for(seen: Seen) -> dict[str, Any]:
    """A plausible answer: one value per output port the schema names, of its type."""
    schema = seen.schema() or {}
    ports = schema.get("properties", {}).get("outputs", {}).get("properties", {})
    inputs = seen.payload().get("inputs", {})
    made: dict[str, Any] = {}
    for port, s in ports.items():
        kind = s.get("type")
        made[port] = {"integer": len(json.dumps(inputs)), "number": 0.5, "boolean": True, "array": [],
                      "object": {}}.get(kind, f"{port} of {json.dumps(inputs, sort_keys=True)}")
    return {"outputs": made}


class ModelServer:
    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.queue: deque[Event] = deque()
        self.model: Callable[[Seen], str | dict[str, Any]] = outputs_for
        self.lock = threading.Lock()
        self.arrived = threading.Event()  # set at each request (the stop test waits for one)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                with server.lock:
                    server.requests.append(seen)
                    event = server.queue.popleft() if server.queue else None
                server.arrived.set()
                if event is None:
                    try:
                        event = Event(server.model(seen))
                    except Exception as exc:  # noqa: BLE001 - a test's model that broke: said as a 500
                        event = Event(None, 500, f"the test model failed: {exc!r}")
                if event.delay:
                    time.sleep(event.delay)
                if event.raw is not None:
                    self._send(event.status, event.raw, event.kind, event.headers, event.cut)
                elif event.status != 200:
                    self._send(event.status, json.dumps(_error(seen, event)).encode(), "application/json", event.headers)
                else:
                    self._send(200, json.dumps(_answer(seen, event)).encode(), "application/json", event.headers,
                               event.cut)

            def _send(self, status: int, data: bytes, kind: str, headers: dict[str, str], cut: bool = False) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2] if cut else data)
                    if cut:
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):  # the client left (a stopped call)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def then(self, *events: Event) -> ModelServer:
        with self.lock:
            self.queue.extend(events)
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _answer(seen: Seen, event: Event) -> dict[str, Any]:
    content = event.content
    asked = _tokens(json.dumps(seen.body.get("messages", [])) + json.dumps(seen.body.get("system", "")))
    model = seen.body.get("model", "")
    if seen.provider == "openai":
        text = content if isinstance(content, str) else json.dumps(content)
        message = {"role": "assistant", "content": None, "refusal": event.refusal} if event.refusal else {
            "role": "assistant", "content": text}
        return {"id": f"chatcmpl-{len(seen.body)}", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": event.finish or "stop"}],
                "usage": {"prompt_tokens": asked, "completion_tokens": _tokens(text), "total_tokens": asked + _tokens(text)}}
    if isinstance(content, dict) and seen.body.get("tools"):
        blocks: list[dict[str, Any]] = [{"type": "tool_use", "id": "toolu_01", "name": seen.body["tools"][0]["name"],
                                         "input": content}]
        said = json.dumps(content)
    else:
        said = content if isinstance(content, str) else json.dumps(content)
        blocks = [{"type": "text", "text": said}]
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": model, "content": blocks,
            "stop_reason": event.finish or ("tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": asked, "output_tokens": _tokens(said)}}


_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                     429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def _error(seen: Seen, event: Event) -> dict[str, Any]:
    if seen.provider == "openai":
        kind = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(event.status, "server_error")
        return {"error": {"message": event.error, "type": kind, "param": None, "code": kind}}
    return {"type": "error", "error": {"type": _ANTHROPIC_ERRORS.get(event.status, "api_error"), "message": event.error}}
