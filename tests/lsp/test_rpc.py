"""JSON-RPC edges that pytest-lsp's client cannot send (it validates what it sends): the real
server, spoken to over its stdio byte by byte, as a careless or minimal editor client would."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import count_flow, uri_of, write_flow


class Raw:
    """A bare JSON-RPC client of `flowtape lsp`; a thread reads what the server writes, so that
    every wait has a timeout."""

    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "flowtape", "lsp"], cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not length:
                return  # the server closed its output
            self.inbox.put(json.loads(out.read(length)))

    def wait(self, test: Any, timeout: float = 20.0) -> dict[str, Any]:
        """The first message (seen already, or arriving within `timeout`) that passes `test`."""
        for message in self.seen:
            if test(message):
                self.seen.remove(message)
                return message
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.inbox.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                raise AssertionError("no answer in time") from None
            if "id" in message and "method" in message:  # a request to the client: answer it
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            if test(message):
                return message
            self.seen.append(message)

    def ask(self, msg_id: Any, method: str, **fields: Any) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, **fields})
        return self.wait(lambda m: m.get("id") == msg_id and "method" not in m)

    def initialize(self, root: Path) -> None:
        answer = self.ask(0, "initialize", params={"processId": None, "rootUri": uri_of(root), "capabilities": {}})
        assert "capabilities" in answer["result"]
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def close(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")


@pytest.fixture
def raw(tmp_path: Path):  # type: ignore[no-untyped-def]
    client = Raw(tmp_path)
    yield client
    client.close()


def error_of(answer: dict[str, Any]) -> tuple[int, str]:
    assert "error" in answer, answer
    return answer["error"]["code"], answer["error"]["message"]


def test_every_request_gets_an_answer(raw: Raw, tmp_path: Path) -> None:
    assert error_of(raw.ask(1, "flowtape/runs"))[0] == -32002  # before initialize
    raw.initialize(tmp_path)
    assert raw.ask(2, "flowtape/runs")["result"] == {"runs": []}  # no params at all: they are optional
    code, message = error_of(raw.ask(3, "flowtape/getSteps"))
    assert code == -32602 and "runId" in message
    code, message = error_of(raw.ask(4, "textDocument/hover", params={"textDocument": {"uri": "file:///x.py"}}))
    assert code == -32602 and "position" in message
    code, message = error_of(raw.ask(5, "workspace/executeCommand", params={}))
    assert code == -32602 and "command" in message
    code, message = error_of(raw.ask(6, "flowtape/stepDetail", params={"runId": "a\u0000b", "step": 1}))
    assert code == -32602 and "bad run id" in message
    code, message = error_of(raw.ask(7, "workspace/executeCommand", params={
        "command": "flowtape.run", "arguments": [{"uri": uri_of(tmp_path / ("a" * 5000 + ".py"))}]}))
    assert code == -32602 and "File name too long" in message
    code, message = error_of(raw.ask(13, "workspace/executeCommand", params={"command": "flowtape.run", "arguments": "x.py"}))
    assert code == -32602 and "arguments is a str, not a list" in message
    raw.send([{"jsonrpc": "2.0", "id": 8, "method": "flowtape/runs"}])  # a batch
    answer = raw.wait(lambda m: "error" in m and m.get("id") is None)
    assert "id" in answer and error_of(answer) == (-32600, "not a JSON-RPC message: a batch (batches are not supported)")
    raw.send(42)
    answer = raw.wait(lambda m: "error" in m and m.get("id") is None)
    assert "id" in answer and error_of(answer) == (-32600, "not a JSON-RPC message: a JSON int, not an object")
    code, message = error_of(raw.ask(12, 7))  # a method that is no string
    assert code == -32600 and "its method is int 7" in message
    assert error_of(raw.ask(9, "initialize", params={"processId": None, "capabilities": {}}))[0] == -32600
    assert raw.ask(10, "shutdown")["result"] is None
    assert error_of(raw.ask(11, "flowtape/runs"))[0] == -32600  # after shutdown
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    assert raw.proc.wait(10) == 0
    assert "Traceback" not in raw.close()  # a client's mistakes are answered, not logged as failures


@pytest.mark.parametrize("leave", ["end of input", "exit without shutdown", "shutdown then exit"])
def test_flows_the_server_started_stop_when_the_editor_goes_away(raw: Raw, tmp_path: Path, leave: str) -> None:
    raw.initialize(tmp_path)
    flow = write_flow(tmp_path, "slow.py", count_flow(1000, delay=0.05))
    answer = raw.ask(1, "workspace/executeCommand", params={"command": "flowtape.run", "arguments": [{"uri": uri_of(flow)}]})
    run_dir = Path(answer["result"]["runDir"])
    raw.wait(lambda m: m.get("method") == "flowtape/steps")  # the flow is running
    if leave == "end of input":
        assert raw.proc.stdin is not None
        raw.proc.stdin.close()
    else:
        if leave == "shutdown then exit":
            raw.ask(2, "shutdown")
        raw.send({"jsonrpc": "2.0", "method": "exit"})
    raw.proc.wait(20)
    deadline = time.monotonic() + 30
    summary: dict[str, Any] = {}
    while time.monotonic() < deadline:
        summary = json.loads((run_dir / "run.json").read_text())
        if summary["status"] != "running":
            break
        time.sleep(0.1)
    assert summary["status"] == "stopped"  # SIGTERM: the run ends with its end record
    assert json.loads((run_dir / "tape.jsonl").read_bytes().splitlines()[-1])["t"] == "end"


def test_a_message_that_is_not_json_is_answered_and_the_server_goes_on(raw: Raw, tmp_path: Path) -> None:
    raw.initialize(tmp_path)
    assert raw.proc.stdin is not None
    body = b'{"jsonrpc": "2.0", "id": 5, "method": '  # cut short
    raw.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    raw.proc.stdin.flush()
    answer = raw.wait(lambda m: "error" in m and m.get("id") is None)
    code, message = error_of(answer)
    assert code == -32700 and "not JSON" in message and "id" in answer  # "id": null, as JSON-RPC asks
    assert raw.ask(6, "flowtape/runs")["result"] == {"runs": []}
    raw.send({"jsonrpc": "2.0", "id": 7, "method": "shutdown"})
    raw.wait(lambda m: m.get("id") == 7)
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    raw.proc.wait(10)
    assert "Traceback" not in raw.close()


HUNG = count_flow(1000).replace("        self.i += 1\n", (
    "        self.i += 1\n        if self.i == 4:\n"
    "            import subprocess\n"  # a process of the actor's own, not a @tool: it must go too
    "            helper = subprocess.Popen(['sleep', '600'])\n"
    "            own = subprocess.Popen(['sleep', '601'], start_new_session=True)\n"  # out of the group's reach
    "            with open('helper.pid', 'w') as fh:\n                fh.write(f'{helper.pid} {own.pid}')\n"
    "            time.sleep(600)\n"), 1)


@pytest.mark.parametrize("leave", ["end of input", "exit without shutdown", "shutdown then exit"])
def test_a_hung_flow_does_not_outlive_the_server(raw: Raw, tmp_path: Path, leave: str) -> None:
    """A flow stuck in an actor ignores the first SIGTERM: the server escalates as `flowtape.stop`
    does (a second SIGTERM, then SIGKILL) before it exits, and the tape still ends `stopped`."""
    raw.initialize(tmp_path)
    flow = write_flow(tmp_path, "hung.py", HUNG)
    answer = raw.ask(1, "workspace/executeCommand", params={"command": "flowtape.run", "arguments": [{"uri": uri_of(flow)}]})
    run_dir = Path(answer["result"]["runDir"])
    raw.wait(lambda m: m.get("method") == "flowtape/steps")
    pid = json.loads((run_dir / "run.json").read_text())["pid"]
    time.sleep(0.5)  # the fourth firing hangs by now
    if leave == "end of input":
        assert raw.proc.stdin is not None
        raw.proc.stdin.close()
    else:
        if leave == "shutdown then exit":
            assert raw.ask(2, "shutdown")["result"] is None
        raw.send({"jsonrpc": "2.0", "method": "exit"})
    code = raw.proc.wait(30)
    assert code == (1 if leave == "exit without shutdown" else 0)  # as LSP asks
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    deadline = time.monotonic() + 10
    for helper in map(int, (tmp_path / "helper.pid").read_text().split()):
        while Path(f"/proc/{helper}").exists() and Path(f"/proc/{helper}/stat").read_text().split(")")[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the actor's own process outlived the server"
            time.sleep(0.05)
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["status"] == "stopped", summary
    assert json.loads((run_dir / "tape.jsonl").read_bytes().splitlines()[-1])["t"] == "end"


def test_stop_takes_down_what_the_flow_started_in_sessions_of_their_own(raw: Raw, tmp_path: Path) -> None:
    raw.initialize(tmp_path)
    flow = write_flow(tmp_path, "hung.py", HUNG)
    answer = raw.ask(1, "workspace/executeCommand", params={"command": "flowtape.run", "arguments": [{"uri": uri_of(flow)}]})
    deadline = time.monotonic() + 30
    while not (tmp_path / "helper.pid").exists() or len((tmp_path / "helper.pid").read_text().split()) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    helpers = list(map(int, (tmp_path / "helper.pid").read_text().split()))
    stopped = raw.ask(2, "workspace/executeCommand", params={"command": "flowtape.stop", "arguments": [
        {"runId": answer["result"]["runId"]}]})
    assert stopped["result"]["stopped"] is True
    for helper in helpers:
        while Path(f"/proc/{helper}").exists() and Path(f"/proc/{helper}/stat").read_text().split(")")[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, f"process {helper} the actor started outlived the stop"
            time.sleep(0.05)


def test_a_change_to_a_document_never_opened_is_ignored_quietly(raw: Raw, tmp_path: Path) -> None:
    raw.initialize(tmp_path)
    raw.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri_of(tmp_path / "never.py"), "version": 2},
        "contentChanges": [{"text": "x = 1\n"}]}})
    assert raw.ask(1, "flowtape/runs")["result"] == {"runs": []}
    assert not [m for m in raw.seen if m.get("method") == "window/showMessage"], raw.seen
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    raw.wait(lambda m: m.get("id") == 2)
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    raw.proc.wait(10)
    assert "Traceback" not in raw.close()


ECHO_DICT = """
from flowtape import Port, connect, task, workflow


