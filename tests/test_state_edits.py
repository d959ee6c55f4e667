"""A state that changed a little is written as an edit of the actor's last one (delta.py), so a
field that grows at every firing keeps the tape linear; every reader gives the whole state."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from flowtape import checkpoints, trust
from flowtape.chain import reseal
from flowtape.cli import main as cli_main
from flowtape.delta import EDIT_FROM, apply_edit, edit_between
from flowtape.errors import ResumeRefused, TraceCorruption
from flowtape.loader import load_module
from flowtape.runner import execute
from flowtape.seek import at_step_from_checkpoints
from flowtape.tape import SimpleFiring, encode_record, read_tape
from flowtape.verify import verify
from flowtape_lsp.tapeindex import TapeIndex
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import Raw

FLOW = Path(__file__).parent / "flows" / "growing.py"
N = 300


@pytest.fixture
def growing():
    return load_module(FLOW)


def collected(k: int) -> dict:
    return {"seen": list(range(1, k + 1)), "count": k}


def edited_lines(path: Path) -> int:
    return sum(1 for raw in path.read_bytes().splitlines() if b'"stateEdit":' in raw)


def test_a_growing_state_is_written_as_edits_and_read_whole(growing, tmp_path, monkeypatch):
    monkeypatch.setattr(growing, "N", 1000)
    result = execute(growing.main, max_workers=1, runs_dir=tmp_path)
    assert result.status == "succeeded" and result.outputs == {"Count": list(range(1, 1001))}
    path = result.run_dir / "tape.jsonl"
    tape, rebuild = verify(path)
    states = [msgspec.json.decode(f.state) for f in tape.firings() if f.actor == "collect"]
    assert states == [collected(k) for k in range(1, 1001)]  # each one whole, as the actor had it
    whole = sum(len(msgspec.json.encode(s)) for s in states)
    assert edited_lines(path) > 900  # every state once the last one is over EDIT_FROM bytes
    assert path.stat().st_size < whole / 5  # written whole, the states alone would take 5 times the tape
    assert msgspec.json.decode(rebuild.states["collect"]) == collected(1000)


@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("path_taken", ["trusted", "checkpoints", "verified"])
def test_a_run_with_edited_states_resumes_at_any_step(growing, tmp_path, monkeypatch, workers, path_taken):
    if path_taken == "checkpoints":
        monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 7)
        monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    if path_taken == "verified":
        monkeypatch.setattr(trust, "seals", lambda data, seal: False)
    original = execute(growing.two, max_workers=workers, runs_dir=tmp_path)
    assert original.status == "succeeded" and edited_lines(original.run_dir / "tape.jsonl") > N
    _, recorded = verify(original.run_dir / "tape.jsonl")
    for at_step in (1, 40, original.steps // 2, original.steps - 1, original.steps):
        growing.CALLS.clear()
        resumed = execute(growing.two, max_workers=workers, runs_dir=tmp_path, resume_from=original.run_dir, at_step=at_step)
        assert resumed.status == "succeeded" and resumed.outputs == original.outputs, at_step
        tape, rebuild = verify(resumed.run_dir / "tape.jsonl")
        assert rebuild.states == recorded.states, at_step  # the same states, byte for byte
        live = sum(1 for f in tape.firings() if f.actor in ("collect", "names") and not f.replayed)
        assert growing.CALLS.get("collect", 0) + growing.CALLS.get("names", 0) == live, at_step


def test_every_reader_gives_the_whole_state_at_a_step(growing, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(checkpoints, "CHECKPOINT_STEPS", 50)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_GROWTH", 0)
    result = execute(growing.main, max_workers=1, runs_dir=tmp_path)
    path = result.run_dir / "tape.jsonl"
    header = read_tape(path).header
    index = TapeIndex(result.run_dir)
    index.ingest_all()
    for number in (2, 77, 151, 2 * N - 1, 2 * N):  # a step of numbers, then one of collect
        k = number // 2
        at = at_step_from_checkpoints(path, header, number)  # from the checkpoint before the step
        assert at is not None and msgspec.json.decode(at.rebuild.states["collect"]) == collected(k), number
        served = index.at_step(number)  # the language server's index
        assert msgspec.json.decode(served.rebuild.states["collect"]) == collected(k), number
    assert cli_main(["show", str(result.run_dir), "--step", "151"]) == 0
    assert "collect: fired 75 · {'seen': [1, 2, 3, 4," in capsys.readouterr().out


def tamper(path: Path, how: str) -> None:
    """Change the first edited state on the tape (or the one before it), and reseal the chain:
    only the rules can tell."""
    lines = path.read_bytes().splitlines()
    first = next(i for i, raw in enumerate(lines) if b'"stateEdit":' in raw)
    record = msgspec.json.decode(lines[first], type=SimpleFiring)  # (a top-level firing: on one line with its step)
    assert record.stateEdit
    ops = record.stateEdit
    if how == "too long":
        ops[0] = ops[0] + 10**6 if isinstance(ops[0], int) else 10**6
    elif how == "no JSON":
        ops.append("]]")
    elif how == "both":
        record.state = Raw(b'{"seen":[],"count":0}')
    elif how == "not an object":
        before = max(i for i in range(first) if b'"a":"collect"' in lines[i] and b'"state":' in lines[i])
        lines[before] = re.sub(rb'"state":\{[^{}]*\}', b'"state":[1,2,3]', lines[before])
    else:  # the states it is an edit of are gone
        lines[:first] = [re.sub(rb',"state":\{[^{}]*\}', b"", raw) if b'"collect"' in raw else raw for raw in lines[:first]]
    if how in ("too long", "no JSON", "both"):
        lines[first] = encode_record(record)
    path.write_bytes(b"".join(line + b"\n" for line in reseal(lines)))


@pytest.mark.parametrize("how, said", [
    ("too long", "collect's state edit does not fit its last state"),
    ("no JSON", "collect's state edit gives no JSON value"),
    ("no last state", "collect's state is written as an edit, but no state of it was recorded before"),
    ("both", "collect's firing \\d+ gives both a state and a state edit"),
    ("not an object", "collect's state after firing \\d+ is not a JSON object of its fields"),
])
def test_an_edit_that_cannot_give_a_state_is_refused(growing, tmp_path, how, said):
    result = execute(growing.main, max_workers=1, runs_dir=tmp_path)
    path = result.run_dir / "tape.jsonl"
    tamper(path, how)
    with pytest.raises(TraceCorruption, match=said):
        verify(path)
    assert cli_main(["verify", str(result.run_dir)]) == 1
    with pytest.raises(ResumeRefused, match="fails verification"):
        execute(growing.main, max_workers=1, runs_dir=tmp_path, resume_from=result.run_dir)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=6), inner, max_size=6),
    max_leaves=40,
)


def inserted(edit: list) -> int:
    return sum(len(op.encode()) for op in edit if isinstance(op, str))


@settings(max_examples=300, deadline=None)
@given(old=json_values, new=json_values, pad=st.text(min_size=EDIT_FROM // 2, max_size=EDIT_FROM))
def test_an_edit_gives_exactly_the_new_encoding(old, new, pad):
    before = msgspec.json.encode({"pad": pad, "v": old, "tail": pad[::-1]})
    after = msgspec.json.encode({"pad": pad, "v": new, "tail": pad[::-1]})
    edit = edit_between(before, after)
    if len(before) < EDIT_FROM:
        assert edit is None
    if edit is not None:
        assert apply_edit(before, edit) == after
        assert inserted(edit) <= len(after) // 2


@settings(max_examples=300, deadline=None)
@given(head=st.text(max_size=3000), tail=st.text(max_size=3000), was=st.text(max_size=40), now=st.text(max_size=40))
def test_an_edit_finds_what_two_encodings_share(head, tail, was, now):
    before, after = (head + was + tail).encode(), (head + now + tail).encode()
    edit = edit_between(before, after)
    if edit is not None:
        assert apply_edit(before, edit) == after
    changed = len(was.encode()) + len(now.encode())
    if len(before) >= EDIT_FROM and changed + 6 < len(after) // 4:  # a cut moves at most 3 bytes each side
        assert edit is not None and inserted(edit) <= changed + 6


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(30, 120), min_size=2, max_size=5),
       changes=st.lists(st.tuples(st.text(max_size=6), st.text(max_size=6)), min_size=2, max_size=5))
def test_changes_far_apart_are_edits_of_their_own(sizes, changes):
    """A counter before a list that grew: two changes, not one span over the whole state."""
    # stretches of 180 bytes or more between changes, and nothing repeats: an anchor clear of the
    # changes always finds what they left alike
    parts = [",".join(str(10_000 * (i + 1) + k) for k in range(size)) for i, size in enumerate(sizes)]
    pairs = list(zip(parts, changes, strict=False))
    before = "".join(p + f"<{a}>" for p, (a, _) in pairs).encode()
    after = "".join(p + f"<{b}>" for p, (_, b) in pairs).encode()
    edit = edit_between(before, after)
    if edit is not None:
        assert apply_edit(before, edit) == after
    changed = sum(len(a.encode()) + len(b.encode()) + 6 for _, (a, b) in pairs)
    if len(before) >= EDIT_FROM and changed < len(after) // 4:
        assert edit is not None and inserted(edit) <= changed


def test_a_counter_before_a_growing_list_is_two_small_edits():
    before = msgspec.json.encode({"count": 99, "seen": list(range(1, 100))})
    after = msgspec.json.encode({"count": 100, "seen": list(range(1, 101))})
    assert edit_between(before, after) == [9, -2, "100", 296, ",100"]


def test_edits_cut_between_characters():
    before = msgspec.json.encode({"s": "é" * 200})
    after = msgspec.json.encode({"s": "é" * 100 + "ü" + "é" * 100})
    edit = edit_between(before, after)
    assert edit is not None and apply_edit(before, edit) == after and any("ü" in op for op in edit if isinstance(op, str))
    with pytest.raises(ValueError, match="an edit that copies 999 bytes at byte 0 of a 408-byte state"):
        apply_edit(before, [999])
    with pytest.raises(ValueError, match="skips"):
        apply_edit(before, [400, -10])
