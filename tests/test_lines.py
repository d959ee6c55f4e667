"""A firing's line built by its format (lines.py) is the line its record's Struct gives, byte for
byte: in every shape the formats take (a take and a put, either alone, state whole or as an edit,
seq and round written or left out), at the top level and inside loops, ifs and nested workflows;
and a tape written with them tells the very story the Structs' path writes."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from flowtape import composites, scheduler
from flowtape.lines import line_format, spread_format, start_format, step_format
from flowtape.loader import load_module
from flowtape.runner import execute
from flowtape.tape import Firing, SimpleFiring, Step, decode_written, encode_record, read_tape
from flowtape.verify import verify_run
from msgspec import Raw

FLOWS = Path(__file__).parent / "flows"
CASES = [("scopes.py", "loop_body", None), ("scopes.py", "if_branch", None), ("scopes.py", "nested", None),
         ("scopes.py", "deep", None), ("growing.py", "main", None), ("growing.py", "two", None), ("chain.py", "main", None),
         ("shapes.py", "main", None), ("shapes.py", "looped", None), ("shapes.py", "countdown", {"In": 3})]


def _line(line_format: bytes, *fields: object) -> bytes:
    """The line a format gives, without the newline it ends with (the writer stores it whole)."""
    line = line_format % fields
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    return line[:-1]


@pytest.mark.parametrize("name", ["s1", "a%d", 'say "hi"', "é/ü"])
def test_each_shape_at_the_top_level_is_the_structs_line(name):
    state = Raw(b'{"i":3}')
    cases = [  # (q_in, q_out, sizes as given in queue-index order, the record)
        (1, 2, (0, 4), dict(consumed=[(1, 1, "0123456789abcdef")], produced=[(2, [Raw(b"7")])], sizes=[0, 4])),
        (5, 2, (4, 0), dict(consumed=[(5, 1, "0123456789abcdef")], produced=[(2, [Raw(b"7")])], sizes=[4, 0])),
        (None, 2, (4,), dict(produced=[(2, [Raw(b"7")])], sizes=[4])),
        (3, None, (1,), dict(consumed=[(3, 1, "0123456789abcdef")], sizes=[1])),
    ]
    for q_in, q_out, sizes, fields in cases:
        formats = line_format(name, q_in, q_out)
        size_of = dict(zip(sorted(q for q in (q_in, q_out) if q is not None), sizes, strict=True))
        size_in, size_out = size_of.get(q_in, b""), size_of.get(q_out, b"")
        in_first = (q_in if q_in is not None else -1) < (q_out if q_out is not None else -1)  # (one lacking goes first)
        ordered = (size_in, size_out) if in_first else (size_out, size_in)
        took = b"0123456789abcdef" if q_in is not None else b""
        put = Raw(b"7") if q_out is not None else b""
        for seq, round_, with_state in [(0, -1, False), (9, 2, True), (0, 0, True)]:
            record = SimpleFiring(step=8, seq=seq, actor=name, fireCount=3, round=round_, at=120, dur=4, **fields)
            if with_state:
                record.state = state
            line = _line(formats, 8, b',"seq":%d' % seq if seq else b"", 3, took, put, *ordered,
                         b',"r":%d' % round_ if round_ >= 0 else b"", 120, 4, b',"state":' + state if with_state else b"")
            assert line == msgspec.json.encode(record), (q_in, q_out, seq, round_)


@pytest.mark.parametrize("name", ["a", "a%s", 'q"x'])
def test_each_shape_inside_a_composite_is_the_structs_line(name):
    for q_in, q_out in [(1, 2), (None, 2), (3, None)]:
        formats = line_format(name, q_in, q_out, within="lp%")
        consumed = [(q_in, 1, "0123456789abcdef")] if q_in is not None else []
        produced = [(q_out, [Raw(b'"x"')])] if q_out is not None else []
        for seq, state in [(0, None), (12, Raw(b'{"total":2}'))]:
            record = Firing(seq=seq, actor=name, fireCount=2, consumed=consumed, produced=produced, within=("lp%", 4), at=7, dur=1)
            if state is not None:
                record.state = state
            line = _line(formats, b',"seq":%d' % seq if seq else b"", 2, b"0123456789abcdef" if q_in is not None else b"",
                         Raw(b'"x"') if q_out is not None else b"", b',"state":' + state if state is not None else b"", 4, 7, 1)
            assert line == msgspec.json.encode(record), (q_in, q_out, seq)


@pytest.mark.parametrize("within", [None, "lp"])
def test_a_firing_of_many_queues_is_the_structs_line(within):
    takes, puts = ((4, 1), (2, 2), (9, 1)), (7, 3)
    consumed = [(4, 1, "aaaaaaaaaaaaaaaa"), (2, 2, "bbbbbbbbbbbbbbbb"), (9, 1, "=-12")]
    produced = [(7, [Raw(b"1")]), (3, [Raw(b'{"a":[1]}'), Raw(b"null")])]
    fields = (b"aaaaaaaaaaaaaaaa", b"bbbbbbbbbbbbbbbb", b"=-12", Raw(b"1"), b'{"a":[1]},null')
    line_of = spread_format("join%", takes, puts, within)
    if within is None:
        record = SimpleFiring(step=5, seq=6, actor="join%", fireCount=2, consumed=consumed, produced=produced,
                              sizes=[0, 1, 0, 3, 0], at=9, dur=1)
        line = _line(line_of, 5, b',"seq":6', 2, *fields, b"[0,1,0,3,0]", b"", 9, 1, b"")
    else:
        record = Firing(actor="join%", fireCount=2, consumed=consumed, produced=produced, within=("lp", 3), at=9, dur=1)
        line = _line(line_of, b"", 2, *fields, b"", 3, 9, 1)
    assert line == msgspec.json.encode(record)


@pytest.mark.parametrize("within", [None, "outer%"])
def test_a_composites_own_record_is_the_structs_line(within):
    cases = [  # (takes, puts, consumed, produced, fields as the format takes them after seq and fire count)
        ((), (4,), [], [(4, [Raw(b"0")])], [b"0"]),  # a loop handing in an item
        ((), (), [], [], []),  # a loop that is done, its `out` wired to nothing
        ((1,), (2, 5), [(1, 1, "0123456789abcdef")], [(2, [Raw(b"true")]), (5, [Raw(b'"x"'), Raw(b"2")])],
         [1, b"0123456789abcdef", b"true", b'"x",2']),  # an if taking its condition, a workflow its inputs
    ]
    for takes, puts, consumed, produced, fields in cases:
        line_of = start_format("lp%", takes, puts, within)
        for seq in (0, 7):
            record = Firing(seq=seq, actor="lp%", fireCount=3, consumed=consumed, produced=produced,
                            within=(within, 2) if within is not None else None)
            line = _line(line_of, b',"seq":%d' % seq if seq else b"", 3, *fields, *([2] if within is not None else []))
            assert line == msgspec.json.encode(record), (takes, puts, seq)


def test_a_composites_step_is_the_structs_line():
    for queues, round_ in [([(0, 0), (1, 2), (7, 0)], -1), ([], 3)]:
        record = Step(step=9, journalSeq=14, actor="lp%", fireCount=3, queues=queues, round=round_, at=50, dur=8)
        line = _line(step_format("lp%"), 9, 14, 3, b',"q":' + msgspec.json.encode(queues) if queues else b"",
                     b',"r":%d' % round_ if round_ >= 0 else b"", 50, 8)
        assert line == msgspec.json.encode(record), (queues, round_)


def _story(path: Path) -> list[object]:
    """The tape's firings and steps, without what differs from run to run (times, hashes)."""
    told: list[object] = []
    for line in read_tape(path).lines:
        record = line.record
        if isinstance(record, (Firing, Step)):
            told.append(msgspec.structs.replace(record, at=0, dur=0, h=""))
    return told


