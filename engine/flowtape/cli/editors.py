"""The commands an editor starts: `debug` (one recorded firing live under debugpy, which the
editor attaches to) and `lsp` (the language server, which the engine does not import by name: the
server registers itself as the `lsp` entry point of the `flowtape.commands` group, pyproject.toml)."""

from __future__ import annotations

import argparse
from importlib.metadata import entry_points

from ..errors import UsageError
from ..rundir import resolve_run
from .arguments import runs_dir_of
from .terminal import EXIT_FAILED, EXIT_OK

THEN_CHOICES = ("stop", "live")  # `debug --then`: what the run does after the debugged firing


def cmd_debug(args: argparse.Namespace) -> int:
    from ..debug import debug_firing

    run_dir = resolve_run(args.run, runs_dir_of(args))
    ok = debug_firing(run_dir, args.step, args.actor, then=args.then, port=args.port, flow_file=args.flow,
                      max_workers=args.max_workers, runs_dir=runs_dir_of(args), run_id=args.run_id)
    return EXIT_OK if ok else EXIT_FAILED


def cmd_lsp(args: argparse.Namespace) -> int:
    found = entry_points(group="flowtape.commands", name="lsp")
    if not found:
        raise UsageError("the language server is not installed with this flowtape (no `lsp` entry point in the "
                         "flowtape.commands group): reinstall flowtape")
    lsp_main = next(iter(found)).load()
    if args.tcp is not None and not args.token:
        raise UsageError("--tcp needs --token TOKEN: the server serves only a client whose initialize gives it "
                         "(initializationOptions.token), as any local user could connect to the port")
    return lsp_main(tcp=args.tcp, token=args.token)
