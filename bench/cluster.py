"""Ray bench: `--executor ray` against the thread executor, side by side, on this machine.

    python bench/cluster.py            # full (about two minutes)
    python bench/cluster.py --quick    # reduced sizes
    python bench/cluster.py --json PATH  # also write the figures (and the rendered table) to PATH

bench/run.py runs this script as a child process (section 6) and merges its figures into its
results under "ray". It runs itself inside a loopback-only network namespace
(scripts/loopback-only.sh): the Ray heads it starts reach nothing beyond 127.0.0.1.

1. CPU-bound: four independent branches, each a source feeding an actor that does 20 ms of
   pure-Python work per firing (a fixed amount of arithmetic, measured to take 20 ms here alone,
   so a thread cannot pass it off by waiting). Threads (4 workers, the GIL: one core) against Ray
   with a head of `num_cpus` 1 and 2 (4 workers in flight). A run of its own (`flowtape run`) is a
   Ray job of its own, whose worker processes start inside it (seconds on a loaded machine); the
   `-warm` rows run in one Ray session the bench holds, whose workers an untimed run started
   first: what a long-lived driver pays per run, and the figure the target is checked against.
   `local` is `--executor ray` alone: a local instance started for the run (its start in the run's
   time), whose workers read the flow's folder itself instead of a shipped copy. From each run of
   its own's start-up and rate, the work (on threads) past which it reaches the target.
2. Per-firing cost: a source and two trivial actors, one worker, firings per second.
3. A resume at the last step of the CPU run, Ray against threads: every firing replays on the
   driver and each source is asked once more there, so the Ray run never joins its cluster."""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work" / "ray"

CPU_FLOW = '''\
from flowtape import Port, connect, task, workflow


def burn(rounds):
    x = 0
    for i in range(rounds):
        x = (x * 31 + i) % 1000003
    return x


@task
class Items:
    class Ports:
        Out = Port[int](direction="out")

    n: int
    i: int = 0

    def action(self):
        if self.i >= self.n:
            return None
        self.i += 1
        return self.i


@task
class Burn:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    rounds: int

    def action(self, x):
        return burn(self.rounds) + x


@workflow
def main():
    for k in range(4):
        items = Items(n=N)
        work = Burn(rounds=ROUNDS)
        connect(items.Out, work.In)
        connect(work.Out, f"Out{k}")
'''

TRIVIAL_FLOW = '''\
from flowtape import Port, connect, task, workflow


@task
class Items:
    class Ports:
        Out = Port[int](direction="out")

    n: int
    i: int = 0

    def action(self):
        if self.i >= self.n:
            return None
        self.i += 1
        return self.i


@task
class Inc:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x + 1


@workflow
def main():
    items = Items(n=N)
    a = Inc()
    b = Inc()
    connect(items.Out, a.In)
    connect(a.Out, b.In)
    connect(b.Out, "Out")
'''

FULL = {"cpu_n": 40, "trivial_n": 300, "reps": 2}  # 160 firings of 20 ms (3.2 s of work); 900 trivial firings
QUICK = {"cpu_n": 12, "trivial_n": 100, "reps": 1}
TARGET_CPU_SPEEDUP = 1.7  # with 2 CPUs


def calibrate(seconds: float = 0.020) -> int:
    """How many rounds of the flow's arithmetic take `seconds` here, alone."""
    namespace: dict[str, Any] = {}
    exec(CPU_FLOW.split("@task")[0].replace("from flowtape import Port, connect, task, workflow", ""), namespace)
    burn = namespace["burn"]
    rounds = 20_000
    while True:
        t0 = time.perf_counter()
        burn(rounds)
        took = time.perf_counter() - t0
        if took > 0.005:
            best = min(took, *(_timed(burn, rounds) for _ in range(3)))
            return int(rounds * seconds / best)
        rounds *= 2


def _timed(fn: Any, arg: int) -> float:
    t0 = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t0


class Head:
    """A Ray head of `cpus` CPUs on 127.0.0.1, started for the bench and stopped after it."""

    def __init__(self, cpus: int) -> None:
        self.temp = tempfile.mkdtemp(prefix="ftbench-", dir="/tmp")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = open(Path(self.temp) / "head.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", f"--port={self.port}",
             f"--num-cpus={cpus}", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.temp}",
             "--node-ip-address=127.0.0.1"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Ray head did not start: see {self.log.name}") from None
                time.sleep(0.3)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()
        shutil.rmtree(self.temp, ignore_errors=True)


