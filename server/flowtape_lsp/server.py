"""The Flowtape language server: wiring of the feature modules, and `main`."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import msgspec
from flowtape import __version__
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcParseError
from pygls.lsp.server import LanguageServer

from . import protocol as P
from .diagnostics import Diagnostics
from .family import become_subreaper
from .rpc import FlowtapeProtocol, raw_converter
from .runs import RunManager
from .transport import serve_stdio, serve_tcp
from .workspace import fs_path, named_by_client, use_client_root

_encoder = msgspec.json.Encoder()

logger = logging.getLogger("flowtape_lsp")
CHANGE_DELAY = 0.3  # seconds of no typing before the open text is checked again


class FlowtapeServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("flowtape-lsp", __version__, converter_factory=raw_converter, protocol_cls=FlowtapeProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.root: Path = Path.cwd().resolve()
        self.manager = RunManager(self)
        self.exit_code = 0  # 1 after an `exit` without `shutdown`, as LSP asks
        self.shut_down = False
        self.diagnostics = Diagnostics(self)
        self.client_options = P.ClientOptions()  # a plain client until `initialize` says otherwise
        self.manager.listeners.append(self.diagnostics.on_run_finished)
        self.manager.listeners.append(lambda run: self.refresh_views())

    def send(self, method: str, message: P.Message) -> None:
        """A custom notification to the client, encoded by msgspec and written as it is: going
        through pygls's generic serialisation cost more than producing the steps."""
        writer = self.protocol.writer
        if writer is None:
            return
        try:
            body = _encoder.encode({"jsonrpc": "2.0", "method": method, "params": message})
            result = writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            if inspect.isawaitable(result):
                asyncio.ensure_future(result)
        except Exception:  # noqa: BLE001 - a client gone away must not kill the streaming task
            logger.warning("sending %s failed", method, exc_info=True)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A message that is not JSON gets the -32700 response JSON-RPC asks for (with no id: it
        could not be read), not a pop-up saying the server failed."""
        if isinstance(error, json.JSONDecodeError):
            assert isinstance(self.protocol, FlowtapeProtocol)
            self.protocol.answer(None, JsonRpcParseError(message=f"not JSON: {error}"))
            return
        super().report_server_error(error, source)

    def warn(self, message: str) -> None:
        """A warning the user should see (window/showMessage), and the log."""
        logger.warning("%s", message)
        self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=f"Flowtape: {message}"))

    def log_error(self, message: str) -> None:
        logger.error("%s", message, exc_info=True)

    def read_client_options(self, raw: Any) -> None:
        """`initializationOptions`: what the client implements itself. Options it got wrong are
        reported and left at their defaults, not a reason to refuse the editor."""
        if raw is None:
            return
        try:
            self.client_options = msgspec.convert(raw, P.ClientOptions, strict=True)
        except msgspec.ValidationError as exc:
            self.window_log_message(lsp.LogMessageParams(
                type=lsp.MessageType.Warning, message=f"flowtape: initializationOptions ignored: {exc}"))

    @property
    def trust(self) -> str:
        """How far the client trusts the folder to run code (initializationOptions.trust, permits.py)."""
        return self.client_options.trust

    def has_client_command(self, command: str) -> bool:
        return command in self.client_options.clientCommands

    def capability(self, *path: str) -> Any:
        value: Any = self.client_capabilities
        for name in path:
            value = getattr(value, name, None)
            if value is None:
                return None
        return value

    def supports_progress(self) -> bool:
        return bool(self.capability("window", "work_done_progress"))

    def refresh_views(self, lenses: bool = True, hints: bool = True) -> None:
        """Ask the client to re-query code lenses and inlay hints (those not said false, when it can)."""
        if lenses and self.capability("workspace", "code_lens", "refresh_support"):
            self.protocol.send_request(lsp.WORKSPACE_CODE_LENS_REFRESH, None)
        if hints and self.capability("workspace", "inlay_hint", "refresh_support"):
            self.protocol.send_request(lsp.WORKSPACE_INLAY_HINT_REFRESH, None)


def _quiet_parse_errors(record: logging.LogRecord) -> bool:
    """A client's message that is not JSON is answered (-32700): one warning, no traceback."""
    if record.exc_info and isinstance(record.exc_info[1], json.JSONDecodeError):
        record.msg, record.args, record.exc_info, record.levelno, record.levelname = (
            "a message that is not JSON was answered with -32700", (), None, logging.WARNING, "WARNING")
    return True


