"""`flowtape run`: a flow run (or resumed, or forked), its outputs printed or one JSON object."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from ..errors import UsageError
from ..values import preview
from .arguments import inputs_json, parse_input, recorded_workflow, runs_dir_of
from .terminal import EXIT_FAILED, EXIT_OK, checking_progress, tell

OUTPUT_CHARS = 10_000  # per output port, in text mode


def say_which_workflow(args: argparse.Namespace, name: str) -> None:
    """With no `main` and no --workflow, the last workflow of the file runs: say so when it had others."""
    from ..loader import load_module, workflows

    if args.workflow is None and name != "main":
        others = [n for n in workflows(load_module(args.flow)) if n != name]
        if others:
            print(f"flowtape: note: running workflow {name!r}, the last in the file (no 'main'); "
                  f"--workflow picks another: {', '.join(others)}", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    from ..fork import parse_sets
    from ..loader import load_flow
    from ..progress import Progress
    from ..runner import execute

    if args.out_dir is not None:
        raise UsageError(f"--out-dir is wfpy's option: Flowtape keeps runs in --runs-dir DIR (--runs-dir {args.out_dir})")
    if args.resume_from is not None and args.workflow is None:
        args.workflow = recorded_workflow(args)  # a resume runs the workflow the run ran
    flow = load_flow(args.flow, args.workflow)
    say_which_workflow(args, flow.name)
    given = [parse_input(i, flow.inputs) for i in args.input]
    names = [name for name, _ in given]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"--input {name} is given {names.count(name)} times: give each input once")
    inputs = {**inputs_json(args.inputs_json), **dict(given)}
    edits = parse_sets(args.set)

    def note_missing(run_id: str, run_dir: Path | None) -> None:  # once the run starts: not before a usage error
        if args.resume_from is None:
            for port in flow.inputs:
                if port not in inputs:
                    print(f"flowtape: note: workflow input {port!r} gets no value (--input {port}=VALUE)", file=sys.stderr)

    progress = Progress() if sys.stdout.isatty() and not args.json else None
    # with --json, stdout holds the one JSON object: what the flow prints goes to stderr
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with quiet, checking_progress() as checking:
            def started(run_id: str, run_dir: Path | None) -> None:
                if checking is not None:
                    checking.close()  # the check of the resumed tape is done: the run's own line follows
                note_missing(run_id, run_dir)

            result = execute(
                flow, inputs, max_workers=args.max_workers, runs_dir=runs_dir_of(args), run_id=args.run_id,
                tape=not args.no_tape, durable=args.durable, resume_from=args.resume_from, at_step=args.at_step,
                on_step=progress, max_steps=args.max_steps, on_start=started, on_check=checking, edits=edits,
                executor=args.executor, ray_address=args.ray_address,
            )
    finally:
        if progress is not None:
            progress.close()
    if args.json:
        out: dict[str, Any] = {"status": result.status, "outputs": _plain(result.outputs),
                               "runId": result.run_id, "runDir": str(result.run_dir) if result.run_dir else None,
                               "steps": result.steps}
        if result.error is not None:
            out["error"] = result.error.message
        if result.replay_stopped:
            out["replayStopped"] = msgspec.to_builtins(result.replay_stopped)
        if result.warnings:
            out["warnings"] = result.warnings
        if result.usage is not None:
            out["usage"] = msgspec.to_builtins(result.usage)
        sys.stdout.write(json.dumps(out, default=str) + "\n")
    else:
        cut = False
        for port, tokens in result.outputs.items():
            text = preview(tokens, OUTPUT_CHARS)
            cut = cut or (len(text) >= OUTPUT_CHARS and text.endswith("…"))
            print(f"{port}: {text}")
        if cut:
            print(f"flowtape: note: outputs longer than {OUTPUT_CHARS:,} characters are cut; --json prints them whole",
                  file=sys.stderr)
        where = f" · tape {result.run_dir}" if result.run_dir else ""
        tell(f"{result.status} · {result.steps} steps · {result.firings} firings{where}")
        if result.status == "stopped" and args.max_steps is not None and result.steps >= args.max_steps:
            go_on = f": go on with --resume-from {result.run_id}" if result.run_dir else " (--no-tape: nothing to resume from)"
            tell(f"stopped at --max-steps {args.max_steps}{go_on}")
        for d in result.replay_stopped:
            tell(f"replay stopped: {d.actor} firing {d.fireCount}: {d.detail()}")
        # what is left is news only when the run ended by itself (a failed or stopped one leaves
        # tokens by its nature), and not on a feedback edge (how such a loop ends: see runner._feedback)
        for qid, count in result.leftovers if result.status == "succeeded" else ():
            tell(f"flowtape: note: {count} token(s) left in {qid}, not taken")
        for line in result.stuck:
            tell(f"flowtape: note: {line}")
    for line in result.warnings:
        tell(f"flowtape: warning: {line}")
    if result.status == "failed" and result.error is not None:
        tell(f"flowtape: {result.error.message}")
        if args.verbose and result.error.traceback:
            tell(result.error.traceback)
    if result.usage is not None and not args.json:  # last: what the models cost, and what a resume saved
        for line in result.usage.said():
            tell(line)
    return {"succeeded": EXIT_OK}.get(result.status, EXIT_FAILED)


def _plain(x: Any) -> Any:
    """Outputs as plain JSON for --json: tuples and sets as lists, other keys as strings,
    dataclasses and objects as their fields, dates as ISO text, anything else as its str()."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if x - x == 0.0 else str(x)  # JSON has no nan or inf
    if isinstance(x, dict):
        return {k if isinstance(k, str) else str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return [_plain(v) for v in sorted(x, key=repr)]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _plain({f.name: getattr(x, f.name) for f in dataclasses.fields(x)})
    try:
        return msgspec.to_builtins(x)  # datetimes, decimals, uuids, enums, bytes
    except TypeError:
        return _plain(vars(x)) if hasattr(x, "__dict__") and not isinstance(x, type) else str(x)