@pytest.mark.parametrize(("file", "workflow", "inputs"), CASES)
def test_a_tape_written_by_formats_tells_what_the_structs_tell(file, workflow, inputs, tmp_path, monkeypatch):
    monkeypatch.setenv("FT_LOG", str(tmp_path / "log.txt"))  # (scopes.py notes each live call there)
    module = load_module(FLOWS / file)
    fast = execute(getattr(module, workflow), inputs, max_workers=1, runs_dir=tmp_path / "fast")
    with monkeypatch.context() as patch:  # every firing by its Struct: the path lines.py stands in for
        refused: list[object] = []
        patch.setattr(scheduler, "commit_simple", lambda *args: refused.append(args[1]))  # (None: not committed)
        patch.setattr(scheduler, "write_spread", lambda *args: refused.append(args[1]))
        patch.setattr(composites, "write_start", lambda engine, actor, fire_count, takes, produced, ctx: engine.tape.write(
            engine._firing_record(actor, fire_count, takes, produced, ctx, False)))
        patch.setattr(composites, "write_step", lambda engine, actor, fire_count, touched, start: engine.tape.write(
            engine._step(actor, fire_count, False, touched, start)))
        slow = execute(getattr(module, workflow), inputs, max_workers=1, runs_dir=tmp_path / "slow")
    assert refused  # (the engine asked the patched one: the slow tape is the Structs')
    assert fast.status == slow.status == "succeeded"
    assert _story(fast.run_dir / "tape.jsonl") == _story(slow.run_dir / "tape.jsonl")
    _same_bytes_as_the_structs(fast.run_dir / "tape.jsonl")
    verify_run(fast.run_dir)  # (raises on a broken rule)


def _same_bytes_as_the_structs(path: Path) -> None:
    """Each line a format wrote is what msgspec writes for the record it holds; but for a time of
    0 µs, which a format writes and msgspec leaves out (a SimpleFiring's or a Step's `at` and
    `d`/`dur` default to 0): read back, the same record."""
    raw = path.read_bytes().splitlines()
    formatted = [line for line in raw if line.startswith((b'{"t":"F"', b'{"t":"f"', b'{"t":"s"'))]
    assert formatted
    for line in formatted:
        again = encode_record(decode_written(line))
        if again != line:
            assert decode_written(again) == decode_written(line) and re.search(rb'"(at|d|dur)":0[,}]', line), line


@pytest.mark.parametrize(("file", "workflow"), [("shapes.py", "main"), ("scopes.py", "if_branch"), ("growing.py", "main")])
def test_lines_written_by_four_workers_are_the_structs_and_verify(file, workflow, tmp_path, monkeypatch):
    monkeypatch.setenv("FT_LOG", str(tmp_path / "log.txt"))
    run = execute(getattr(load_module(FLOWS / file), workflow), max_workers=4, runs_dir=tmp_path)
    assert run.status == "succeeded"
    _same_bytes_as_the_structs(run.run_dir / "tape.jsonl")
    verify_run(run.run_dir)