@task
class Echo:
    class Ports:
        In = Port[dict](direction="in")
        Out = Port[dict](direction="out")

    def action(self, x: dict) -> dict:
        return x


@workflow(inputs={"In": dict})
def main():
    e = Echo()
    connect("In", e.In)
    connect(e.Out, "Out")
"""


def test_the_protocol_edges_of_other_clients(raw: Raw, tmp_path: Path) -> None:
    """What clients other than VS Code send: a lower-case header, UTF-8 positions first, an input
    that looks like a JSON-RPC message, a notification sent as a request, a wrong version."""
    assert raw.proc.stdin is not None
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}).encode()
    raw.proc.stdin.write(b"content-length: %d\r\n\r\n%s" % (len(body), body))  # and before initialize
    raw.proc.stdin.flush()
    assert error_of(raw.wait(lambda m: m.get("id") == 1))[0] == -32002
    raw.send({"jsonrpc": "2.0", "method": "flowtape/selectStep", "params": {"runId": "r", "step": 1}})  # dropped
    code, message = error_of(raw.ask(6, "initialize", params={"processId": None, "rootUri": uri_of(tmp_path) + "%00",
                                                              "capabilities": {}}))
    assert code == -32602 and "rootUri holds a NUL byte" in message  # and it does not count: initialize again
    for bad in ({"a": 1}, [1], True):
        raw.send({"jsonrpc": "2.0", "id": bad, "method": "flowtape/runs"})
        answer = raw.wait(lambda m: "error" in m and m.get("id") is None)
        assert error_of(answer)[0] == -32600 and "an id is a string or a number" in error_of(answer)[1]
    answer = raw.ask(0, "initialize", params={"processId": None, "rootUri": uri_of(tmp_path), "capabilities": {
        "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]}}})
    assert answer["result"]["capabilities"]["positionEncoding"] == "utf-16"  # the columns it sends count UTF-16 units
    raw.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    code, message = error_of(raw.ask(2, "$/cancelRequest", params={"id": 1}))
    assert code == -32600 and "$/cancelRequest is a notification: it is sent without an id" in message
    code, message = error_of(raw.ask(3, "flowtape/runs", jsonrpc="1.0"))
    assert code == -32600 and "its jsonrpc is '1.0', not \"2.0\"" in message
    raw.send({"jsonrpc": "2.0"})
    answer = raw.wait(lambda m: "error" in m and m.get("id") is None)
    assert error_of(answer) == (-32600, "not a JSON-RPC request: it has neither a method nor a result or error")
    flow = write_flow(tmp_path, "echo.py", ECHO_DICT)
    value = {"jsonrpc": "2.0", "method": 7, "params": {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover"}}
    answer = raw.ask(4, "workspace/executeCommand", params={"command": "flowtape.run", "arguments": [
        {"uri": uri_of(flow), "inputs": {"In": value}}]})
    run_dir = Path(answer["result"]["runDir"])
    deadline = time.monotonic() + 30
    while not (run_dir / "run.json").exists() or json.loads((run_dir / "run.json").read_text())["status"] == "running":
        assert time.monotonic() < deadline, raw.seen
        time.sleep(0.1)
    assert json.loads((run_dir / "run.json").read_text())["outputs"] == {"Out": [value]}  # as it was sent
    raw.send({"jsonrpc": "2.0", "id": 5, "method": "shutdown"})
    raw.wait(lambda m: m.get("id") == 5)
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    assert raw.proc.wait(10) == 0
    assert "Traceback" not in raw.close()


def test_a_directory_of_the_runs_dir_that_holds_no_run_is_not_listed(raw: Raw, tmp_path: Path) -> None:
    runs = tmp_path / ".flowtape" / "runs"
    (runs / "20260101-000000-000000-bbbb").mkdir(parents=True)
    (runs / "20260101-000000-000000-bbbb" / "tape.jsonl").write_text("garbage\n")  # there as the server starts
    raw.initialize(tmp_path)
    (runs / "20260101-000000-000000-aaaa").mkdir()  # and made while it runs
    deadline = time.monotonic() + 15
    listed, seen = None, set()
    while listed != [] or "20260101-000000-000000-aaaa" not in seen:  # (listed a while, as it may become a run)
        assert time.monotonic() < deadline, listed
        listed = [r["runId"] for r in raw.ask(len(raw.seen) + 100, "flowtape/runs")["result"]["runs"]]
        seen.update(listed)
        time.sleep(0.2)
    for junk in ("aaaa", "bbbb"):
        code, message = error_of(raw.ask(f"s-{junk}", "flowtape/getSteps", params={"runId": f"20260101-000000-000000-{junk}"}))
        assert code == -32001 and message.endswith("holds no run: no run.json and no readable tape"), message


def test_a_run_whose_run_json_is_garbage_is_told_by_its_tape(raw: Raw, tmp_path: Path) -> None:
    flow = write_flow(tmp_path, "count.py", count_flow(n=3))
    subprocess.run([sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", "r1"], cwd=tmp_path, check=True,
                   capture_output=True)
    (tmp_path / ".flowtape" / "runs" / "r1" / "run.json").write_text("\x00garbage")
    raw.initialize(tmp_path)
    deadline = time.monotonic() + 15
    while True:  # (a run whose process is gone is told once its tape was read)
        (run,) = raw.ask(f"l{time.monotonic()}", "flowtape/runs")["result"]["runs"]
        if run["status"] == "succeeded" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert run["status"] == "succeeded" and run["uri"] == uri_of(flow) and run["workflow"] == "main", run
    again = raw.ask(2, "workspace/executeCommand", params={"command": "flowtape.resumeAtStep",
                                                           "arguments": [{"runId": "r1", "step": 2}]})
    assert again["result"]["runId"] != "r1"
