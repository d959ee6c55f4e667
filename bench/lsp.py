"""LSP streaming bench: how fast the language server streams a run to the editor, its memory, and
how fast it answers questions about a huge tape.

    python bench/lsp.py            # full: 100,002-step stream, 1,000,002-firing tape (about a minute and a half)
    python bench/lsp.py --quick    # same stream, a 100,002-firing tape for the detail requests
    python bench/lsp.py --json PATH  # also write the figures (and the rendered table) to PATH

bench/run.py runs this script as a child process (section 5) and merges its figures into its
results JSON under "lsp_streaming".

A small JSON-RPC client of its own (Content-Length framing over the server's stdio; server
requests such as workDoneProgress/create are answered with null) drives `python -m flowtape lsp`:

1. streaming: a temp workspace holding the bench chain flow (a source of N items through 5 actors:
   6 x N top-level steps). `workspace/executeCommand flowtape.run {uri}`; every `flowtape/steps`
   batch is timestamped when decoded, until `flowtape/runFinished` says how many steps there are.
   The same flow is then run from a terminal (`flowtape run` into the workspace runs dir), which the
   server discovers by polling the directory.
2. the server's peak memory (VmHWM of /proc/<pid>/status) once both runs are streamed.
3. a second workspace with a tape of ~1,000,000 firings written beforehand by `flowtape run`; a
   fresh server answers `flowtape/runs`, `flowtape/stepDetail` on the last step (cold: the first
   request indexes the whole tape; then warm, median of 10) and `flowtape/getSteps` for the last page.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from run import fmt, table, verdict  # bench/run.py: this script runs from bench/ (sys.path[0])

BENCH = Path(__file__).resolve().parent
CHAIN = BENCH / "flows" / "chain.py"
PLACEHOLDER = "from FRAMEWORK import"
N_LINE = 'N = int(os.environ.get("BENCH_N", "2000"))'
STEPS_PER_ITEM = 6  # source + 5 actors: one top-level step each

FULL: dict[str, Any] = {"stream_items": 16667, "detail_items": 166667, "warm_reps": 10}  # 100,002 / 1,000,002
QUICK: dict[str, Any] = {"stream_items": 16667, "detail_items": 16667, "warm_reps": 10}  # 100,002 / 100,002

TARGET_STREAM_RATIO = 1.2
TARGET_PEAK_MB = 150.0
TARGET_DETAIL_MS = 50.0

RUN_TIMEOUT = 120.0  # one streamed run, seconds
REQUEST_TIMEOUT = 120.0  # one request (the cold stepDetail indexes the whole tape)


def log(msg: str) -> None:
    print(f"[bench lsp] {msg}", file=sys.stderr, flush=True)


def write_flow(workspace: Path, name: str, items: int) -> Path:
    """The bench chain flow with `from flowtape import` and N fixed (the run child inherits the
    server's environment, so N cannot come from BENCH_N per run)."""
    text = CHAIN.read_text()
    if PLACEHOLDER not in text or N_LINE not in text:
        raise SystemExit(f"bench lsp: {CHAIN} no longer has `{PLACEHOLDER}` and `{N_LINE}`")
    flow = workspace / name
    flow.write_text(text.replace(PLACEHOLDER, "from flowtape import").replace(N_LINE, f"N = {items}"))
    return flow


def run_times(run_dir: Path) -> dict[str, Any]:
    """startedAt (header) and finishedAt (end record) of a finished tape, and the seconds between."""
    tape = run_dir / "tape.jsonl"
    with open(tape, "rb") as fh:
        header = json.loads(fh.readline())
        size = fh.seek(0, os.SEEK_END)
        back = min(size, 8 << 20)  # the end record holds the outputs: a few MB on the big tapes
        fh.seek(size - back)
        last = fh.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    end = json.loads(last)
    if end.get("t") != "end":
        raise RuntimeError(f"{tape}: the last record is not an end record")
    started = dt.datetime.fromisoformat(header["startedAt"])
    finished = dt.datetime.fromisoformat(end["finishedAt"])
    return {"startedAt": header["startedAt"], "finishedAt": end["finishedAt"], "status": end["status"],
            "steps": end["steps"], "firings": end["firings"], "tape_bytes": size,
            "run_s": (finished - started).total_seconds(), "started_epoch": started.timestamp(),
            "finished_epoch": finished.timestamp()}


def proc_status(pid: int) -> dict[str, float]:
    """VmHWM / VmRSS of a live process, in MB."""
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(rest.split()[0]) / 1024
    return out


# ---- a minimal LSP client ------------------------------------------------------------------------


class LspError(Exception):
    def __init__(self, method: str, error: dict[str, Any]) -> None:
        super().__init__(f"{method}: {error.get('code')} {error.get('message')}")
        self.error = error


@dataclass
class RunTrack:
    """What the client received of one run."""

    run_id: str
    started_at: float | None = None  # perf_counter of runStarted
    batches: int = 0
    steps: int = 0
    last_step: int = 0
    in_order: bool = True
    batch_times: list[tuple[float, float, int]] = field(default_factory=list)  # (perf, epoch, last step) per batch
    finished: dict[str, Any] | None = None
    finished_at: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def time_of_step(self, step: int) -> tuple[float, float] | None:
        """(perf_counter, epoch) at which the client had decoded the batch holding `step`."""
        for perf, epoch, last in self.batch_times:
            if last >= step:
                return perf, epoch
        return None


class LspClient:
    """JSON-RPC over a server's stdio, Content-Length framed; messages timestamped when decoded."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin = proc.stdin
        self.stdout = proc.stdout
        self.next_id = 0
        self.pending: dict[int, tuple[str, asyncio.Future[tuple[Any, float]]]] = {}
        self.handlers: dict[str, Callable[[Any, float], None]] = {}
        self.messages = 0
        self.notifications: dict[str, int] = {}
        self.bytes = 0
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, cwd: Path, profile: Path | None = None) -> LspClient:
        """`python -m flowtape lsp` (under cProfile, its stats written to `profile` on exit, if given)."""
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("PYTHONPATH", None)
        wrap = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *wrap, "-m", "flowtape", "lsp", cwd=str(cwd), env=env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, limit=64 << 20,
        )
        return cls(proc)

    async def _read(self) -> None:
        try:
            while True:
                head = await self.stdout.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("ascii").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await self.stdout.readexactly(length)
                msg = msgspec.json.decode(body)
                now = time.perf_counter()
                self.messages += 1
                self.bytes += len(head) + length
                method = msg.get("method")
                if method is not None:
                    self.notifications[method] = self.notifications.get(method, 0) + 1
                    if "id" in msg:  # a request of the server's: accept it (progress create, refreshes)
                        self._write({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                    handler = self.handlers.get(method)
                    if handler is not None:
                        handler(msg.get("params"), now)
                    continue
                waiting = self.pending.pop(msg.get("id"), None)
                if waiting is None or waiting[1].done():
                    continue
                name, future = waiting
                if "error" in msg:
                    future.set_exception(LspError(name, msg["error"]))
                else:
                    future.set_result((msg.get("result"), now))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            for name, future in self.pending.values():
                if not future.done():
                    future.set_exception(ConnectionError(f"{name}: the server closed its output"))

    def _write(self, msg: dict[str, Any]) -> None:
        body = msgspec.json.encode(msg)
        self.stdin.write(b"Content-Length: %d\r\n\r\n%b" % (len(body), body))

    async def request(self, method: str, params: Any, timeout: float = REQUEST_TIMEOUT) -> tuple[Any, float]:
        """(result, seconds from sending the request until its response was decoded)."""
        self.next_id += 1
        future: asyncio.Future[tuple[Any, float]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = (method, future)
        t0 = time.perf_counter()
        self._write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        await self.stdin.drain()
        result, t1 = await asyncio.wait_for(future, timeout)
        return result, t1 - t0

    async def notify(self, method: str, params: Any) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})
        await self.stdin.drain()

    async def initialize(self, root: Path) -> None:
        await self.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(), "rootPath": str(root),
            "capabilities": {"window": {"workDoneProgress": True}},
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
        }, timeout=30)
        await self.notify("initialized", {})

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.request("shutdown", None, timeout=10)
            await self.notify("exit", None)
        with contextlib.suppress(Exception):
            self.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.reader.cancel()


class StreamWatcher:
    """Follows the flowtape/* notifications of every run."""

    def __init__(self, client: LspClient) -> None:
        self.runs: dict[str, RunTrack] = {}
        client.handlers["flowtape/runStarted"] = self._started
        client.handlers["flowtape/steps"] = self._steps
        client.handlers["flowtape/runFinished"] = self._finished

    def track(self, run_id: str) -> RunTrack:
        if run_id not in self.runs:
            self.runs[run_id] = RunTrack(run_id)
        return self.runs[run_id]

    def _started(self, params: Any, now: float) -> None:
        self.track(params["runId"]).started_at = now

    def _steps(self, params: Any, now: float) -> None:
        track = self.track(params["runId"])
        steps = params["steps"]
        track.batches += 1
        track.steps += len(steps)
        for s in steps:
            if s["step"] != track.last_step + 1:
                track.in_order = False
            track.last_step = s["step"]
        track.batch_times.append((now, time.time(), track.last_step))

    def _finished(self, params: Any, now: float) -> None:
        track = self.track(params["runId"])
        track.finished, track.finished_at = params, now
        track.done.set()


# ---- 1 + 2: streaming and memory ------------------------------------------------------------------


def stream_figures(track: RunTrack, t_command: float, epoch_command: float, run_dir: Path) -> dict[str, Any]:
    assert track.finished is not None
    total = track.finished["steps"]
    times = run_times(run_dir)
    got = track.time_of_step(total)
    last_s = got[0] - t_command if got else None
    since_start = got[1] - times["started_epoch"] if got else None
    run_s = times["run_s"]
    return {
        "run_id": track.run_id, "status": track.finished["status"], "steps": total, "steps_received": track.steps,
        "in_order_once": track.in_order and track.steps == total and track.last_step == total,
        "batches": track.batches, "steps_per_batch": track.steps / track.batches if track.batches else None,
        "run_s": run_s, "startedAt": times["startedAt"], "finishedAt": times["finishedAt"],
        "tape_bytes": times["tape_bytes"],
        "command_to_last_step_s": last_s,
        "ratio": last_s / run_s if last_s and run_s else None,
        "startup_s": times["started_epoch"] - epoch_command,  # command -> tape header written (wall clock)
        "header_to_last_step_s": since_start,
        "ratio_from_header": since_start / run_s if since_start and run_s else None,
        "lag_after_end_s": got[1] - times["finished_epoch"] if got else None,
        "command_to_run_finished_s": track.finished_at - t_command if track.finished_at else None,
    }


async def streaming(p: dict[str, Any], base: Path, profile: Path | None = None) -> dict[str, Any]:
    ws = base / "stream"
    ws.mkdir()
    flow = write_flow(ws, "chain_stream.py", p["stream_items"])
    runs_dir = ws / ".flowtape" / "runs"
    client = await LspClient.start(ws, profile)
    out: dict[str, Any] = {"items": p["stream_items"], "server_pid": client.proc.pid}
    try:
        watcher = StreamWatcher(client)
        await client.initialize(ws)
        out["server_start_rss_mb"] = proc_status(client.proc.pid)

        # from the editor: workspace/executeCommand flowtape.run
        t0, e0 = time.perf_counter(), time.time()
        result, answered = await client.request("workspace/executeCommand",
                                                {"command": "flowtape.run", "arguments": [{"uri": flow.as_uri()}]})
        track = watcher.track(result["runId"])
        await asyncio.wait_for(track.done.wait(), RUN_TIMEOUT)
        editor = stream_figures(track, t0, e0, Path(result["runDir"]))
        editor["command_answered_s"] = answered
        out["editor"] = editor
        log(f"editor run: {editor['steps']:,} steps, run {editor['run_s']:.2f}s, last step at "
            f"{editor['command_to_last_step_s']:.2f}s, {editor['batches']} batches")

        # from a terminal: `flowtape run` into the workspace runs dir, found by the server's dir poll
        run_id = "terminal-run"
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        t0, e0 = time.perf_counter(), time.time()
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", run_id, "--runs-dir", str(runs_dir),
            cwd=str(ws), env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        track = watcher.track(run_id)
        await asyncio.wait_for(track.done.wait(), RUN_TIMEOUT)
        await child.wait()
        terminal = stream_figures(track, t0, e0, runs_dir / run_id)
        out["terminal"] = terminal
        log(f"terminal run: last step at {terminal['command_to_last_step_s']:.2f}s, run {terminal['run_s']:.2f}s")

        out["server_memory_mb"] = proc_status(client.proc.pid)
        out["messages"] = client.messages
        out["messages_by_method"] = dict(client.notifications)
        out["bytes_received"] = client.bytes
    finally:
        await client.close()
    return out


# ---- 3: questions about a huge tape -----------------------------------------------------------------


async def detail(p: dict[str, Any], base: Path) -> dict[str, Any]:
    ws = base / "detail"
    ws.mkdir()
    flow = write_flow(ws, "chain_big.py", p["detail_items"])
    runs_dir = ws / ".flowtape" / "runs"
    run_id = "big-run"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    t0 = time.perf_counter()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", run_id, "--runs-dir", str(runs_dir),
        cwd=str(ws), env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"flowtape run of the big tape failed ({child.returncode}): {err.decode()[-500:]}")
    times = run_times(runs_dir / run_id)
    out: dict[str, Any] = {"items": p["detail_items"], "firings": times["firings"], "steps": times["steps"],
                           "tape_bytes": times["tape_bytes"], "generate_s": time.perf_counter() - t0,
                           "run_s": times["run_s"]}
    log(f"big tape: {times['steps']:,} steps, {times['tape_bytes'] / 1e6:.0f} MB, written in {out['generate_s']:.1f}s")

    client = await LspClient.start(ws)
    try:
        await client.initialize(ws)
        runs, out["runs_s"] = await client.request("flowtape/runs", {})
        info = next(r for r in runs["runs"] if r["runId"] == run_id)
        last = info["steps"]
        out["runs_listed"] = len(runs["runs"])
        params = {"runId": run_id, "step": last}
        got, out["detail_cold_s"] = await client.request("flowtape/stepDetail", params)
        if got["step"] != last:
            raise RuntimeError(f"stepDetail answered step {got['step']}, not {last}")
        out["detail_answer"] = {"actor": got["actor"], "fireCount": got["fireCount"],
                                "queues": len(got["queues"]), "states": len(got["states"]),
                                "bytes": len(msgspec.json.encode(got))}
        warm = [(await client.request("flowtape/stepDetail", params))[1] for _ in range(p["warm_reps"])]
        out["detail_warm_s"] = warm
        out["detail_warm_median_s"] = statistics.median(warm)
        first = max(1, last - 499)
        page_times = []
        for _ in range(p["warm_reps"]):
            page, took = await client.request("flowtape/getSteps", {"runId": run_id, "from": first, "limit": 500})
            page_times.append(took)
        if not page["steps"] or page["steps"][-1]["step"] != last or page["total"] != last:
            raise RuntimeError(f"getSteps last page: {len(page['steps'])} steps, total {page['total']}")
        out["get_steps_last_page_s"] = page_times
        out["get_steps_last_page_first_s"] = page_times[0]
        out["get_steps_last_page_median_s"] = statistics.median(page_times)
        # a step in the middle: replays from the nearest snapshot, as a stepper jumping around would
        mid_times = [(await client.request("flowtape/stepDetail", {"runId": run_id, "step": last // 2 + 7}))[1]
                     for _ in range(3)]
        out["detail_mid_s"] = mid_times
        out["detail_mid_median_s"] = statistics.median(mid_times)
        out["server_memory_mb"] = proc_status(client.proc.pid)
    finally:
        await client.close()
    log(f"stepDetail cold {out['detail_cold_s']:.2f}s, warm {out['detail_warm_median_s'] * 1000:.1f} ms")
    return out


# ---- report -------------------------------------------------------------------------------------------


def render(res: dict[str, Any], quick: bool) -> str:
    s = res.get("streaming", {})
    rows = []
    for label, key in (("editor: flowtape.run command", "editor"), ("terminal: flowtape run", "terminal")):
        f = s.get(key)
        if not f:
            rows.append([label] + ["-"] * 9)
            continue
        rows.append([
            label, f"{f['steps']:,}", fmt(f["run_s"], ".2f", "s"), fmt(f["startup_s"], ".2f", "s"),
            fmt(f["command_to_last_step_s"], ".2f", "s"), fmt(f["ratio"], ".2f"), fmt(f["ratio_from_header"], ".2f"),
            fmt(f["lag_after_end_s"] * 1000 if f["lag_after_end_s"] is not None else None, ".0f", " ms"),
            f"{f['batches']:,}" + ("" if f["in_order_once"] else " (!)"),
            verdict(f["ratio"] <= TARGET_STREAM_RATIO if f["ratio"] else None),
        ])
    mem = s.get("server_memory_mb", {})
    stream_table = table(
        "5. LSP streaming: a run streamed to the editor (flowtape/steps notifications)",
        ["run", "steps", "run time", "startup", "last step at", "ratio", "ratio/hdr", "lag", "batches", "target"],
        rows,
        ["run time = the tape's header startedAt -> end finishedAt; startup = command (or process spawn) ->"
         " header written, i.e. process start and flow import, inside the run child.",
         "last step at = command sent -> the client has decoded the batch holding the last step;"
         " ratio = that / run time; ratio/hdr = (header written -> last step held) / run time.",
         "lag = the last step held - the end record's finishedAt (wall clocks of one machine, ms resolution).",
         f"batches = flowtape/steps notifications of the run; {s.get('messages', 0):,} messages in all"
         f" ({fmt(s.get('bytes_received', 0) / 1e6, '.1f')} MB), the terminal run found by the 200 ms dir poll.",
         f"server peak memory (VmHWM) after both runs: {fmt(mem.get('VmHWM'), '.0f')} MB"
         f" (RSS {fmt(mem.get('VmRSS'), '.0f')} MB)  "
         f"{verdict(mem['VmHWM'] < TARGET_PEAK_MB if mem.get('VmHWM') else None)} (target < {TARGET_PEAK_MB:.0f} MB).",
         f"target: ratio <= {TARGET_STREAM_RATIO}. The run child, the server and this client share the machine's CPUs."],
    )
    d = res.get("detail", {})

    def ms(v: float | None) -> str:
        return fmt(v * 1000 if v is not None else None, ",.1f", " ms")

    dmem = d.get("server_memory_mb", {})
    detail_rows = [
        ["flowtape/runs", ms(d.get("runs_s")), "", ""],
        ["flowtape/stepDetail, last step, cold", ms(d.get("detail_cold_s")), "",
         verdict(d["detail_cold_s"] * 1000 < TARGET_DETAIL_MS if d.get("detail_cold_s") else None)],
        [f"flowtape/stepDetail, last step, warm (median of {len(d.get('detail_warm_s', []))})",
         ms(d.get("detail_warm_median_s")),
         f"{ms(min(d['detail_warm_s']))} .. {ms(max(d['detail_warm_s']))}" if d.get("detail_warm_s") else "",
         verdict(d["detail_warm_median_s"] * 1000 < TARGET_DETAIL_MS if d.get("detail_warm_median_s") else None)],
        ["flowtape/stepDetail, a middle step, first", ms((d.get("detail_mid_s") or [None])[0]), "", ""],
        ["flowtape/stepDetail, a middle step (median of 3)", ms(d.get("detail_mid_median_s")), "", ""],
        ["flowtape/getSteps, last page of 500, first", ms(d.get("get_steps_last_page_first_s")), "", ""],
        [f"flowtape/getSteps, last page of 500 (median of {len(d.get('get_steps_last_page_s', []))})",
         ms(d.get("get_steps_last_page_median_s")), "", ""],
    ]
    detail_table = table(
        f"5b. LSP requests on a {d.get('firings', 0):,}-firing tape"
        f" ({fmt(d.get('tape_bytes', 0) / 1e6, '.0f')} MB, a fresh server)",
        ["request", "time", "range", "target"], detail_rows,
        [f"the tape was written beforehand by `flowtape run` ({fmt(d.get('generate_s'), '.1f', 's')});"
         " times are request sent -> response decoded by the client.",
         f"server peak memory (VmHWM) after these requests: {fmt(dmem.get('VmHWM'), '.0f')} MB"
         f" (RSS {fmt(dmem.get('VmRSS'), '.0f')} MB)  "
         f"{verdict(dmem['VmHWM'] < TARGET_PEAK_MB if dmem.get('VmHWM') else None)} (target < {TARGET_PEAK_MB:.0f} MB).",
         "cold = the first request for a run the server has not read yet: the last step of a finished run is"
         " described from the tape's two ends (the end record holds the run after its last step), any other"
         " step from the checkpoints before it; a page of getSteps is found by bisecting the file on step"
         " numbers. Once read, the index (every record read once, snapshots kept) answers.",
         f"target: stepDetail < {TARGET_DETAIL_MS:.0f} ms."
         + (" (--quick: a 100,002-firing tape; the full bench uses 1,000,002.)" if quick else "")],
    )
    return stream_table + "\n" + detail_table


async def bench(quick: bool, profile: Path | None = None) -> dict[str, Any]:
    p = QUICK if quick else FULL
    res: dict[str, Any] = {"mode": "quick" if quick else "full", "params": p}
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="flowtape-lsp-bench-"))
    try:
        res["streaming"] = await streaming(p, base, profile)
        shutil.rmtree(base / "stream", ignore_errors=True)
        res["detail"] = await detail(p, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    res["seconds"] = time.perf_counter() - started
    return res


def print_profile(path: Path) -> None:
    import io
    import pstats

    if not path.exists():
        print(f"\nno server profile at {path} (the server did not exit cleanly)")
        return
    buf = io.StringIO()
    stats = pstats.Stats(str(path), stream=buf).strip_dirs()
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(25)
    print(f"\nProfile: the LSP server while streaming (cProfile, main thread)\n{buf.getvalue()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 100,002-firing tape for the detail requests")
    parser.add_argument("--json", metavar="PATH", help="write the figures (and the rendered table) here")
    parser.add_argument("--profile-server", metavar="PATH", help="run the streaming server under cProfile, write its"
                        " stats to PATH and print the top functions (main thread only: the tape is read in a worker"
                        " thread; the figures are then slower than normal)")
    args = parser.parse_args(argv)
    profile = Path(args.profile_server).resolve() if args.profile_server else None
    res = asyncio.run(bench(args.quick, profile))
    res["table"] = render(res, args.quick)
    print(res["table"])
    if profile is not None:
        print_profile(profile)
    print(f"\nLSP bench time {res['seconds']:.0f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
