"""The `flowtape` command: run, runs, show, verify, diff, debug, golden, lsp."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from . import __version__
from .errors import ErrorReport, FlowError, FlowtapeError, ResumeRefused, TraceCorruption, UsageError
from .executors import EXECUTORS
from .ports import is_resource
from .progress import Checking
from .rundir import (
    DEFAULT_RUNS_DIR,
    TAPE,
    RunSummary,
    list_runs,
    resolve_run,
    still_running,
    summary_from_tape,
)
from .runner import MAX_WORKERS
from .seek import last_step_number
from .tape import FORMAT_VERSION, Tape
from .values import preview, preview_raw

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
THEN_CHOICES = ("stop", "live")  # `debug --then`: what the run does after the debugged firing
OUTPUT_CHARS = 10_000  # per output port, in text mode


class _Parser(argparse.ArgumentParser):
    json_asked = False  # `--json` on the command line (run, runs, show): a mistake in it is a JSON object too

    def error(self, message: str) -> Any:  # one line and exit 2, like every other usage error
        if _Parser.json_asked:
            _say_json(ErrorReport.of(message))
        self.exit(EXIT_USAGE, f"flowtape: {message}\n")


def _parse_input(text: str, types: dict[str, Any] | None = None) -> tuple[str, Any]:
    """NAME=VALUE: VALUE as JSON, else as text; always as text for an input declared `str`, and
    as an absolute path for one declared `File` or `Resource` (tools run in the flow's folder)."""
    if "=" not in text:
        raise UsageError(f"--input takes NAME=VALUE, not {text!r}")
    name, raw = text.split("=", 1)
    declared = types.get(name) if types is not None else None
    if declared is str:
        return name, raw
    if is_resource(declared) and raw:
        return name, os.path.abspath(os.path.expanduser(raw))
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw


def _inputs_json(source: str | None) -> dict[str, Any]:
    """--inputs-json FILE: the inputs as one JSON object (how the language server passes them:
    no size limit of a command line, and a value is never taken for an option)."""
    if source is None:
        return {}
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        inputs = json.loads(text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--inputs-json {source}: {exc}") from None
    if not isinstance(inputs, dict):
        raise UsageError(f"--inputs-json {source}: a JSON object of input ports is expected, not {type(inputs).__name__}")
    return inputs


def _say_which_workflow(args: argparse.Namespace, name: str) -> None:
    """With no `main` and no --workflow, the last workflow of the file runs: say so when it had others."""
    from .loader import load_module, workflows

    if args.workflow is None and name != "main":
        others = [n for n in workflows(load_module(args.flow)) if n != name]
        if others:
            print(f"flowtape: note: running workflow {name!r}, the last in the file (no 'main'); "
                  f"--workflow picks another: {', '.join(others)}", file=sys.stderr)


def _recorded_workflow(args: argparse.Namespace) -> str | None:
    """The workflow the run to resume ran, as its tape's header says; None when it cannot be told
    (the resume itself then says why it cannot go on)."""
    try:
        summary = summary_from_tape(resolve_run(args.resume_from, _runs_dir(args)))
    except UsageError:
        return None
    return summary.workflow if summary is not None else None


def _runs_dir(args: argparse.Namespace) -> Path:
    return Path(args.runs_dir) if getattr(args, "runs_dir", None) else DEFAULT_RUNS_DIR


def cmd_run(args: argparse.Namespace) -> int:
    from .fork import parse_sets
    from .loader import load_flow
    from .progress import Progress
    from .runner import execute

    if args.out_dir is not None:
        raise UsageError(f"--out-dir is wfpy's option: Flowtape keeps runs in --runs-dir DIR (--runs-dir {args.out_dir})")
    if args.resume_from is not None and args.workflow is None:
        args.workflow = _recorded_workflow(args)  # a resume runs the workflow the run ran
    flow = load_flow(args.flow, args.workflow)
    _say_which_workflow(args, flow.name)
    given = [_parse_input(i, flow.inputs) for i in args.input]
    names = [name for name, _ in given]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"--input {name} is given {names.count(name)} times: give each input once")
    inputs = {**_inputs_json(args.inputs_json), **dict(given)}
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
        with quiet, _checking() as checking:
            def started(run_id: str, run_dir: Path | None) -> None:
                if checking is not None:
                    checking.close()  # the check of the resumed tape is done: the run's own line follows
                note_missing(run_id, run_dir)

            result = execute(
                flow, inputs, max_workers=args.max_workers, runs_dir=_runs_dir(args), run_id=args.run_id,
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
        _tell(f"{result.status} · {result.steps} steps · {result.firings} firings{where}")
        if result.status == "stopped" and args.max_steps is not None and result.steps >= args.max_steps:
            go_on = f": go on with --resume-from {result.run_id}" if result.run_dir else " (--no-tape: nothing to resume from)"
            _tell(f"stopped at --max-steps {args.max_steps}{go_on}")
        for d in result.replay_stopped:
            _tell(f"replay stopped: {d.actor} firing {d.fireCount}: {d.detail()}")
        # what is left is news only when the run ended by itself (a failed or stopped one leaves
        # tokens by its nature), and not on a feedback edge (how such a loop ends: see runner._feedback)
        for qid, count in result.leftovers if result.status == "succeeded" else ():
            _tell(f"flowtape: note: {count} token(s) left in {qid}, not taken")
        for line in result.stuck:
            _tell(f"flowtape: note: {line}")
    for line in result.warnings:
        _tell(f"flowtape: warning: {line}")
    if result.status == "failed" and result.error is not None:
        _tell(f"flowtape: {result.error.message}")
        if args.verbose and result.error.traceback:
            _tell(result.error.traceback)
    if result.usage is not None and not args.json:  # last: what the models cost, and what a resume saved
        for line in result.usage.said():
            _tell(line)
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


# what a tape or run.json says is printed with its control characters shown, not obeyed: a tape
# from elsewhere must not retitle the terminal, rewrite the lines above, or reorder what a line
# shows with bidirectional overrides (the "Trojan Source" trick)
_CONTROLS = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (*range(9), *range(11, 32), 127, *range(0x80, 0xA0), 0x200E, 0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A))
}


