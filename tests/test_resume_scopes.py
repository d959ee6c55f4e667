"""A run that failed, or was killed, inside a loop body, an if branch or a nested workflow (or a
nesting of them) resumes inside that scope: every firing on its tape replays, and only what
follows runs live. Live executions are counted with the side effect the flow's actions leave
(a log file they append to), not with the tape."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import check_replayed_in_place
from flowtape.loader import load_module
from flowtape.runner import execute
from flowtape.tape import read_tape
from flowtape.verify import verify

FLOWS = Path(__file__).parent / "flows"
FLOW = FLOWS / "scopes.py"

# each workflow of scopes.py, the value its Double fails (or hangs) on, and the firings of its
# scope that are on the tape by then: those must not run again
CASES = {
    "loop_body": ("2", ["pass 2"]),
    "if_branch": ("2", ["pass 2"]),
    "nested": ("2", ["pass 2"]),
    "deep": ("22", ["spread 2", "pass 21", "gate 21", "odd 21", "pass 22", "gate 22"]),
}


@pytest.fixture
def scopes(tmp_path, monkeypatch):
    log = tmp_path / "effects.log"
    monkeypatch.setenv("FT_LOG", str(log))
    monkeypatch.delenv("FT_FAIL", raising=False)
    monkeypatch.delenv("FT_HANG", raising=False)
    return load_module(FLOW), log


def effects(log: Path) -> list[str]:
    """What the actions did since the last look (the log is emptied)."""
    if not log.exists():
        return []
    lines = log.read_text(encoding="utf-8").splitlines()
    log.unlink()
    return lines


def same_outputs(got: dict, clean: dict, workers: int) -> bool:
    """With several workers, tokens from independent firings may reach an output in any order."""
    if workers == 1:
        return got == clean
    return {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in clean.items()}


@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("name", list(CASES))
def test_a_failure_inside_a_scope_resumes_inside_it(scopes, tmp_path, monkeypatch, name, workers, resume_path):
    module, log = scopes
    flow = getattr(module, name)
    bad, recorded = CASES[name]
    clean = execute(flow, max_workers=workers, runs_dir=tmp_path / "clean")
    assert clean.status == "succeeded"
    every = Counter(effects(log))
    monkeypatch.setenv("FT_FAIL", bad)
    failed = execute(flow, max_workers=workers, runs_dir=tmp_path, run_id="failed")
    assert failed.status == "failed" and f"double broke on {bad}" in failed.error.message
    first = effects(log)
    assert set(recorded) <= set(first)
    monkeypatch.delenv("FT_FAIL")  # the fix
    resumed = execute(flow, max_workers=workers, runs_dir=tmp_path, resume_from="failed")
    assert resumed.status == "succeeded", resumed.error
    assert same_outputs(resumed.outputs, clean.outputs, workers)
    assert resumed.replay_stopped == []
    again = effects(log)
    assert not set(first) & set(again), "a firing on the tape ran again"
    assert Counter(first) + Counter(again) == every  # every firing ran once, in one run or the other
    verify(resumed.run_dir / "tape.jsonl")
    check_replayed_in_place(read_tape(failed.run_dir / "tape.jsonl"), read_tape(resumed.run_dir / "tape.jsonl"))


@pytest.mark.parametrize(("name", "bad", "worse"), [("deep", "12", "22"), ("nested", "2", "3"), ("if_branch", "2", "4")])
def test_a_resumed_run_that_failed_inside_a_scope_resumes_inside_it_again(scopes, tmp_path, monkeypatch, name, bad, worse):
    module, log = scopes
    flow = getattr(module, name)
    clean = execute(flow, max_workers=1, runs_dir=tmp_path / "clean")
    every = Counter(effects(log))
    monkeypatch.setenv("FT_FAIL", bad)
    first = execute(flow, max_workers=1, runs_dir=tmp_path, run_id="first")
    monkeypatch.setenv("FT_FAIL", worse)
    second = execute(flow, max_workers=1, runs_dir=tmp_path, run_id="second", resume_from="first")
    assert first.status == second.status == "failed"
    assert f"broke on {worse}" in second.error.message
    monkeypatch.delenv("FT_FAIL")
    third = execute(flow, max_workers=4, runs_dir=tmp_path, run_id="third", resume_from="second")
    assert third.status == "succeeded" and same_outputs(third.outputs, clean.outputs, 4)
    done = effects(log)
    assert Counter(done) == every, "across the three runs every firing ran once"
    check_replayed_in_place(read_tape(second.run_dir / "tape.jsonl"), read_tape(third.run_dir / "tape.jsonl"))


@pytest.mark.parametrize("back", [0, 1])
@pytest.mark.parametrize("name", ["loop_body", "nested"])
def test_at_a_step_the_unfinished_scope_runs_live_as_before(scopes, tmp_path, monkeypatch, name, back):
    """`--at-step N`, the last step or one before: the run as it was right after step N, then
    live: the composite that never completed is not replayed."""
    module, log = scopes
    flow = getattr(module, name)
    clean = execute(flow, max_workers=1, runs_dir=tmp_path / "clean")
    effects(log)
    monkeypatch.setenv("FT_FAIL", "2")
    failed = execute(flow, max_workers=1, runs_dir=tmp_path, run_id="failed")
    assert failed.steps >= 1
    first = effects(log)
    monkeypatch.delenv("FT_FAIL")
    at = failed.steps - back
    resumed = execute(flow, max_workers=1, runs_dir=tmp_path, resume_from="failed", at_step=at)
    assert resumed.status == "succeeded" and resumed.outputs == clean.outputs
    old, new = read_tape(failed.run_dir / "tape.jsonl"), read_tape(resumed.run_dir / "tape.jsonl")
    tops = {(s.actor, s.fireCount) for s in old.steps()[:at]}
    covered = {(f.actor, f.fireCount) for f in old.firings() if (tuple(f.within) if f.within else (f.actor, f.fireCount)) in tops}
    assert {(f.actor, f.fireCount) for f in new.firings() if f.replayed} == covered
    assert "pass 2" in first and "pass 2" in effects(log)  # it ran in the failed run, and again after step `at`


def settle(tape: Path, quiet: float = 0.3, most: float = 10.0) -> None:
    """Wait until the tape has not grown for `quiet` seconds: a firing beside the hanging one that
    ran its action commits in microseconds, and one killed in between was never recorded (it
    would run again, rightly, but then its side effect would be counted twice)."""
    deadline = time.monotonic() + most
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = tape.stat().st_size
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.02)


def _run(name: str, runs_dir: Path, *extra: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "flowtape", "run", str(FLOW), "--workflow", name, "--runs-dir", str(runs_dir), *extra],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_run_killed_or_stopped_inside_a_scope_resumes_inside_it(scopes, tmp_path, name, workers, sig):
    """SIGKILL while Double hangs: its firing never happened. SIGTERM while it works: it finishes,
    is recorded, and nothing more of the composite runs (its step is never written)."""
    module, log = scopes
    bad, recorded = CASES[name]
    clean = execute(getattr(module, name), max_workers=workers, runs_dir=tmp_path / "clean")
    every = Counter(effects(log))
    env = {"FT_LOG": str(log)}
    hang_for = "600" if sig == signal.SIGKILL else "1"
    proc = _run(name, tmp_path, "--run-id", "killed", "--max-workers", str(workers),
                env={**env, "FT_HANG": bad, "FT_HANG_FOR": hang_for})
    hang = Path(f"{log}.hang")
    deadline = time.monotonic() + 30
    while not hang.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hang.exists(), proc.communicate()[1].decode()
    settle(tmp_path / "killed" / "tape.jsonl")  # what fires beside the composite (4 workers) is on the tape
    proc.send_signal(sig)  # in the middle of the composite's step
    _, err = proc.communicate(timeout=30)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 1 and b"stopped" in err, err.decode()
    first = effects(log)
    assert set(recorded) <= set(first)
    assert (f"double {bad}" in first) == (sig == signal.SIGTERM)
    resume = _run(name, tmp_path, "--resume-from", "killed", "--run-id", "resumed", "--json", env=env)
    out, err = resume.communicate(timeout=60)
    assert resume.returncode == 0, err.decode()
    result = json.loads(out)
    assert result["status"] == "succeeded"
    assert same_outputs(result["outputs"], clean.outputs, workers)
    again = effects(log)
    assert not set(first) & set(again), "a firing on the tape ran again"
    assert Counter(first) + Counter(again) == every
    verify(tmp_path / "resumed" / "tape.jsonl")
    check_replayed_in_place(read_tape(tmp_path / "killed" / "tape.jsonl"), read_tape(tmp_path / "resumed" / "tape.jsonl"))


@pytest.mark.parametrize("trusted", [True, False])
def test_the_steps_before_the_unfinished_composite_come_back_as_a_snapshot(scopes, tmp_path, monkeypatch, trusted):
    """Only the composite that never completed is replayed firing by firing: the steps before
    it are restored in one go, as for any resume, whether the tape is trusted or verified."""
    from flowtape import trust
    from flowtape.network import build_network
    from flowtape.replay import plan_resume

    module, _ = scopes
    monkeypatch.setenv("FT_FAIL", "2")
    failed = execute(module.nested, max_workers=1, runs_dir=tmp_path, run_id="failed")
    if not trusted:
        monkeypatch.setattr(trust, "seals", lambda data, seal: False)
    net = build_network(module.nested.build())
    plan = plan_resume(failed.run_dir, None, net, "nested")
    assert plan.snapshot is not None and plan.snapshot.steps == plan.at_step == failed.steps
    assert plan.unfinished == {("sub", 2)}
    assert {path: [e.fire_count for e in entries] for path, entries in plan.entries.items()} == {"sub/p": [2]}
    assert set(plan.covered) == {("sub", 2)}
    at_last = plan_resume(failed.run_dir, failed.steps, net, "nested")  # a step named: nothing after it replays
    assert at_last.entries == {} and at_last.unfinished == set()


@pytest.mark.parametrize(("name", "workers"), [*((n, 1) for n in CASES), ("deep", 4)])
def test_a_failure_at_any_firing_of_any_scope_resumes_without_running_a_recorded_one(scopes, tmp_path, monkeypatch, name, workers):
    """The general rule, not the cases above: whichever action call fails (the k-th, for every k),
    the resume runs each recorded firing zero times and every other one once."""
    module, log = scopes
    flow = getattr(module, name)
    clean = execute(flow, max_workers=workers, runs_dir=tmp_path / "clean")
    every = Counter(effects(log))
    for k in range(1, sum(every.values()) + 1):
        module.CALLED[0] = 0
        monkeypatch.setenv("FT_FAIL_AT", str(k))
        failed = execute(flow, max_workers=workers, runs_dir=tmp_path, run_id=f"failed{k}")
        monkeypatch.delenv("FT_FAIL_AT")
        assert failed.status == "failed" and f"action call {k} broke" in failed.error.message, k
        first = effects(log)
        resumed = execute(flow, max_workers=workers, runs_dir=tmp_path, run_id=f"resumed{k}", resume_from=f"failed{k}")
        assert resumed.status == "succeeded" and same_outputs(resumed.outputs, clean.outputs, workers), k
        assert Counter(first) + Counter(effects(log)) == every, k
        check_replayed_in_place(read_tape(failed.run_dir / "tape.jsonl"), read_tape(resumed.run_dir / "tape.jsonl"))
