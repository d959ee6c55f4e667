"""Broken frames, as a buggy or hostile client writes them, to the real server over its stdin: each
gets a parse error, and every good request after it is still answered. Over TCP, the server
listens on the loopback and serves only a client that shows its token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .test_rpc import Raw, error_of, raw  # noqa: F401 - `raw` is a fixture

GOOD = {"jsonrpc": "2.0", "method": "flowtape/runs", "params": {}}


def frame(message: dict[str, object], delta: int = 0, name: bytes = b"Content-Length") -> bytes:
    body = json.dumps(message).encode()
    return b"%s: %d\r\n\r\n%s" % (name, len(body) + delta, body)


BROKEN = {
    "not a number": b"Content-Length: abc\r\n\r\n" + json.dumps(GOOD).encode(),
    "missing": b"Content-Type: application/json\r\n\r\n" + json.dumps(GOOD).encode(),
    "a few bytes short": frame({**GOOD, "id": "short"}, -4),
    "a few bytes long": frame({**GOOD, "id": "long"}, +7),
    "absurd": b"Content-Length: 1000000000000\r\n\r\n" + json.dumps(GOOD).encode(),
    "garbage": b"\x00\xff hello\r\n\r\n",
    "no end of headers": b"X-Filler: " + b"x" * 20_000,
}


def write(client: Raw, data: bytes) -> None:
    assert client.proc.stdin is not None
    client.proc.stdin.write(data)
    client.proc.stdin.flush()


@pytest.mark.parametrize("broken", list(BROKEN))
def test_a_bad_frame_is_answered_and_the_next_requests_are_too(raw: Raw, tmp_path: Path, broken: str) -> None:  # noqa: F811
    raw.initialize(tmp_path)
    write(raw, BROKEN[broken])
    for n in range(3):  # each good request after it is answered
        write(raw, frame({**GOOD, "id": n}))
        answer = raw.wait(lambda m, n=n: m.get("id") == n and "method" not in m)
        assert answer["result"] == {"runs": []}
    parse_errors = [m for m in raw.seen if "error" in m and m.get("id") is None]
    assert parse_errors and all(error_of(m)[0] == -32700 for m in parse_errors), raw.seen
    assert raw.proc.poll() is None
    if broken == "absurd":
        rss = int(next(line for line in open(f"/proc/{raw.proc.pid}/status") if line.startswith("VmRSS")).split()[1])
        assert rss < 500_000  # kB: nothing near the length was allocated


def test_a_stream_of_broken_frames_between_good_ones(raw: Raw, tmp_path: Path) -> None:  # noqa: F811
    """Every kind at once, cut into small writes: all the good requests are answered, in order."""
    raw.initialize(tmp_path)
    stream = b""
    for n, data in enumerate(BROKEN.values()):
        stream += data + frame({**GOOD, "id": 100 + n}) + frame({**GOOD, "id": 200 + n}, name=b"content-length")
    for i in range(0, len(stream), 97):
        write(raw, stream[i : i + 97])
    for n in range(len(BROKEN)):
        for msg_id in (100 + n, 200 + n):
            assert raw.wait(lambda m, i=msg_id: m.get("id") == i and "method" not in m)["result"] == {"runs": []}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ask(sock: socket.socket, message: dict[str, object]) -> dict[str, object]:
    sock.sendall(frame(message))
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    return json.loads(body[:length])  # type: ignore[no-any-return]


def test_tcp_needs_a_token_and_listens_on_the_loopback_only(tmp_path: Path) -> None:
    refused = subprocess.run([sys.executable, "-m", "flowtape", "lsp", "--tcp", "9"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--tcp needs --token" in refused.stderr
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "flowtape", "lsp", "--tcp", str(port), "--token", "s3cret"],
                              cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.1)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": {"token": "nope"}}}
        with sock:
            answer = _ask(sock, init)
            assert answer["id"] == 1 and "token" in answer["error"]["message"]  # type: ignore[index]
            assert sock.recv(10) == b""  # and closed
        addresses = _listening(port)
        assert addresses and all(a.startswith("127.0.0.1:") for a in addresses), addresses
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            good = {**init, "params": {**init["params"], "initializationOptions": {"token": "s3cret"}}}  # type: ignore[dict-item]
            assert "capabilities" in _ask(sock, good)["result"]  # type: ignore[operator]
            assert _ask(sock, {**GOOD, "id": 2})["result"] == {"runs": []}
    finally:
        server.kill()
        server.wait(10)


def _listening(port: int) -> list[str]:
    """The local addresses listening on `port` (from /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hexport = local.split(":")
            if int(hexport, 16) == port and state == "0A":  # LISTEN
                ip = ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)) if len(address) == 8 else address
                found.append(f"{ip}:{port}")
    return found