def _say(text: str) -> None:
    print(text.translate(_CONTROLS))


def _tell(text: str) -> None:
    """A message on stderr, escaped as _say escapes output: tape text in it is shown, not obeyed."""
    print(text.translate(_CONTROLS), file=sys.stderr)


def _say_json(value: object) -> None:
    """One line of JSON (run.json holds its outputs indented: made one line too)."""
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(value), indent=0).decode() + "\n")


@contextlib.contextmanager
def _checking() -> Iterator[Checking | None]:
    """How far the check of a long tape has got, on a terminal (a million steps take seconds)."""
    if not sys.stderr.isatty():
        yield None
        return
    shown = Checking()
    try:
        yield shown
    finally:
        shown.close()


def _say_records(tape: Tape) -> None:
    from .export import full_records

    encode = msgspec.json.Encoder().encode
    out = sys.stdout.buffer
    batch: list[bytes] = []
    for record in full_records(tape):
        batch.append(encode(record))
        if len(batch) == 1024:  # a million-step tape streams out, a thousand lines a write
            out.write(b"\n".join(batch) + b"\n")
            batch = []
    if batch:
        out.write(b"\n".join(batch) + b"\n")


class ListedRun(msgspec.Struct):
    """A run as `runs --json` lists it: its directory, and its run.json (a dead run's status `killed`)."""

    dir: str
    summary: RunSummary


