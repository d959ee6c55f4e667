"""Parallel model calls: six independent agents, each answered after 0.5 s by a local
OpenAI-compatible server that waits (tests/model_server.py), with one worker and with the
default pool, side by side; then a resume at the last step (every answer replayed, no request).

    python bench/agents.py [--json PATH] [--delay 0.5] [--agents 6]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from model_server import ModelServer, outputs_for  # noqa: E402

FLOW = '''
from flowtape import Port, agent, connect, workflow


@agent(prompt="Answer the question.", transport="openai", model="bench-model", retries=0)
class Ask:
    class Ports:
        question = Port[str](direction="in")
        answer = Port[str](direction="out")


@workflow
def main():
{body}
'''


def _flow(folder: Path, agents: int) -> Path:
    body = "\n".join(f"    a{i} = Ask()\n    connect('question', a{i}.question)\n    connect(a{i}.answer, 'answers')"
                     for i in range(agents))
    path = folder / "six_agents.py"
    path.write_text(FLOW.format(body=body))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the server takes to answer")
    parser.add_argument("--agents", type=int, default=6)
    args = parser.parse_args(argv)
    server = ModelServer()

    def slow(seen: Any) -> Any:
        time.sleep(args.delay)
        return outputs_for(seen)

    server.model = slow
    os.environ.update(OPENAI_BASE_URL=server.url + "/v1", OPENAI_API_KEY="sk-bench")
    from flowtape.loader import load_flow
    from flowtape.runner import execute

    work = Path(tempfile.mkdtemp(prefix="flowtape-agents-bench-"))
    flow = load_flow(str(_flow(work, args.agents)), None)
    execute(flow, {"question": "warm-up"}, runs_dir=work / "runs", max_workers=1)  # (the SDK's import, once)
    rows: dict[str, Any] = {}
    for label, workers in (("one worker", 1), ("default pool", None)):
        server.requests.clear()
        t0 = time.perf_counter()
        result = execute(flow, {"question": "why?"}, runs_dir=work / "runs", max_workers=workers, run_id=label.replace(" ", "-"))
        rows[label] = {"seconds": time.perf_counter() - t0, "requests": len(server.requests), "status": result.status}
    server.requests.clear()
    t0 = time.perf_counter()
    resumed = execute(flow, runs_dir=work / "runs", resume_from="default-pool")
    rows["resume at the last step"] = {"seconds": time.perf_counter() - t0, "requests": len(server.requests),
                                       "status": resumed.status}
    server.close()
    serial = rows["one worker"]["seconds"]
    lines = [f"6. Parallel model calls: {args.agents} independent agents, each answered after {args.delay:g} s",
             f"{'':28}{'wall s':>8}{'requests':>10}{'vs one worker':>15}"]
    for label, row in rows.items():
        lines.append(f"{label:28}{row['seconds']:8.2f}{row['requests']:10d}{serial / row['seconds']:14.1f}x")
    table = "\n".join(lines)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"agents": args.agents, "delay": args.delay, "rows": rows, "table": table}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
