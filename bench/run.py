"""Flowtape vs wfpy 1.1.0, side by side: engine speed, tape cost, tape size, resume.

    python bench/run.py            # full bench (about 3 minutes), writes bench/results.json
    python bench/run.py --quick    # reduced sizes (under a minute), writes bench/results-quick.json
    python bench/run.py --no-wfpy  # Flowtape only
    python bench/run.py --no-lsp   # without the LSP streaming bench (section 5, bench/lsp.py)
    python bench/run.py --no-ray   # without Ray against threads (section 6, bench/cluster.py)
    python bench/run.py --profile  # also profile Flowtape's chain run in-process (cProfile)

The flows live once in bench/flows/ with a placeholder import (`from FRAMEWORK import ...`);
each framework gets a copy whose import line names it (in bench/.work/, ignored by git), so both
run the very same flow code. Every measurement runs in its own child process (bench/child.py)
under that framework's interpreter: Flowtape's is this one, wfpy's is bench/.wfpy-venv (created
and filled with `pip install wfpy==1.1.0` when missing; wfpy is never a project dependency).
Only the run call is timed."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / ".work"
FLOWS = BENCH / "flows"
CHILD = BENCH / "child.py"
WFPY_VENV = BENCH / ".wfpy-venv"
WFPY_VERSION = "1.1.0"
PLACEHOLDER = "from FRAMEWORK import"

# flow name -> (file in bench/flows, workflow function, firings per item, what a firing counts)
FLOW_DEFS: dict[str, tuple[str, str, int, str]] = {
    "chain": ("chain.py", "chain", 6, "source + 5 actors, per item"),
    "fanout": ("fanout.py", "fanout", 10, "source + 8 workers + join, per item"),
    "loop": ("loopflow.py", "looped", 3, "3 body actors per item (loop node firings not counted)"),
}
# flows measured for tape size only (section 3), with the same items for both frameworks
SIZE_FLOWS: dict[str, tuple[str, str, int, str]] = {
    "accumulate": ("accumulate.py", "accumulate", 2, "source + a collector keeping every item, per item"),
}

FULL: dict[str, Any] = {
    "ft_n": {"chain": 2000, "fanout": 1400, "loop": 2000},  # 12,000 / 14,000 / 6,000 firings
    "wf_n": {"chain": 250, "fanout": 150, "loop": 300},  # 1,500 / 1,500 / 900 firings (wfpy is slow)
    "ft_reps": 5,
    "wf_reps": 3,  # wfpy's time varies by a third from run to run: its best of a few, as for Flowtape
    "big_n": 16667,  # 6 x 16,667 = 100,002 firings
    "acc_n": 2000,  # 4,000 firings, for both frameworks
    "sleep_n": 33,  # 6 x 33 = 198 firings of 20 ms
    "sleep": 0.020,
    "sleep_mid": True,
}
QUICK: dict[str, Any] = {
    "ft_n": {"chain": 1000, "fanout": 700, "loop": 1000},
    "wf_n": {"chain": 100, "fanout": 60, "loop": 100},
    "ft_reps": 2,
    "wf_reps": 1,
    "big_n": 3334,  # 20,004 firings
    "acc_n": 500,
    "sleep_n": 10,  # 60 firings of 20 ms
    "sleep": 0.020,
    "sleep_mid": False,
}

TARGET_SPEEDUP = 50.0
TARGET_TAPE_OVERHEAD = 50.0  # %, actors that do nothing (issue #26; the aim beyond it: 15%)
TARGET_TAPE_OVERHEAD_AIM = 15.0  # %
TARGET_LIGHT_TAPE_OVERHEAD = 5.0  # %, actors that do 0.2 ms of work
TARGET_TAPE_BYTES_PER_FIRING = 120.0  # the chain flow
TARGET_BIG_TAPE_MB = 20.0
TARGET_REPLAY_SPEEDUP = 5.0
TARGET_SLEEP_RESUME_PCT = 2.0


def engine_stamp() -> str:
    """The newest modification time of the engine's sources: the bench warns when it moved mid-run."""
    files = list((ROOT / "engine" / "flowtape").glob("*.py"))
    newest = max((f.stat().st_mtime for f in files), default=0.0)
    return dt.datetime.fromtimestamp(newest, dt.UTC).isoformat(timespec="seconds")


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ---- setup -------------------------------------------------------------------------------------


def flowtape_python() -> str:
    """This interpreter when it has flowtape, else the project venv's."""
    try:
        import flowtape  # noqa: F401
    except ImportError:
        venv = ROOT / ".venv" / "bin" / "python"
        if venv.exists():
            return str(venv)
        raise SystemExit("bench: flowtape is not importable here; run `make venv` first") from None
    return sys.executable


