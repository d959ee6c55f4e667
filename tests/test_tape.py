"""What a tape holds: the header, a firing record per completed firing (nested ones too), a step
record per step, the end record; and run.json beside it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import flowtape
import pytest
from flowtape.digests import digest
from flowtape.loader import load_module
from flowtape.rundir import read_summary
from flowtape.runner import execute
from flowtape.tape import FORMAT_VERSION, Diverged, End, Firing, Header, Step, encode_record, read_tape
from flowtape.values import encode
from flowtape.verify import verify

FLOWS = Path(__file__).parent / "flows"


def load(name: str):
    return load_module(FLOWS / f"{name}.py")


KIND = {Header: "header", Firing: "firing", Step: "step", Diverged: "diverged", End: "end"}


def records(run_dir: Path) -> list[dict]:
    """The tape's records as JSON data (as read: what a step leaves out is filled in), `t` = kind."""
    out = []
    for record in read_tape(run_dir / "tape.jsonl").records():
        data = json.loads(encode_record(record))
        data["t"] = KIND[type(record)]
        out.append(data)
    return out


@pytest.fixture
def chain():
    m = load("chain")
    m.CALLS.clear()
    m.BROKEN, m.SKEW = False, 0
    yield m
    m.BROKEN, m.SKEW = False, 0


@pytest.fixture
def branches():
    m = load("branches")
    m.CALLS.clear()
    m.LEFT_SKEW, m.VERDICT = 0, "ok"
    yield m
    m.LEFT_SKEW, m.VERDICT = 0, "ok"


def test_header_comes_first_and_describes_the_run(chain, tmp_path):
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path, run_id="first")
    recs = records(result.run_dir)
    head = recs[0]
    assert head["t"] == "header"
    assert head["version"] == FORMAT_VERSION == 8
    assert head["runId"] == "first" == result.run_id
    assert head["workflow"] == "main"
    assert head["flowFile"].endswith("chain.py")
    assert head["graph"].startswith("blake2b:")
    assert head["inputs"] == {}
    assert head["flowtapeVersion"] == flowtape.__version__
    assert "resumedFrom" not in head and "resumedAtStep" not in head
    assert [a["path"] for a in head["actors"]] == ["source", "double", "add", "total"]
    assert "source.Out->double.In" in head["queues"]
    assert sum(1 for r in recs if r["t"] == "header") == 1

    again = execute(chain.main, max_workers=1, runs_dir=tmp_path, run_id="again", resume_from=result.run_dir, at_step=3)
    head2 = records(again.run_dir)[0]
    assert head2["resumedFrom"] == "first"
    assert head2["resumedAtStep"] == 3
    assert head2["graph"] == head["graph"]
    assert head2["inputs"] == head["inputs"]


def test_inputs_are_in_the_header(chain, tmp_path):
    result = execute(chain.seeded, {"In": 20}, max_workers=1, runs_dir=tmp_path)
    assert result.outputs == {"Out": [41]}
    head = records(result.run_dir)[0]
    assert head["inputs"] == {"In": 20}


def test_a_firing_record_for_every_completed_firing(chain, tmp_path):
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    assert result.outputs == {"Out": [5, 12, 21, 32, 45]}
    tape = read_tape(result.run_dir / "tape.jsonl")
    firings = tape.firings()
    assert [f.seq for f in firings] == list(range(1, len(firings) + 1))
    assert len(firings) == result.firings == sum(chain.CALLS.values()) == 20
    per_actor: dict[str, list[int]] = {}
    for f in firings:
        per_actor.setdefault(f.actor, []).append(f.fireCount)
        assert not f.replayed and f.notReplayable is None and f.within is None
    assert per_actor == {a: [1, 2, 3, 4, 5] for a in ("source", "double", "add", "total")}

    # consumed: (queue index, count, digest of the tokens), in FIFO order of what was produced
    queues = tape.header.queues
    fifo: dict[int, list[bytes]] = {}
    for f in firings:
        for index, count, dig in f.consumed:
            taken, fifo[index] = fifo[index][:count], fifo[index][count:]
            assert count == 1 and dig == digest(taken)
        for index, tokens in f.produced:
            fifo.setdefault(index, []).extend(bytes(t) for t in tokens)
    by_actor = {f.actor: f for f in firings if f.fireCount == 2}
    assert [(queues[i], json.loads(bytes(t))) for i, toks in by_actor["double"].produced for t in toks] == [
        ("double.Out->add.In", 4)
    ]
    assert by_actor["add"].consumed == [(queues.index("double.Out->add.In"), 1, digest([encode(4)]))]
    assert [(queues[i], [json.loads(bytes(t)) for t in toks]) for i, toks in by_actor["total"].produced] == [
        ("$.Out", [12])
    ]


