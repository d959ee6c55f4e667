"""A small Debug Adapter Protocol client, as an editor speaks it to debugpy (tests only)."""

from __future__ import annotations

import json
import socket
import time
from typing import Any


class DapClient:
    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.create_connection((host, port), timeout=timeout)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.buffer = b""
        self.seq = 0
        self.events: list[dict[str, Any]] = []
        self.responses: dict[int, dict[str, Any]] = {}  # read while waiting for something else
        self.timeout = timeout

    def send(self, command: str, **arguments: Any) -> int:
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request", "command": command, "arguments": arguments}).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return self.seq

    def _read(self) -> dict[str, Any]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        while len(rest) < length:
            self.buffer = head + b"\r\n\r\n" + rest
            self._fill()
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
        self.buffer = rest[length:]
        return json.loads(rest[:length])

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the debug adapter closed the connection")
        self.buffer += chunk

    def _keep(self, message: dict[str, Any]) -> None:
        if message.get("type") == "event":
            self.events.append(message)
        elif message.get("type") == "response":
            self.responses[message["request_seq"]] = message

    def response(self, seq: int) -> dict[str, Any]:
        while seq not in self.responses:
            self._keep(self._read())
        return self.responses.pop(seq)

    def request(self, command: str, **arguments: Any) -> dict[str, Any]:
        reply = self.response(self.send(command, **arguments))
        assert reply["success"], reply
        return reply.get("body", {})

    def event(self, name: str) -> dict[str, Any]:
        for i, message in enumerate(self.events):
            if message["event"] == name:
                return self.events.pop(i)
        while True:
            message = self._read()
            if message.get("type") == "event" and message["event"] == name:
                return message
            self._keep(message)

    def close(self) -> None:
        self.sock.close()
