"""`--executor ray`: firings on a real Ray cluster (one head for the session, `ray_address`), with
the same outputs and tapes as threads, resumes, a worker killed mid-firing, a stop, a killed driver."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, GEN_FLOW, REPO, line_of, loopback_only
from flowtape.cli import main as cli_main
from flowtape.loader import load_flow
from flowtape.runner import RunResult, execute
from flowtape.tape import Firing, encode_record, read_tape
from flowtape.verify import verify
from test_examples import EXPECTED

TIMINGS = {"at", "dur", "startedAt", "finishedAt", "h"}  # (h: the hash chain, over the timings too)


def records(run_dir: Path, run_id: str) -> list[dict]:
    """The tape's records as JSON, but what differs from run to run: timings, the run's own id."""
    out = []
    for record in read_tape(run_dir / "tape.jsonl").records():
        text = encode_record(record).decode().replace(run_id, "<run>")
        out.append({k: v for k, v in json.loads(text).items() if k not in TIMINGS})
    return out


def _same_records(got: list[dict], expected: list[dict]) -> None:
    for i, (a, b) in enumerate(zip(got, expected, strict=False)):
        assert a == b, f"record {i}: " + ", ".join(f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in a | b if a.get(k) != b.get(k))
    assert len(got) == len(expected)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_examples_give_the_same_outputs_and_tapes_on_ray(name: str, ray_address: str, runs_dir: Path) -> None:
    flow = load_flow(EXAMPLES / f"{name}.py")
    # one run id and folder for both (a tool's tokens are paths in the run's folder): the first is moved aside
    threads = execute(flow, max_workers=1, runs_dir=runs_dir, run_id="run")
    (runs_dir / "run").rename(runs_dir / "threads")
    ray = execute(flow, max_workers=1, runs_dir=runs_dir, run_id="run", executor="ray", ray_address=ray_address)
    assert threads.status == ray.status == "succeeded", ray.error
    assert ray.outputs == threads.outputs == EXPECTED[name]
    _same_records(records(runs_dir / "run", "run"), records(runs_dir / "threads", "run"))
    verify(runs_dir / "run" / "tape.jsonl")


def test_a_ray_run_resumes_at_every_step(ray_address: str, runs_dir: Path) -> None:
    """Nested workflows, each step a new Ray job (loops and ifs on Ray: the examples' tapes above)."""
    name = "nested"
    flow = load_flow(EXAMPLES / f"{name}.py")
    first = execute(flow, max_workers=1, runs_dir=runs_dir, run_id="first", executor="ray", ray_address=ray_address)
    assert first.status == "succeeded" and first.outputs == EXPECTED[name]
    for step in range(first.steps):
        resumed = execute(flow, runs_dir=runs_dir, run_id=f"at-{step}", resume_from="first", at_step=step,
                          executor="ray", ray_address=ray_address)
        assert resumed.status == "succeeded", (step, resumed.error)
        assert resumed.outputs == EXPECTED[name], step
        _same_records(_unmarked(runs_dir / f"at-{step}", f"at-{step}"), _unmarked(runs_dir / "first", "first"))
        steps = read_tape(runs_dir / f"at-{step}" / "tape.jsonl").steps()
        assert [s.replayed for s in steps] == [True] * step + [False] * (first.steps - step), step
        verify(runs_dir / f"at-{step}" / "tape.jsonl")
    # at its last step every firing replays on the driver; only its source is asked once more (live) for what it may have gained
    last = execute(flow, runs_dir=runs_dir, run_id="at-last", resume_from="first", executor="ray", ray_address=ray_address)
    assert last.status == "succeeded" and last.outputs == EXPECTED[name]
    assert all(s.replayed for s in read_tape(runs_dir / "at-last" / "tape.jsonl").steps())


def test_a_resume_at_the_last_step_of_a_ray_run_does_no_cluster_work(ray_address: str, runs_dir: Path, write_flow) -> None:
    """Every firing replays and each source's last ask runs on the driver: no Ray instance is
    started for it (without --ray-address one would be, in RAY_TMPDIR, as the test below sees)."""
    if not loopback_only():
        pytest.skip("starts a Ray instance if it fails: only in a loopback-only network namespace (make pytest)")
    flow = write_flow(HELPER_FLOW.replace("from helpers import shout", "shout = str.upper"))
    first = execute(load_flow(flow), runs_dir=runs_dir, run_id="first", executor="ray", ray_address=ray_address)
    assert first.status == "succeeded"
    ray_tmp = Path(tempfile.mkdtemp(prefix="ftr-", dir="/tmp"))
    try:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "flowtape", "run", str(flow), "--executor", "ray", "--resume-from",
                               "first", "--run-id", "last", "--runs-dir", str(runs_dir), "--json"],
                              capture_output=True, text=True, env=dict(os.environ, RAY_TMPDIR=str(ray_tmp)), timeout=180)
        assert json.loads(proc.stdout).get("outputs") == first.outputs, proc.stdout + proc.stderr
        assert not list(ray_tmp.rglob("session_*")), "a Ray instance was started for a resume that replays only"
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
        assert "flowtape.executors.ray" in imported and "ray" not in imported, "a resume that replays only imported Ray"
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert all(s.replayed for s in read_tape(runs_dir / "last" / "tape.jsonl").steps())



