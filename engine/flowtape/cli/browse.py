"""The commands that read runs and flows: `runs` (the list), `show` (a run, a step of it, its
records) and `graph` (a flow's or a run's)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import msgspec

from ..errors import UsageError
from ..rundir import TAPE, RunSummary, list_runs, resolve_run, still_running
from ..seek import last_step_number
from ..tape import Tape
from ..values import preview_raw
from .arguments import runs_dir_of
from .terminal import EXIT_OK, checking_progress, say, say_json


def say_records(tape: Tape) -> None:
    from ..export import full_records

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
    if runs_dir_of(args).exists() and not runs_dir_of(args).is_dir():
        raise UsageError(f"{runs_dir_of(args)} is not a directory of runs")
    runs = list_runs(runs_dir_of(args))
    listed: list[ListedRun] = []
    for run_dir, s in runs:
        dead = s.status == "running" and not still_running(s)  # its process died without an end record
        if s.status in ("running", "unknown"):  # run.json has no steps yet, or is missing: the tape tells
            s = msgspec.structs.replace(s, status="killed" if dead else s.status)
            with contextlib.suppress(OSError):
                s.steps = last_step_number(run_dir / TAPE)
        listed.append(ListedRun(str(run_dir), s))
    if args.json:
        say_json(listed)
        return EXIT_OK
    if not runs:
        say(f"no runs in {runs_dir_of(args)}")
    for run in listed:
        s, name = run.summary, Path(run.dir).name
        edits = f" ({s.edits} edit{'s' if s.edits != 1 else ''})" if s.edits else ""
        how = "forked" if s.edits else "resumed"
        origin = f"  {how} from {s.resumedFrom} @ step {s.resumedAtStep}{edits}" if s.resumedFrom else ""
        copied = f"  (a copy of run {s.id})" if name != s.id else ""  # the name is what `show` takes
        row = f"{name}  {s.workflow:<16} {s.status:<9} {s.steps:>7} steps  {s.startedAt}{origin}{copied}"
        say(row.replace("\n", "\\n"))  # one run, one line
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from ..fork import fork_edits
    from ..show import detail_of, format_detail, load, run_detail
    from ..tape import Diverged, Edited, Step

    if args.records and (args.step is not None or args.json):
        raise UsageError("--records prints every record of the run, as JSON already: leave out --step and --json")
    run_dir = resolve_run(args.run, runs_dir_of(args))
    if args.step is not None:
        with checking_progress() as progress:
            detail = detail_of(run_dir, args.step, progress)
        if args.json:
            say_json(detail)
        else:
            say(format_detail(detail))
        return EXIT_OK
    with checking_progress() as progress:
        tape = load(run_dir, progress)
    if args.records:
        say_records(tape)
        return EXIT_OK
    if args.json:
        say_json(run_detail(tape))
        return EXIT_OK
    h = tape.header
    end = tape.end
    say(f"run {h.runId} · workflow {h.workflow} · {h.flowFile}")
    if h.resumedFrom:
        how = "forked" if fork_edits(tape) else "resumed"
        say(f"{how} from {h.resumedFrom} at step {h.resumedAtStep}")
    for record in tape.records():
        if isinstance(record, Step):
            mark = "  [replayed]" if record.replayed else ""
            say(f"  {record.step:>5} · {record.actor} · fire {record.fireCount} · seq {record.journalSeq}{mark}")
        elif isinstance(record, Diverged):  # where the replay stopped, between the steps around it
            say(f"        replay stopped: {record.actor} firing {record.fireCount}: {record.detail()}")
        elif isinstance(record, Edited):  # a fork's edit, where it was made
            say(f"        edited: {record.what} = {preview_raw(record.value, 120)}"
                 + (" (its next answer)" if record.answer else ""))
    if end is not None:
        say(f"{end.status} · outputs {preview_raw(end.outputs, 2000)}")
        if end.error is not None:
            say(f"error: {end.error.message}")
        for line in end.usage.said() if end.usage is not None else []:
            say(line)
    else:
        say("(no end record: the run is still going, or was killed)")
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from ..flowgraph import describe, graph_of_flow, graph_of_header, header_of_tape

    target = Path(args.target)
    if target.suffix == ".py" or target.is_file():
        graph = graph_of_flow(target, args.workflow)
    else:
        if args.workflow is not None:
            raise UsageError("--workflow is for a flow file: a run has its workflow")
        graph = graph_of_header(header_of_tape(resolve_run(args.target, runs_dir_of(args)) / TAPE))
    if args.json:
        say_json(graph)
    else:
        say(describe(graph))
    return EXIT_OK
