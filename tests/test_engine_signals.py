"""SIGTERM (an IDE's stop button) and Ctrl-C stop a run cleanly: the run record says `stopped` and
the tape ends with an end record `stopped`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from flowtape.tape import End, Firing, Step, read_tape

SLOW = '''
import time

from flowtape import Port, action, connect, guard, task, workflow


@task
class Ticks:
    _i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    @guard(lambda self: self._i < 10_000)
    def tick(self):
        time.sleep(0.01)
        self._i += 1
        return self._i


@task
class Square:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x * x


@workflow
def main():
    ticks = Ticks()
    square = Square()
    connect(ticks.Out, square.In)
    connect(square.Out, "Out")
'''


def _wait_for_steps(tape: Path, count: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        if tape.is_file() and len(read_tape(tape, warn=False).steps()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError("the run did not get going")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_run_and_the_tape_ends_stopped(tmp_path, sig):
    flow = tmp_path / "slow.py"
    flow.write_text(SLOW, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowtape", "run", str(flow), "--runs-dir", "runs", "--run-id", "slow"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    run_dir = tmp_path / "runs" / "slow"
    try:
        _wait_for_steps(run_dir / "tape.jsonl", 5, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "stopped" in err and "Traceback" not in err
    assert out.startswith("Out: [")
    summary = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert summary["status"] == "stopped"
    tape = read_tape(run_dir / "tape.jsonl", warn=False)
    assert not tape.torn
    assert isinstance(tape.end, End) and tape.end.status == "stopped"
    steps = [r for r in tape.records() if isinstance(r, Step)]
    assert 5 <= len(steps) < 10_000 and tape.end.steps == len(steps)
    assert tape.end.firings == len([r for r in tape.records() if isinstance(r, Firing)])