def test_state_is_recorded_only_when_it_changed(chain, tmp_path):
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    recs = [r for r in records(result.run_dir) if r["t"] == "firing"]
    totals = [r["state"] for r in recs if r["actor"] == "total"]
    assert totals == [{"total": t} for t in (5, 12, 21, 32, 45)]
    assert [r["state"] for r in recs if r["actor"] == "source"] == [{"i": i} for i in range(1, 6)]
    # Double has no state at all: none of its firings carries one
    assert all("state" not in r for r in recs if r["actor"] == "double")


def test_state_unchanged_by_a_firing_is_not_rewritten(tmp_path, branches):
    result = execute(branches.fanout, max_workers=1, runs_dir=tmp_path)
    recs = [r for r in records(result.run_dir) if r["t"] == "firing" and r["actor"] == "left_sink"]
    assert [r["state"]["kept"] for r in recs] == [[10], [10, 20], [10, 20, 30], [10, 20, 30, 40]]


def test_steps_one_per_top_level_firing_with_journal_seq(chain, tmp_path):
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    last_seq = 0
    steps = []
    for r in records(result.run_dir):
        if r["t"] == "firing":
            last_seq = r["seq"]
        elif r["t"] == "step":
            assert r["journalSeq"] == last_seq
            steps.append(r)
    assert [s["step"] for s in steps] == list(range(1, 21))
    assert result.steps == 20
    assert all(s["kind"] == "task" and not s.get("replayed") for s in steps)
    # one worker, in rounds: each number goes down the whole chain before the source emits the next
    assert [(s["actor"], s["fireCount"]) for s in steps] == [
        (a, i) for i in range(1, 6) for a in ("source", "double", "add", "total")
    ]


@pytest.mark.parametrize("workers", [1, 4])
def test_nested_firings_carry_path_and_within(branches, tmp_path, workers):
    result = execute(branches.looped, max_workers=workers, runs_dir=tmp_path)
    assert result.status == "succeeded"
    assert result.outputs == {"Squares": [4, 9, 16], "Verdicts": ["ok"] * 3, "Done": [1]}
    recs = records(result.run_dir)
    firings = [r for r in recs if r["t"] == "firing"]
    steps = [r for r in recs if r["t"] == "step"]
    # one step per loop item, one for the loop's end, one for `done`
    assert [(s["actor"], s["kind"], s["fireCount"]) for s in steps] == [
        ("lp", "loop", 1), ("lp", "loop", 2), ("lp", "loop", 3), ("lp", "loop", 4), ("done", "task", 1)
    ]
    nested = [(f["actor"], f["fireCount"], tuple(f["within"])) for f in firings if "within" in f]
    assert ("sub/inc", 2, ("lp", 2)) in nested and ("sub/square", 3, ("lp", 3)) in nested
    assert ("sub", 1, ("lp", 1)) in nested and ("reviewer", 3, ("lp", 3)) in nested
    assert {f["actor"] for f in firings} == {"lp", "sub", "sub/inc", "sub/square", "reviewer", "done"}
    last_seq = 0
    for r in recs:
        if r["t"] == "firing":
            last_seq = r["seq"]
        elif r["t"] == "step":
            assert r["journalSeq"] == last_seq
    # the agent's firings carry the chat messages they added (a user and an assistant message)
    chats = [f["chat"] for f in firings if f["actor"] == "reviewer"]
    assert len(chats) == 3
    for chat, square in zip(chats, (4, 9, 16), strict=True):
        assert [m["role"] for m in chat] == ["user", "assistant"]
        assert "Is this number fine?" in chat[0]["content"] and str(square) in chat[0]["content"]
    verify(result.run_dir / "tape.jsonl")


