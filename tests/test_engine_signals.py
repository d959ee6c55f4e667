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


HUNG_TOOL = '''
from flowtape import Port, connect, task, tool, workflow


@tool(cmd="sh", args=["-c", "sleep 300 & echo $! > {in.PidFile}; echo started > {out.Out}; wait"])
class Sleeper:
    class Ports:
        PidFile = Port[str](direction="in")
        Out = Port[str](direction="out")


@workflow(inputs={"PidFile": str})
def main():
    s = Sleeper()
    connect("PidFile", s.PidFile)
    connect(s.Out, "Out")
'''


@pytest.mark.parametrize("workers", [1, 3])
def test_a_stop_ends_a_tool_that_runs_on_after_the_grace_period(tmp_path, monkeypatch, workers):
    """The first SIGTERM asks; a tool that does not end is interrupted when the grace period is
    over, the run ends stopped, and nothing the tool started lives on."""
    import threading

    from flowtape import runner
    from flowtape.loader import load_flow

    monkeypatch.setattr(runner, "STOP_GRACE", 1.0)
    flow = tmp_path / "sleeper.py"
    flow.write_text(HUNG_TOOL, encoding="utf-8")
    pid_file = tmp_path / "sleep.pid"

    def stop_once_started() -> None:
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_once_started, daemon=True).start()
    began = time.monotonic()
    result = runner.execute(load_flow(flow), {"PidFile": str(pid_file)}, max_workers=workers, runs_dir=tmp_path / "runs")
    assert result.status == "stopped" and time.monotonic() - began < 15
    sleeper = int(pid_file.read_text())
    for _ in range(50):
        if not Path(f"/proc/{sleeper}").exists() or Path(f"/proc/{sleeper}/stat").read_text().split(")")[-1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the tool's child {sleeper} still runs")
    verify(result.run_dir / "tape.jsonl", warn=False)


HUNG_TOOL_IN_LOOP = '''
from flowtape import Port, connect, loop, tool, workflow


@tool(cmd="sh", args=["-c", "echo $$ > {in.PidFile}.tmp; mv {in.PidFile}.tmp {in.PidFile}; sleep 300"])
class Sleeper:
    class Ports:
        PidFile = Port[str](direction="in")


@workflow(inputs={"PidFile": str})
def main():
    lp = loop(["once"])
    with lp:
        s = Sleeper()
    connect("PidFile", s.PidFile)
'''


@pytest.mark.parametrize(("flow_text", "workers"), [(HUNG_TOOL, "1"), (HUNG_TOOL, "3"), (HUNG_TOOL_IN_LOOP, "1"), (HUNG_TOOL_IN_LOOP, "3")])
def test_a_second_signal_while_a_tool_runs_stops_the_run_it_does_not_fail_it(tmp_path, flow_text, workers):
    """The stop kills the tool: its firing did not happen (a resume runs it), and the run is stopped."""
    flow = tmp_path / "sleeper.py"
    flow.write_text(flow_text, encoding="utf-8")
    pid_file = tmp_path / "sleep.pid"
    proc = subprocess.Popen([sys.executable, "-m", "flowtape", "run", str(flow), "--input", f"PidFile={pid_file}",
                             "--max-workers", workers, "--run-id", "r"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err.decode()
    run_dir = tmp_path / ".flowtape" / "runs" / "r"
    summary = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert summary["status"] == "stopped" and "error" not in summary, summary
    assert b"exited with code" not in err
    verify(run_dir / "tape.jsonl", warn=False)


# A signal that lands while the run writes its end (sealing the tape, then run.json), or while a
# resume copies its source's records: simulated by signalling the process from inside those steps.
WHILE_ENDING = '''
import os, signal, sys
from flowtape import trust, writer
from flowtape.runner import execute
from flowtape.loader import load_flow

where, sig = sys.argv[1], getattr(signal, sys.argv[2])
real_seal, real_copy = trust.seal_file, writer.TapeWriter.copy_prefix

def seal_file(*args):
    if where == "end":
        os.kill(os.getpid(), sig)
        os.kill(os.getpid(), sig)  # and a second one: it must not cut the end short either
    return real_seal(*args)

def copy_prefix(self, *args):
    os.kill(os.getpid(), sig)
    return real_copy(self, *args)

trust.seal_file = seal_file
writer.TapeWriter.copy_prefix = copy_prefix
flow = load_flow(sys.argv[3], None)
resume = sys.argv[4] if len(sys.argv) > 4 else None
result = execute(flow, max_workers=1, runs_dir=".", run_id=sys.argv[5] if resume else "ended", resume_from=resume)
print(result.status)
'''


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_run_writes_its_end_or_copies_a_prefix_leaves_tape_and_run_json_agreeing(tmp_path, sig):
    from flowtape.cli import main as cli_main

    script = tmp_path / "ending.py"
    script.write_text(WHILE_ENDING)
    chain = str(Path(__file__).parent / "flows" / "chain.py")
    done = subprocess.run([sys.executable, str(script), "end", sig, chain], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "succeeded"  # it had ended: the signals came too late to stop it
    assert json.loads((tmp_path / "ended" / "run.json").read_text())["status"] == "succeeded"
    assert cli_main(["verify", str(tmp_path / "ended")]) == 0
    resumed = subprocess.run([sys.executable, str(script), "copy", sig, chain, str(tmp_path / "ended"), "again"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "stopped"  # asked to stop while copying: it stops right after
    assert json.loads((tmp_path / "again" / "run.json").read_text())["status"] == "stopped"
    assert cli_main(["verify", str(tmp_path / "again")]) == 0
