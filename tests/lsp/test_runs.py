"""Runs through the language server: start, stream, resume, rerun an actor, stop, crash, terminal."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GEN_FLOW
from flowtape.cli import main as cli_main
from flowtape.tape import Step, read_tape
from flowtape.verify import verify
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from .conftest import FLOW_NESTED, collector, command, count_flow, request, uri_of, write_flow


def tape_steps(run_dir: str) -> list[Step]:
    return read_tape(Path(run_dir) / "tape.jsonl").steps()


async def test_run_streams_every_step_with_its_journal_seq(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(40))
    result = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    run_id, run_dir = result["runId"], result["runDir"]
    assert Path(run_dir) == workspace.resolve() / ".flowtape" / "runs" / run_id
    col = collector(client)
    done = await col.finished(run_id)
    assert done["status"] == "succeeded"
    assert done["outputs"] == {"Result": [2 * i for i in range(1, 41)]}
    started = col.of("flowtape/runStarted", run_id)
    assert len(started) == 1 and started[0]["workflow"] == "main" and started[0]["uri"] == uri_of(flow)
    # runStarted comes before the first steps, runFinished after the last
    order = [m for m, p in col.items if isinstance(p, dict) and p.get("runId") == run_id]
    assert order[0] == "flowtape/runStarted" and order[-1] == "flowtape/runFinished"
    streamed = col.steps(run_id)
    recorded = tape_steps(run_dir)
    assert [(s["step"], s["actor"], s["fireCount"], s["journalSeq"]) for s in streamed] == [
        (s.step, s.actor, s.fireCount, s.journalSeq) for s in recorded
    ]
    lines = flow.read_text().splitlines()
    first = streamed[0]
    assert first["uri"] == uri_of(flow) and first["actorKind"] == "task" and first["replayed"] is False
    assert lines[first["range"]["start"]["line"]].strip().startswith("count = Count(")
    # paged back from the tape
    page = await request(client, "flowtape/getSteps", {"runId": run_id, "from": 30, "limit": 100})
    assert page["total"] == len(recorded) and page["live"] is False
    assert [s["journalSeq"] for s in page["steps"]] == [s.journalSeq for s in recorded[29:]]
    # work-done progress: begin … end
    token = f"flowtape-run-{run_id}"
    for _ in range(50):
        kinds = [v.kind for v in client.progress_reports.get(token, [])]
        if "end" in kinds:
            break
        await asyncio.sleep(0.05)
    assert kinds[0] == "begin" and kinds[-1] == "end"


async def test_slow_run_streams_live(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "slow.py", count_flow(6, delay=0.25))
    col = collector(client)
    run_id = (await command(client, "flowtape.run", {"uri": uri_of(flow)}))["runId"]
    arrivals: list[float] = []
    seen = 0
    while True:
        await col.wait_for("flowtape/steps", lambda p, seen=seen: p["runId"] == run_id and len(col.steps(run_id)) > seen)
        arrivals.append(time.monotonic())
        seen = len(col.steps(run_id))
        if col.of("flowtape/runFinished", run_id) or seen >= 12:
            break
    await col.finished(run_id)
    # the count's steps arrive one by one, a quarter second apart: streamed live, not at the end
    assert len(col.of("flowtape/steps", run_id)) >= 4
    progress = [v for v in client.progress_reports.get(f"flowtape-run-{run_id}", []) if v.kind == "report"]
    assert progress and "steps" in (progress[-1].message or "")


async def test_resume_marks_exactly_the_replayed_steps(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "count.py", count_flow(6))
    col = collector(client)
    first = (await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1}))["runId"]
    await col.finished(first)
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": first, "step": 4})
    done = await col.finished(resumed["runId"])
    assert done["status"] == "succeeded"
    assert read_tape(Path(resumed["runDir"]) / "tape.jsonl").header.maxWorkers == 1  # the recorded pool, the same order
    started = col.of("flowtape/runStarted", resumed["runId"])[0]
    assert started["resumedFrom"] == first and started["resumedAtStep"] == 4
    steps = col.steps(resumed["runId"])
    assert [s["replayed"] for s in steps] == [s.step <= 4 for s in tape_steps(resumed["runDir"])]
    assert [s["step"] for s in steps if s["replayed"]] == [1, 2, 3, 4]
    runs = (await request(client, "flowtape/runs", {"uri": uri_of(flow)}))["runs"]
    assert [r["runId"] for r in runs] == [resumed["runId"], first]
    assert runs[0]["resumedFrom"] == first and runs[0]["resumedAtStep"] == 4 and runs[0]["status"] == "succeeded"


async def test_rerun_nested_actor_resumes_before_its_last_firing(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "nested.py", FLOW_NESTED)
    col = collector(client)
    first = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await col.finished(first["runId"])
    tape = read_tape(Path(first["runDir"]) / "tape.jsonl")
    last = [f for f in tape.firings() if f.actor == "wrap/mid/leaf"][-1]
    assert last.within is not None
    top = next(s for s in tape.steps() if (s.actor, s.fireCount) == tuple(last.within))
    rerun = await command(client, "flowtape.rerunActor", {"runId": first["runId"], "actor": "wrap/mid/leaf"})
    done = await col.finished(rerun["runId"])
    assert done["status"] == "succeeded"
    started = col.of("flowtape/runStarted", rerun["runId"])[0]
    assert started["resumedAtStep"] == top.step - 1
    again = read_tape(Path(rerun["runDir"]) / "tape.jsonl")
    live = [f for f in again.firings() if f.actor == "wrap/mid/leaf" and not f.replayed]
    assert [f.fireCount for f in live] == [last.fireCount]
    # named by the line that creates it, as an editor's cursor does: the same rerun
    line = next(i for i, text in enumerate(FLOW_NESTED.splitlines()) if "leaf = Inc()" in text)
    by_line = await command(client, "flowtape.rerunActor", {"runId": first["runId"], "uri": uri_of(flow), "line": line})
    await col.finished(by_line["runId"])
    assert col.of("flowtape/runStarted", by_line["runId"])[0]["resumedAtStep"] == top.step - 1
    with pytest.raises(JsonRpcException, match="no actor of run .* is created on line 1 of nested.py"):
        await command(client, "flowtape.rerunActor", {"runId": first["runId"], "uri": uri_of(flow), "line": 0})
    with pytest.raises(JsonRpcException, match="name the actor to rerun"):
        await command(client, "flowtape.rerunActor", {"runId": first["runId"]})
    with pytest.raises(JsonRpcException, match="no such file.*nope.py"):
        await command(client, "flowtape.rerunActor", {"runId": first["runId"], "uri": uri_of(workspace / "nope.py"), "line": 3})


async def test_stop_ends_the_tape_stopped(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "long.py", count_flow(10_000, delay=0.02))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    await col.wait_for("flowtape/steps", lambda p: p["runId"] == run["runId"])
    stopped = await command(client, "flowtape.stop", {"runId": run["runId"]})
    assert stopped == {"runId": run["runId"], "stopped": True, "status": "stopped"}
    done = await col.finished(run["runId"])
    assert done["status"] == "stopped"
    tape, _ = verify(Path(run["runDir"]) / "tape.jsonl", warn=False)
    assert tape.end is not None and tape.end.status == "stopped"
    # stopping a finished run says so
    again = await command(client, "flowtape.stop", {"runId": run["runId"]})
    assert again["stopped"] is False and again["status"] == "stopped"


async def test_cancelling_the_progress_stops_the_run(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "long.py", count_flow(10_000, delay=0.02))
    col = collector(client)
    run_id = (await command(client, "flowtape.run", {"uri": uri_of(flow)}))["runId"]
    token = f"flowtape-run-{run_id}"
    await col.wait_for(lsp.PROGRESS, lambda p: p.token == token)
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    done = await col.finished(run_id)
    assert done["status"] == "stopped"


async def test_a_flow_that_exits_mid_run_is_reported_and_the_server_survives(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "crash.py", count_flow(10, exit_at=4))
    col = collector(client)
    # one worker, in rounds: count and double alternate, so count's 4th firing (the exit) comes
    # after steps count 1, double 1, count 2, double 2, count 3, double 3
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1})
    done = await col.finished(run["runId"])
    assert done["status"] == "failed"
    assert "exited with code 3" in done["error"]
    steps = col.steps(run["runId"])
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6]
    assert [(s["actor"], s["fireCount"]) for s in steps] == [(a, i) for i in (1, 2, 3) for a in ("count", "double")]
    tape, _ = verify(Path(run["runDir"]) / "tape.jsonl", warn=False)  # sealed: it verifies
    assert tape.end is not None and tape.end.status == "failed"
    assert cli_main(["verify", run["runDir"]]) == 0  # and run.json tells the same end
    runs = (await request(client, "flowtape/runs", {}))["runs"]
    assert runs[0]["runId"] == run["runId"] and runs[0]["status"] == "failed"


async def test_a_run_started_in_a_terminal_is_streamed(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "term.py", count_flow(5, delay=0.1))
    col = collector(client)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", "from-terminal",
         "--runs-dir", str(workspace / ".flowtape" / "runs")],
        cwd=workspace, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        started = await col.wait_for("flowtape/runStarted", lambda p: p["runId"] == "from-terminal")
        assert started["uri"] == uri_of(flow)
        done = await col.finished("from-terminal")
    finally:
        proc.wait(10)
    assert done["status"] == "succeeded"
    streamed = col.steps("from-terminal")
    assert [s["journalSeq"] for s in streamed] == [s.journalSeq for s in tape_steps(str(workspace / ".flowtape/runs/from-terminal"))]
    assert len(col.of("flowtape/steps", "from-terminal")) >= 2  # live, not all at the end


async def test_a_flow_that_cannot_start_still_finishes(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "nowf.py", "x = 1\n")
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    done = await col.finished(run["runId"])
    assert done["status"] == "failed" and "defines no @workflow" in done["error"]
    assert col.of("flowtape/runStarted", run["runId"])



async def test_a_tape_copied_in_cut_short_is_reported_not_written_to(client: LanguageClient, workspace: Path) -> None:
    """A run directory that appears with a finished run.json but a tape without its end record
    (a copy cut short) is no run that died here: the server says so and leaves the tape alone."""
    import shutil

    flow = write_flow(workspace, "count.py", count_flow(4))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    await col.finished(run["runId"])
    source = workspace / ".flowtape" / "runs" / run["runId"]
    staged = workspace / "staged"
    shutil.copytree(source, staged)
    tape = staged / "tape.jsonl"
    tape.write_bytes(b"".join(line + b"\n" for line in tape.read_bytes().splitlines()[:-1]))  # the end cut off
    cut = tape.read_bytes()
    staged.rename(workspace / ".flowtape" / "runs" / "copied-in")
    done = await col.finished("copied-in")
    assert done["status"] == "failed" and "cut short" in done["error"]
    assert (workspace / ".flowtape" / "runs" / "copied-in" / "tape.jsonl").read_bytes() == cut


async def test_a_run_found_on_disk_is_answered_as_far_as_its_tape_is_written(client: LanguageClient, workspace: Path) -> None:
    """A whole run that appears in the runs directory (copied in, or run from a terminal and ended
    before the directory's next poll) is followed like a live one; a request about it, once it is
    listed, answers what its tape holds, not what its follower has read so far."""
    import shutil  # noqa: I001

    flow = write_flow(workspace, "count.py", count_flow(25_000))  # (a tape of more than one read chunk)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    await col.finished(run["runId"], timeout=120)
    runs = workspace / ".flowtape" / "runs"
    source = runs / run["runId"]
    steps = len(tape_steps(str(source)))
    staged = workspace / "staged"
    shutil.copytree(source, staged)
    staged.rename(runs / "copied-in")  # (whole at once)
    deadline = time.monotonic() + 30
    while "copied-in" not in {r["runId"] for r in (await request(client, "flowtape/runs", {}))["runs"]}:
        assert time.monotonic() < deadline, "the copied run was never found"
        await asyncio.sleep(0.01)
    page = await request(client, "flowtape/getSteps", {"runId": "copied-in", "from": steps, "limit": 1})
    assert [s["step"] for s in page["steps"]] == [steps]  # its last step, though its follower had read less when asked
    first = await request(client, "flowtape/getSteps", {"runId": "copied-in", "from": 1, "limit": 3})
    assert [s["step"] for s in first["steps"]] == [1, 2, 3]


FLOW_BIG_TOKEN = '''\
from flowtape import Port, connect, task, workflow


@task
class Source:
    class Ports:
        Out = Port[str](direction="out")

    i: int = 0

    def action(self):
        if self.i >= 20:
            return None
        self.i += 1
        return "x" * (5_000_000 if self.i == 2 else 10)


@task
class Size:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[int](direction="out")

    def action(self, text):
        return len(text)


@workflow
def main():
    src = Source()
    size = Size()
    connect(src.Out, size.In)
    connect(size.Out, "Sizes")
'''


async def test_a_tape_line_longer_than_a_read_chunk_is_followed_whole(client: LanguageClient, workspace: Path) -> None:
    """A 5 MB token is one 5 MB tape line: the server reads on to its end, and never takes the
    tape for a dead run's (which it would cut back and seal as failed)."""
    flow = write_flow(workspace, "big.py", FLOW_BIG_TOKEN)
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    done = await col.finished(run["runId"], timeout=60)
    assert done["status"] == "succeeded", done
    assert done["outputs"]["Sizes"][1] == 5_000_000
    tape = Path(run["runDir"]) / "tape.jsonl"
    assert tape.stat().st_size > 5_000_000
    verify(tape)
    recorded = tape_steps(run["runDir"])
    assert len(col.steps(run["runId"])) == len(recorded) == 40
    page = await request(client, "flowtape/getSteps", {"runId": run["runId"], "from": 1, "limit": 100})
    assert [s["step"] for s in page["steps"]] == list(range(1, 41))


FLOW_GROWING = GEN_FLOW.format(body='''
@task
class Newest:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    seen: list = []

    def action(self, x):
        self.seen.insert(0, x)
        return len(self.seen)


@workflow
def main():
    newest = Newest()
    connect(Gen(n=200).Out, newest.In)
    connect(newest.Out, "Count")
''')


async def test_a_state_written_as_edits_is_shown_and_resumed_whole(client: LanguageClient, workspace: Path) -> None:
    """A state that grows at every firing is on the tape as edits of the last one (docs/tape-format.md,
    `stateEdit`); the server shows it whole at any step and resumes from it."""
    flow = write_flow(workspace, "growing.py", FLOW_GROWING)
    col = collector(client)
    started = await command(client, "flowtape.run", {"uri": uri_of(flow), "maxWorkers": 1})
    done = await col.finished(started["runId"])
    assert done["status"] == "succeeded"
    assert b'"stateEdit":' in (Path(started["runDir"]) / "tape.jsonl").read_bytes()
    for k in (150, 200):  # step 2k is newest's k-th firing
        detail = await request(client, "flowtape/stepDetail", {"runId": started["runId"], "step": 2 * k})
        state = next(a["state"] for a in detail["states"] if a["actor"] == "newest")
        assert state.startswith(f"{{'seen': [{k}, {k - 1}, {k - 2}, "), state
    resumed = await command(client, "flowtape.resumeAtStep", {"runId": started["runId"], "step": 301})
    assert (await col.finished(resumed["runId"]))["status"] == "succeeded"
    _, rebuild = verify(Path(resumed["runDir"]) / "tape.jsonl")
    assert rebuild.states["newest"] == verify(Path(started["runDir"]) / "tape.jsonl")[1].states["newest"]


async def test_a_run_started_without_a_workflow_is_listed_by_the_one_it_runs(client: LanguageClient, workspace: Path) -> None:
    flow = write_flow(workspace, "boom.py", count_flow(3) + "\nraise RuntimeError('the flow cannot load')\n")
    run = await command(client, "flowtape.run", {"uri": uri_of(flow)})  # no workflow: `main`, the file's
    listed = [r for r in (await request(client, "flowtape/runs", {}))["runs"] if r["runId"] == run["runId"]]
    assert listed[0]["workflow"] == "main"
    assert (await collector(client).finished(run["runId"]))["status"] == "failed"  # before it had a header
    listed = [r for r in (await request(client, "flowtape/runs", {}))["runs"] if r["runId"] == run["runId"]]
    assert listed[0]["workflow"] == "main"


FLOW_LOOP_FAIL = '''\
from flowtape import Port, connect, loop, task, workflow


@task
class Pass:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x


@task
class Picky:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        if x == 2:
            raise ValueError("two is not allowed")
        return x * 10


@workflow
def main():
    lp = loop([1, 2, 3])
    with lp:
        p = Pass()
        picky = Picky()
        connect(lp.item, p.In)
        connect(p.Out, picky.In)
        connect(picky.Out, "Out")
'''


@pytest.mark.parametrize("how", ["rerunActor", "resumeAtStep"])
async def test_rerunning_an_actor_that_failed_in_a_loop_body_replays_what_its_item_recorded(
    client: LanguageClient, workspace: Path, how: str
) -> None:
    """The failed firing reruns, and nothing the tape holds (the item's `p` firing) runs again: as
    `flowtape run --resume-from` without `--at-step`, not at the last step, which runs the item anew."""
    flow = write_flow(workspace, "loopfail.py", FLOW_LOOP_FAIL)
    col = collector(client)
    first = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    done = await col.finished(first["runId"])
    assert done["status"] == "failed" and done["steps"] == 1
    flow.write_text(FLOW_LOOP_FAIL.replace("if x == 2:", "if x == 99:"))  # the fix
    params = {"runId": first["runId"], "actor": "picky"} if how == "rerunActor" else {"runId": first["runId"]}
    again = await command(client, f"flowtape.{how}", params)
    redone = await col.finished(again["runId"])
    assert redone["status"] == "succeeded" and redone["outputs"] == {"Out": [10, 20, 30]}
    assert col.of("flowtape/runStarted", again["runId"])[0]["resumedAtStep"] == 1
    tape = read_tape(Path(again["runDir"]) / "tape.jsonl")
    assert {(f.actor, f.fireCount) for f in tape.firings() if f.replayed} == {("lp", 1), ("p", 1), ("picky", 1), ("p", 2)}
    verify(Path(again["runDir"]) / "tape.jsonl")


async def test_rerunning_an_actor_whose_last_firing_is_in_the_item_a_run_failed_in(client: LanguageClient, workspace: Path) -> None:
    """`p` fired for item 2, whose step the failure left unwritten: rerunning it resumes at the last
    step, so the item runs again from its start and `p` fires again; item 1 still replays."""
    flow = write_flow(workspace, "loopfail.py", FLOW_LOOP_FAIL)
    col = collector(client)
    first = await command(client, "flowtape.run", {"uri": uri_of(flow)})
    assert (await col.finished(first["runId"]))["status"] == "failed"
    flow.write_text(FLOW_LOOP_FAIL.replace("if x == 2:", "if x == 99:"))
    again = await command(client, "flowtape.rerunActor", {"runId": first["runId"], "actor": "p"})
    assert (await col.finished(again["runId"]))["status"] == "succeeded"
    assert col.of("flowtape/runStarted", again["runId"])[0]["resumedAtStep"] == 1
    tape = read_tape(Path(again["runDir"]) / "tape.jsonl")
    assert {(f.actor, f.fireCount) for f in tape.firings() if f.replayed} == {("lp", 1), ("p", 1), ("picky", 1)}
