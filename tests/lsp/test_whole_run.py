"""What the editor shows of a whole run (issue 22): outputs, the failed firing with its traceback,
inner firings of composite steps, finding steps, and a workflow's declared inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from .conftest import FLOW_FAIL, FLOW_NESTED, collector, command, count_flow, request, uri_of, write_flow
from .test_editor import diagnostics_for, line_of

FLOW_INPUTS = '''\
from flowtape import Port, connect, task, workflow


@task
class Scale:
    class Ports:
        In = Port[int](direction="in")
        Factor = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x, factor):
        return x * factor


@workflow(inputs={"In": int, "Factor": int}, outputs={"Out": int})
def main():
    scale = Scale()
    connect("In", scale.In)
    connect("Factor", scale.Factor)
    connect(scale.Out, "Out")
'''


async def run_to_end(client: LanguageClient, flow: Path, **extra: object) -> tuple[str, dict]:
    run_id = (await command(client, "flowtape.run", {"uri": uri_of(flow), **extra}))["runId"]
    return run_id, await collector(client).finished(run_id)


async def listed(client: LanguageClient, run_id: str) -> dict:
    runs = (await request(client, "flowtape/runs", {}))["runs"]
    return next(r for r in runs if r["runId"] == run_id)


async def test_outputs_are_previewed_on_the_run_and_given_whole(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(300))
    run_id, done = await run_to_end(client, flow)
    assert done["outputs"]["Result"][:3] == [2, 4, 6]
    info = await listed(client, run_id)
    [port] = info["outputs"]
    assert port["port"] == "Result" and port["count"] == 300
    assert port["preview"].startswith("[2, 4, 6") and port["preview"].endswith("…]") and len(port["preview"]) < 140
    whole = await request(client, "flowtape/runOutputs", {"runId": run_id})
    assert whole["outputs"] == {"Result": [2 * i for i in range(1, 301)]}


async def test_a_failure_tells_the_firing_what_it_took_and_its_traceback(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "fail.py", FLOW_FAIL)
    uri = uri_of(flow)
    run_id, done = await run_to_end(client, flow)
    assert done["status"] == "failed"
    detail = done["errorDetail"]
    assert detail["actor"] == "picky" and detail["fireCount"] == 2
    assert detail["taken"] == [{"queue": "src.Out->picky.In", "tokens": ["2"]}]
    assert detail["line"] == line_of(flow, "picky = Picky()")
    assert detail["raisedUri"] == uri and detail["raisedLine"] == line_of(flow, 'raise ValueError("two is not allowed")')
    frames = detail["traceback"]
    own = [f for f in frames if f["own"]]
    assert own and own[-1]["uri"] == uri and own[-1]["line"] == detail["raisedLine"] and own[-1]["function"] == "action"
    assert any(not f["own"] for f in frames)  # the engine's frames are there, told apart
    # the run row tells why it failed, from the list too
    info = await listed(client, run_id)
    assert info["error"]["actor"] == "picky" and "two is not allowed" in info["error"]["message"]
    assert info["error"]["taken"] == detail["taken"]
    # an Error on the line that raised, besides the one on the actor's creation line
    diags = await diagnostics_for(client, uri, lambda ds: any(d.code == "run-raised" for d in ds))
    raised = next(d for d in diags if d.code == "run-raised")
    assert raised.severity == lsp.DiagnosticSeverity.Error and raised.range.start.line == detail["raisedLine"]
    assert "two is not allowed" in raised.message
    assert any(d.code == "run-failed" and d.range.start.line == detail["line"] for d in diags)


async def test_a_composite_step_lists_its_inner_firings_apart(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "nested.py", FLOW_NESTED)
    run_id, done = await run_to_end(client, flow)
    assert done["status"] == "succeeded"
    steps = (await request(client, "flowtape/getSteps", {"runId": run_id, "from": 1, "limit": 100}))["steps"]
    wrap = next(s for s in steps if s["actor"] == "wrap")
    detail = await request(client, "flowtape/stepDetail", {"runId": run_id, "step": wrap["step"]})
    firings = detail["firings"]
    actors = [f["actor"] for f in firings]
    assert actors == ["wrap", "wrap/mid", "wrap/mid/leaf"]  # as the tape holds them: the step's own, then the inner ones
    leaf = next(f for f in firings if f["actor"] == "wrap/mid/leaf")
    assert leaf["taken"] and leaf["put"] and leaf["replayed"] is False and leaf["actorKind"] == "task"
    assert leaf["put"][0]["tokens"] == [str(int(leaf["taken"][0]["tokens"][0]) + 1)]  # its own tokens, not merged
    lines = flow.read_text().splitlines()
    assert lines[leaf["range"]["start"]["line"]].strip().startswith("leaf = Inc()")


async def test_find_steps_by_actor_inner_actor_and_value(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "nested.py", FLOW_NESTED)
    run_id, _ = await run_to_end(client, flow)
    steps = (await request(client, "flowtape/getSteps", {"runId": run_id, "from": 1, "limit": 100}))["steps"]
    after = [s["step"] for s in steps if s["actor"] == "after"]
    wraps = [s["step"] for s in steps if s["actor"] == "wrap"]
    found = await request(client, "flowtape/findSteps", {"runId": run_id, "actor": "after", "limit": 100})
    assert found["steps"] == after and found["total"] == len(after)
    nxt = await request(client, "flowtape/findSteps", {"runId": run_id, "actor": "after", "from": after[0]})
    assert nxt["steps"] == [after[1]]
    prev = await request(client, "flowtape/findSteps", {"runId": run_id, "actor": "after", "from": after[1], "direction": "previous"})
    assert prev["steps"] == [after[0]]
    last = await request(client, "flowtape/findSteps", {"runId": run_id, "actor": "after", "direction": "previous"})
    assert last["steps"] == [after[-1]]  # from 0 backwards: the last one
    inner = await request(client, "flowtape/findSteps", {"runId": run_id, "actor": "wrap/mid/leaf", "limit": 100})
    assert inner["steps"] == wraps  # an inner actor's firings are in its composite steps
    # Gen gives 1, 2, 3; the leaf makes 2, 3, 4; after makes 3, 4, 5: "5" is put once, by after
    value = await request(client, "flowtape/findSteps", {"runId": run_id, "text": "5", "limit": 100})
    assert value["steps"] == [after[-1]]
    with pytest.raises(JsonRpcException, match="name what to find"):
        await request(client, "flowtape/findSteps", {"runId": run_id})


async def test_declared_inputs_are_asked_for_and_required(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "scale.py", FLOW_INPUTS)
    uri = uri_of(flow)
    asked = await request(client, "flowtape/workflowInputs", {"uri": uri})
    assert asked["workflow"] == "main" and asked["known"] is True and "last" not in asked
    assert asked["inputs"] == [{"name": "In", "type": "int", "required": True}, {"name": "Factor", "type": "int", "required": True}]
    with pytest.raises(JsonRpcException, match=r"workflow main needs its inputs In: int, Factor: int"):
        await command(client, "flowtape.run", {"uri": uri})
    with pytest.raises(JsonRpcException, match=r"needs its input Factor: int"):
        await command(client, "flowtape.run", {"uri": uri, "inputs": {"In": 3}})
    run_id, done = await run_to_end(client, flow, inputs={"In": 3, "Factor": 7})
    assert done["status"] == "succeeded" and done["outputs"] == {"Out": [21]}
    again = await request(client, "flowtape/workflowInputs", {"uri": uri, "workflow": "main"})
    assert again["last"] == {"In": 3, "Factor": 7}  # offered again
    # a workflow without inputs: nothing to ask
    plain = write_flow(workspace, "count.py", count_flow(2))
    none = await request(client, "flowtape/workflowInputs", {"uri": uri_of(plain)})
    assert none["inputs"] == [] and none["known"] is True
    with pytest.raises(JsonRpcException, match="has no workflow 'nope'"):
        await request(client, "flowtape/workflowInputs", {"uri": uri, "workflow": "nope"})


async def test_inputs_the_source_cannot_tell_are_not_required(client: LanguageClient, workspace: Path) -> None:
    """A declaration built elsewhere (a name, not a dict literal) cannot be read without importing
    the flow: the client is told so, and the run is not refused on a guess."""
    flow = write_flow(workspace, "spec.py", FLOW_INPUTS.replace(
        '@workflow(inputs={"In": int, "Factor": int}, outputs={"Out": int})',
        'SPEC = {"In": int, "Factor": int}\n\n\n@workflow(inputs=SPEC, outputs={"Out": int})'))
    asked = await request(client, "flowtape/workflowInputs", {"uri": uri_of(flow)})
    assert asked["known"] is False and asked["inputs"] == []
    run_id, done = await run_to_end(client, flow, inputs={"In": 2, "Factor": 5})
    assert done["outputs"] == {"Out": [10]}
