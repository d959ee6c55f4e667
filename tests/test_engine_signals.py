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
from flowtape.verify import verify

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


HUNG = '''
import time

from flowtape import Port, connect, task, workflow


@task
class Stuck:
    class Ports:
        Out = Port[int](direction="out")

    i: int = 0

    def action(self):
        self.i += 1
        if self.i == 3:
            time.sleep(600)  # hangs: only a second signal ends it
        return self.i


@task
class Keep:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x


@workflow
def main():
    stuck = Stuck()
    keep = Keep()
    connect(stuck.Out, keep.In)
    connect(keep.Out, "Out")
'''


@pytest.mark.parametrize("workers", ["1", "4"])
def test_a_second_signal_stops_a_hung_firing_as_stopped_not_failed(tmp_path, workers):
    """The first SIGTERM asks; an actor that never returns gets interrupted by the second. That is
    the user stopping the run, not the flow failing: the run ends `stopped`, and the interrupted
    firing is not recorded (a resume runs it again)."""
    flow = tmp_path / "hung.py"
    flow.write_text(HUNG, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowtape", "run", str(flow), "--runs-dir", "runs", "--run-id", "hung", "--max-workers", workers],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    run_dir = tmp_path / "runs" / "hung"
    try:
        _wait_for_steps(run_dir / "tape.jsonl", 2, proc)
        time.sleep(0.5)  # firing 3 of `stuck` hangs by now
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "stopped" in err and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["status"] == "stopped"
    tape = read_tape(run_dir / "tape.jsonl", warn=False)
    assert isinstance(tape.end, End) and tape.end.status == "stopped" and tape.end.error is None
    assert [(f.actor, f.fireCount) for f in tape.firings() if f.actor == "stuck"] == [("stuck", 1), ("stuck", 2)]
    verify(run_dir / "tape.jsonl", warn=False)  # the end's picture leaves out the tokens the hung firing held