def test_a_resume_at_the_last_step_never_joins_the_cluster(ray_address: str, runs_dir: Path) -> None:
    """No cluster work: the resume succeeds with its address pointing where nothing listens, and
    leaves this process without a Ray session."""
    import ray

    flow = load_flow(EXAMPLES / "nested.py")
    first = execute(flow, max_workers=1, runs_dir=runs_dir, run_id="first", executor="ray", ray_address=ray_address)
    assert first.status == "succeeded" and not ray.is_initialized()
    with socket.socket() as s:  # a port of this namespace's loopback that nothing listens on
        s.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{s.getsockname()[1]}"
    last = execute(flow, runs_dir=runs_dir, run_id="last", resume_from="first", executor="ray", ray_address=nowhere)
    assert last.status == "succeeded", last.error
    assert last.outputs == EXPECTED["nested"] and not ray.is_initialized()
    assert all(s.replayed for s in read_tape(runs_dir / "last" / "tape.jsonl").steps())
    verify(runs_dir / "last" / "tape.jsonl")

def _unmarked(run_dir: Path, run_id: str) -> list[dict]:
    """What a run recorded after its header, replayed or not."""
    return [{k: v for k, v in r.items() if k != "replayed"} for r in records(run_dir, run_id)[1:]]


SLOW_FLOW = '''\
import os
import pathlib
import signal
import time

from flowtape import Port, connect, task, workflow

MARK = pathlib.Path("MARK_PATH")  # (by absolute path: on a worker, __file__ is its copy of the flow's folder)


@task
class Gen:
    class Ports:
        Out = Port[int](direction="out")

    i: int = 0

    def action(self):
        if self.i >= 3:
            return None
        self.i += 1
        return self.i


@task
class Slow:
    """On its second firing: MODE "always" kills its own worker; else the first try writes its
    worker's pid and waits there (for the test to kill it, or stop the run); a retry goes on."""

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    mode: str
    seen: int = 0

    def action(self, x):
        if x == 2 and self.mode == "always":
            os.kill(os.getpid(), signal.SIGKILL)
        if x == 2 and not MARK.exists():
            MARK.write_text(str(os.getpid()))
            time.sleep(120)
        self.seen += 1
        return x * 10


@workflow
def main():
    gen = Gen()
    slow = Slow(mode="MODE")
    connect(gen.Out, slow.In)
    connect(slow.Out, "Out")
'''


def _slow_flow(write_flow, mode: str) -> Path:
    path = write_flow(SLOW_FLOW.replace("MODE", mode))
    path.write_text(path.read_text().replace("MARK_PATH", str(path.with_name("worker.pid"))))
    return path


def _wait_for(path: Path, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.05)
    return int(path.read_text())


def _gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_worker_killed_mid_firing_is_retried_and_the_tape_holds_the_firing_once(
    ray_address: str, runs_dir: Path, write_flow, capfd: pytest.CaptureFixture[str]
) -> None:
    path = _slow_flow(write_flow, "once")
    flow = load_flow(path)
    done: list[RunResult] = []
    runner = threading.Thread(target=lambda: done.append(execute(
        flow, max_workers=1, runs_dir=runs_dir, run_id="killed", executor="ray", ray_address=ray_address)))
    runner.start()
    pid = _wait_for(path.with_name("worker.pid"))
    os.kill(pid, signal.SIGKILL)  # the Ray worker running slow's second firing
    runner.join(120)
    assert done and done[0].status == "succeeded", done and done[0].error
    assert done[0].outputs == {"Out": [10, 20, 30]}
    firings = [r for r in records(runs_dir / "killed", "killed") if r.get("actor") == "slow" and "consumed" in r]
    assert [r["fireCount"] for r in firings] == [1, 2, 3] and firings[1]["state"] == {"seen": 2}
    assert "slow firing 2: its Ray worker died" in capfd.readouterr().err
    verify(runs_dir / "killed" / "tape.jsonl")


