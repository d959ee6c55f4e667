"""A finished run whose tape holds together (its chain resealed) but holds a value no reader can
rebuild: the language server refuses it as `flowtape verify` does (-32003, the same line and
rule), for a token nested 1,200 deep too (once a -32603 RecursionError), and hovers say nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from flowtape.chain import reseal

from .conftest import count_flow, uri_of, write_flow
from .test_rpc import Raw, error_of


@pytest.fixture
def raw(tmp_path: Path):  # type: ignore[no-untyped-def]
    client = Raw(tmp_path)
    yield client
    client.close()


@pytest.mark.parametrize(("token", "says"), [
    (b"[" * 1200 + b"1" + b"]" * 1200, "well-formed records: unreadable record (a value in it is nested too deeply to read)"),
    (b'{"$t":"decimal","v":"abc"}', "recorded values can be rebuilt: firing 2 of count puts into count.Out->double.In a token"),
    (b'"a\xffb"', "cannot be rebuilt: it is no JSON value: Invalid UTF-8"),
])
def test_a_tape_with_a_value_no_reader_can_rebuild_is_refused_as_verify_refuses_it(raw: Raw, tmp_path: Path, token: bytes, says: str) -> None:
    flow = write_flow(tmp_path, "count.py", count_flow(n=4))
    subprocess.run([sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", "bad", "--max-workers", "1"],
                   cwd=tmp_path, check=True, capture_output=True)
    tape = tmp_path / ".flowtape" / "runs" / "bad" / "tape.jsonl"
    lines = tape.read_bytes().rstrip(b"\n").split(b"\n")
    (n, line), = [(n, line) for n, line in enumerate(lines) if line.startswith(b'{"t":"F"') and b'"a":"count","n":2' in line]
    lines[n] = line.replace(b"[[1,[2]]]", b"[[1,[" + token + b"]]]")
    assert lines[n] != line
    tape.write_bytes(b"\n".join(reseal(lines)) + b"\n")
    verified = subprocess.run([sys.executable, "-m", "flowtape", "verify", "bad"], cwd=tmp_path, capture_output=True, text=True,
                              errors="replace")
    assert verified.returncode == 1 and says in verified.stderr, verified.stderr
    said = verified.stderr.removeprefix("flowtape: corrupt tape: ").strip()
    raw.initialize(tmp_path)
    for ask, (method, params) in enumerate([("flowtape/getSteps", {"runId": "bad"}), ("flowtape/stepDetail", {"runId": "bad", "step": 3})], 1):
        code, message = error_of(raw.ask(ask, method, params=params))
        assert code == -32003 and said in message, (method, code, message)
    raw.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri_of(flow), "languageId": "python", "version": 1, "text": flow.read_text()}}})
    hover = raw.ask(9, "textDocument/hover", params={"textDocument": {"uri": uri_of(flow)}, "position": {"line": 1, "character": 0}})
    assert "error" not in hover, hover
    assert "Traceback" not in raw.close()
