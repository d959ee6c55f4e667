"""What-if through the language server: fork with edits, diff two runs, what a fork may edit at a
step, the firing "Debug this firing" names; and a divergence that links to the diff."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest
from flowtape.verify import verify
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from .conftest import FLOW_DIVERGE, FLOW_NESTED, collector, command, count_flow, request, uri_of, write_flow


async def _run(client: LanguageClient, flow: Path) -> dict:
    started = await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1})
    done = await collector(client).finished(started["runId"])
    assert done["status"] == "succeeded"
    return started


async def test_fork_diff_and_editables(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(4))
    first = await _run(client, flow)
    run_id = first["runId"]
    # after step 3 (count fired twice, double once), count's 2 waits for double, and both keep state
    found = await request(client, "flowtape/editables", {"runId": run_id, "step": 3})
    by_where = {e["where"]: e for e in found["editables"]}
    assert by_where["count.Out->double.In[0]"] == {"where": "count.Out->double.In[0]", "kind": "token", "actor": "double",
                                                   "value": 2, "queue": "count.Out->double.In"}
    assert by_where["count.i"]["value"] == 2 and by_where["double.total"]["value"] == 1
    assert not any(w.startswith("$.") for w in by_where)  # the run's outputs take no edit
    col = collector(client)
    forked = await command(client, "flowtape.fork", {"runId": run_id, "step": 3, "edits": {"count.Out->double.In[0]": 10, "double.total": 100}})
    done = await col.finished(forked["runId"])
    assert done["status"] == "succeeded" and done["outputs"] == {"Result": [2, 20, 6, 8]}
    verify(Path(forked["runDir"]) / "tape.jsonl")
    started = col.of("flowtape/runStarted", forked["runId"])[0]
    assert started["resumedFrom"] == run_id and started["resumedAtStep"] == 3 and started["edits"] == 2
    listed = (await request(client, "flowtape/runs", {"uri": uri_of(flow)}))["runs"]
    assert [(r["runId"], r.get("edits", 0)) for r in listed] == [(forked["runId"], 2), (run_id, 0)]
    diff = await request(client, "flowtape/diff", {"runA": run_id, "runB": forked["runId"]})
    assert diff["same"] is False and diff["first"]["actor"] == "double" and diff["first"]["fireCount"] == 2
    assert diff["first"]["aspects"] == ["inputs", "outputs", "state"]
    assert diff["first"]["a"]["inputs"][0]["tokens"] == [2] and diff["first"]["b"]["inputs"][0]["tokens"] == [10]
    assert diff["outputs"] == {"same": False, "a": {"Result": [2, 4, 6, 8]}, "b": {"Result": [2, 20, 6, 8]}}
    narrowed = await request(client, "flowtape/diff", {"runA": run_id, "runB": forked["runId"], "actor": "count"})
    assert narrowed["same"] is True and narrowed["actor"] == "count"


async def test_editables_list_the_fields_of_an_actor_that_has_not_fired_and_a_fork_edits_one(
    client: LanguageClient, workspace: Path,
) -> None:
    flow = write_flow(workspace, "count.py", count_flow(4))
    run_id = (await _run(client, flow))["runId"]
    # at step 1 only count has fired: double has no state on the tape, and starts from its defaults
    found = await request(client, "flowtape/editables", {"runId": run_id, "step": 1})
    fields = {e["where"]: e for e in found["editables"] if e["kind"] == "field"}
    assert fields["count.i"]["value"] == 1
    assert fields["double.total"] == {"where": "double.total", "kind": "field", "actor": "double", "value": 0}
    col = collector(client)
    forked = await command(client, "flowtape.fork", {"runId": run_id, "step": 1, "edits": {"double.total": 100}})
    done = await col.finished(forked["runId"])
    assert done["status"] == "succeeded" and done["outputs"] == {"Result": [2, 4, 6, 8]}
    verify(Path(forked["runDir"]) / "tape.jsonl")
    last = await request(client, "flowtape/editables", {"runId": forked["runId"], "step": done["steps"]})
    assert {e["where"]: e.get("value") for e in last["editables"]}["double.total"] == 100 + 1 + 2 + 3 + 4
    # the defaults are the flow's as it is now (what a fork of it starts from), not as it was
    flow.write_text(count_flow(4).replace("total: int = 0", "total: int = 7"))
    found = await request(client, "flowtape/editables", {"runId": run_id, "step": 1})
    assert {e["where"]: e.get("value") for e in found["editables"]}["double.total"] == 7
    # a flow that does not load now tells no defaults: what the tape holds is still listed
    flow.write_text("raise SystemExit('broken on purpose')\n")
    found = await request(client, "flowtape/editables", {"runId": run_id, "step": 1})
    wheres = [e["where"] for e in found["editables"]]
    assert "count.i" in wheres and "count.Out->double.In[0]" in wheres and "double.total" not in wheres


async def test_a_misfit_fork_fails_saying_why_and_bad_params_are_refused(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(4))
    run_id = (await _run(client, flow))["runId"]
    col = collector(client)
    forked = await command(client, "flowtape.fork", {"runId": run_id, "step": 3, "edits": {"count.Out->double.In[5]": 1}})
    done = await col.finished(forked["runId"])
    assert done["status"] == "failed" and "holds 1 token(s) at step 3 (0 to 0)" in done["error"]
    with pytest.raises(JsonRpcException, match="a fork edits something"):
        await command(client, "flowtape.fork", {"runId": run_id, "step": 3, "edits": {}})
    with pytest.raises(JsonRpcException, match="step 99 is out of range"):
        await command(client, "flowtape.fork", {"runId": run_id, "step": 99, "edits": {"count.i": 1}})
    with pytest.raises(JsonRpcException, match="unknown field `edit`"):
        await command(client, "flowtape.fork", {"runId": run_id, "step": 3, "edit": {}})
    with pytest.raises(JsonRpcException, match="no actor 'ghost' in either run"):
        await request(client, "flowtape/diff", {"runA": run_id, "runB": run_id, "actor": "ghost"})
    with pytest.raises(JsonRpcException, match="nope"):
        await request(client, "flowtape/diff", {"runA": run_id, "runB": "nope"})


async def test_firing_at_a_step_or_an_actors_line(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "nested.py", FLOW_NESTED)
    run_id = (await _run(client, flow))["runId"]
    steps = (await request(client, "flowtape/getSteps", {"runId": run_id, "from": 1, "limit": 100}))["steps"]
    last = steps[-1]
    at = await request(client, "flowtape/firingAt", {"runId": run_id, "step": last["step"]})
    assert (at["actor"], at["fireCount"], at["step"]) == (last["actor"], last["fireCount"], last["step"])
    line = next(i for i, text in enumerate(FLOW_NESTED.splitlines()) if "leaf = Inc()" in text)
    wrap_steps = [s for s in steps if s["actor"] == "wrap"]
    at = await request(client, "flowtape/firingAt", {"runId": run_id, "step": wrap_steps[1]["step"], "uri": uri_of(flow), "line": line})
    assert (at["actor"], at["fireCount"], at["step"]) == ("wrap/mid/leaf", 2, wrap_steps[1]["step"])
    with pytest.raises(JsonRpcException, match="has not fired by step 1"):
        await request(client, "flowtape/firingAt", {"runId": run_id, "step": 1, "uri": uri_of(flow), "line": line})


async def test_a_divergence_links_to_the_diff_with_the_recorded_run(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "diverge.py", FLOW_DIVERGE)
    (workspace / "data.json").write_text(json.dumps([1, 2, 3]))
    first = await _run(client, flow)
    (workspace / "data.json").write_text(json.dumps([1, 5, 3]))
    col = collector(client)
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": first["runId"], "step": 3})
    await col.finished(resumed["runId"])

    def diverged(p: lsp.PublishDiagnosticsParams) -> bool:
        return any(d.code == "replay-diverged" for d in p.diagnostics)

    published = await col.wait_for(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, diverged)
    d = next(d for d in published.diagnostics if d.code == "replay-diverged")
    assert "compare with the recorded run" in d.message
    assert d.code_description is not None and d.code_description.href.startswith("command:flowtape.compareRuns?")
    args = json.loads(unquote(d.code_description.href.partition("?")[2]))
    assert args == [{"runA": first["runId"], "runB": resumed["runId"], "actor": "sq"}]
    assert d.data["resumedFrom"] == first["runId"]
