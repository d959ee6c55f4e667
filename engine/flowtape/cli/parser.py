"""The `flowtape` command line: every subcommand, its options and their help."""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..executors import EXECUTORS
from ..rundir import DEFAULT_RUNS_DIR
from ..runner import MAX_WORKERS
from ..tape import FORMAT_VERSION
from .arguments import Parser, count
from .browse import cmd_graph, cmd_runs, cmd_show
from .checks import cmd_diff, cmd_golden, cmd_verify
from .editors import THEN_CHOICES, cmd_debug, cmd_lsp
from .run import cmd_run


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="flowtape", description="Run actor-dataflow flows; every run is a tape.")
    parser.add_argument("--verbose", action="store_true", help="print tracebacks")
    parser.add_argument("--version", action="version", version=f"flowtape {__version__} (tape format {FORMAT_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    runs_dir: dict[str, Any] = {"metavar": "DIR", "help": f"where runs are kept (default: {DEFAULT_RUNS_DIR})"}
    workflow: dict[str, Any] = {"metavar": "NAME", "help": "the @workflow to run (default: main, else the last one in the file)"}

    p = sub.add_parser("run", help="run a flow and print its outputs")
    p.add_argument("flow", help="a Python file defining a @workflow")
    p.add_argument("--workflow", **workflow)
    p.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                   help="VALUE is JSON, else a string (always the text for an input declared str); once per input")
    p.add_argument("--inputs-json", metavar="FILE", help="the inputs as one JSON object, from FILE ('-': stdin)")
    p.add_argument("--max-workers", type=count(1, MAX_WORKERS), metavar="N",
                   help="threads firing actors (1: a deterministic order; default: the workflow's, else CPUs + 2 "
                        "up to 8; a resume: the recorded run's)")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="where firings run: threads in this process (the default) or a Ray cluster (pip install 'flowtape[ray]')")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="with --executor ray: the cluster to join (auto, ray://HOST:10001, or what `ray start --head` "
                        "printed; default: a local instance started for the run)")
    p.add_argument("--max-steps", type=count(1), metavar="N", help="stop the run after N steps (a guard for a flow that never ends)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS)  # keeps `flowtape --verbose run`
    p.add_argument("--runs-dir", **runs_dir)
    p.add_argument("--run-id", metavar="ID", help="the new run's id (default: the time, then a random tail)")
    p.add_argument("--durable", action="store_true", help="fsync every tape record")
    p.add_argument("--no-tape", action="store_true", help="do not record the run")
    p.add_argument("--resume-from", metavar="RUN", help="resume a recorded run (an id or a run directory)")
    p.add_argument("--at-step", type=count(), metavar="N", help="with --resume-from: the step to resume at, all after it live (default: where it stopped, also inside the loop item, if branch or nested workflow it stopped in)")
    p.add_argument("--set", action="append", default=[], metavar="WHERE=VALUE",
                   help="with --resume-from: fork, editing a value at the step first: QUEUE[i]=JSON (a waiting token; "
                        "QUEUE is its id or its consumer's port, a.In), ACTOR.field=JSON, AGENT.answer[.PORT]=JSON; repeatable")
    p.add_argument("--out-dir", "-o", help=argparse.SUPPRESS)  # wfpy's: said to be --runs-dir here
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("runs", help="list runs, newest first")
    p.add_argument("--runs-dir", **runs_dir)
    p.add_argument("--json", action="store_true", help="print a JSON array: each run's directory and run.json")
    p.set_defaults(fn=cmd_runs)

    p = sub.add_parser("show", help="print a run, or one step of it")
    p.add_argument("run", help="a run directory or a run id")
    p.add_argument("--step", type=count(), metavar="N", help="show step N: what it took and put, every queue and state after it")
    p.add_argument("--json", action="store_true", help="print one JSON object, values whole, in the tape's tagged JSON")
    p.add_argument("--records", action="store_true", help="print the tape's records, one JSON object a line, every field filled in and named in full")
    p.add_argument("--runs-dir", **runs_dir)
    p.set_defaults(fn=cmd_show)

    p = sub.add_parser("verify", help="rebuild a run from its tape and check its invariants")
    p.add_argument("run", help="a run directory or a run id")
    p.add_argument("--runs-dir", **runs_dir)
    p.set_defaults(fn=cmd_verify)

    p = sub.add_parser("golden", help="record or check a golden tape")
    p.add_argument("action", choices=["record", "check"])
    p.add_argument("flow", help="a Python file defining a @workflow")
    p.add_argument("golden", help="the golden file (JSON)")
    p.add_argument("--workflow", **workflow)
    p.add_argument("--input", action="append", default=[], metavar="NAME=VALUE", help="as for run")
    p.add_argument("--resume-from", metavar="RUN", help="the golden of a resume (or, with --set, a fork) of a recorded run")
    p.add_argument("--at-step", type=count(), metavar="N", help="as for run")
    p.add_argument("--set", action="append", default=[], metavar="WHERE=VALUE", help="as for run")
    p.add_argument("--runs-dir", **runs_dir)
    p.set_defaults(fn=cmd_golden)

    p = sub.add_parser("diff", help="compare two runs firing by firing: the first difference, with the values")
    p.add_argument("run_a", metavar="RUN_A", help="a run directory or a run id")
    p.add_argument("run_b", metavar="RUN_B", help="the run to compare it with")
    p.add_argument("--actor", metavar="NAME", help="compare only this actor's firings (its path)")
    p.add_argument("--json", action="store_true", help="print one JSON object: every differing firing, values whole")
    p.add_argument("--runs-dir", **runs_dir)
    p.set_defaults(fn=cmd_diff)

    p = sub.add_parser("debug", help="run one recorded firing live under the Python debugger (debugpy), after replaying what came before")
    p.add_argument("run", help="a run directory or a run id")
    p.add_argument("--step", type=count(1), metavar="N", required=True, help="the step whose firing to debug")
    p.add_argument("--actor", metavar="NAME", help="debug this actor's last firing at or before step N instead (one inside a loop, say)")
    p.add_argument("--then", choices=THEN_CHOICES, default="stop",
                   help="after the firing: stop the run (default), or go on live")
    p.add_argument("--port", type=count(0, 65535), default=5678, metavar="PORT",
                   help="where debugpy listens on 127.0.0.1 (default 5678; 0: a free port, said on stderr)")
    p.add_argument("--flow", metavar="FILE", help="the flow file (default: the one the run ran)")
    p.add_argument("--max-workers", type=count(1, MAX_WORKERS), metavar="N", help="threads firing actors (default 1: the recorded order)")
    p.add_argument("--run-id", metavar="ID", help="the new run's id")
    p.add_argument("--runs-dir", **runs_dir)
    p.set_defaults(fn=cmd_debug)

    p = sub.add_parser("graph", help="print a flow's graph (actors, nesting, queues) without running it, or a run's")
    p.add_argument("target", help="a Python file defining a @workflow, or a run directory or run id")
    p.add_argument("--workflow", **workflow)
    p.add_argument("--json", action="store_true", help="print one JSON object (what the editor's graph view draws)")
    p.add_argument("--runs-dir", **runs_dir)
    p.set_defaults(fn=cmd_graph)

    p = sub.add_parser("lsp", help="start the language server (stdio)")
    p.add_argument("--tcp", type=count(1, 65535), metavar="PORT",
                   help="listen on 127.0.0.1:PORT instead, for a client that shows --token")
    p.add_argument("--token", metavar="TOKEN", help="with --tcp: the token a client must give as initializationOptions.token")
    p.add_argument("--stdio", action="store_true", help="speak LSP on stdin/stdout (the default)")
    p.add_argument("--clientProcessId", help=argparse.SUPPRESS)  # added by some language clients
    p.set_defaults(fn=cmd_lsp)
    return parser