def cmd_runs(args: argparse.Namespace) -> int:
    if _runs_dir(args).exists() and not _runs_dir(args).is_dir():
        raise UsageError(f"{_runs_dir(args)} is not a directory of runs")
    runs = list_runs(_runs_dir(args))
    listed: list[ListedRun] = []
    for run_dir, s in runs:
        dead = s.status == "running" and not still_running(s)  # its process died without an end record
        if s.status in ("running", "unknown"):  # run.json has no steps yet, or is missing: the tape tells
            s = msgspec.structs.replace(s, status="killed" if dead else s.status)
            with contextlib.suppress(OSError):
                s.steps = last_step_number(run_dir / TAPE)
        listed.append(ListedRun(str(run_dir), s))
    if args.json:
        _say_json(listed)
        return EXIT_OK
    if not runs:
        _say(f"no runs in {_runs_dir(args)}")
    for run in listed:
        s, name = run.summary, Path(run.dir).name
        edits = f" ({s.edits} edit{'s' if s.edits != 1 else ''})" if s.edits else ""
        how = "forked" if s.edits else "resumed"
        origin = f"  {how} from {s.resumedFrom} @ step {s.resumedAtStep}{edits}" if s.resumedFrom else ""
        copied = f"  (a copy of run {s.id})" if name != s.id else ""  # the name is what `show` takes
        row = f"{name}  {s.workflow:<16} {s.status:<9} {s.steps:>7} steps  {s.startedAt}{origin}{copied}"
        _say(row.replace("\n", "\\n"))  # one run, one line
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from .fork import fork_edits
    from .show import detail_of, format_detail, load, run_detail
    from .tape import Diverged, Edited, Step

    if args.records and (args.step is not None or args.json):
        raise UsageError("--records prints every record of the run, as JSON already: leave out --step and --json")
    run_dir = resolve_run(args.run, _runs_dir(args))
    if args.step is not None:
        with _checking() as progress:
            detail = detail_of(run_dir, args.step, progress)
        if args.json:
            _say_json(detail)
        else:
            _say(format_detail(detail))
        return EXIT_OK
    with _checking() as progress:
        tape = load(run_dir, progress)
    if args.records:
        _say_records(tape)
        return EXIT_OK
    if args.json:
        _say_json(run_detail(tape))
        return EXIT_OK
    h = tape.header
    end = tape.end
    _say(f"run {h.runId} · workflow {h.workflow} · {h.flowFile}")
    if h.resumedFrom:
        how = "forked" if fork_edits(tape) else "resumed"
        _say(f"{how} from {h.resumedFrom} at step {h.resumedAtStep}")
    for record in tape.records():
        if isinstance(record, Step):
            mark = "  [replayed]" if record.replayed else ""
            _say(f"  {record.step:>5} · {record.actor} · fire {record.fireCount} · seq {record.journalSeq}{mark}")
        elif isinstance(record, Diverged):  # where the replay stopped, between the steps around it
            _say(f"        replay stopped: {record.actor} firing {record.fireCount}: {record.detail()}")
        elif isinstance(record, Edited):  # a fork's edit, where it was made
            _say(f"        edited: {record.what} = {preview_raw(record.value, 120)}"
                 + (" (its next answer)" if record.answer else ""))
    if end is not None:
        _say(f"{end.status} · outputs {preview_raw(end.outputs, 2000)}")
        if end.error is not None:
            _say(f"error: {end.error.message}")
        for line in end.usage.said() if end.usage is not None else []:
            _say(line)
    else:
        _say("(no end record: the run is still going, or was killed)")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from .streamed import unvouched
    from .verify import verify_run

    run_dir = resolve_run(args.run, _runs_dir(args))
    with _checking() as progress:
        tape, rebuild = verify_run(run_dir, progress=progress)
    status = rebuild.ended.status if rebuild.ended else "no end record"
    _say(f"ok: {run_dir} · {rebuild.seq} firings · {rebuild.step} steps · {status}")
    tail = unvouched(tape)
    if tail is not None:
        print(f"flowtape: note: lines {tail[0]}-{tail[1]}, written after the tape's last hashed record (the run ended "
              "without its end record), hold together with the run rebuilt before them, but no hash vouches for them",
              file=sys.stderr)
    return EXIT_OK