def create_server() -> FlowtapeServer:
    from . import codelens, commands, graphs, inputs, inspect, outputs, search, timeline, whatif

    server = FlowtapeServer()

    def start_runs() -> None:
        if server.manager.start():  # the latest runs' diagnostics are back after a restart
            server.manager.spawn(server.diagnostics.restore())

    @server.feature(lsp.INITIALIZE)
    def initialize(params: lsp.InitializeParams) -> None:
        server.read_client_options(params.initialization_options)
        # The root is known now: a client that never sends `initialized` still gets its own.
        folders = server.workspace.folders
        root = server.workspace.root_path
        if not root and folders:
            first = next(iter(folders.values()))
            root = fs_path(first.uri) or ""  # as spelled: a symlinked folder's files keep its name
        if root:
            server.root = Path(root).resolve()
            use_client_root(Path(os.path.abspath(root)), server.root)
        # a client that never sends `initialized` still sees the runs on disk, a little later
        asyncio.get_running_loop().call_later(2.0, start_runs)

    @server.feature(lsp.INITIALIZED)
    async def initialized(params: lsp.InitializedParams) -> None:
        restore = server.manager._poller is None
        server.manager.start()
        if restore:
            server.manager.spawn(server.diagnostics.restore())
        for doc in list(server.workspace.text_documents.values()):
            server.diagnostics.schedule_check(doc.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        named_by_client(params.text_document.uri)
        server.diagnostics.schedule_check(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: lsp.DidSaveTextDocumentParams) -> None:
        server.diagnostics.schedule_check(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        server.diagnostics.schedule_check(params.text_document.uri, delay=CHANGE_DELAY)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        server.diagnostics.schedule_check(params.text_document.uri)  # what is saved, the unsaved text gone

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(params: Any) -> None:
        server.shut_down = True
        await server.manager.stop_started()
        server.manager.stop_all()

    @server.feature(lsp.EXIT)
    def exit_(params: Any) -> None:
        if not server.shut_down:
            server.exit_code = 1
        server.manager.stop_all()  # an exit without shutdown: the flows the server started stop too

    codelens.register(server)
    commands.register(server)
    whatif.register(server)
    inspect.register(server)
    outputs.register(server)
    inputs.register(server)
    search.register(server)
    graphs.register(server)
    timeline.register(server)
    return server


def main(tcp: int | None = None, token: str | None = None) -> int:
    """`flowtape lsp [--tcp PORT --token TOKEN]`: serve over stdio (or TCP on the loopback, to a
    client that shows the token: transport.py)."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="flowtape-lsp %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pygls").setLevel(logging.WARNING)
    logging.getLogger("asyncio").setLevel(logging.ERROR)  # (its child watcher's notes when flows outlive the loop at exit)
    for handler in logging.getLogger().handlers:  # on the handler: pygls logs it through several loggers
        handler.addFilter(_quiet_parse_errors)
    server = create_server()
    become_subreaper()  # what a flow that dies leaves behind comes to the server, to go with it (family.py)
    try:
        if tcp is not None:
            assert token, "a TCP server needs a token"
            serve_tcp(server, tcp, token)
        else:
            serve_stdio(server)
    finally:
        server.manager.stop_all()  # the editor went away (end of input): stop what it started
        # the transport may have closed stdout; the CLI flushes it on the way out
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    return server.exit_code
