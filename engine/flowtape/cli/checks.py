"""The commands that hold runs to something: `verify` (a tape to its invariants), `golden` (a run
to a golden file), `diff` (one run to another)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..rundir import resolve_run
from .arguments import parse_input, recorded_workflow, runs_dir_of
from .terminal import EXIT_FAILED, EXIT_OK, checking_progress, say, say_json


def cmd_verify(args: argparse.Namespace) -> int:
    from ..streamed import unvouched
    from ..verify import verify_run

    run_dir = resolve_run(args.run, runs_dir_of(args))
    with checking_progress() as progress:
        tape, rebuild = verify_run(run_dir, progress=progress)
    status = rebuild.ended.status if rebuild.ended else "no end record"
    say(f"ok: {run_dir} · {rebuild.seq} firings · {rebuild.step} steps · {status}")
    tail = unvouched(tape)
    if tail is not None:
        print(f"flowtape: note: lines {tail[0]}-{tail[1]}, written after the tape's last hashed record (the run ended "
              "without its end record), hold together with the run rebuilt before them, but no hash vouches for them",
              file=sys.stderr)
    return EXIT_OK


def cmd_golden(args: argparse.Namespace) -> int:
    from ..fork import parse_sets
    from ..golden import GoldenMismatch, check, record
    from ..loader import load_flow

    if args.resume_from is not None and args.workflow is None:
        args.workflow = recorded_workflow(args)
    flow = load_flow(args.flow, args.workflow)
    inputs = dict(parse_input(i, flow.inputs) for i in args.input) or None
    fork: dict[str, Any] = {}
    if args.resume_from is not None:  # a golden of a resume or a fork of a recorded run
        fork = {"resume_from": resolve_run(args.resume_from, runs_dir_of(args)).resolve(), "at_step": args.at_step,
                "edits": parse_sets(args.set)}
    elif args.set or args.at_step is not None:
        raise UsageError("--at-step and --set need --resume-from")
    if args.action == "record":
        data = record(flow, Path(args.golden), inputs, **fork)
        print(f"recorded {args.golden}: {len(data['steps'])} steps")
        if data["end"].get("status") == "failed":  # a golden may hold a failure on purpose: said, not refused
            print(f"flowtape: note: the recorded run failed, and the golden holds that: {data['end'].get('error')}", file=sys.stderr)
        return EXIT_OK
    try:
        check(flow, Path(args.golden), inputs, **fork)
    except GoldenMismatch as exc:
        print(f"flowtape: golden mismatch: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"ok: matches {args.golden}")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    from ..diff import diff_runs, format_diff

    runs = runs_dir_of(args)
    try:
        with checking_progress() as progress:  # (a long tape takes seconds to check)
            diff = diff_runs(resolve_run(args.run_a, runs), resolve_run(args.run_b, runs), args.actor, progress)
    except ValueError as exc:  # an --actor neither run has
        raise UsageError(str(exc)) from None
    if args.json:
        say_json(diff)
    else:
        say(format_diff(diff))
    return EXIT_OK if diff.same else EXIT_FAILED
