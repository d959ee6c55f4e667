"""Requests that race what the server is doing: a cancel of a command that starts a run, a
question about a run whose process has not written its tape yet, pages of a run still writing
its tape, a client slow to create a progress token, and a file that is gone from disk while its
editor is open."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import count_flow, uri_of, write_flow
from .test_rpc import Raw, error_of

SLOW_IMPORT = "import time\ntime.sleep(2.0)  # the run's process has not written its tape for a while\n"


@pytest.fixture
def raw(tmp_path: Path):  # type: ignore[no-untyped-def]
    client = Raw(tmp_path)
    yield client
    client.close()


def finished(raw: Raw, run_id: str) -> dict[str, Any]:
    return raw.wait(lambda m: m.get("method") == "flowtape/runFinished" and m["params"]["runId"] == run_id, 30)["params"]


def test_a_cancelled_run_command_still_answers_with_the_run_it_started(raw: Raw, tmp_path: Path) -> None:
    raw.initialize(tmp_path)
    flow = write_flow(tmp_path, "count.py", count_flow(n=3))
    assert raw.proc.stdin is not None
    for message in ({"jsonrpc": "2.0", "id": 7, "method": "workspace/executeCommand",
                     "params": {"command": "flowtape.run", "arguments": [{"uri": uri_of(flow)}]}},
                    {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}):
        body = json.dumps(message).encode()  # both in one write: the cancel is read while the launch is under way
        raw.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    raw.proc.stdin.flush()
    answer = raw.wait(lambda m: m.get("id") == 7 and "method" not in m)
    run_id = answer["result"]["runId"]  # not -32800: the run is started, and the client learns its id
    assert finished(raw, run_id)["status"] == "succeeded"
    assert [p.name for p in (tmp_path / ".flowtape" / "runs").iterdir()] == [run_id]


def test_a_run_still_starting_has_no_steps_yet_and_has_not_failed(raw: Raw, tmp_path: Path) -> None:
    raw.initialize(tmp_path)
    flow = write_flow(tmp_path, "slow.py", SLOW_IMPORT + count_flow(n=3))
    run_id = raw.ask(1, "workspace/executeCommand", params={
        "command": "flowtape.run", "arguments": [{"uri": uri_of(flow)}]})["result"]["runId"]
    page = raw.ask(2, "flowtape/getSteps", params={"runId": run_id})["result"]
    assert page == {"runId": run_id, "steps": [], "total": 0, "live": True}
    code, message = error_of(raw.ask(3, "flowtape/stepDetail", params={"runId": run_id, "step": 1}))
    assert code == -32001 and message == f"run {run_id} is starting: it has no steps yet"
    code, message = error_of(raw.ask(4, "workspace/executeCommand", params={
        "command": "flowtape.resumeAtStep", "arguments": [{"runId": run_id}]}))
    assert code == -32001 and "is starting" in message
    end = finished(raw, run_id)
    assert end["status"] == "succeeded" and end["steps"] > 0
    assert len(raw.ask(5, "flowtape/getSteps", params={"runId": run_id})["result"]["steps"]) == end["steps"]


def test_a_run_stopped_before_its_tape_began_says_so(raw: Raw, tmp_path: Path) -> None:
    raw.initialize(tmp_path)
    flow = write_flow(tmp_path, "slow.py", SLOW_IMPORT + count_flow(n=3))
    run_id = raw.ask(1, "workspace/executeCommand", params={
        "command": "flowtape.run", "arguments": [{"uri": uri_of(flow)}]})["result"]["runId"]
    raw.ask(2, "workspace/executeCommand", params={"command": "flowtape.stop", "arguments": [{"runId": run_id}]})
    assert finished(raw, run_id)["status"] == "stopped"
    code, message = error_of(raw.ask(3, "flowtape/getSteps", params={"runId": run_id}))
    assert code == -32001 and message == f"run {run_id} was stopped before it started, so it has no steps"


def test_a_live_run_polled_from_its_total_gives_every_step_once(raw: Raw, tmp_path: Path) -> None:
    raw.initialize(tmp_path)
    flow = write_flow(tmp_path, "count.py", count_flow(n=1500, delay=0.0005))
    run_id = raw.ask(1, "workspace/executeCommand", params={
        "command": "flowtape.run", "arguments": [{"uri": uri_of(flow)}]})["result"]["runId"]
    got: list[int] = []
    ask, live = 10, True
    while live:  # as protocol.md says a client may poll: from = total + 1
        answer = raw.ask(ask, "flowtape/getSteps", params={"runId": run_id, "from": len(got) + 1, "limit": 10000})
        ask += 1
        page = answer["result"]
        numbers = [s["step"] for s in page["steps"]]
        assert not numbers or numbers[-1] <= page["total"], (numbers[-1], page["total"])  # the total counts the page
        got.extend(numbers)
        assert len(got) == page["total"] or not numbers
        live = page["live"]
        time.sleep(0.01)
    assert got == list(range(1, len(got) + 1)) and len(got) == finished(raw, run_id)["steps"]


def test_a_progress_token_created_late_still_gets_its_progress(raw: Raw, tmp_path: Path) -> None:
    """A client (or a server busy with a burst of runs) that answers `workDoneProgress/create`
    after seconds: the progress still begins and ends, and nothing is logged as a failure."""
    answer = raw.ask(0, "initialize", params={"processId": None, "rootUri": uri_of(tmp_path),
                                              "capabilities": {"window": {"workDoneProgress": True}}})
    assert "capabilities" in answer["result"]
    raw.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    flow = write_flow(tmp_path, "slow.py", count_flow(n=40, delay=0.2))
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "workspace/executeCommand",
              "params": {"command": "flowtape.run", "arguments": [{"uri": uri_of(flow)}]}})
    create: dict[str, Any] | None = None
    deadline = time.monotonic() + 20
    while create is None:  # read by hand: `wait` would answer the request at once
        assert time.monotonic() < deadline, raw.seen
        message = raw.inbox.get(timeout=20)
        if message.get("method") == "window/workDoneProgress/create":
            create = message
        else:
            raw.seen.append(message)
    time.sleep(6.0)  # longer than the server once waited: it gave up, then failed on the late answer
    raw.send({"jsonrpc": "2.0", "id": create["id"], "result": None})
    token = create["params"]["token"]

    def progress(kind: str) -> Any:
        return lambda m: m.get("method") == "$/progress" and m["params"]["token"] == token and m["params"]["value"]["kind"] == kind

    assert raw.wait(progress("begin"))["params"]["value"]["title"].startswith("Flowtape")
    assert raw.wait(progress("end"), 30)["params"]["value"]["message"].startswith("succeeded")
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    raw.wait(lambda m: m.get("id") == 2)
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    assert raw.proc.wait(10) == 0
    stderr = raw.close()
    assert "Traceback" not in stderr and "InvalidStateError" not in stderr, stderr


def diagnostics_of(raw: Raw, uri: str, test: Any) -> list[dict[str, Any]]:
    message = raw.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
                       and test(m["params"]["diagnostics"]))
    return message["params"]["diagnostics"]


def test_a_flow_file_gone_from_disk_keeps_no_stale_diagnostics(raw: Raw, tmp_path: Path) -> None:
    raw.initialize(tmp_path)
    broken = count_flow(n=3) + "\ndef oops(:\n"
    flow = write_flow(tmp_path, "gone.py", broken)
    uri = uri_of(flow)
    raw.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": broken}}})
    assert [d["code"] for d in diagnostics_of(raw, uri, bool)] == ["syntax-error"]
    flow.unlink()  # deleted on disk (a checkout, a rename) while the editor holds it
    raw.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": count_flow(n=3)}]}})
    diagnostics_of(raw, uri, lambda d: d == [])  # the editor's text is still checked
    raw.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": broken}]}})
    assert [d["code"] for d in diagnostics_of(raw, uri, bool)] == ["syntax-error"]
    raw.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
    diagnostics_of(raw, uri, lambda d: d == [])  # closed, and no file behind it: nothing left to say
