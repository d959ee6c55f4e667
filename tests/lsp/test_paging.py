"""Paging the steps of a finished run the server has not read yet: the first page comes from a
partial read, and the total is the run's own count, not what was read so far."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from flowtape.tape import Checkpoint, decode_record, read_tape
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from .conftest import count_flow, request, write_flow


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    flow = write_flow(root, "count.py", count_flow(3000))
    subprocess.run(
        [sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", "big", "--max-workers", "1",
         "--runs-dir", str(root / ".flowtape" / "runs")],
        cwd=root, check=True, capture_output=True,
    )
    subprocess.run(  # the same run resumed at its middle step: its first 3000 steps are replayed
        [sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", "again", "--max-workers", "1",
         "--runs-dir", str(root / ".flowtape" / "runs"), "--resume-from", "big", "--at-step", "3000"],
        cwd=root, check=True, capture_output=True,
    )
    return root


async def test_pages_of_a_finished_run_the_server_has_not_read(client: LanguageClient, workspace: Path) -> None:
    recorded = read_tape(workspace / ".flowtape" / "runs" / "big" / "tape.jsonl").steps()
    assert len(recorded) == 6000
    first = await request(client, "flowtape/getSteps", {"runId": "big", "from": 1, "limit": 10})
    assert first["total"] == 6000 and first["live"] is False
    assert [(s["step"], s["actor"], s["journalSeq"]) for s in first["steps"]] == [
        (s.step, s.actor, s.journalSeq) for s in recorded[:10]
    ]
    last = await request(client, "flowtape/getSteps", {"runId": "big", "from": 5991, "limit": 500})
    assert last["total"] == 6000 and [s["step"] for s in last["steps"]] == list(range(5991, 6001))
    listed = await request(client, "flowtape/runs", {})
    assert [r["steps"] for r in listed["runs"] if r["runId"] == "big"] == [6000]
    with pytest.raises(Exception, match="out of range"):
        await request(client, "flowtape/getSteps", {"runId": "big", "from": 6002, "limit": 5})



async def test_any_page_of_an_unread_run_matches_its_tape(client: LanguageClient, workspace: Path) -> None:
    """Pages beyond what the server has read are found by bisecting the tape: each matches it."""
    recorded = read_tape(workspace / ".flowtape" / "runs" / "again" / "tape.jsonl").steps()
    assert sum(s.replayed for s in recorded) == 3000
    for first in (5991, 2995, 4000, 1, 6000):
        page = await request(client, "flowtape/getSteps", {"runId": "again", "from": first, "limit": 10})
        assert page["total"] == 6000
        expected = recorded[first - 1 : first + 9]
        got = [(s["step"], s["actor"], s["actorKind"], s["fireCount"], s["journalSeq"], s["replayed"]) for s in page["steps"]]
        assert got == [(s.step, s.actor, s.kind, s.fireCount, s.journalSeq, s.replayed) for s in expected], first


async def test_a_middle_step_of_an_unread_run_is_described_from_its_checkpoints(
    client: LanguageClient, workspace: Path
) -> None:
    """Before the server reads the tape, a step's detail is rebuilt from the checkpoints before it;
    it says what the detail from the full index says."""
    tape = read_tape(workspace / ".flowtape" / "runs" / "again" / "tape.jsonl")
    assert sum(isinstance(r, Checkpoint) for r in tape.records()) >= 4
    picks = [5999, 4097, 3001, 2500, 1025, 1024, 1023, 1]  # step 1, already read, reads the rest
    early = [await request(client, "flowtape/stepDetail", {"runId": "again", "step": n}) for n in picks]
    await request(client, "flowtape/getSteps", {"runId": "again", "from": 1, "limit": 10000})  # read it all
    late = [await request(client, "flowtape/stepDetail", {"runId": "again", "step": n}) for n in picks]
    assert early == late
    assert early[3]["step"] == 2500 and early[3]["queues"]


def test_checkpoints_rebuild_a_step_as_the_index_does(workspace: Path) -> None:
    from flowtape.seek import at_step_from_checkpoints
    from flowtape_lsp.tapeindex import TapeIndex

    for run_id in ("big", "again"):
        index = TapeIndex(workspace / ".flowtape" / "runs" / run_id)
        index.ingest_all()
        assert index.header is not None and index.steps == 6000
        # as a stepper asks: on from the last step described, the same one again, one back
        for n in (1, 1023, 1024, 1025, 2048, 2500, 2501, 2501, 2502, 2499, 3001, 4097, 5999, 6000):
            want, got = index.at_step(n), at_step_from_checkpoints(index.path, index.header, n)
            assert got is not None, (run_id, n)
            assert (got.step.step, got.step.actor, got.step.fireCount, got.step.replayed) == (
                want.step.step, want.step.actor, want.step.fireCount, want.step.replayed)
            assert [[bytes(t) for t in q] for q in got.rebuild.queues] == [[bytes(t) for t in q] for q in want.rebuild.queues]
            assert got.rebuild.states == want.rebuild.states and got.rebuild.fire_counts == want.rebuild.fire_counts
            assert [(f.seq, [(i, [bytes(t) for t in ts]) for i, ts in took]) for f, took in got.firings] == [
                (f.seq, [(i, [bytes(t) for t in ts]) for i, ts in took]) for f, took in want.firings]
            for q in got.rebuild.queues:  # what a caller does with its answer cannot change the next one
                q.clear()


@pytest.mark.parametrize("chunk", [97, 4096, 8 << 20])
def test_the_checkpoints_of_a_tape_are_found_whatever_the_reads(workspace: Path, monkeypatch, chunk: int) -> None:
    from flowtape import seek as stepsearch

    monkeypatch.setattr(stepsearch, "SCAN_CHUNK", chunk)
    monkeypatch.setattr(stepsearch, "_known", {})
    path = workspace / ".flowtape" / "runs" / "again" / "tape.jsonl"
    want, offset = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        if line.startswith(b'{"t":"checkpoint"'):
            want.append(stepsearch.CheckpointAt(decode_record(line.rstrip(b"\n")).step, offset, offset + len(line)))
        offset += len(line)
    assert len(want) >= 4
    with open(path, "rb") as fh:
        assert stepsearch.checkpoints_of(path, fh) == want


async def test_a_tape_cut_to_its_header_is_not_taken_for_the_run_its_run_json_tells(client: LanguageClient, workspace: Path) -> None:
    from .conftest import collector, command, uri_of

    flow = write_flow(workspace, "count.py", count_flow(5))
    col = collector(client)
    run = await command(client, "flowtape.run", {"uri": uri_of(flow), "workflow": "main"})
    await col.finished(run["runId"])
    tape = workspace / ".flowtape" / "runs" / run["runId"] / "tape.jsonl"
    (workspace / "cut").mkdir()
    cut = workspace / "cut" / "tape.jsonl"
    cut.write_bytes(tape.read_bytes().split(b"\n", 1)[0] + b"\n")  # run.json (copied below) says 10 steps
    (workspace / "cut" / "run.json").write_bytes((tape.parent / "run.json").read_bytes())
    (workspace / "cut").rename(workspace / ".flowtape" / "runs" / "cut")
    await col.finished("cut")
    with pytest.raises(JsonRpcException) as info:
        await request(client, "flowtape/getSteps", {"runId": "cut", "from": 1, "limit": 5})
    assert info.value.code == -32003 and "says the run succeeded after 10 steps (the tape holds 0): it was cut short" in info.value.message
