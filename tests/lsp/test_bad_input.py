"""Bad input gets a JSON-RPC error with a clear message: never silence, never a dead server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from .conftest import collector, command, count_flow, request, uri_of, write_flow

INVALID, NOT_FOUND = -32602, -32001


async def _error(call: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await call
    return info.value


async def test_bad_input_gets_clear_errors(client: LanguageClient, workspace: Path, tmp_path: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(3))
    outside = tmp_path / "outside.py"
    outside.write_text(count_flow(3))
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await collector(client).finished(run["runId"])
    run_id = run["runId"]

    cases: list[tuple[str, str, Any, int, str]] = [
        # (kind, name, params, code, words in the message)
        ("cmd", "flowtape.run", {"uri": uri_of(outside)}, INVALID, "outside the workspace"),
        ("cmd", "flowtape.run", {"uri": uri_of(workspace / "missing.py")}, INVALID, "no such file"),
        ("cmd", "flowtape.run", {"uri": "untitled:Untitled-1"}, INVALID, "does not name a file"),
        ("cmd", "flowtape.run", {}, INVALID, "uri"),
        ("cmd", "flowtape.run", {"uri": 42}, INVALID, "uri"),
        ("cmd", "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 0}, INVALID, "maxWorkers"),
        ("cmd", "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 10**9}, INVALID, "maxWorkers"),
        ("cmd", "flowtape.resumeAtStep", {"runId": run_id, "maxWorkers": 257}, INVALID, "maxWorkers"),
        ("cmd", "flowtape.run", {"uri": uri_of(flow), "inputs": [1]}, INVALID, "inputs"),
        ("cmd", "flowtape.run", {"uri": uri_of(flow), "workflow": "ma\u0000in"}, INVALID, "is no workflow name"),
        ("cmd", "flowtape.run", {"uri": uri_of(flow), "workflow": "-x"}, INVALID, "is no workflow name"),
        ("cmd", "flowtape.run", "count.py", INVALID, "params must be an object"),
        ("cmd", "flowtape.resumeAtStep", {"runId": "nope", "step": 1}, NOT_FOUND, "unknown run 'nope'"),
        ("cmd", "flowtape.resumeAtStep", {"runId": run_id, "step": 99}, NOT_FOUND, "out of range"),
        ("cmd", "flowtape.resumeAtStep", {"runId": run_id, "step": -1}, INVALID, "step"),
        ("cmd", "flowtape.resumeAtStep", {"runId": run_id, "step": "2"}, INVALID, "step"),
        ("cmd", "flowtape.resumeAtStep", {"runId": run_id, "step": True}, INVALID, "step"),
        ("cmd", "flowtape.resumeAtStep", {"runId": "../../etc", "step": 1}, INVALID, "escapes the runs directory"),
        ("cmd", "flowtape.rerunActor", {"runId": run_id, "actor": "ghost"}, INVALID, "no actor 'ghost'"),
        ("cmd", "flowtape.rerunActor", {"runId": run_id}, INVALID, "actor"),
        ("cmd", "flowtape.stop", {"runId": "x/../.."}, INVALID, "escapes the runs directory"),
        ("cmd", "flowtape.stop", {"runId": "never-ran"}, NOT_FOUND, "unknown run"),
        ("req", "flowtape/runs", {"uri": uri_of(outside)}, INVALID, "outside the workspace"),
        ("req", "flowtape/runs", [], INVALID, "params must be an object"),
        ("req", "flowtape/getSteps", {"runId": run_id, "from": 0, "limit": 10}, INVALID, "from"),
        ("req", "flowtape/getSteps", {"runId": run_id, "from": 1, "limit": 0}, INVALID, "limit"),
        ("req", "flowtape/getSteps", {"runId": run_id, "from": 500, "limit": 10}, NOT_FOUND, "out of range"),
        ("req", "flowtape/getSteps", {"runId": "..", "from": 1, "limit": 10}, INVALID, "escapes the runs directory"),
        ("req", "flowtape/getSteps", {"from": 1, "limit": 10}, INVALID, "runId"),
        ("req", "flowtape/stepDetail", {"runId": run_id, "step": 0}, INVALID, "step"),
        ("req", "flowtape/stepDetail", {"runId": run_id, "step": 10_000}, NOT_FOUND, "out of range"),
        ("req", "flowtape/stepDetail", {"runId": run_id, "step": 1.5}, INVALID, "step"),
        ("req", "flowtape/stepDetail", {"runId": "no-such-run", "step": 1}, NOT_FOUND, "unknown run"),
        ("req", "flowtape/stepDetail", None, INVALID, "runId"),
        # a misspelt field is refused, not ignored: `stpe` would resume at the last step
        ("cmd", "flowtape.resumeAtStep", {"runId": run_id, "stpe": 2}, INVALID, "unknown field `stpe`"),
        ("req", "flowtape/getSteps", {"runId": run_id, "form": 2}, INVALID, "unknown field `form`"),
    ]
    for kind, name, params, code, words in cases:
        call = command(client, name, params) if kind == "cmd" else request(client, name, params)
        error = await _error(call)
        assert error.code == code, (name, params, error.code, error.message)
        assert words in error.message, (name, params, error.message)

    # a command with no argument, or two
    for arguments in ([], [{"runId": run_id}, {"runId": run_id}]):
        error = await _error(client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="flowtape.stop", arguments=arguments)
        ))
        assert error.code == INVALID and "one argument" in error.message
    error = await _error(client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="flowtape.nope")))
    assert error.code == INVALID

    # notifications cannot be answered: bad ones are logged, and the server carries on
    client.protocol.notify("flowtape/selectStep", {"runId": run_id, "step": "x"})
    client.protocol.notify("flowtape/selectStep", {"runId": "ghost", "step": 1})
    client.protocol.notify("flowtape/selectStep", 7)
    runs = await request(client, "flowtape/runs", {"uri": uri_of(flow)})
    assert [r["runId"] for r in runs["runs"]] == [run_id]
    detail = await request(client, "flowtape/stepDetail", {"runId": run_id, "step": 1})
    assert detail["step"] == 1


async def test_a_tape_cut_or_edited_or_deleted_under_the_server_gets_clear_errors(client: LanguageClient, workspace: Path) -> None:
    """Files change behind the server's back: a finished run's tape cut short or edited after it
    was read, or its directory deleted. The stepper never tells the changed tape's story as the
    run's: -32003 naming the broken rule, as `flowtape verify` would, and -32001 once it is gone."""
    import shutil

    flow = write_flow(workspace, "count.py", count_flow(3000))
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await collector(client).finished(run["runId"], timeout=60)
    run_id = run["runId"]
    assert (await request(client, "flowtape/stepDetail", {"runId": run_id, "step": 5999}))["step"] == 5999
    tape = Path(run["runDir"]) / "tape.jsonl"
    data = tape.read_bytes()
    at = data.index(b",[", data.index(b'"p":[[')) + 2  # the first token put: a number
    edited = data[:at] + (b"7" if data[at : at + 1] != b"7" else b"8") + data[at + 1 :]  # one digit changed
    tape.write_bytes(edited)
    for method, params in (("flowtape/stepDetail", {"runId": run_id, "step": 1}), ("flowtape/getSteps", {"runId": run_id})):
        err = await _error(request(client, method, params))
        assert err.code == -32003 and "tape is damaged" in err.message and "hash chain" in err.message, err.message
    tape.write_bytes(data[: len(data) // 2])  # cut mid-line
    for _ in range(2):  # said every time: the tape does not hold the run that ended
        err = await _error(request(client, "flowtape/stepDetail", {"runId": run_id, "step": 5999}))
        assert err.code == -32003 and "it was cut short" in err.message
    err = await _error(request(client, "flowtape/getSteps", {"runId": run_id, "from": 1, "limit": 10}))
    assert err.code == -32003 and "it was cut short" in err.message
    tape.write_bytes(data)  # put back as it was: sound again
    assert (await request(client, "flowtape/stepDetail", {"runId": run_id, "step": 5999}))["step"] == 5999
    assert run_id in [r["runId"] for r in (await request(client, "flowtape/runs", {}))["runs"]]

    shutil.rmtree(run["runDir"])
    for method, params in (("flowtape/getSteps", {"runId": run_id, "from": 1}), ("flowtape/stepDetail", {"runId": run_id, "step": 1})):
        err = await _error(request(client, method, params))
        assert err.code == NOT_FOUND and ("gone" in err.message or "unknown run" in err.message), err.message
    assert run_id not in [r["runId"] for r in (await request(client, "flowtape/runs", {}))["runs"]]


async def test_a_run_that_cannot_start_says_where_and_why_and_has_no_steps(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "broken.py", count_flow(3) + "\nconnect(\n")
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    done = await collector(client).finished(run["runId"])
    assert done["status"] == "failed" and "syntax error" in done["error"]
    detail = done["errorDetail"]
    assert (detail["uri"], detail["line"]) == (uri_of(flow), len(flow.read_text().splitlines()) - 1)
    for method, params in (("flowtape/getSteps", {"runId": run["runId"]}), ("flowtape/stepDetail", {"runId": run["runId"], "step": 1})):
        err = await _error(request(client, method, params))
        assert err.code == NOT_FOUND and "failed before it started, so it has no steps: " in err.message and "syntax error" in err.message
    listed = [r for r in (await request(client, "flowtape/runs", {}))["runs"] if r["runId"] == run["runId"]]
    assert listed and listed[0]["status"] == "failed"


async def test_a_step_past_a_live_run_is_out_of_range_so_far(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "slow.py", count_flow(100, delay=0.1))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await col.wait_for("flowtape/steps", lambda p: p["runId"] == run["runId"])
    for method, params in (("flowtape/getSteps", {"runId": run["runId"], "from": 9999}),
                           ("flowtape/stepDetail", {"runId": run["runId"], "step": 9999})):
        err = await _error(request(client, method, params))
        assert err.code == NOT_FOUND and "out of range" in err.message and err.message.endswith("so far (the run is still going)")
    await command(client, "flowtape.stop", {"runId": run["runId"]})
    assert (await col.finished(run["runId"]))["status"] == "stopped"


async def test_a_sealed_looking_tape_is_still_checked_and_refused_once_found_edited(client: LanguageClient, workspace: Path) -> None:
    """A tape with the size and time it had when sealed is answered at once (a keyed digest of a
    big tape takes a while) and checked meanwhile: an edit that kept both is refused from then on."""
    import asyncio
    import os

    flow = write_flow(workspace, "count.py", count_flow(50))
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await collector(client).finished(run["runId"])
    tape = Path(run["runDir"]) / "tape.jsonl"
    data, stat = tape.read_bytes(), tape.stat()
    at = data.index(b",[", data.index(b'"p":[[')) + 2
    tape.write_bytes(data[:at] + (b"7" if data[at : at + 1] != b"7" else b"8") + data[at + 1 :])  # same size
    os.utime(tape, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same time
    params = {"runId": run["runId"], "step": 1}
    for _ in range(100):
        try:
            await request(client, "flowtape/stepDetail", params)
        except JsonRpcException as exc:
            assert exc.code == -32003 and "hash chain" in exc.message
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the edited tape was never refused")
