"""A stand-in for `flowtape lsp`, for developing the extension before the real server exists.

NOT the product: it speaks the custom part of docs/protocol.md well enough to drive the e2e
(runs through the `flowtape` CLI, then streams the steps read back from the run's tape.jsonl).
Used only when the e2e runs with E2E_FAKE_SERVER=1.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("fake-flowtape", "0.0.1")
RUNS: dict[str, dict[str, Any]] = {}
LIVE: set[str] = set()


def path_of(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def arg0(args: tuple[Any, ...]) -> Any:
    while args and isinstance(args, (list, tuple)) and len(args) == 1 and isinstance(args[0], (list, tuple)) and not hasattr(args[0], "_fields"):
        args = args[0]
    return args[0] if args else {}


def runs_dir(flow: Path) -> Path:
    return flow.parent / ".flowtape" / "runs"


def read_tape(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header: dict[str, Any] = {}
    steps: list[dict[str, Any]] = []
    for line in (run_dir / "tape.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("t") == "header":
            header = rec
        elif rec.get("t") == "step":
            steps.append(rec)
    return header, steps


def step_infos(run_dir: Path) -> list[dict[str, Any]]:
    header, steps = read_tape(run_dir)
    uri = Path(header["flowFile"]).as_uri()
    out = []
    for s in steps:
        line = max(0, int(s.get("line", 1)) - 1)
        out.append({
            "step": s["step"], "actor": s["actor"], "actorKind": s.get("kind", "task"), "fireCount": s["fireCount"],
            "journalSeq": s.get("journalSeq", 0), "replayed": bool(s.get("replayed")), "uri": uri,
            "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 200}},
            "durationMs": s.get("dur", 0) / 1000,
        })
    return out


def run_info(run_dir: Path) -> dict[str, Any] | None:
    try:
        rec = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return None
    return {
        "runId": rec["id"], "workflow": rec["workflow"], "uri": Path(rec["flowFile"]).as_uri(),
        "status": rec.get("status", "running"), "steps": rec.get("steps", 0), "startedAt": rec.get("startedAt"),
        "finishedAt": rec.get("finishedAt"), "resumedFrom": rec.get("resumedFrom"),
        "resumedAtStep": rec.get("resumedAtStep"), "runDir": str(run_dir),
    }


async def launch(flow: Path, resume_from: str | None = None, at_step: int | None = None) -> dict[str, Any]:
    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    run_dir = runs_dir(flow) / run_id
    argv = [sys.executable, "-m", "flowtape", "run", str(flow), "--run-id", run_id]
    if resume_from:
        argv += ["--resume-from", resume_from, "--at-step", str(at_step)]
    LIVE.add(run_id)
    server.protocol.notify("flowtape/runStarted", {
        "runId": run_id, "uri": flow.as_uri(), "workflow": "main", "runDir": str(run_dir),
        "resumedFrom": resume_from, "resumedAtStep": at_step,
    })

    async def go() -> None:
        proc = await asyncio.create_subprocess_exec(*argv, cwd=str(flow.parent), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        await proc.communicate()
        steps = step_infos(run_dir) if (run_dir / "tape.jsonl").exists() else []
        rec = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
        diverged = rec.get("replayStopped") or []
        bad = {(d["actor"], d["fireCount"]) for d in diverged}
        for s in steps:
            if (s["actor"], s["fireCount"]) in bad:
                s["diverged"] = True
        for i in range(0, len(steps), 3):  # a few batches, like a live run
            server.protocol.notify("flowtape/steps", {"runId": run_id, "steps": steps[i:i + 3]})
            await asyncio.sleep(0.05)
        LIVE.discard(run_id)
        header, _ = read_tape(run_dir) if steps else ({}, [])
        lines = {a["path"]: a["line"] for a in header.get("actors", [])}
        diags = [
            types.Diagnostic(
                range=types.Range(types.Position(max(0, lines.get(d["actor"], 1) - 1), 0), types.Position(max(0, lines.get(d["actor"], 1) - 1), 200)),
                message=f"replay diverged: {d['actor']} firing {d['fireCount']}: {d['reason']}",
                severity=types.DiagnosticSeverity.Warning, source="flowtape", code="replay-diverged",
            )
            for d in diverged
        ]
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=flow.as_uri(), diagnostics=diags))
        server.protocol.notify("flowtape/runFinished", {
            "runId": run_id, "status": rec.get("status", "failed"), "outputs": rec.get("outputs"),
            "error": rec.get("error"), "replayStopped": diverged,
        })

    asyncio.get_running_loop().create_task(go())
    return {"runId": run_id, "runDir": str(run_dir)}


def find_run(run_id: str) -> Path:
    for flow_runs in {Path(f).parent for f in WATCHED}:
        d = flow_runs / ".flowtape" / "runs" / run_id
        if d.exists():
            return d
    raise ValueError(f"unknown run {run_id}")


WATCHED: set[str] = set()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    WATCHED.add(str(path_of(params.text_document.uri)))


@server.feature(types.TEXT_DOCUMENT_CODE_LENS)
def lenses(ls: LanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    out = []
    for i, line in enumerate(doc.lines):
        if line.startswith("@workflow"):
            r = types.Range(types.Position(i, 0), types.Position(i, 9))
            out.append(types.CodeLens(range=r, command=types.Command(title="▶ Run", command="flowtape.run", arguments=[{"uri": params.text_document.uri}])))
    return out


@server.command("flowtape.run")
async def cmd_run(ls: LanguageServer, *args: Any) -> dict[str, Any]:
    p = arg0(args)
    flow = path_of(get(p, "uri"))
    WATCHED.add(str(flow))
    return await launch(flow)


@server.command("flowtape.resumeAtStep")
async def cmd_resume(ls: LanguageServer, *args: Any) -> dict[str, Any]:
    p = arg0(args)
    run_dir = find_run(get(p, "runId"))
    header, _ = read_tape(run_dir)
    return await launch(Path(header["flowFile"]), get(p, "runId"), int(get(p, "step")))


@server.command("flowtape.rerunActor")
async def cmd_rerun(ls: LanguageServer, *args: Any) -> dict[str, Any]:
    p = arg0(args)
    run_dir = find_run(get(p, "runId"))
    header, steps = read_tape(run_dir)
    last = max((s["step"] for s in steps if s["actor"] == get(p, "actor")), default=1)
    return await launch(Path(header["flowFile"]), get(p, "runId"), last - 1)


@server.feature("flowtape/runs")
def runs(ls: LanguageServer, params: Any) -> dict[str, Any]:
    uri = get(params, "uri")
    flows = [path_of(uri)] if uri else [Path(f) for f in WATCHED]
    out = []
    for flow in flows:
        d = runs_dir(flow)
        if d.exists():
            for rd in d.iterdir():
                info = run_info(rd)
                if info and info["runId"] not in LIVE:
                    out.append(info)
    out.sort(key=lambda r: r["startedAt"] or "", reverse=True)
    return {"runs": out}


@server.feature("flowtape/getSteps")
def get_steps(ls: LanguageServer, params: Any) -> dict[str, Any]:
    run_id = get(params, "runId")
    steps = step_infos(find_run(run_id))
    start = int(get(params, "from", 1)) - 1
    limit = int(get(params, "limit", 500))
    return {"runId": run_id, "steps": steps[start:start + limit], "total": len(steps), "live": run_id in LIVE}


@server.feature("flowtape/stepDetail")
def step_detail(ls: LanguageServer, params: Any) -> dict[str, Any]:
    run_id, n = get(params, "runId"), int(get(params, "step"))
    s = step_infos(find_run(run_id))[n - 1]
    return {"runId": run_id, "step": n, "actor": s["actor"], "actorKind": s["actorKind"], "fireCount": s["fireCount"],
            "taken": [{"queue": "fake.In", "tokens": ["'<fake>'"]}], "put": [], "queues": [], "states": [{"actor": s["actor"], "state": "{}"}]}


@server.feature("flowtape/selectStep")
def select_step(ls: LanguageServer, params: Any) -> None:
    return None


if __name__ == "__main__":
    server.start_io()
