"""Property: a real tape with one recorded value replaced (malformed, or merely different) and its
hash chain sealed anew, as a forger would, is either accepted by every reader or refused by every
reader the same way: the `TraceCorruption` `flowtape verify` gives (its line and rule), never an
internal error, a hang, or a reader that shows what verify refuses."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import msgspec
import pytest
from flowtape.chain import reseal
from flowtape.cli import main as cli_main
from flowtape.errors import ResumeRefused, TraceCorruption
from flowtape.loader import load_flow
from flowtape.runner import execute
from flowtape.streamed import check_run
from flowtape.verify import verify_run
from flowtape_lsp.tapeindex import TapeIndex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FLOW = '''
import datetime as dt
from decimal import Decimal

from flowtape import Port, agent, connect, task, workflow


@task
class Things:
    n: int
    i: int = 0
    seen: dict = {}

    class Ports:
        Out = Port[object](direction="out")

    def action(self):
        if self.i >= self.n:
            return None
        self.i += 1
        self.seen[self.i] = (self.i, b"x" * self.i)
        return [(self.i, "t"), {self.i, -self.i}, b"\\x00\\xff", dt.timedelta(seconds=self.i),
                Decimal("1.5") * self.i, dt.datetime(2026, 1, self.i), [[[self.i]]], float("inf")][self.i % 8]


@agent(prompt="Say it.", transport="mock", mock_outputs={"Said": lambda inputs: repr(inputs["X"])})
class Echo:
    class Ports:
        X = Port[object](direction="in")
        Said = Port[str](direction="out")


@workflow
def main():
    things = Things(n=8)
    echo = Echo()
    connect(things.Out, echo.X)
    connect(echo.Said, "Out")
'''

# Values a forger (or a bug elsewhere) might put where a recorded value was: each breaks a rule of
# the tagged encoding, or is a plain value of another shape.
BAD = [
    '{"$t":"timedelta","v":["1","2","3"]}', '{"$t":"timedelta","v":[999999999999,0,0]}', '{"$t":"bytes","v":"!not base64"}',
    '{"$t":"tuple"}', '{"$t":"tuple","v":5}', "1e999", '{"$t":"float","v":"abc"}', '{"$t":"decimal","v":"abc"}',
    '{"$t":"set","v":[[1]]}', '{"$t":"dict","v":[1]}', '{"$t":"datetime","v":5}', '{"$t":"date","v":"2026-13-01"}',
    '{"$t":"datetime","v":"2026-01-01T00:00","tz":"../../../etc/passwd"}', '{"$t":7}', '{"$t":"uuid","v":"zz"}',
    '{"$t":"complex","v":["a",1]}', '{"$t":"deque","v":[],"maxlen":-3}', '{"$t":"defaultdict","factory":"exec","v":[]}',
    '{"$t":"odict","v":[[1]]}', '{"$t":"path","v":[]}', '"\\ud800"', "[" * 1200 + "]" * 1200, "[" * 700 + "]" * 700,
]
GOOD = ['0', '"x"', '{"$t":"tuple","v":[1,2]}', '[1,{"a":null}]', '{"$t":"bytes","v":"AAE="}', '{"$t":"float","v":"nan"}']
RAW_BAD = [b'"a\xffb"', b'"\xc3("']  # invalid UTF-8 inside a string


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("fuzz")
    (base / "flow.py").write_text(FLOW)
    result = execute(load_flow(base / "flow.py"), max_workers=1, runs_dir=base / "runs", run_id="orig")
    assert result.status == "succeeded", result.error
    return base / "flow.py", result.run_dir


def _places(lines: list[bytes]) -> list[tuple[int, str, int]]:
    """Where a recorded value stands: (line index, field, which one), for tokens, states and chats."""
    found = []
    for i, raw in enumerate(lines):
        record = json.loads(raw)
        if record.get("t") in ("f", "F"):  # (format 6: a simple firing's line, its fields named short)
            for j, (_, tokens) in enumerate(record.get("produced", record.get("p", []))):
                found += [(i, f"produced.{j}", k) for k in range(len(tokens))]
            found += [(i, "state", 0)] * ("state" in record) + [(i, "chat", 0)] * ("chat" in record)
    return found


def _replace(raw: bytes, field: str, which: int, value: bytes) -> bytes:
    """The line with one value's encoding replaced by `value`, the rest byte for byte."""
    record = json.loads(raw)
    marker = "\u0000MARK\u0000"
    if field.startswith("produced."):
        record["produced" if "produced" in record else "p"][int(field.split(".")[1])][1][which] = marker
    elif field == "chat":
        record["chat"][-1]["content"] = marker  # (a chat message's text: a string inside the value)
        return json.dumps(record, separators=(",", ":")).encode().replace(json.dumps(marker).encode(), value)
    else:
        record[field] = {"i": marker}  # a state is an object of fields: one field's value replaced
    return json.dumps(record, separators=(",", ":")).encode().replace(json.dumps(marker).encode(), value)


