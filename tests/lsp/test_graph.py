"""The graph view's requests against the real server: a run's graph from its tape header, a flow
file's built without running it, a flow that does not build, and a queue's tokens at a step."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from .conftest import collector, command, count_flow, request, uri_of, write_flow

FLOW_SCOPES = '''\
from flowtape import Port, connect, if_, loop, task, workflow


@task
class Check:
    class Ports:
        In = Port[int](direction="in")
        Cond = Port[bool](direction="out")
        Then = Port[int](direction="out")
        Else = Port[int](direction="out")

    def action(self, x):
        return {"Cond": x > 1, "Then" if x > 1 else "Else": x}


@task
class Keep:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x


@workflow
def inner():
    k = Keep()
    connect("In", k.In)
    connect(k.Out, "Out")


@workflow
def main():
    lp = loop([1, 2, 3])
    with lp:
        check = Check()
        connect(lp.item, check.In)
        c = if_()
        connect(check.Cond, c.cond)
        with c.then:
            big = inner()
            connect(check.Then, big.In)
            connect(big.Out, "Big")
        with c.else_:
            small = Keep()
            connect(check.Else, small.In)
            connect(small.Out, "Small")
'''

BROKEN = '''\
from flowtape import Port, connect, task, workflow


@task
class A:
    class Ports:
        Out = Port[int](direction="out")

    def action(self):
        return 1


@workflow
def main():
    a = A()
    connect(a.Out, a.Nope)
'''


def _by_path(graph: dict) -> dict[str, dict]:
    return {a["path"]: a for a in graph["actors"]}


async def _graph_of_run(client: LanguageClient, workspace: Path, text: str) -> tuple[dict, dict]:
    flow = write_flow(workspace, "scopes.py", text)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1})
    done = await collector(client).finished(run["runId"])
    assert done["status"] == "succeeded", done
    return run, await request(client, "flowtape/graph", {"runId": run["runId"]})


async def test_graph_of_a_run_has_nesting_edges_and_files(client: LanguageClient, workspace: Path) -> None:
    run, result = await _graph_of_run(client, workspace, FLOW_SCOPES)
    g = result["graph"]
    assert g["workflow"] == "main" and g["runId"] == run["runId"]
    actors = _by_path(g)
    assert actors["lp"]["kind"] == "loop" and "owner" not in actors["lp"]
    assert actors["check"]["owner"] == "lp" and actors["c"]["owner"] == "lp"
    assert actors["big"]["kind"] == "workflow" and actors["big"]["branch"] == "then" and actors["big"]["owner"] == "c"
    assert actors["small"]["branch"] == "else"
    assert actors["big/k"]["owner"] == "big"
    pairs = {(e["src"], e["dst"]) for e in g["edges"]}
    assert ("lp", "check") in pairs and ("check", "c") in pairs and ("big", "big/k") in pairs
    assert ("big/k", "big") in pairs  # the nested workflow's member puts to its own output port
    assert ("big", "") in pairs and ("small", "") in pairs  # the run's outputs
    assert set(g["outputs"]) == {"Big", "Small"}
    inner_edge = next(e for e in g["edges"] if e["src"] == "lp" and e["dst"] == "check")
    assert inner_edge["srcInner"] is True  # the loop's item is drawn from inside the loop
    flow_uri = uri_of(workspace / "scopes.py")
    assert result["files"][g["flowFile"]] == flow_uri
    line = next(i for i, t in enumerate((workspace / "scopes.py").read_text().splitlines(), 1) if "check = Check()" in t)
    assert actors["check"]["line"] == line


async def test_graph_of_a_flow_that_never_ran(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "scopes.py", FLOW_SCOPES)
    built = await request(client, "flowtape/graph", {"uri": uri_of(flow)})
    assert not (workspace / ".flowtape" / "runs").exists() or not any((workspace / ".flowtape" / "runs").iterdir())
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await collector(client).finished(run["runId"])
    recorded = await request(client, "flowtape/graph", {"runId": run["runId"]})
    recorded["graph"].pop("runId")
    assert built == recorded  # the same picture before and after it ran


async def test_a_flow_that_does_not_build_is_a_clear_error(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "broken.py", BROKEN)
    with pytest.raises(JsonRpcException) as err:
        await request(client, "flowtape/graph", {"uri": uri_of(flow)})
    assert err.value.code == -32004 and "does not build" in str(err.value)
    assert "broken.py:16" in str(err.value) and "Nope" in str(err.value)
    with pytest.raises(JsonRpcException) as err:
        await request(client, "flowtape/graph", {"uri": uri_of(flow), "workflow": "other"})
    assert "no workflow 'other'" in str(err.value)
    ok = write_flow(workspace, "count.py", count_flow(2))  # the server goes on answering
    assert (await request(client, "flowtape/graph", {"uri": uri_of(ok)}))["graph"]["workflow"] == "main"


async def test_graph_refuses_bad_params(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(2))
    for params in ({}, {"runId": "x", "uri": uri_of(flow)}, {"uri": "file:///elsewhere/flow.py"}, {"uri": uri_of(flow), "stray": 1}):
        with pytest.raises(JsonRpcException) as err:
            await request(client, "flowtape/graph", params)
        assert err.value.code == -32602, (params, err.value)
    with pytest.raises(JsonRpcException) as err:
        await request(client, "flowtape/graph", {"runId": "no-such-run"})
    assert err.value.code == -32001 and "no-such-run" in str(err.value)


async def test_queue_tokens_at_a_step_are_whole(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(3))
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1})
    await collector(client).finished(run["runId"])
    g = (await request(client, "flowtape/graph", {"runId": run["runId"]}))["graph"]
    edge = next(e for e in g["edges"] if e["src"] == "count" and e["dst"] == "double")
    steps = (await request(client, "flowtape/getSteps", {"runId": run["runId"]}))["steps"]
    assert all("startMs" in s for s in steps) and steps[-1]["startMs"] >= steps[0]["startMs"]
    first = await request(client, "flowtape/queueTokens", {"runId": run["runId"], "step": 1, "queue": edge["queue"]})
    assert first["id"] == "count.Out->double.In" and first["size"] == 1 and first["tokens"] == [1]
    out = next(e for e in g["edges"] if e["dst"] == "" and e["dstPort"] == "Result")
    last = await request(client, "flowtape/queueTokens", {"runId": run["runId"], "step": len(steps), "queue": out["queue"]})
    assert last["tokens"] == [2, 4, 6]
    with pytest.raises(JsonRpcException) as err:
        await request(client, "flowtape/queueTokens", {"runId": run["runId"], "step": 1, "queue": 99})
    assert err.value.code == -32602 and "out of range" in str(err.value)


async def test_timeline_draws_inner_firings_inside_their_composite(client: LanguageClient, workspace: Path) -> None:
    run, _ = await _graph_of_run(client, workspace, FLOW_SCOPES)
    t = await request(client, "flowtape/timeline", {"runId": run["runId"]})
    assert t["complete"] is True and t["total"] == len(t["steps"]) > 0
    names = t["actors"]
    steps = {s[0]: s for s in t["steps"]}
    assert [names[s[1]] for s in t["steps"]].count("lp") == len(t["steps"])  # each loop item is a step
    assert t["inner"], "the loop's inner firings are timed"
    for step, _index, actor, at, dur, replayed, _parent in t["inner"]:
        _, _, s_at, s_dur, _, _ = steps[step]
        assert s_at <= at and at + dur <= s_at + s_dur, (names[actor], at, dur, s_at, s_dur)  # inside the composite's bar
        assert replayed is False
    # an inner firing's index is its place among the step's inner firings, as stepDetail lists them:
    # every one of them, the nested composites' own (the if, the nested workflow) too
    for n in steps:
        detail = await request(client, "flowtape/stepDetail", {"runId": run["runId"], "step": n})
        listed = [f["actor"] for f in detail["firings"] if (f["actor"], f["fireCount"]) != ("lp", n)]
        assert [names[f[2]] for f in t["inner"] if f[0] == n] == listed
    # the loop holds an if holding a nested workflow: each inner firing names the firing it ran in,
    # and lies within that one's bar, as deep as the flow nests
    owner = {"check": "lp", "c": "lp", "small": "c", "big": "c", "big/k": "big"}
    by_ref = {(f[0], f[1]): f for f in t["inner"]}
    depth = {}
    for step, index, actor, at, dur, _, parent in t["inner"]:
        if parent == 0:
            assert owner[names[actor]] == "lp"
            depth[(step, index)] = 1
            continue
        up = by_ref[(step, parent)]
        assert parent < index and names[up[2]] == owner[names[actor]], (names[actor], names[up[2]])
        assert up[3] <= at and at + dur <= up[3] + up[4], (names[actor], names[up[2]])
        depth[(step, index)] = depth[(step, parent)] + 1
    assert max(depth.values()) == 3  # lp > c > big > big/k
    assert {names[f[2]] for f in t["inner"]} == {"check", "c", "big", "big/k", "small"}
    later = await request(client, "flowtape/timeline", {"runId": run["runId"], "from": 2})
    assert [s[0] for s in later["steps"]] == [s[0] for s in t["steps"]][1:]
    assert all(f[0] >= 2 for f in later["inner"])


async def test_timeline_follows_a_live_run_and_refuses_bad_params(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(40, delay=0.01))
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1})
    seen: list[int] = []
    while True:  # as the view asks while the run streams: the steps after the last it has
        t = await request(client, "flowtape/timeline", {"runId": run["runId"], "from": len(seen) + 1})
        seen += [s[0] for s in t["steps"]]
        if t["complete"]:
            break
    assert seen == list(range(1, len(seen) + 1)) and len(seen) == 80
    for params in ({}, {"runId": run["runId"], "from": 0}, {"runId": run["runId"], "stray": 1}):
        with pytest.raises(JsonRpcException) as err:
            await request(client, "flowtape/timeline", params)
        assert err.value.code == -32602, params
    with pytest.raises(JsonRpcException) as err:
        await request(client, "flowtape/timeline", {"runId": "no-such-run"})
    assert err.value.code == -32001


async def test_timeline_of_a_resumed_run_marks_what_was_replayed(client: LanguageClient, workspace: Path) -> None:
    run, _ = await _graph_of_run(client, workspace, FLOW_SCOPES)
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": run["runId"], "step": 2, "maxWorkers": 1})
    done = await collector(client).finished(resumed["runId"])
    assert done["status"] == "succeeded", done
    t = await request(client, "flowtape/timeline", {"runId": resumed["runId"]})
    replayed = {s[0]: s[4] for s in t["steps"]}
    assert replayed[1] and replayed[2] and not any(r for n, r in replayed.items() if n > 2), replayed
    inner = {(f[0], f[1]): f[5] for f in t["inner"]}
    assert inner and all(r == (step <= 2) for (step, _), r in inner.items()), inner  # inner firings as their step
