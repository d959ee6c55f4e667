"""A Ray run through the language server: started with `executor: "ray"`, streamed step by step as
any run, stopped from the editor (its firing on the cluster cancelled), and resumed on Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
from flowtape.tape import read_tape
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from .conftest import collector, command, count_flow, uri_of, write_flow


async def test_a_ray_run_streams_every_step(ray_address: str, client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(8))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1, "executor": "ray",
                                                 "rayAddress": ray_address})
    done = await col.finished(run["runId"], timeout=120)
    assert done["status"] == "succeeded", done
    assert done["outputs"] == {"Result": [2 * i for i in range(1, 9)]}
    recorded = read_tape(Path(run["runDir"]) / "tape.jsonl").steps()
    assert [(s["step"], s["actor"], s["journalSeq"]) for s in col.steps(run["runId"])] == [
        (s.step, s.actor, s.journalSeq) for s in recorded]
    # a resume on Ray from the editor: the replayed steps marked, the rest run on the cluster
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": run["runId"], "step": 5, "executor": "ray",
                                                              "rayAddress": ray_address})
    again = await col.finished(resumed["runId"], timeout=120)
    assert again["status"] == "succeeded" and again["outputs"] == done["outputs"]
    assert [s["replayed"] for s in col.steps(resumed["runId"])] == [s.step <= 5 for s in recorded]


async def test_stopping_a_ray_run_from_the_editor(ray_address: str, client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "long.py", count_flow(10_000, delay=0.05))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "executor": "ray", "rayAddress": ray_address})
    await col.wait_for("flowtape/steps", lambda p: p["runId"] == run["runId"], timeout=120)
    stopped = await command(client, "flowtape.stop", {"runId": run["runId"]})
    assert stopped["stopped"] is True
    done = await col.finished(run["runId"], timeout=60)
    assert done["status"] == "stopped"
    tape = read_tape(Path(run["runDir"]) / "tape.jsonl")
    assert tape.end is not None and tape.end.status == "stopped"


async def test_a_bad_executor_is_refused_naming_the_field(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(2))
    with pytest.raises(JsonRpcException, match="executor"):
        await command(client, "flowtape.run", {"uri": uri_of(flow), "executor": "dask"})