def test_a_top_level_nested_workflow_is_one_step_per_firing(branches, tmp_path):
    result = execute(branches.nested_top, max_workers=1, runs_dir=tmp_path)
    assert result.outputs == {"Out": [4, 9, 16]}
    recs = records(result.run_dir)
    steps = [(r["actor"], r["kind"], r["fireCount"]) for r in recs if r["t"] == "step"]
    assert steps == [(a, k, i) for i in (1, 2, 3) for a, k in (("numbers", "task"), ("sub", "workflow"))]
    inner = [(r["actor"], tuple(r["within"])) for r in recs if r["t"] == "firing" and r.get("within")]
    assert inner == [(a, ("sub", i)) for i in (1, 2, 3) for a in ("sub/inc", "sub/square")]


def test_an_if_is_one_step_per_firing(branches, tmp_path):
    result = execute(branches.gated, max_workers=1, runs_dir=tmp_path)
    assert result.outputs == {"Tags": ["1 is odd", "3 is odd", "2 is even", "4 is even"]}
    recs = records(result.run_dir)
    steps = [(r["actor"], r["kind"], r["fireCount"]) for r in recs if r["t"] == "step"]
    assert steps[8:] == [("c", "if", i) for i in (1, 2, 3, 4)]
    inner = [(r["actor"], r["fireCount"], tuple(r["within"])) for r in recs if r["t"] == "firing" and r.get("within")]
    # the if's first firing (cond False) runs the else branch to quiescence: both odd numbers
    assert inner == [("odd", 1, ("c", 1)), ("odd", 2, ("c", 1)), ("even", 1, ("c", 2)), ("even", 2, ("c", 2))]
    verify(result.run_dir / "tape.jsonl")


def test_end_record_of_a_good_run(chain, tmp_path):
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    end = records(result.run_dir)[-1]
    assert end["t"] == "end"
    assert end["status"] == "succeeded"
    assert end["outputs"] == {"Out": [5, 12, 21, 32, 45]}
    assert end["steps"] == 20 and end["firings"] == 20
    assert "error" not in end and "replayStopped" not in end


def test_end_record_of_a_failed_run_names_the_error(chain, tmp_path):
    chain.BROKEN = True
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path)
    assert result.status == "failed"
    end = records(result.run_dir)[-1]
    assert end["t"] == "end" and end["status"] == "failed"
    assert end["error"]["actor"] == "add" and end["error"]["fireCount"] == 3
    assert "power cut" in end["error"]["message"]
    # one worker, in rounds: the first two numbers went all the way to Out before add failed on the third
    assert end["outputs"] == {"Out": [5, 12]}
    # the failed firing is not on the tape; the ones before it are
    adds = [r for r in records(result.run_dir) if r["t"] == "firing" and r["actor"] == "add"]
    assert [r["fireCount"] for r in adds] == [1, 2]
    verify(result.run_dir / "tape.jsonl")
    assert read_summary(result.run_dir).status == "failed"


def test_end_record_lists_replay_stopped(branches, tmp_path):
    clean = execute(branches.diverge, max_workers=1, runs_dir=tmp_path)
    branches.LEFT_SKEW = 1
    resumed = execute(branches.diverge, max_workers=1, runs_dir=tmp_path, resume_from=clean.run_dir)
    end = records(resumed.run_dir)[-1]
    assert [d["actor"] for d in end["replayStopped"]] == ["moody", "left_sink"]
    assert end["replayStopped"][0]["reason"].startswith("notReplayable")
    assert end["replayStopped"][1]["reason"] == "inputs differ"
    diverged = [r for r in records(resumed.run_dir) if r["t"] == "diverged"]
    assert [d["actor"] for d in diverged] == ["moody", "left_sink"]
    summary = read_summary(resumed.run_dir)
    assert [d.actor for d in summary.replayStopped] == ["moody", "left_sink"]
    verify(resumed.run_dir / "tape.jsonl")


def test_not_replayable_state_is_named_and_the_run_goes_on(chain, tmp_path):
    result = execute(chain.locked, max_workers=1, runs_dir=tmp_path)
    assert result.status == "succeeded"
    assert result.outputs == {"Out": [4, 8, 12, 16]}
    locky = [r for r in records(result.run_dir) if r["t"] == "firing" and r["actor"] == "locky"]
    assert len(locky) == 4
    for r in locky:
        assert "_guard" in r["notReplayable"] and "locky" in r["notReplayable"]
        assert "Lock" in r["notReplayable"]
    others = [r for r in records(result.run_dir) if r["t"] == "firing" and r["actor"] != "locky"]
    assert all("notReplayable" not in r for r in others)
    verify(result.run_dir / "tape.jsonl")