def timed_run(flow_path: Path, runs: Path, run_id: str, **options: Any) -> dict[str, Any]:
    from flowtape.loader import load_flow
    from flowtape.runner import execute
    from flowtape.tape import read_tape

    flow = load_flow(flow_path)
    t0 = time.perf_counter()
    result = execute(flow, runs_dir=runs, run_id=run_id, **options)
    wall = time.perf_counter() - t0
    if result.status != "succeeded":
        raise RuntimeError(f"{run_id}: {result.status}: {result.error.message if result.error else ''}")
    steps = read_tape(runs / run_id / "tape.jsonl").steps()
    # the firings that do the work (a source's asks run on the driver with either executor)
    live = [s for s in steps if not s.replayed and not s.actor.startswith("items")]
    if not live:
        return {"wall": wall, "span": 0.0, "steady": None, "firings": result.firings, "steps": result.steps, "first_back": 0.0}
    end = max(s.at + s.dur for s in live)
    span = (end - min(s.at for s in live)) / 1e6
    # once the first firing sent to a worker is back (a source's run on the driver, with Ray), the
    # workers are up: the rate from then on, without their start
    sent = [s for s in live if not s.actor.startswith("items")] or live
    first = min(s.at + s.dur for s in sent)
    begun = min(s.at for s in live)
    after = sum(1 for s in live if s.at + s.dur > first)
    steady = after / ((end - first) / 1e6) if end > first else None
    return {"wall": wall, "span": span, "steady": steady, "firings": result.firings, "steps": result.steps,
            "first_back": (first - begun) / 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if [name for _, name in socket.if_nameindex()] != ["lo"]:
        script = ROOT / "scripts" / "loopback-only.sh"
        return subprocess.call([str(script), sys.executable, *sys.argv])
    params = QUICK if args.quick else FULL
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16), RAY_USAGE_STATS_ENABLED="0")
    shutil.rmtree(WORK, ignore_errors=True)
    flows = WORK / "flows"
    flows.mkdir(parents=True)
    runs = WORK / "runs"
    rounds = calibrate()
    cpu = flows / "cpu.py"
    cpu.write_text(CPU_FLOW.replace("n=N", f"n={params['cpu_n']}").replace("rounds=ROUNDS", f"rounds={rounds}"))
    trivial = flows / "trivial.py"
    trivial.write_text(TRIVIAL_FLOW.replace("n=N", f"n={params['trivial_n']}"))
    figures: dict[str, Any] = {"params": params, "burn_rounds_for_20ms": rounds, "cpus": os.cpu_count()}

    def best(label: str, path: Path, **options: Any) -> dict[str, Any]:
        tries = [timed_run(path, runs, f"{label}-{i}", **options) for i in range(params["reps"])]
        return min(tries, key=lambda r: r["wall"]) | {"run_id": f"{label}-{tries.index(min(tries, key=lambda r: r['wall']))}"}

    def warm(label: str, path: Path, address: str) -> dict[str, Any]:
        """Runs in one Ray session this process holds (a run uses its caller's session as it is),
        whose workers an untimed run has started: what a long-lived driver pays per run."""
        import ray

        ray.init(address=address, runtime_env={"working_dir": str(path.parent)}, logging_level=logging.WARNING)
        try:
            timed_run(path, runs, f"{label}-warmup", max_workers=4, executor="ray")
            return best(label, path, max_workers=4, executor="ray")
        finally:
            ray.shutdown()

    print("ray bench: threads", file=sys.stderr, flush=True)
    results = {"threads": best("cpu-threads", cpu, max_workers=4)}
    trivial_threads = best("trivial-threads", trivial, max_workers=1)
    for cpus in (1, 2):
        print(f"ray bench: a head of {cpus} CPU(s)", file=sys.stderr, flush=True)
        head = Head(cpus)
        try:
            results[f"ray{cpus}"] = best(f"cpu-ray{cpus}", cpu, max_workers=4, executor="ray", ray_address=head.address)
            results[f"ray{cpus}-warm"] = warm(f"cpu-ray{cpus}-warm", cpu, head.address)
            if cpus == 2:
                trivial_ray = best("trivial-ray", trivial, max_workers=1, executor="ray", ray_address=head.address)
                t0 = time.perf_counter()
                timed_run(cpu, runs, "resume-ray", resume_from=results["ray2"]["run_id"], executor="ray",
                          ray_address=head.address)
                resume_ray = time.perf_counter() - t0
        finally:
            head.stop()
    print("ray bench: a local instance of the run's own", file=sys.stderr, flush=True)
    results["local"] = best("cpu-local", cpu, max_workers=4, executor="ray")
    t0 = time.perf_counter()
    timed_run(cpu, runs, "resume-threads", resume_from=results["threads"]["run_id"])
    resume_threads = time.perf_counter() - t0

    base = results["threads"]
    for name in ("ray1", "ray2", "local"):  # its workers' start: the time to its first result, less the threads run's
        results[name]["workers_start_s"] = results[name]["first_back"] - base["first_back"]
    # How long a run of its own must compute (on threads) to reach the target: a long run's rate
    # tends to the warm one, and what it pays beyond its work at that rate (joining or starting
    # Ray, its workers' start, letting go) is fixed, so T / (fixed + T / rate) = target (None: the
    # warm rate alone is below the target)
    breakeven = {}
    rate = base["wall"] / results["ray2-warm"]["wall"]
    for name in ("ray2", "local"):
        fixed = results[name]["wall"] - base["wall"] / rate
        results[name]["fixed_s"] = fixed
        breakeven[name] = TARGET_CPU_SPEEDUP * fixed / (1 - TARGET_CPU_SPEEDUP / rate) if rate > TARGET_CPU_SPEEDUP else None
    rows = []
    for name, r in results.items():
        rows.append(f"  {name:<10} wall {r['wall']:6.2f} s ({base['wall'] / r['wall']:4.2f}x threads)   "
                    f"once its workers are up {r['steady']:6.1f} firings/s ({r['steady'] / base['steady']:4.2f}x threads)")
    rows.append(f"  (ray1, ray2: a run of its own joining a head (`--ray-address`), its folder shipped to its workers, "
                f"which start inside it: {results['ray1']['workers_start_s']:.1f} s and "
                f"{results['ray2']['workers_start_s']:.1f} s before a first result; local: `--executor ray` alone, a local "
                f"instance started for the run, {results['local']['workers_start_s']:.1f} s; -warm: runs in one Ray "
                "session this bench holds, its workers started by an untimed run)")
    rows.append("  a run of its own pays, beyond its work, " + ", ".join(
        f"{name} {results[name]['fixed_s']:.1f} s" for name in breakeven) + f"; so it reaches {TARGET_CPU_SPEEDUP}x threads "
        "once its work takes, on threads, " + ", ".join(
        f"{name} {'(never, at the warm rate)' if t is None else f'{t:.0f} s'}" for name, t in breakeven.items())
        + " (at the ray2-warm rate, which a long run's tends to)")
    speedup2 = base["wall"] / results["ray2-warm"]["wall"]
    figures |= {
        "cpu": results,
        "cpu_speedup_wall": {k: base["wall"] / r["wall"] for k, r in results.items() if k != "threads"},
        "cpu_speedup_steady": {k: r["steady"] / base["steady"] for k, r in results.items() if k != "threads"},
        "trivial_firings_per_s": {"threads": trivial_threads["steady"], "ray": trivial_ray["steady"]},
        "resume_last_step_s": {"threads": resume_threads, "ray": resume_ray},
        "breakeven_threads_s": breakeven,
    }
    fps = figures["trivial_firings_per_s"]
    table = "\n".join([
        f"\n6. Ray: {4 * params['cpu_n']} firings of 20 ms of pure Python in 4 independent branches, 4 workers "
        f"(target with 2 CPUs, its workers up (ray2-warm): {TARGET_CPU_SPEEDUP}x threads: "
        f"{'ok' if speedup2 >= TARGET_CPU_SPEEDUP else 'MISSED'})",
        *rows,
        f"  per firing, trivial actors, one worker: threads {fps['threads']:,.0f} firings/s, ray {fps['ray']:,.0f} firings/s "
        f"({1e3 / fps['ray']:.2f} ms a firing through Ray, once its workers are up)",
        f"  resume at the last step of the CPU run: threads {resume_threads:.2f} s, ray {resume_ray:.2f} s "
        f"({resume_ray / resume_threads:.2f}x threads: recorded firings replay on the driver, each source is asked "
        "once more there; the cluster is never joined)",
    ])
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(figures | {"table": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