def test_a_worker_that_always_dies_fails_the_firing_atomically_naming_the_actor(
    ray_address: str, runs_dir: Path, write_flow
) -> None:
    flow = load_flow(_slow_flow(write_flow, "always"))
    result = execute(flow, max_workers=1, runs_dir=runs_dir, run_id="dies", executor="ray", ray_address=ray_address)
    assert result.status == "failed" and result.error is not None
    assert result.error.actor == "slow" and result.error.fireCount == 2
    assert "its Ray worker died 3 times" in result.error.message
    assert result.outputs == {"Out": [10]}
    assert result.leftovers == [("gen.Out->slow.In", 1)]  # its input went back: token 2 waits there
    slow = [r for r in records(runs_dir / "dies", "dies") if r.get("actor") == "slow" and "consumed" in r]
    assert [r["fireCount"] for r in slow] == [1]  # the failed firing left no record
    verify(runs_dir / "dies" / "tape.jsonl")


def _child(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "flowtape", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_sigterm_cancels_the_firing_on_the_cluster_and_the_run_ends_stopped_then_resumes(
    ray_address: str, runs_dir: Path, write_flow
) -> None:
    path = _slow_flow(write_flow, "once")
    common = ["--runs-dir", str(runs_dir), "--executor", "ray", "--ray-address", ray_address, "--json"]
    proc = _child(["run", str(path), "--run-id", "stopped", *common], path.parent)
    pid = _wait_for(path.with_name("worker.pid"))
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - began < 8, "the stop waited for the firing instead of cancelling it"
    assert json.loads(out)["status"] == "stopped", err
    assert _gone(pid), "the Ray worker of the cancelled firing still runs"
    summary = json.loads((runs_dir / "stopped" / "run.json").read_text())
    assert summary["status"] == "stopped"
    resumed = _child(["run", str(path), "--resume-from", "stopped", "--run-id", "again", *common], path.parent)
    out, err = resumed.communicate(timeout=120)
    assert json.loads(out) | {"runDir": None} == {
        "status": "succeeded", "outputs": {"Out": [10, 20, 30]}, "runId": "again", "runDir": None, "steps": 6}, err


def test_a_driver_killed_outright_leaves_a_tape_that_resumes(ray_address: str, runs_dir: Path, write_flow) -> None:
    path = _slow_flow(write_flow, "once")
    common = ["--runs-dir", str(runs_dir), "--executor", "ray", "--ray-address", ray_address]
    proc = _child(["run", str(path), "--run-id", "killed", *common], path.parent)
    _wait_for(path.with_name("worker.pid"))
    proc.kill()
    proc.communicate(timeout=30)
    assert read_tape(runs_dir / "killed" / "tape.jsonl").end is None
    code = cli_main(["run", str(path), "--resume-from", "killed", "--run-id", "after", *common])
    assert code == 0
    tape = read_tape(runs_dir / "after" / "tape.jsonl")
    assert tape.end is not None and tape.end.status == "succeeded"
    assert [s.replayed for s in tape.steps()].count(True) >= 2  # gen's first and slow's first were on the tape


PARALLEL_FLOW = '''\
import time

from flowtape import Port, connect, task, workflow


@task
class Gen:
    class Ports:
        Out = Port[int](direction="out")

    i: int = 0

    def action(self):
        if self.i >= 2:
            return None
        self.i += 1
        return self.i


@task
class Nap:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        time.sleep(0.4)
        return x


@workflow
def main():
    for k in range(4):
        gen = Gen()
        nap = Nap()
        connect(gen.Out, nap.In)
        connect(nap.Out, f"Out{k}")
'''


def _most_at_once(run_dir: Path) -> int:
    """The most naps under way at one moment, from the steps' start times and durations."""
    edges = []
    for s in read_tape(run_dir / "tape.jsonl").steps():
        if s.dur > 200_000:
            edges += [(s.at + s.dur, -1), (s.at, 1)]  # (an end sorts before a start at the same moment)
    running = most = 0
    for _, change in sorted(edges):
        running += change
        most = max(most, running)
    return most


def test_max_workers_bounds_the_firings_in_flight_on_the_cluster(ray_address: str, runs_dir: Path, write_flow) -> None:
    flow = load_flow(write_flow(PARALLEL_FLOW))
    for workers in (1, 2):
        result = execute(flow, max_workers=workers, runs_dir=runs_dir, run_id=f"w{workers}", executor="ray",
                         ray_address=ray_address)
        assert result.status == "succeeded" and result.outputs == {f"Out{k}": [1, 2] for k in range(4)}
        assert _most_at_once(runs_dir / f"w{workers}") == workers


HELPER_FLOW = GEN_FLOW.format(body='''
from helpers import shout


@task
class Say:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        return shout("tape")


@workflow
def main():
    gen = Gen(n=1)
    say = Say()
    connect(gen.Out, say.In)
    connect(say.Out, "Out")
''')


def test_a_flow_importing_its_own_module_runs_on_the_workers(ray_address: str, runs_dir: Path, write_flow) -> None:
    path = write_flow(HELPER_FLOW)
    (path.parent / "helpers.py").write_text("import os\n\n\ndef shout(s):\n    return s.upper() + '!' + str(os.getpid())\n")
    result = execute(load_flow(path), runs_dir=runs_dir, executor="ray", ray_address=ray_address)
    assert result.status == "succeeded", result.error
    (said,) = result.outputs["Out"]
    assert said.startswith("TAPE!") and said != f"TAPE!{os.getpid()}"  # it ran in another process


AGENT_FLOW = GEN_FLOW.format(body='''
import os

from flowtape import agent


@task
class Where:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        return str(os.getpid())


@agent(prompt="Say where it ran.", transport="openai", model="ray-model")
class Say:
    class Ports:
        pid = Port[str](direction="in")
        said = Port[str](direction="out")


@workflow
def main():
    gen = Gen(n=1)
    where = Where()
    say = Say()
    connect(gen.Out, where.In)
    connect(where.Out, say.pid)
    connect(say.said, "said")
''')


def test_an_agent_calls_its_model_from_the_driver_while_tasks_go_to_the_cluster(
    ray_address: str, runs_dir: Path, write_flow, server, monkeypatch
) -> None:
    # (the key and the endpoint are the driver's alone: the cluster's workers never see them)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ray-test")
    result = execute(load_flow(write_flow(AGENT_FLOW)), runs_dir=runs_dir, executor="ray", ray_address=ray_address)
    assert result.status == "succeeded", result.error
    (request,) = server.requests
    worker = request.payload()["inputs"]["pid"]
    assert worker != str(os.getpid())  # the task ran on the cluster
    assert result.outputs["said"] == [f"said of {json.dumps({'pid': worker})}"]
    (firing,) = [r for r in read_tape(runs_dir / result.run_id / "tape.jsonl").records() if isinstance(r, Firing) and r.actor == "say"]
    assert firing.calls and firing.calls[0].model == "ray-model"
    assert result.usage is not None and result.usage.calls == 1


LOCKED_FLOW = GEN_FLOW.format(body='''
import threading


@task
class Holder:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    lock: object

    def action(self, x):
        return x


@workflow
def main():
    gen = Gen(n=1)
    holder = Holder(lock=threading.Lock())
    connect(gen.Out, holder.In)
    connect(holder.Out, "Out")
''')


def test_an_actor_that_cannot_be_sent_fails_naming_it(ray_address: str, runs_dir: Path, write_flow) -> None:
    result = execute(load_flow(write_flow(LOCKED_FLOW)), runs_dir=runs_dir, executor="ray", ray_address=ray_address)
    assert result.status == "failed" and result.error is not None and result.error.actor == "holder"
    assert "holder cannot be sent to a Ray worker" in result.error.message
    assert "holder.lock: cannot pickle '_thread.lock' object" in result.error.message


RAISING_FLOW = GEN_FLOW.format(body='''
@task
class Picky:
    class Ports:
        In = Port[int](direction="in")

    def action(self, x):
        if x == 2:
            raise ValueError("two")  # RAISES


@workflow
def main():
    gen = Gen(n=3)
    picky = Picky()
    connect(gen.Out, picky.In)
''')


def test_code_the_workers_cannot_import_is_named(ray_address: str, runs_dir: Path, write_flow, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A module the driver imports from outside the flow's folder is not on the workers: the run
    fails naming the import that failed there, not Ray's own `ray::fire()` header."""
    faraway = tmp_path / "faraway"
    faraway.mkdir()
    (faraway / "far.py").write_text("def twice(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(faraway))
    path = write_flow(GEN_FLOW.format(body='''
from far import twice


@task
class Double:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return twice(x)


@workflow
def main():
    gen = Gen(n=1)
    double = Double()
    connect(gen.Out, double.In)
    connect(double.Out, "Out")
'''))
    result = execute(load_flow(path), runs_dir=runs_dir, executor="ray", ray_address=ray_address)
    assert result.status == "failed" and result.error is not None
    assert "a Ray worker could not run it: ModuleNotFoundError: No module named 'far'" in result.error.message, result.error.message


def test_an_error_on_a_worker_names_the_line_that_raised(ray_address: str, runs_dir: Path, write_flow) -> None:
    path = write_flow(RAISING_FLOW)
    result = execute(load_flow(path), max_workers=1, runs_dir=runs_dir, executor="ray", ray_address=ray_address)
    assert result.status == "failed" and result.error is not None and result.error.actor == "picky"
    assert result.error.raisedLine == line_of(path, "RAISES") and result.error.raisedFile == str(path)
    assert "ValueError: two" in result.error.message and "Traceback" in (result.error.traceback or "")
    assert isinstance(result.exception, ValueError)


def test_usage_errors_are_said_before_a_run_starts(runs_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chain = str(EXAMPLES / "chain.py")
    assert cli_main(["run", chain, "--runs-dir", str(runs_dir), "--ray-address", "auto"]) == 2
    assert "--ray-address (ray_address) needs --executor ray" in capsys.readouterr().err
    assert cli_main(["run", chain, "--runs-dir", str(runs_dir), "--executor", "ray", "--ray-address", "127.0.0.1:1"]) == 2
    assert "cannot start the run on the Ray cluster at 127.0.0.1:1: nothing answers" in capsys.readouterr().err
    assert not runs_dir.exists() or not any(runs_dir.iterdir())  # no tape begun


def test_without_ray_installed_the_error_names_the_extra(runs_dir: Path) -> None:
    # a real child whose `import ray` fails as it does where the extra is not installed
    code = ("import sys; sys.modules['ray'] = None; from flowtape.cli import main; "
            f"sys.exit(main(['run', {str(EXAMPLES / 'chain.py')!r}, '--executor', 'ray', '--runs-dir', {str(runs_dir)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "flowtape: --executor ray needs Ray, which is not installed: pip install 'flowtape[ray]'"


def test_a_local_instance_is_started_for_the_run_and_shut_down(runs_dir: Path, write_flow, tmp_path: Path) -> None:
    """No address: the run starts its own Ray (in this loopback-only namespace) and stops it at its end.
    Its workers read the flow's folder itself (no copy): its helper modules import (an actor whose
    class is one of theirs goes to the worker by that module's name), and they run in it."""
    if not loopback_only():
        pytest.skip("starts a Ray instance: only in a loopback-only network namespace (make pytest)")
    path = write_flow(GEN_FLOW.format(body='''
from helpers import Say


@workflow
def main():
    gen = Gen(n=1)
    say = Say()
    connect(gen.Out, say.In)
    connect(say.Out, "Out")
'''))
    (path.parent / "helpers.py").write_text(textwrap.dedent('''\
        import os

        from flowtape import Port, task


        @task
        class Say:
            class Ports:
                In = Port[int](direction="in")
                Out = Port[str](direction="out")

            def action(self, x):
                open("seen.txt", "w").close()
                return "TAPE" + open("greeting.txt").read() + str(os.getpid())
        '''))
    (path.parent / "greeting.txt").write_text("!")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ray_tmp = Path(tempfile.mkdtemp(prefix="ftl-", dir="/tmp"))  # (short: Ray's socket paths must fit 107 bytes)
    env = dict(os.environ, RAY_TMPDIR=str(ray_tmp))
    # `flowtape run`, and from Python a flow imported as a module of its own (its classes then go to
    # the workers by that module's name)
    by_api = ("import json, sys; sys.path.insert(0, sys.argv[1]); import flowtape, flow; "
              "r = flowtape.run(flow.main, executor='ray', runs_dir=sys.argv[2]); print(json.dumps({'outputs': r}))")
    for command in ([sys.executable, "-m", "flowtape", "run", str(path), "--executor", "ray", "--runs-dir", str(runs_dir),
                     "--json"], [sys.executable, "-c", by_api, str(path.parent), str(runs_dir)]):
        (path.parent / "seen.txt").unlink(missing_ok=True)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=elsewhere)
        out, err = proc.communicate(timeout=180)
        outputs = json.loads(out.splitlines()[-1]).get("outputs") if out.strip() else None
        assert outputs is not None and len(outputs.get("Out", [])) == 1, out + err
        (said,) = outputs["Out"]
        pid = said.removeprefix("TAPE!")
        assert pid.isdigit() and pid != str(proc.pid), said  # in the flow's folder, in a worker process, not the driver
        assert (path.parent / "seen.txt").exists(), "the worker ran in a copy of the flow's folder, not in it"
    try:
        assert list((ray_tmp / "ray").glob("session_2*")), "no local instance was started"
        left = subprocess.run(["pgrep", "-f", str(ray_tmp)], capture_output=True, text=True).stdout.split()
        assert not left, "the local instance outlived its run"
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
