"""What the tape costs per firing in instructions, not seconds: the same count on a loaded machine.

On a machine whose cores other processes share, a time measured side by side still moves by
10-20 % from run to run, which hides a change of a few percent. Instructions (counted by
valgrind's cachegrind, user space only: a write(2)'s time in the kernel is not in them) do not
move. Each figure is the difference between two runs of a bench flow, with SMALL and SMALL +
ITEMS items, so that what every run costs once (Python's start, the imports, the header, run.json)
cancels out.

    python bench/instructions.py [FLOW ...] [--items N] [--workers W]
    # e.g.  chain w=1: off 52,800 on 98,200 instructions a firing: the tape +86 %

Needs valgrind (`apt-get install valgrind`); it is not one of the project's dependencies, and
`make bench` does not run this. Each flow takes about a minute (valgrind runs Python ~50x slower).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
FLOWS = {"chain": ("chain.py", "chain"), "fanout": ("fanout.py", "fanout"), "loop": ("loopflow.py", "looped")}
SMALL = 300
_CHILD = """
import os, sys, importlib.util, tempfile
from flowtape.runner import execute
spec = importlib.util.spec_from_file_location("bench_flow", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
workers = int(sys.argv[4]) or None
result = execute(getattr(module, sys.argv[2]), None, max_workers=workers, runs_dir=tempfile.mkdtemp(),
                 tape=sys.argv[3] == "on")
print(result.firings)
"""


def _count(flow: Path, workflow: str, items: int, tape: bool, workers: int) -> tuple[int, int]:
    """(instructions, firings) of one run of `flow` with `items` items."""
    env = dict(os.environ, BENCH_N=str(items), BENCH_SLEEP="0")
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
         "-c", _CHILD, str(flow), workflow, "on" if tape else "off", str(workers)],
        capture_output=True, text=True, env=env, check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise SystemExit(f"valgrind gave no count: {out.stderr[-500:]}")
    return int(found.group(1).replace(",", "")), int(out.stdout.split()[-1])


def per_firing(flow: Path, workflow: str, items: int, tape: bool, workers: int) -> float:
    big, big_firings = _count(flow, workflow, SMALL + items, tape, workers)
    small, small_firings = _count(flow, workflow, SMALL, tape, workers)
    return (big - small) / (big_firings - small_firings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("flows", nargs="*", default=list(FLOWS), choices=list(FLOWS))
    parser.add_argument("--items", type=int, default=1000, help="items beyond the small run's (default 1000)")
    parser.add_argument("--workers", type=int, default=1, help="worker threads (0: the default pool)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("bench/instructions.py needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="flowtape-instructions-") as tmp:
        for name in args.flows:
            file, workflow = FLOWS[name]
            flow = Path(tmp) / file  # (the bench's flows name their framework by a placeholder)
            flow.write_text((BENCH / "flows" / file).read_text().replace("from FRAMEWORK import", "from flowtape import"))
            off = per_firing(flow, workflow, args.items, False, args.workers)
            on = per_firing(flow, workflow, args.items, True, args.workers)
            print(f"{name} w={args.workers or 'default'}: off {off:,.0f} on {on:,.0f} instructions a firing:"
                  f" the tape +{(on - off) / off * 100:.0f} %", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