def test_run_json_is_rewritten_atomically_with_the_status(chain, tmp_path):
    seen = {}

    def on_start(run_id, run_dir):
        summary = read_summary(run_dir)
        seen["status"] = summary.status
        seen["pid"] = summary.pid

    result = execute(chain.main, max_workers=1, runs_dir=tmp_path, run_id="r1", on_start=on_start)
    assert seen["status"] == "running" and seen["pid"] is not None
    summary = read_summary(result.run_dir)
    assert summary.status == "succeeded"
    assert summary.id == "r1" and summary.workflow == "main"
    assert summary.steps == 20 and summary.firings == 20
    assert summary.pid is None
    assert json.loads(bytes(summary.outputs)) == {"Out": [5, 12, 21, 32, 45]}
    assert sorted(p.name for p in result.run_dir.iterdir() if p.is_file()) == ["run.json", "tape.jsonl"]


def test_tape_records_decode_as_their_structs(chain, tmp_path):
    result = execute(chain.main, max_workers=4, runs_dir=tmp_path)
    tape = read_tape(result.run_dir / "tape.jsonl")
    kinds = [type(line.record) for line in tape.lines]
    assert kinds[0] is Header and kinds[-1] is End
    assert set(kinds[1:-1]) == {Firing, Step}
    assert tape.end.status == "succeeded"
    assert len(tape.steps()) == 20 and not tape.torn


def test_no_tape_run_writes_nothing(chain, tmp_path):
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path, tape=False)
    assert result.run_dir is None and result.outputs == {"Out": [5, 12, 21, 32, 45]}
    assert not any(tmp_path.iterdir())


def test_a_durable_run_writes_the_same_tape(chain, tmp_path):
    result = execute(chain.main, max_workers=1, runs_dir=tmp_path, durable=True)
    assert result.outputs == {"Out": [5, 12, 21, 32, 45]}
    tape, rebuild = verify(result.run_dir / "tape.jsonl")
    assert rebuild.ended.status == "succeeded" and rebuild.seq == 20


@pytest.mark.parametrize("workers", [1, 3])
def test_a_full_disk_fails_the_run_with_the_reason_and_keeps_what_was_written(chain, tmp_path, monkeypatch, capsys, workers):
    import errno
    import os
    import types

    from flowtape import tapefile

    calls = {"n": 0}

    def fill_up(fd: int, offset: int, length: int) -> None:  # the disk fills up at the tape's 3rd window
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        os.posix_fallocate(fd, offset, length)

    # (the tape file's own `os`, whose block allocation is the full disk's: every other module's
    # stays as it is), and windows of a page, so that a few firings fill one
    monkeypatch.setattr(tapefile, "os", types.SimpleNamespace(**{**vars(os), "posix_fallocate": fill_up}))
    monkeypatch.setattr(tapefile, "WINDOW", 1)
    monkeypatch.setenv("FT_N", "200")
    result = execute(chain.main, max_workers=workers, runs_dir=tmp_path, run_id="full")
    assert result.status == "failed" and result.error is not None
    assert "Flowtape could not go on: OSError" in result.error.message and "No space left" in result.error.message
    summary = read_summary(tmp_path / "full")
    assert summary is not None and summary.status == "failed" and "No space left" in summary.error.message
    tape, rebuild = verify(tmp_path / "full" / "tape.jsonl")  # what was written reads as a killed run's
    assert tape.end is None and rebuild.step >= 1
    assert "Traceback" not in capsys.readouterr().err