def cmd_golden(args: argparse.Namespace) -> int:
    from .fork import parse_sets
    from .golden import GoldenMismatch, check, record
    from .loader import load_flow

    if args.resume_from is not None and args.workflow is None:
        args.workflow = _recorded_workflow(args)
    flow = load_flow(args.flow, args.workflow)
    inputs = dict(_parse_input(i, flow.inputs) for i in args.input) or None
    fork: dict[str, Any] = {}
    if args.resume_from is not None:  # a golden of a resume or a fork of a recorded run
        fork = {"resume_from": resolve_run(args.resume_from, _runs_dir(args)).resolve(), "at_step": args.at_step,
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
    from .diff import diff_runs, format_diff

    runs = _runs_dir(args)
    try:
        with _checking() as progress:  # (a long tape takes seconds to check)
            diff = diff_runs(resolve_run(args.run_a, runs), resolve_run(args.run_b, runs), args.actor, progress)
    except ValueError as exc:  # an --actor neither run has
        raise UsageError(str(exc)) from None
    if args.json:
        _say_json(diff)
    else:
        _say(format_diff(diff))
    return EXIT_OK if diff.same else EXIT_FAILED


def cmd_debug(args: argparse.Namespace) -> int:
    from .debug import debug_firing

    run_dir = resolve_run(args.run, _runs_dir(args))
    ok = debug_firing(run_dir, args.step, args.actor, then=args.then, port=args.port, flow_file=args.flow,
                      max_workers=args.max_workers, runs_dir=_runs_dir(args), run_id=args.run_id)
    return EXIT_OK if ok else EXIT_FAILED


def cmd_graph(args: argparse.Namespace) -> int:
    from .flowgraph import describe, graph_of_flow, graph_of_header, header_of_tape

    target = Path(args.target)
    if target.suffix == ".py" or target.is_file():
        graph = graph_of_flow(target, args.workflow)
    else:
        if args.workflow is not None:
            raise UsageError("--workflow is for a flow file: a run has its workflow")
        graph = graph_of_header(header_of_tape(resolve_run(args.target, _runs_dir(args)) / TAPE))
    if args.json:
        _say_json(graph)
    else:
        _say(describe(graph))
    return EXIT_OK


def cmd_lsp(args: argparse.Namespace) -> int:
    from flowtape_lsp.server import main as lsp_main

    if args.tcp is not None and not args.token:
        raise UsageError("--tcp needs --token TOKEN: the server serves only a client whose initialize gives it "
                         "(initializationOptions.token), as any local user could connect to the port")
    return lsp_main(tcp=args.tcp, token=args.token)


_WHOLE = re.compile(r"-?[0-9]+")  # what `int()` takes beyond it (`1_0`, ` 3`, other scripts' digits) is a typo


def _count(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number (from `low` to `high`); argparse names the option in its error."""

    def parse(text: str) -> int:
        if not _WHOLE.fullmatch(text) or len(text) > 30:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number" if len(text) <= 30 else "too many digits")
        value = int(text)
        if low is None:
            return value
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="flowtape", description="Run actor-dataflow flows; every run is a tape.")
    parser.add_argument("--verbose", action="store_true", help="print tracebacks")
    parser.add_argument("--version", action="version", version=f"flowtape {__version__} (tape format {FORMAT_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    runs_dir: dict[str, Any] = {"metavar": "DIR", "help": f"where runs are kept (default: {DEFAULT_RUNS_DIR})"}
    workflow: dict[str, Any] = {"metavar": "NAME", "help": "the @workflow to run (default: main, else the last one in the file)"}

    p = sub.add_parser("run", help="run a flow and print its outputs")
    p.add_argument("flow", help="a Python file defining a @workflow")
    p.add_argument("--workflow", **workflow)
    p.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                   help="VALUE is JSON, else a string (always the text for an input declared str); once per input")
    p.add_argument("--inputs-json", metavar="FILE", help="the inputs as one JSON object, from FILE ('-': stdin)")
    p.add_argument("--max-workers", type=_count(1, MAX_WORKERS), metavar="N",
                   help="threads firing actors (1: a deterministic order; default: the workflow's, else CPUs + 2 "
                        "up to 8; a resume: the recorded run's)")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="where firings run: threads in this process (the default) or a Ray cluster (pip install 'flowtape[ray]')")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="with --executor ray: the cluster to join (auto, ray://HOST:10001, or what `ray start --head` "
                        "printed; default: a local instance started for the run)")
    p.add_argument("--max-steps", type=_count(1), metavar="N", help="stop the run after N steps (a guard for a flow that never ends)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS)  # keeps `flowtape --verbose run`
    p.add_argument("--runs-dir", **runs_dir)
    p.add_argument("--run-id", metavar="ID", help="the new run's id (default: the time, then a random tail)")
    p.add_argument("--durable", action="store_true", help="fsync every tape record")
    p.add_argument("--no-tape", action="store_true", help="do not record the run")
    p.add_argument("--resume-from", metavar="RUN", help="resume a recorded run (an id or a run directory)")
    p.add_argument("--at-step", type=_count(), metavar="N", help="with --resume-from: the step to resume at, all after it live (default: where it stopped, also inside the loop item, if branch or nested workflow it stopped in)")
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
    p.add_argument("--step", type=_count(), metavar="N", help="show step N: what it took and put, every queue and state after it")
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
    p.add_argument("--at-step", type=_count(), metavar="N", help="as for run")
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
    p.add_argument("--step", type=_count(1), metavar="N", required=True, help="the step whose firing to debug")
    p.add_argument("--actor", metavar="NAME", help="debug this actor's last firing at or before step N instead (one inside a loop, say)")
    p.add_argument("--then", choices=THEN_CHOICES, default="stop",
                   help="after the firing: stop the run (default), or go on live")
    p.add_argument("--port", type=_count(0, 65535), default=5678, metavar="PORT",
                   help="where debugpy listens on 127.0.0.1 (default 5678; 0: a free port, said on stderr)")
    p.add_argument("--flow", metavar="FILE", help="the flow file (default: the one the run ran)")
    p.add_argument("--max-workers", type=_count(1, MAX_WORKERS), metavar="N", help="threads firing actors (default 1: the recorded order)")
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
    p.add_argument("--tcp", type=_count(1, 65535), metavar="PORT",
                   help="listen on 127.0.0.1:PORT instead, for a client that shows --token")
    p.add_argument("--token", metavar="TOKEN", help="with --tcp: the token a client must give as initializationOptions.token")
    p.add_argument("--stdio", action="store_true", help="speak LSP on stdin/stdout (the default)")
    p.add_argument("--clientProcessId", help=argparse.SUPPRESS)  # added by some language clients
    p.set_defaults(fn=cmd_lsp)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    _Parser.json_asked = bool(words) and words[0] in ("run", "runs", "show", "diff") and "--json" in words
    args = build_parser().parse_args(argv)
    verbose = bool(getattr(args, "verbose", False))
    try:
        code = int(args.fn(args))
    except TraceCorruption as exc:  # (a tape of a format this Flowtape does not read is no corrupt one)
        from .verify import RUN_JSON

        said = {"a known format version": "cannot read this tape: ", RUN_JSON: ""}.get(exc.rule, "corrupt tape: ")
        code = _error(args, f"{said}{exc}", EXIT_FAILED)
    except UsageError as exc:
        code = _error(args, exc.cli or str(exc), EXIT_USAGE, exc)
    except (FlowError, ResumeRefused) as exc:
        code = _error(args, str(exc), EXIT_USAGE, exc)
    except FlowtapeError as exc:
        code = _error(args, str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        code = _error(args, "interrupted", 130)
    except BrokenPipeError:  # `flowtape show RUN | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # a runs directory or tape it may not read, a full disk...
        where = f" {exc.filename}:" if exc.filename else ""
        code = _error(args, f"cannot go on:{where} {exc.strerror or exc}", EXIT_FAILED)
    except RecursionError:
        code = _error(args, "a value is nested too deeply to read (a tape written elsewhere, or edited?)", EXIT_FAILED)
    except Exception as exc:  # noqa: BLE001 - a bug of ours still gets one line unless --verbose
        if verbose:
            traceback.print_exc()
        code = _error(args, f"internal error: {type(exc).__name__}: {exc}", EXIT_FAILED)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def _error(args: argparse.Namespace, message: str, code: int, exc: BaseException | None = None) -> int:
    """One line on stderr (what a tape or run.json said in it escaped); with `run --json`, the one
    JSON object on stdout says it too."""
    _tell(f"flowtape: {message}")
    if getattr(args, "json", False):
        _say_json(ErrorReport.of(message, exc))
    return code


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
