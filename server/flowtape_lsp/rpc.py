"""JSON-RPC as a demanding client expects it: every request gets an answer.

pygls drops a request whose params it cannot convert (the client then waits forever), serves
requests before `initialize`, and logs every error a handler returns on purpose as if the
server had failed. This protocol answers the first with -32602 and the second with -32002, and
keeps the log for real failures."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote

import attrs
import cattrs
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcServerNotInitialized
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
)

from .permits import NotTrusted
from .protocol import CMD_RERUN_ACTOR, CMD_RESUME, CMD_RUN, RunNotFound, TapeDamaged

logger = logging.getLogger("flowtape_lsp")

# answered before `initialize` too (the spec's own exceptions)
_ANY_TIME = {lsp.INITIALIZE, lsp.EXIT}
# Commands that start a run: once asked for, the run is started and its id answered, cancelled or
# not (a cancel cut into the launch would start the run anyway, and tell the client it did not).
_STARTS_RUN = {CMD_RUN, CMD_RESUME, CMD_RERUN_ACTOR}


def raw_converter() -> cattrs.Converter:
    """pygls's converter, except that the params (and results) of methods it does not know stay
    plain JSON values: every custom message is validated by our own msgspec Structs instead. A
    request or notification without `params` has `null` ones, as JSON-RPC allows."""
    converter = default_converter()

    def keep(obj: dict[str, Any], cls: type) -> Any:
        return cls(**{"params": None, **obj} if cls is not JsonRPCResponseMessage else {"result": None, **obj})

    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        converter.register_structure_hook(cls, keep)
    return converter


class Unreadable:
    """A request whose params could not be converted: answered with -32602, not dropped."""

    jsonrpc = "2.0"

    def __init__(self, msg_id: Any, method: str, reason: str) -> None:
        self.id, self.method, self.reason = msg_id, method, reason


class NotARequest:
    """A message whose `method` is no string: answered with -32600."""

    jsonrpc = "2.0"

    def __init__(self, msg_id: Any, reason: str) -> None:
        self.id = msg_id if isinstance(msg_id, (int, str)) else None
        self.reason = reason


class FlowtapeProtocol(LanguageServerProtocol):
    initialized = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._uncancellable: set[Any] = set()  # ids of requests that start runs

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if msg_id in self._uncancellable:
            logger.info("request %s starts a run: it is answered with the run, not cancelled", msg_id)
            return
        super()._handle_cancel_notification(msg_id)

    def answer(self, msg_id: Any, error: Any) -> None:
        """An error response, with `"id": null` when the message's id is unknown, as JSON-RPC asks."""
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error.to_response_error()})

    def structure_message(self, data: dict[str, Any]) -> Any:
        """Every object of a message stays plain JSON here (pygls would make a message of any
        value inside that looks like one, a flow's input say); `handle_message` structures the
        message as a whole."""
        return data

    def _structure(self, data: dict[str, Any]) -> Any:
        if data.get("jsonrpc") != "2.0":
            said = f"its jsonrpc is {data['jsonrpc']!r}" if "jsonrpc" in data else "it has no jsonrpc member"
            return NotARequest(data.get("id"), f'{said}, not "2.0"')
        if "id" in data and (isinstance(data["id"], bool) or not isinstance(data["id"], (int, str, type(None)))):
            return NotARequest(None, f"its id is {type(data['id']).__name__} {data['id']!r}: an id is a string or a number")
        if "method" not in data:
            if "id" not in data or not ("result" in data or "error" in data):
                return NotARequest(data.get("id"), "it has neither a method nor a result or error")
            return super().structure_message(data)  # a response to a request of ours
        if not isinstance(data["method"], str):
            return NotARequest(data.get("id"), f"its method is {type(data['method']).__name__} {data['method']!r}, not a string")
        kind = self.get_message_type(data["method"]) or (JsonRPCRequestMessage if "id" in data else JsonRPCNotification)
        if "id" in data and "id" not in attrs.fields_dict(kind):
            return NotARequest(data["id"], f"{data['method']} is a notification: it is sent without an id")
        arguments = data["params"].get("arguments") if isinstance(data.get("params"), dict) else None
        if data["method"] == lsp.WORKSPACE_EXECUTE_COMMAND and not isinstance(arguments, (list, type(None))):
            # (pygls would spread a string into one argument a character)
            return Unreadable(data.get("id"), data["method"], f"arguments is a {type(arguments).__name__}, not a list")
        try:
            return self._converter.structure(data, kind)
        except Exception as exc:  # noqa: BLE001 - anything the converter refuses is the client's mistake
            errors = cattrs.transform_error(exc) if isinstance(exc, cattrs.BaseValidationError) else [str(exc)]
            return Unreadable(data.get("id"), str(data["method"]), "; ".join(errors[:3]) or "unreadable")

    def handle_message(self, message: Any) -> None:
        if isinstance(message, dict):
            message = self._structure(message)
        if isinstance(message, Unreadable):
            reason = f"bad params for {message.method}: {message.reason}"
            if message.id is None:  # a notification: nobody to answer
                logger.warning("ignored %s", reason)
            else:
                self._send_response(message.id, error=JsonRpcInvalidParams(message=reason).to_response_error())
            return
        if isinstance(message, NotARequest):
            self.answer(message.id, JsonRpcInvalidRequest(message=f"not a JSON-RPC request: {message.reason}"))
            return
        method = getattr(message, "method", None)
        if not hasattr(message, "jsonrpc"):  # a batch, or not an object at all
            what = "a batch (batches are not supported)" if isinstance(message, list) else f"a JSON {type(message).__name__}, not an object"
            self.answer(None, JsonRpcInvalidRequest(message=f"not a JSON-RPC message: {what}"))
            return
        if self._shutdown and method != lsp.EXIT and getattr(message, "id", None) is not None and method:
            self._send_response(message.id, error=JsonRpcInvalidRequest(
                message=f"{method} after shutdown: the server is shutting down").to_response_error())
            return
        if method == lsp.INITIALIZE:
            if self.initialized:
                self._send_response(message.id, error=JsonRpcInvalidRequest(
                    message="the server is initialized already").to_response_error())
                return
            bad = _nul_root(message.params)
            if bad is not None:  # refused before it counts: a corrected initialize may follow
                self._send_response(message.id, error=JsonRpcInvalidParams(
                    message=f"{bad} holds a NUL byte: it names no folder").to_response_error())
                return
            self.initialized = True
            general = message.params.capabilities.general
            if general is not None:  # every position this server sends counts UTF-16 units, which every client reads
                general.position_encodings = None
        elif not self.initialized and method not in _ANY_TIME and method:
            if getattr(message, "id", None) is not None:
                self._send_response(message.id, error=JsonRpcServerNotInitialized(
                    message=f"{method} before initialize").to_response_error())
            else:  # a notification before initialize is dropped, as LSP says
                logger.warning("ignored %s before initialize", method)
            return
        if method == lsp.TEXT_DOCUMENT_DID_CHANGE and unquote(message.params.text_document.uri) not in self.workspace.text_documents:
            logger.warning("ignored didChange of %s: it was never opened", message.params.text_document.uri)
            return  # (pygls would fail on it and pop up "Error in server")
        if method == lsp.WORKSPACE_EXECUTE_COMMAND and getattr(message.params, "command", None) in _STARTS_RUN:
            self._uncancellable.add(message.id)
        super().handle_message(message)

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        # A handler that refuses a client's mistake answers with the error; that is no server failure.
        self._uncancellable.discard(msg_id)
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, (JsonRpcInvalidParams, RunNotFound, TapeDamaged, NotTrusted)):
            self._request_futures.pop(msg_id, None)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)


def _nul_root(params: lsp.InitializeParams) -> str | None:
    """The root field of `initialize` that holds a NUL byte (no path can), if any."""
    named = [("rootUri", params.root_uri), ("rootPath", params.root_path)]
    named += [(f"workspaceFolders[{i}]", f.uri) for i, f in enumerate(params.workspace_folders or [])]
    for name, value in named:
        if value and ("\x00" in value or "%00" in value):
            return name
    return None