def ensure_wfpy() -> str | None:
    """bench/.wfpy-venv with wfpy 1.1.0 in it, created when missing. None if that fails."""
    py = WFPY_VENV / "bin" / "python"
    check = [str(py), "-c", f"import importlib.metadata as m; assert m.version('wfpy') == '{WFPY_VERSION}'"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return str(py)
    log(f"installing wfpy=={WFPY_VERSION} into {WFPY_VENV.relative_to(ROOT)} (once)")
    try:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(WFPY_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", f"wfpy=={WFPY_VERSION}"], check=True)
        subprocess.run(check, check=True, capture_output=True)
    except (subprocess.CalledProcessError, OSError) as exc:
        log(f"could not set up wfpy ({exc}); the wfpy columns stay empty")
        return None
    return str(py)


def prepare_flows(work: Path) -> dict[str, Path]:
    """Copy every flow once per framework, with the import line naming that framework."""
    dirs = {}
    for framework in ("flowtape", "wfpy"):
        target = work / f"flows-{framework}"
        target.mkdir(parents=True, exist_ok=True)
        for src in FLOWS.glob("*.py"):
            text = src.read_text()
            if PLACEHOLDER not in text:
                raise SystemExit(f"bench: {src} has no `{PLACEHOLDER} ...` line")
            (target / src.name).write_text(text.replace(PLACEHOLDER, f"from {framework} import"))
        dirs[framework] = target
    return dirs


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.params = QUICK if args.quick else FULL
        self.work = WORK / ("quick" if args.quick else "full")
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.flow_dirs = prepare_flows(self.work)
        self.py = {"flowtape": flowtape_python(), "wfpy": None if args.no_wfpy else ensure_wfpy()}
        self.count = 0

    def child(
        self, framework: str, flow: str, n: int, runs: list[dict[str, Any]], reps: int = 1, sleep: float = 0.0,
        label: str = "",
    ) -> dict[str, Any] | None:
        """Run `runs` (x reps) of `flow` with N=`n` items in a fresh child of `framework`."""
        py = self.py[framework]
        if py is None:
            return None
        self.count += 1
        spec_path = self.work / f"spec-{self.count:03d}.json"
        result_path = self.work / f"result-{self.count:03d}.json"
        file, workflow, _, _ = {**FLOW_DEFS, **SIZE_FLOWS}[flow]
        spec = {
            "framework": framework, "flow": str(self.flow_dirs[framework] / file), "workflow": workflow,
            "result": str(result_path), "runs": runs, "reps": reps,
        }
        spec_path.write_text(json.dumps(spec, indent=1))
        env = dict(os.environ, BENCH_N=str(n), BENCH_SLEEP=str(sleep), PYTHONDONTWRITEBYTECODE="1")
        env.pop("PYTHONPATH", None)
        t0 = time.perf_counter()
        with open(self.work / f"child-{self.count:03d}.log", "wb") as out:
            proc = subprocess.run([py, str(CHILD), str(spec_path)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                  cwd=self.work)
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not result_path.exists():
            log(f"{framework:8} {label or flow}: child failed (exit {proc.returncode}), see {out.name}")
            return None
        payload: dict[str, Any] = json.loads(result_path.read_text())
        if not payload.get("ok"):
            log(f"{framework:8} {label or flow}: {payload.get('error')}")
            return None
        bad = [r for run in payload["runs"] for r in run["reps"] if r.get("status") != "succeeded"]
        for r in bad[:1]:
            log(f"{framework:8} {label or flow}: run {r.get('status')}: {r.get('error')}")
        log(f"{framework:8} {label or flow:<34} N={n:<6} {wall:6.1f}s wall")
        return payload


# ---- helpers -------------------------------------------------------------------------------------


def best(run: dict[str, Any] | None) -> float | None:
    return min(run["times"]) if run and run["times"] else None


def median(run: dict[str, Any] | None) -> float | None:
    return statistics.median(run["times"]) if run and run["times"] else None


def rate(firings: int, seconds: float | None) -> float | None:
    return firings / seconds if seconds else None


def fmt(value: Any, spec: str = ",.0f", unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{format(value, spec)}{unit}"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("PASS" if ok else "MISS")


def table(title: str, header: list[str], rows: list[list[str]], notes: list[str] | None = None) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    line = "  ".join("-" * w for w in widths)
    out = [f"\n{title}", "=" * len(title)]
    out.append("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=False))))
    out.append(line)
    for row in rows:
        out.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))))
    out.extend(f"  * {n}" for n in notes or [])
    return "\n".join(out)


def workers_label(workers: int | None) -> str:
    return "1" if workers == 1 else "default"


# ---- 1 + 2: engine speed and tape cost ------------------------------------------------------------


def speed(b: Bench, results: dict[str, Any]) -> list[str]:
    p = b.params
    reps = p["ft_reps"]
    rows_speed: list[list[str]] = []
    rows_tape: list[list[str]] = []
    data: dict[str, Any] = {}
    for flow in FLOW_DEFS:
        per_item = FLOW_DEFS[flow][2]
        for workers in (1, None):
            wl = workers_label(workers)
            ft_n, wf_n = p["ft_n"][flow], p["wf_n"][flow]
            ft_firings, wf_firings = ft_n * per_item, wf_n * per_item
            out = b.work / "runs" / f"ft-{flow}-w{wl}"
            ft = b.child("flowtape", flow, ft_n, [
                {"workers": workers, "tape": True, "out": str(out), "run_id": "on", "suffix_rep": True},
                {"workers": workers, "tape": False, "out": str(out), "run_id": "off", "suffix_rep": True},
            ], reps=reps, label=f"{flow} workers={wl} tape on/off x{reps}")
            wf = b.child("wfpy", flow, wf_n, [
                {"workers": workers, "out": str(b.work / "runs" / f"wf-{flow}-w{wl}"), "run_id": "fresh", "suffix_rep": True},
            ], reps=p["wf_reps"], label=f"{flow} workers={wl} x{p['wf_reps']}")
            on = ft["runs"][0] if ft else None
            off = ft["runs"][1] if ft else None
            wfr = wf["runs"][0] if wf else None
            ft_rate, ft_rate_med = rate(ft_firings, best(on)), rate(ft_firings, median(on))
            ft_rate_off = rate(ft_firings, best(off))
            wf_rate = rate(wf_firings, best(wfr))
            ratio = ft_rate / wf_rate if ft_rate and wf_rate else None
            overhead = (best(on) / best(off) - 1) * 100 if best(on) and best(off) else None  # type: ignore[operator]
            overhead_med = (median(on) / median(off) - 1) * 100 if median(on) and median(off) else None  # type: ignore[operator]
            key = f"{flow}/workers={wl}"
            data[key] = {
                "flowtape": {"items": ft_n, "firings": ft_firings, "tape_on_s": on["times"] if on else None,
                             "tape_off_s": off["times"] if off else None, "firings_per_s": ft_rate,
                             "firings_per_s_median": ft_rate_med, "firings_per_s_tape_off": ft_rate_off,
                             "records": on["reps"][0]["records"] if on else None,
                             "tape_bytes": on["reps"][0].get("tape_bytes") if on else None},
                "wfpy": {"items": wf_n, "firings": wf_firings, "seconds": wfr["times"] if wfr else None,
                         "firings_per_s": wf_rate, "records": wfr["reps"][0]["records"] if wfr else None,
                         "run_dir": wfr["reps"][0]["run_dir"] if wfr else None,
                         "journal_bytes": wfr["reps"][0]["journal_bytes"] if wfr else None,
                         "queues_bytes": wfr["reps"][0]["queues_bytes"] if wfr else None,
                         "edge_token_files": wfr["reps"][0]["edge_token_files"] if wfr else None,
                         "steps": wfr["reps"][0]["steps"] if wfr else None,
                         "outputs": wfr["reps"][0].get("outputs") if wfr else None},
                "speedup": ratio, "tape_overhead_pct": overhead, "tape_overhead_pct_median": overhead_med,
            }
            rows_speed.append([
                flow, wl, f"{ft_firings:,}", fmt(best(on), ".3f", "s"), fmt(ft_rate), fmt(ft_rate_med),
                f"{wf_firings:,}", fmt(best(wfr), ".2f", "s"), fmt(wf_rate), fmt(ratio, ".0f", "x"),
                verdict(ratio >= TARGET_SPEEDUP if ratio else None),
            ])
            rows_tape.append([
                flow, wl, f"{ft_firings:,}", fmt(best(on), ".3f", "s"), fmt(best(off), ".3f", "s"),
                fmt(overhead, "+.1f", "%"), fmt(overhead_med, "+.1f", "%"),
                verdict(overhead <= TARGET_TAPE_OVERHEAD if overhead is not None else None),
            ])
    # The same chain when each firing does a little work (a 0.2 ms wait, like a tiny I/O call):
    # what the tape costs once an actor does anything at all.
    light_n = max(50, p["ft_n"]["chain"] // 8)
    out = b.work / "runs" / "ft-chain-light"
    light = b.child("flowtape", "chain", light_n, [
        {"workers": 1, "tape": True, "out": str(out), "run_id": "on", "suffix_rep": True},
        {"workers": 1, "tape": False, "out": str(out), "run_id": "off", "suffix_rep": True},
    ], reps=reps, sleep=0.0002, label="chain 0.2ms/firing tape on/off")
    if light:
        on, off = light["runs"][0], light["runs"][1]
        overhead = (best(on) / best(off) - 1) * 100 if best(on) and best(off) else None  # type: ignore[operator]
        overhead_med = (median(on) / median(off) - 1) * 100 if median(on) and median(off) else None  # type: ignore[operator]
        data["chain-0.2ms/workers=1"] = {"tape_overhead_pct": overhead, "tape_overhead_pct_median": overhead_med,
                                         "firings": light_n * FLOW_DEFS["chain"][2]}
        rows_tape.append([
            "chain, 0.2 ms/firing", "1", f"{light_n * FLOW_DEFS['chain'][2]:,}", fmt(best(on), ".3f", "s"),
            fmt(best(off), ".3f", "s"), fmt(overhead, "+.1f", "%"), fmt(overhead_med, "+.1f", "%"),
            verdict(overhead <= TARGET_LIGHT_TAPE_OVERHEAD if overhead is not None else None),
        ])
    results["speed"] = data
    notes = [
        "firings/s = firings / seconds of the run() call; best of "
        f"{reps} Flowtape runs (median beside it), best of {p['wf_reps']} wfpy run(s).",
        "wfpy runs on FEWER items (" + ", ".join(f"{f} {p['wf_n'][f]}" for f in FLOW_DEFS)
        + ") than Flowtape (" + ", ".join(f"{f} {p['ft_n'][f]}" for f in FLOW_DEFS)
        + "): the ratio compares rates, not times.",
        "firings counted from the flow structure, the same for both: " + "; ".join(
            f"{f}: {d[3]}" for f, d in FLOW_DEFS.items()),
        f"target: Flowtape >= {TARGET_SPEEDUP:.0f}x wfpy's firings/s. 'default' = each framework's default pool.",
    ]
    chain1 = data.get("chain/workers=1", {})
    n1 = chain1.get("flowtape", {}).get("firings") or 0
    on1 = min(chain1.get("flowtape", {}).get("tape_on_s") or [0]) or None
    off1 = min(chain1.get("flowtape", {}).get("tape_off_s") or [0]) or None
    cost_off = off1 / n1 * 1e6 if n1 and off1 else None
    cost_rec = (on1 - off1) / n1 * 1e6 if n1 and on1 and off1 else None
    floor = recorder_floor(b, n1)
    data["recorder_floor_us"] = floor
    floor_pct = floor / cost_off * 100 if floor and cost_off else None
    tape_notes = [
        f"same flows and sizes as above, tape on and off alternated in one process, {reps} runs each;"
        " overhead from the best times (median-based beside it).",
        f"target: overhead <= {TARGET_TAPE_OVERHEAD:.0f}% for actors that do nothing (aim: {TARGET_TAPE_OVERHEAD_AIM:.0f}%),"
        f" <= {TARGET_LIGHT_TAPE_OVERHEAD:.0f}% for actors that do 0.2 ms of work.",
        f"chain, 1 worker, as measured here: a firing costs {fmt(cost_off, '.1f')} us untaped and recording it"
        f" {fmt(cost_rec, '.1f')} us more (one line per firing, its step included, filled into the actor's format:"
        " encode, the token taken named (an int by itself), hash chain, one store into the tape's mapped file, no system call). 'chain, 0.2 ms/firing':"
        " the same chain whose actors each wait 0.2 ms.",
        f"floor (bench/floor.py): that line alone, encoded, its token taken named, formatted, sealed and stored by Flowtape's own writer"
        f" with no engine around it, costs {fmt(floor, '.1f')} us a firing here, {fmt(floor_pct, '.0f', '%')} of an"
        " untaped firing.",
    ]
    return [
        table("1. Engine speed: Flowtape vs wfpy 1.1.0 (firings/s)",
              ["flow", "workers", "FT firings", "FT time", "FT f/s", "FT f/s med", "wfpy firings", "wfpy time",
               "wfpy f/s", "FT/wfpy", "target"], rows_speed, notes),
        table("2. Tape cost: Flowtape tape on vs off (tape=False)",
              ["flow", "workers", "firings", "tape on", "tape off", "overhead", "overhead med", "target"],
              rows_tape, tape_notes),
    ]


def recorder_floor(b: Bench, firings: int) -> float | None:
    """bench/floor.py's figure, in a child of Flowtape's interpreter (microseconds per firing)."""
    if not firings:
        return None
    log("recorder floor (bench/floor.py)")
    out = subprocess.run([b.py["flowtape"] or sys.executable, str(BENCH / "floor.py"), str(firings)],
                         capture_output=True, text=True, timeout=600)
    try:
        return float(out.stdout.split()[0])
    except (IndexError, ValueError):
        log(f"recorder floor failed: {out.stderr.strip()[-500:]}")
        return None


# ---- 3 + 4: tape size and resume --------------------------------------------------------------------


def resume_series(
    b: Bench, framework: str, n: int, sleep: float, out: Path, fresh: dict[str, Any] | None, with_mid: bool, label: str,
    reps_last: int = 1,
) -> dict[str, Any]:
    """A fresh run of the chain (or the one given), then resumed at its middle and at its last step
    (the last-step resume `reps_last` times in one child: the best counts, all are kept)."""
    res: dict[str, Any] = {"items": n, "firings": n * FLOW_DEFS["chain"][2], "sleep_s": sleep}
    if fresh is None:
        got = b.child(framework, "chain", n, [{"workers": 1, "out": str(out), "run_id": "fresh"}], sleep=sleep,
                      label=f"{label} fresh")
        fresh = got["runs"][0]["reps"][0] if got else None
    if fresh is None:
        return res
    res["fresh"] = fresh
    steps = fresh.get("steps")
    if not steps:
        return res
    points = [("mid", steps // 2)] if with_mid else []
    points.append(("last", steps))
    for name, at in points:
        reps = reps_last if name == "last" else 1
        got = b.child(framework, "chain", n, [{
            "workers": 1, "out": str(out), "run_id": f"resume-{name}", "resume_from": fresh["run_dir"], "at_step": at,
            "suffix_rep": reps > 1,
        }], reps=reps, sleep=sleep, label=f"{label} resume at step {at:,}/{steps:,}" + (f" x{reps}" if reps > 1 else ""))
        if got:
            runs = got["runs"][0]
            fastest = min(runs["reps"], key=lambda r: r["seconds"])
            res[name] = dict(fastest, at_step=at, times=runs["times"])
    return res


def replay_figures(res: dict[str, Any]) -> dict[str, float | None]:
    """Replay speed-up implied by the timings. The last-step resume replays every firing. The middle
    one replays about half and then runs live: the fresh run's time to reach that step, over the
    resumed run's time to its first live step (both from the steps the engine reported)."""
    fresh = res.get("fresh", {}).get("seconds")
    last = res.get("last", {}).get("seconds")
    mid = res.get("mid", {}).get("seconds")
    out: dict[str, float | None] = {"fresh_s": fresh, "mid_s": mid, "last_s": last}
    out["last_pct_of_fresh"] = last / fresh * 100 if fresh and last else None
    out["speedup_last"] = fresh / last if fresh and last else None
    out["speedup_mid"] = out["mid_replay_s"] = out["mid_fresh_s"] = None
    if fresh and "mid" in res:
        at = res["mid"]["at_step"]
        reached = next((t for s, t in res["fresh"].get("marks", []) if s >= at), None)
        first_live = res["mid"].get("marks", [])[:1]
        if reached and first_live and first_live[0][0] == at + 1:
            out["mid_fresh_s"], out["mid_replay_s"] = reached, first_live[0][1]
            out["speedup_mid"] = reached / first_live[0][1]
        elif mid:  # no steps reported (wfpy): the resumed run's time less the live half's, at the fresh pace
            frac = at / res["fresh"]["steps"]
            replay_part = mid - fresh * (1 - frac)
            out["speedup_mid"] = fresh * frac / replay_part if replay_part > 0 else None
    return out


def accumulator_sizes(b: Bench, rows: list[list[str]]) -> dict[str, Any]:
    """Tape bytes per firing of a flow whose actor's state grows at every firing, for both
    frameworks on the same items; adds its rows to the tape size table."""
    n = b.params["acc_n"]
    firings = n * SIZE_FLOWS["accumulate"][2]
    ft = b.child("flowtape", "accumulate", n, [{"workers": 1, "tape": True, "out": str(b.work / "runs" / "ft-acc"),
                                                 "run_id": "acc"}], label="accumulate (tape size)")
    wf = b.child("wfpy", "accumulate", n, [{"workers": 1, "out": str(b.work / "runs" / "wf-acc"), "run_id": "acc"}],
                 label="accumulate (tape size)")
    ft_bytes = ft["runs"][0]["reps"][0].get("tape_bytes") if ft else None
    wf_rep = wf["runs"][0]["reps"][0] if wf else None
    wf_bytes = wf_rep["journal_bytes"] + wf_rep["queues_bytes"] if wf_rep else None
    ratio = wf_bytes / ft_bytes if wf_bytes and ft_bytes else None
    rows.append(["Flowtape tape.jsonl", "accumulate", f"{firings:,}", fmt(ft_bytes),
                 fmt(ft_bytes / firings if ft_bytes else None, ",.0f"), ""])
    rows.append(["wfpy journal + queues", "accumulate", f"{firings:,}", fmt(wf_bytes),
                 fmt(wf_bytes / firings if wf_bytes else None, ",.0f"), f"{fmt(ratio, '.1f')}x Flowtape's"])
    return {"firings": firings, "flowtape_bytes": ft_bytes, "wfpy_bytes": wf_bytes, "wfpy_over_flowtape": ratio}


def tape_and_resume(b: Bench, results: dict[str, Any]) -> list[str]:
    p = b.params
    sections: list[str] = []
    speed_data = results.get("speed", {}).get("chain/workers=1", {})

    # 3. tape size -------------------------------------------------------------------------------
    big = resume_series(b, "flowtape", p["big_n"], 0.0, b.work / "runs" / "ft-big", None, True, "chain 100k")
    ft_speed = speed_data.get("flowtape", {})
    wf_speed = speed_data.get("wfpy", {})
    rows = []
    ft_bpf = ft_speed["tape_bytes"] / ft_speed["firings"] if ft_speed.get("tape_bytes") else None
    rows.append(["Flowtape tape.jsonl", "chain", f"{ft_speed.get('firings', 0):,}", fmt(ft_speed.get("tape_bytes")),
                 fmt(ft_bpf, ",.0f"),
                 f"target <= {TARGET_TAPE_BYTES_PER_FIRING:.0f} B  {verdict(ft_bpf <= TARGET_TAPE_BYTES_PER_FIRING if ft_bpf else None)}"])
    wf_bpf = None
    if wf_speed.get("journal_bytes") is not None:
        total = wf_speed["journal_bytes"] + wf_speed["queues_bytes"]
        wf_bpf = total / wf_speed["firings"]
        rows.append(["wfpy journal + queues", "chain", f"{wf_speed['firings']:,}", fmt(total), fmt(wf_bpf, ",.0f"),
                     f"{wf_speed['edge_token_files']:,} token files"])
        rows.append(["  of which journal", "", "", fmt(wf_speed["journal_bytes"]),
                     fmt(wf_speed["journal_bytes"] / wf_speed["firings"], ",.0f"), ""])
        rows.append(["  of which queue trace", "", "", fmt(wf_speed["queues_bytes"]),
                     fmt(wf_speed["queues_bytes"] / wf_speed["firings"], ",.0f"), ""])
    big_fresh = big.get("fresh", {})
    big_mb = big_fresh["tape_bytes"] / 1e6 if big_fresh.get("tape_bytes") else None
    rows.append([f"Flowtape tape.jsonl, {big['firings']:,}-firing chain", "chain", f"{big['firings']:,}",
                 fmt(big_fresh.get("tape_bytes")), fmt(big_fresh["tape_bytes"] / big["firings"] if big_mb else None, ",.0f"),
                 f"{fmt(big_mb, '.1f')} MB  {verdict(big_mb < TARGET_BIG_TAPE_MB if big_mb else None)}"])
    ratio = wf_bpf / ft_bpf if wf_bpf and ft_bpf else None
    acc = accumulator_sizes(b, rows)
    results["tape_size"] = {
        "flowtape_bytes_per_firing": ft_bpf, "wfpy_bytes_per_firing": wf_bpf, "wfpy_over_flowtape": ratio,
        "wfpy_edge_token_files": wf_speed.get("edge_token_files"),
        "big_chain_firings": big["firings"], "big_chain_tape_mb": big_mb, "accumulate": acc,
    }
    sections.append(table(
        "3. Tape size (chain flow, small int tokens)",
        ["record", "flow", "firings", "bytes", "bytes/firing", "note"], rows,
        [f"wfpy writes {fmt(ratio, '.1f')}x more bytes per firing than Flowtape (and one file per token"
         " that crosses an edge, in work/edge-tokens/).",
         f"Flowtape chain: {p['ft_n']['chain']:,} items; wfpy chain: {p['wf_n']['chain']:,} items (bytes/firing compared).",
         f"accumulate: {p['acc_n']:,} items for both; its collector's state grows by an item at every firing"
         " (Flowtape writes the change, wfpy the whole state).",
         f"target: the {big['firings']:,}-firing tape < {TARGET_BIG_TAPE_MB:.0f} MB."
         + ("" if not b.args.quick else " (--quick: a smaller run; the full bench does 100,002 firings.)")],
    ))

    # 4. resume ----------------------------------------------------------------------------------
    wf_fresh = None
    if wf_speed.get("run_dir"):
        wf_fresh = {"seconds": wf_speed["seconds"][0], "steps": wf_speed["steps"], "run_dir": wf_speed["run_dir"],
                    "records": wf_speed["records"], "outputs": wf_speed.get("outputs")}
    wf_trivial = resume_series(b, "wfpy", p["wf_n"]["chain"], 0.0, b.work / "runs" / "wf-chain-w1", wf_fresh, True,
                               "chain")
    ft_sleep = resume_series(b, "flowtape", p["sleep_n"], p["sleep"], b.work / "runs" / "ft-sleep", None,
                             p["sleep_mid"], "chain 20ms/firing", reps_last=3)
    wf_sleep = resume_series(b, "wfpy", p["sleep_n"], p["sleep"], b.work / "runs" / "wf-sleep", None,
                             p["sleep_mid"], "chain 20ms/firing")
    rows = []
    summary: dict[str, Any] = {}
    for label, fw, res in (("trivial actors", "Flowtape", big), ("trivial actors", "wfpy", wf_trivial),
                           ("20 ms per firing", "Flowtape", ft_sleep), ("20 ms per firing", "wfpy", wf_sleep)):
        fig = replay_figures(res)
        stopped = [s for k in ("mid", "last") for s in res.get(k, {}).get("replayStopped", [])]
        fresh_out = res.get("fresh", {}).get("outputs")
        resumed = [res[k].get("outputs") for k in ("mid", "last") if k in res]
        same = None if fresh_out is None or not resumed else all(o == fresh_out for o in resumed)
        replayed_last = res.get("last", {}).get("firings_replayed")
        if label.startswith("trivial"):
            target = verdict(fig["speedup_last"] >= TARGET_REPLAY_SPEEDUP if fig["speedup_last"] else None)
        else:
            target = verdict(fig["last_pct_of_fresh"] < TARGET_SLEEP_RESUME_PCT if fig["last_pct_of_fresh"] else None)
        if fw == "wfpy":
            target = ""
        rows.append([
            label, fw, f"{res['firings']:,}", fmt(fig["fresh_s"], ".3f", "s"), fmt(fig["mid_s"], ".3f", "s"),
            fmt(fig["last_s"], ".3f", "s"), fmt(fig["last_pct_of_fresh"], ".1f", "%"),
            fmt(fig["speedup_last"], ".1f", "x"), fmt(fig["speedup_mid"], ".1f", "x"),
            f"{replayed_last:,}" if replayed_last is not None else "-", "yes" if stopped else "no",
            "-" if same is None else ("yes" if same else "NO"), target,
        ])
        summary[f"{fw.lower()}/{'trivial' if label.startswith('trivial') else 'sleep20ms'}"] = {
            **fig, "firings": res["firings"], "items": res["items"], "replay_stopped": stopped,
            "firings_replayed_at_last": replayed_last, "same_outputs_as_fresh": same,
            "steps": res.get("fresh", {}).get("steps"), "last_times_s": res.get("last", {}).get("times"),
        }
    results["resume"] = summary
    sections.append(table(
        "4. Resume: fresh run vs resumed at the middle / last step (chain, max_workers=1)",
        ["actors", "engine", "firings", "fresh", "resume@mid", "resume@last", "last/fresh", "replay x (last)",
         "replay x (mid)", "replayed@last", "diverged", "same outputs", "target"], rows,
        ["resume times are the whole run() call: reading the recorded run, replaying, running the rest live.",
         "same outputs: the resumed runs' outputs equal the fresh run's (digest of the returned outputs).",
         "replay x (last) = fresh / resume-at-last (every firing replayed);"
         " replay x (mid) = the fresh run's time to reach the middle step / the resumed run's time to its"
         " first live step (the tape read, the run at the step restored, the prefix copied); for wfpy,"
         " which reports no steps, the replayed half's live time / (resume@mid - the live half's time).",
         f"targets: trivial actors, Flowtape replay >= {TARGET_REPLAY_SPEEDUP:.0f}x faster than live;"
         f" 20 ms actors, resume at the last step < {TARGET_SLEEP_RESUME_PCT:.0f}% of the live run.",
         f"wfpy's trivial chain is {p['wf_n']['chain']:,} items (its speed-bench run is the fresh run);"
         f" Flowtape's is the {big['firings']:,}-firing chain of section 3.",
         f"20 ms flow: the chain with every firing sleeping {p['sleep'] * 1000:.0f} ms, {p['sleep_n']} items;"
         " Flowtape's resume@last is the best of 3 in one child (first, cold: "
         + fmt((ft_sleep.get("last", {}).get("times") or [None])[0], ".3f", "s") + ")."],
    ))
    return sections


# ---- 5: LSP streaming ----------------------------------------------------------------------------------


def child_bench(b: Bench, results: dict[str, Any], script: str, key: str, what: str, quick_args: list[str]) -> list[str]:
    """bench/<script> in a child process (Flowtape's interpreter); its table and figures merged here."""
    out = b.work / f"{key}.json"
    args = [b.py["flowtape"] or sys.executable, str(BENCH / script), "--json", str(out)]
    if b.args.quick:
        args += quick_args
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    t0 = time.perf_counter()
    with open(b.work / f"{key}.log", "wb") as logfile:
        proc = subprocess.run(args, stdout=logfile, stderr=subprocess.STDOUT, env=env, cwd=b.work)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not out.exists():
        log(f"{key:8} bench failed (exit {proc.returncode}), see {logfile.name}")
        results[key] = None
        return [f"\n{what}: failed, see {logfile.name}"]
    payload: dict[str, Any] = json.loads(out.read_text())
    text = payload.pop("table", "")
    results[key] = payload
    log(f"{key:8} {what} {wall:6.1f}s wall")
    return [text]


# ---- 6: Ray -----------------------------------------------------------------------------------------------


def ray_cluster(b: Bench, results: dict[str, Any]) -> list[str]:
    """bench/cluster.py in a child process (it puts itself in a loopback-only network namespace)."""
    out = b.work / "ray.json"
    args = [b.py["flowtape"] or sys.executable, str(BENCH / "cluster.py"), "--json", str(out)]
    if b.args.quick:
        args.append("--quick")
    t0 = time.perf_counter()
    with open(b.work / "ray.log", "wb") as logfile:
        proc = subprocess.run(args, stdout=logfile, stderr=subprocess.STDOUT, cwd=b.work)
    if proc.returncode != 0 or not out.exists():
        log(f"ray      bench failed (exit {proc.returncode}), see {logfile.name}")
        results["ray"] = None
        return ["\n6. Ray: failed, see " + logfile.name]
    payload: dict[str, Any] = json.loads(out.read_text())
    text = payload.pop("table", "")
    results["ray"] = payload
    log(f"ray      cpu-bound flow, per-firing cost, resume {time.perf_counter() - t0:6.1f}s wall")
    return [text]


# ---- profile ------------------------------------------------------------------------------------------


def profile(b: Bench, n: int) -> str:
    """Flowtape's chain run under cProfile, in this process: top functions by cumulative and own time."""
    import cProfile
    import importlib.util
    import io
    import pstats

    os.environ["BENCH_N"], os.environ["BENCH_SLEEP"] = str(n), "0"
    spec = importlib.util.spec_from_file_location("bench_profile_chain", b.flow_dirs["flowtape"] / "chain.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from flowtape.runner import execute

    # Flowtape's builder names actors through sys.setprofile, which cannot chain to an active
    # cProfile (its hook is not callable): build the graph first and hand that one to execute().
    graph = module.chain.build()
    module.chain.build = lambda: graph
    prof = cProfile.Profile()
    prof.enable()
    execute(module.chain, None, max_workers=1, runs_dir=b.work / "runs" / "profile")
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs()
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(20)
    return f"\nProfile: Flowtape chain, {n} items, max_workers=1, tape on (cProfile)\n" + buf.getvalue()


# ---- main -----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="reduced sizes, under a minute")
    parser.add_argument("--no-wfpy", action="store_true", help="measure Flowtape only")
    parser.add_argument("--no-lsp", action="store_true", help="skip the LSP streaming bench (section 5)")
    parser.add_argument("--no-ray", action="store_true", help="skip Ray against threads (section 6)")
    parser.add_argument("--no-agents", action="store_true", help="skip the parallel model calls bench (section 7)")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of Flowtape's chain run")
    parser.add_argument("--json", metavar="PATH", help="where to write the results (default bench/results.json,"
                        " bench/results-quick.json with --quick)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    b = Bench(args)
    load_before = os.getloadavg()
    stamp_before = engine_stamp()
    results: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
                    "loadavg_start": load_before},
        "wfpy_version": WFPY_VERSION if b.py["wfpy"] else None,
        "params": b.params,
    }
    sections: list[str] = []

    # ==== 1 + 2. Engine speed (Flowtape vs wfpy) and tape cost (tape on vs off) ==========================
    sections += speed(b, results)

    # ==== 3 + 4. Tape size and resume (fresh vs resumed at the middle / last step) ========================
    sections += tape_and_resume(b, results)

    # =========================================================================================================
    # ==== 5. LSP streaming benchmark (bench/lsp.py, in its own child process) ================================
    # How fast the language server streams a running tape to the editor (command -> last step held by the
    # client), its peak memory, and stepDetail / getSteps on a huge tape. Its rows go to `sections`, its
    # figures to `results["lsp_streaming"]`.
    # =========================================================================================================
    if not args.no_lsp:
        sections += child_bench(b, results, "lsp.py", "lsp_streaming", "5. LSP streaming, memory, requests on a big tape",
                                ["--quick"])

    # ==== 6. Parallel model calls (bench/agents.py): independent agents against a local server that waits ====
    if not args.no_agents:
        sections += child_bench(b, results, "agents.py", "agents", "6. parallel model calls", [])

    # ==== 6. Ray against threads (bench/cluster.py, in its own child process) ===========================
    if not args.no_ray:
        sections += ray_cluster(b, results)

    if args.profile:
        sections.append(profile(b, b.params["ft_n"]["chain"]))

    results["machine"]["loadavg_end"] = os.getloadavg()
    results["engine_sources_mtime"] = [stamp_before, engine_stamp()]
    results["total_seconds"] = time.perf_counter() - started
    head = (f"Flowtape bench ({results['mode']}) · {results['date']} · Python {platform.python_version()} · "
            f"{os.cpu_count()} CPUs · load avg {load_before[0]:.1f} -> {results['machine']['loadavg_end'][0]:.1f}"
            f" · wfpy {results['wfpy_version'] or 'not measured'}")
    print(head)
    if stamp_before != results["engine_sources_mtime"][1]:
        print(f"WARNING: engine/flowtape sources changed during the bench ({stamp_before} -> "
              f"{results['engine_sources_mtime'][1]}): the figures mix engine versions; run it again.")
    for s in sections:
        print(s)
    print(f"\ntotal bench time {results['total_seconds']:.0f}s")
    out = Path(args.json) if args.json else BENCH / ("results-quick.json" if args.quick else "results.json")
    out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