def test_once_the_tape_cannot_grow_no_later_line_is_stored(tmp_path, monkeypatch):
    """A line that does not fit the window, when the disk is full, fails; a shorter one after it
    (another worker's) would still fit in what is left, and would leave a gap in the tape: it is
    refused too, and so is everything after, disk freed or not."""
    import errno
    import os
    import types

    from flowtape import tapefile

    full = {"now": False}

    def fallocate(fd: int, offset: int, length: int) -> None:
        if full["now"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        os.posix_fallocate(fd, offset, length)

    monkeypatch.setattr(tapefile, "os", types.SimpleNamespace(**{**vars(os), "posix_fallocate": fallocate}))
    monkeypatch.setattr(tapefile, "WINDOW", 1)  # (a window of one page)
    path = tmp_path / "tape.jsonl"
    tape = tapefile.TapeFile(path)
    tape.append(b"x" * 4000 + b"\n")
    full["now"] = True
    with pytest.raises(OSError, match="No space left"):
        tape.append(b"y" * 200 + b"\n")  # (96 bytes are left in the page)
    for line in (b"short\n", b"z" * 300 + b"\n"):
        with pytest.raises(OSError, match="could not grow"):
            tape.append(line)
    full["now"] = False
    with pytest.raises(OSError, match="could not grow"):
        tape.block(b"block\n")
    tape.close()
    assert path.read_bytes() == b"x" * 4000 + b"\n"


def test_a_step_is_shown_with_its_own_firings_only(tmp_path):
    """With several workers a nested workflow under way writes its inner firings while other
    actors' steps are written: a step's detail lists the firings of its own top-level firing."""
    from flowtape.seek import walk_to_step
    from flowtape.tape import ActorInfo, Firing, Header, Step, graph_fingerprint
    from flowtape.verify import Rebuild
    from msgspec import Raw

    actors = [ActorInfo("src", "task", "Src", "f.py", 1), ActorInfo("sub", "workflow", "inner", "f.py", 2),
              ActorInfo("sub/leaf", "task", "Leaf", "f.py", 3)]
    queues = ["$.Out"]
    header = Header(version=4, runId="r", workflow="main", flowFile="f.py", graph=graph_fingerprint(actors, queues),
                    actors=actors, queues=queues, inputs=Raw(b"{}"), flowtapeVersion="x", startedAt="t", maxWorkers=4)
    records = [
        Firing(seq=1, actor="sub", fireCount=1),
        Firing(seq=2, actor="src", fireCount=1),
        Step(step=1, actor="src", fireCount=1, journalSeq=2),
        Firing(seq=3, actor="sub/leaf", fireCount=1, within=("sub", 1)),
        Step(step=2, actor="sub", fireCount=1, journalSeq=3),
    ]
    first = walk_to_step(records, Rebuild(header, full_checks=False), 1)
    assert first is not None and [(f.actor, f.fireCount) for f, _ in first.firings] == [("src", 1)]
    second = walk_to_step(records, Rebuild(header, full_checks=False), 2)
    assert second is not None and [(f.actor, f.fireCount) for f, _ in second.firings] == [("sub", 1), ("sub/leaf", 1)]


@pytest.mark.parametrize("plant", ["group-readable", "symlink", "fifo", "short", "another-owner"])
def test_a_trust_key_that_is_not_the_users_own_secret_is_refused(plant, tmp_path, monkeypatch, capsys):
    """A pre-existing key someone else could read, swap or name is not used: nothing is trusted."""
    from flowtape import trust

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(trust, "_key_read", False)
    monkeypatch.setattr(trust, "_key", None)
    key = tmp_path / "cache" / "flowtape" / "tape-key"
    key.parent.mkdir(parents=True)
    if plant == "group-readable":
        key.write_bytes(os.urandom(32))
        key.chmod(0o640)
    elif plant == "symlink":
        other = tmp_path / "theirs"
        other.write_bytes(os.urandom(32))
        other.chmod(0o600)
        key.symlink_to(other)
    elif plant == "fifo":
        os.mkfifo(key, 0o600)
    elif plant == "another-owner":
        if os.getuid() != 0:
            pytest.skip("giving a file to another user takes root")
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
        os.chown(key, 65534, -1)
    else:
        key.write_bytes(b"abc")
        key.chmod(0o600)
    assert trust.key() is None
    assert "the trust key" in capsys.readouterr().err


def test_the_trust_key_is_made_private_and_used(tmp_path, monkeypatch):
    from flowtape import trust

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(trust, "_key_read", False)
    monkeypatch.setattr(trust, "_key", None)
    made = trust.key()
    key = tmp_path / "cache" / "flowtape" / "tape-key"
    assert made is not None and len(made) == 32 and key.stat().st_mode & 0o777 == 0o600
    monkeypatch.setattr(trust, "_key_read", False)
    assert trust.key() == made
