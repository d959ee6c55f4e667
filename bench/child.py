"""One bench measurement, run in a child process by bench/run.py.

Runs under either framework's interpreter (Flowtape's venv or bench/.wfpy-venv), so it imports
nothing of the bench or of Flowtape at module level. Usage:

    python bench/child.py SPEC.json

SPEC: {"framework": "flowtape"|"wfpy", "flow": path, "workflow": name, "result": path,
       "runs": [{"workers": int|null, "tape": bool, "out": dir, "run_id": str,
                 "resume_from": dir|null, "at_step": int|null}, ...], "reps": int}

Each run is timed around the framework's run call only (the flow module is imported once, before
any timing; the flow's size comes from the environment, BENCH_N / BENCH_SLEEP). With reps > 1 the
runs are repeated round-robin (a, b, a, b, ...) so that a load spike hits every variant alike.
The result file gets one entry per run with the list of timings and what the framework recorded."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def outputs_sig(outputs: Any) -> str:
    """A digest of a run's outputs, to check that a resumed run ends where the fresh one did."""
    text = json.dumps(outputs, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_workflow(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_flow_{Path(path).stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def dir_bytes(path: Path) -> tuple[int, int]:
    total = files = 0
    for root, _, names in os.walk(path):
        for n in names:
            files += 1
            total += (Path(root) / n).stat().st_size
    return total, files


def count_flowtape_firings(tape: Path) -> tuple[int, int]:
    """(replayed, live) firing records of a tape, read with Flowtape's own reader (after the timing)."""
    from flowtape.tape import Firing, read_tape

    replayed = live = 0
    for record in read_tape(tape).records():
        if isinstance(record, Firing):
            if record.replayed:
                replayed += 1
            else:
                live += 1
    return replayed, live


def run_flowtape(wf: Any, run: dict[str, Any], rep: int) -> dict[str, Any]:
    from flowtape.runner import execute

    out = Path(run["out"])
    run_id = f"{run['run_id']}-{rep}" if run.get("suffix_rep") else run["run_id"]
    marks: list[tuple[int, float]] = []  # (step, seconds since the call) every 100 steps, and the first

    def on_step(step: int, firings: int, actor: str) -> None:
        if not marks or step % 100 == 0:
            marks.append((step, time.perf_counter() - t0))

    t0 = time.perf_counter()
    result = execute(
        wf, None, max_workers=run["workers"], runs_dir=out, run_id=run_id, tape=run.get("tape", True),
        resume_from=run.get("resume_from"), at_step=run.get("at_step"), on_step=on_step,
    )
    seconds = time.perf_counter() - t0
    info: dict[str, Any] = {
        "seconds": seconds, "status": result.status, "steps": result.steps, "records": result.firings,
        "replayStopped": [f"{d.actor}#{d.fireCount}: {d.reason}" for d in result.replay_stopped],
        "error": result.error.message if result.error is not None else None,
        "outputs": outputs_sig(result.outputs), "marks": marks,
    }
    if result.run_dir is not None:
        tape = result.run_dir / "tape.jsonl"
        info["run_dir"] = str(result.run_dir)
        info["tape_bytes"] = tape.stat().st_size
        info["dir_bytes"], info["dir_files"] = dir_bytes(result.run_dir)
        info["firings_replayed"], info["firings_live"] = count_flowtape_firings(tape)
    return info


def run_wfpy(wf: Any, run: dict[str, Any], rep: int) -> dict[str, Any]:
    from wfpy import run as wf_run

    out = Path(run["out"])
    run_id = f"{run['run_id']}-{rep}" if run.get("suffix_rep") else run["run_id"]
    kwargs: dict[str, Any] = {"max_workers": run["workers"], "out_dir": str(out), "run_id": run_id}
    if run.get("resume_from"):
        kwargs["resume_from"] = run["resume_from"]
        kwargs["at_step"] = run["at_step"]
    t0 = time.perf_counter()
    error = None
    outputs: Any = None
    try:
        outputs = wf_run(wf, inputs={}, **kwargs)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - t0
    run_dir = out / run_id
    journal = run_dir / "run.wf-journal.jsonl"
    queues = run_dir / "run.wf-queues.json"
    record = run_dir / "run.wf-run.json"
    replayed = live = 0
    if journal.exists():
        with open(journal, "rb") as fh:
            for line in fh:
                if b'"actor"' in line:
                    if b'"replayed": true' in line or b'"replayed":true' in line:
                        replayed += 1
                    else:
                        live += 1
    steps = None
    if queues.exists():
        steps = json.loads(queues.read_bytes()).get("stepCount")
    stopped = None
    if record.exists():
        stopped = json.loads(record.read_bytes()).get("replayStopped")
    edge = run_dir / "work" / "edge-tokens"
    return {
        "seconds": seconds, "status": "failed" if error else "succeeded", "steps": steps,
        "records": replayed + live, "firings_replayed": replayed, "firings_live": live,
        "replayStopped": [str(stopped)] if stopped else [], "error": error, "run_dir": str(run_dir),
        "outputs": outputs_sig(outputs),
        "journal_bytes": journal.stat().st_size if journal.exists() else 0,
        "queues_bytes": queues.stat().st_size if queues.exists() else 0,
        "edge_token_files": sum(len(f) for _, _, f in os.walk(edge)) if edge.exists() else 0,
    }


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    framework = spec["framework"]
    results: list[dict[str, Any]] = [{"times": [], "reps": []} for _ in spec["runs"]]
    try:
        wf = load_workflow(spec["flow"], spec["workflow"])
        runner = run_flowtape if framework == "flowtape" else run_wfpy
        for rep in range(spec.get("reps", 1)):
            for i, run in enumerate(spec["runs"]):
                info = runner(wf, run, rep)
                results[i]["times"].append(info["seconds"])
                results[i]["reps"].append(info)
        payload: dict[str, Any] = {"ok": True, "runs": results}
    except Exception as exc:  # noqa: BLE001 - the parent prints it in the table
        payload = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(), "runs": results}
    Path(spec["result"]).write_text(json.dumps(payload, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
