"""How the server is reached: stdio (what editors use), or TCP on the loopback with a token.

Either way the bytes go through framing.py before pygls's message loop reads them, and a bad
frame is answered with a parse error (`id: null`) instead of breaking the stream.

Over TCP any local user could connect to the port, and the server would run flows and read
files as this user on their say. So it binds 127.0.0.1 only, and serves a connection only once
its first message is an `initialize` whose `initializationOptions.token` is the token the server
was started with (`flowtape lsp --tcp PORT --token TOKEN`); any other connection is answered
with one error and closed. One client is served; when it goes, the server ends."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import sys
from typing import TYPE_CHECKING, Any, BinaryIO

from pygls.exceptions import JsonRpcInvalidRequest, JsonRpcParseError
from pygls.io_ import StdoutWriter, run_async

from .framing import FramedReader

if TYPE_CHECKING:
    from .server import FlowtapeServer

logger = logging.getLogger("flowtape_lsp")
CHUNK = 1 << 16
TOKEN_WAIT = 30.0  # seconds a TCP client has to send its initialize


def _bad_frame(server: FlowtapeServer) -> Any:
    def answer(reason: str) -> None:
        logger.warning("%s", reason)
        server.protocol.answer(None, JsonRpcParseError(message=reason))  # type: ignore[attr-defined]
    return answer


async def _loop(server: FlowtapeServer, reader: FramedReader) -> None:
    await run_async(stop_event=server._stop_event, reader=reader, protocol=server.protocol,  # type: ignore[arg-type]
                    logger=logger, error_handler=server.report_server_error)


def serve_stdio(server: FlowtapeServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """As pygls's `start_io`, with the input framed by framing.py."""
    import threading

    raw = stdin or sys.stdin.buffer
    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def chunk() -> bytes:
            return await loop.run_in_executor(server.thread_pool, raw.read1, CHUNK)  # type: ignore[union-attr]

        await _loop(server, FramedReader(chunk, _bad_frame(server)))

    try:
        asyncio.run(main())
    except BrokenPipeError:
        logger.error("the client is gone (its end of the pipe closed): the server stops")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()


def serve_tcp(server: FlowtapeServer, port: int, token: str) -> None:
    """Serve one client on 127.0.0.1:`port`, once it has shown `token` (see the module's doc)."""
    import threading

    server._stop_event = threading.Event()
    done = asyncio.Event()
    served = False

    async def connection(stream: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        refusals: list[str] = []
        reader = FramedReader(lambda: stream.read(CHUNK), refusals.append)
        try:
            first = await asyncio.wait_for(reader.peek_body(), TOKEN_WAIT)
        except (TimeoutError, ConnectionError):
            first = None
        why = _refusal(first, token) if not served else "the server serves one client, and has one"
        if why is not None:
            logger.warning("a TCP connection was refused: %s", why)
            message = json.loads(first) if first and _is_object(first) else {}
            msg_id = message.get("id") if isinstance(message.get("id"), (int, str)) else None
            error = JsonRpcInvalidRequest(message=why).to_response_error()
            body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": error.code, "message": error.message}}).encode()
            writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            with contextlib.suppress(OSError):
                await writer.drain()
                writer.close()
            return
        served = True
        reader.on_bad = _bad_frame(server)
        server.protocol.set_writer(writer)
        try:
            await _loop(server, reader)
        finally:
            done.set()

    async def main() -> None:
        listener = await asyncio.start_server(connection, "127.0.0.1", port)
        async with listener:
            await done.wait()

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()


def _is_object(body: bytes) -> bool:
    try:
        return isinstance(json.loads(body), dict)
    except ValueError:
        return False


def _refusal(body: bytes | None, token: str) -> str | None:
    """Why a connection whose first message is `body` is not served; None when it may be."""
    asked = "its first message must be an initialize whose initializationOptions.token is the server's token"
    if body is None:
        return f"no message came: {asked}"
    try:
        message = json.loads(body)
    except ValueError:
        return f"the first message is not JSON: {asked}"
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return f"the first message is no initialize: {asked}"
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    given = options.get("token") if isinstance(options, dict) else None
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
        return f"wrong or missing token: {asked}"
    return None