def _cli(*args: str) -> tuple[int, str, str]:
    """`flowtape ARGS` in-process; its stdout and stderr as bytes decoded leniently (a reader that
    printed a value's bytes as they are must fail the test by what it printed, not crash it)."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8", errors="replace"))  # type: ignore[attr-defined]
    return code, texts[0], texts[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_resealed_tape_with_one_value_replaced_is_read_alike_by_every_reader(recorded, tmp_path_factory, data):
    flow_file, original = recorded
    lines = (original / "tape.jsonl").read_bytes().rstrip(b"\n").split(b"\n")
    i, field, which = data.draw(st.sampled_from(_places(lines)), label="where")
    value = data.draw(st.sampled_from([v.encode() for v in BAD + GOOD] + RAW_BAD), label="value")
    if field == "chat":  # inside a string: what can stand there
        value = data.draw(st.sampled_from([b'"\\ud800 lone"', b'"a\xffb"', b'"fine"']), label="chat text")
    lines[i] = _replace(lines[i], field, which, value)
    run_dir = tmp_path_factory.mktemp("mutated") / "runs" / "orig"
    run_dir.mkdir(parents=True)
    (run_dir / "tape.jsonl").write_bytes(b"\n".join(reseal(lines)) + b"\n")
    shutil.copy(original / "run.json", run_dir / "run.json")

    try:
        verify_run(run_dir, warn=False)
        verdict: TraceCorruption | None = None
    except TraceCorruption as exc:
        verdict = exc
    said = str(verdict) if verdict is not None else None

    # the command line: every way of reading the run, refused exactly as verify refuses it, first
    for args in (["verify"], ["show"], ["show", "--json"], ["show", "--records"], ["show", "--step", "1"], ["show", "--step", "16"]):
        code, out, err = _cli(args[0], str(run_dir), *args[1:])
        assert "internal error" not in err and "Traceback" not in err, (args, err)
        if verdict is None:
            assert code == 0, (args, err)
        else:
            assert code == 1 and said in err.splitlines()[0], (args, said, err)
            assert out == "" if "--json" not in args else said in json.loads(out)["error"], (args, out)

    # a resume: refused for the same reason, or it runs
    try:
        result = execute(load_flow(flow_file), max_workers=1, runs_dir=run_dir.parent, resume_from=run_dir)
        assert verdict is None, said
        assert result.status in ("succeeded", "failed")
    except ResumeRefused as exc:
        assert verdict is not None and said in str(exc), (said, str(exc))

    # the language server's index and its check: the same verdict, nothing raised on the way
    index = TapeIndex(run_dir)
    index.ingest_all()
    if index.header is not None and index.steps:
        index.at_step(max(1, index.steps // 2))
    try:
        check_run(run_dir)
        assert verdict is None
    except TraceCorruption as exc:
        assert str(exc) == said
    msgspec.json.encode(index.steps)  # (the index stayed usable)


@pytest.mark.parametrize(("field", "value", "says"), [
    ("state", b'{"$t":"timedelta","v":["1","2","3"]}',
     "recorded values can be rebuilt: the state of things after its firing 1 cannot be rebuilt: malformed 'timedelta' value"),
    ("produced.0", b'{"$t":"bytes","v":"!not base64"}',
     "recorded values can be rebuilt: firing 1 of things puts into things.Out->echo.X a token (1 of 1) that cannot be rebuilt"),
    ("produced.0", b"[" * 1200 + b"]" * 1200, "well-formed records: unreadable record (a value in it is nested too deeply to read)"),
])
def test_verify_names_the_line_the_value_and_the_rule_and_show_says_so_first(recorded, tmp_path, field, value, says):
    _, original = recorded
    lines = (original / "tape.jsonl").read_bytes().rstrip(b"\n").split(b"\n")
    n = next(i for i, raw in enumerate(lines)
             if (raw.startswith(b'{"t":"f"') and b'"actor":"things"' in raw) or (raw.startswith(b'{"t":"F"') and b'"a":"things"' in raw))
    lines[n] = _replace(lines[n], field, 0, value)
    run_dir = tmp_path / "orig"
    run_dir.mkdir()
    (run_dir / "tape.jsonl").write_bytes(b"\n".join(reseal(lines)) + b"\n")
    with pytest.raises(TraceCorruption) as info:
        verify_run(run_dir)
    assert info.value.line == n + 1 and f"line {n + 1}: {says}" in str(info.value)
    for args in (["verify"], ["show"], ["show", "--step", "2"]):
        code, out, err = _cli(args[0], str(run_dir), *args[1:])
        assert (code, out) == (1, "") and err.splitlines()[0] == f"flowtape: corrupt tape: {info.value}", (args, err)
