"""Debugging one recorded firing: everything before it replays from the tape, then it runs live
under debugpy (a Debug Adapter Protocol server: VS Code, nvim-dap or any DAP client attaches),
with the inputs it had and the actor's state as the tape restores them, so a breakpoint in the
action stops there. Afterwards the run stops, or goes on live: a new tape, as any resume."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError
from .rundir import TAPE
from .tape import Edited, Firing, read_tape
from .values import decode, preview


@dataclass
class Target:
    """The firing to debug, and the step whose firing it is (or runs inside)."""

    actor: str
    fire_count: int
    step: int
    flow_file: str
    workflow: str
    consumed: list[tuple[int, int, str]]  # as recorded: what it took, by digest

    @property
    def resume_at(self) -> int:
        return self.step - 1


def find_target(run_dir: Path, step: int, actor: str | None = None) -> Target:
    """Step `step`'s firing, or `actor`'s last firing at or before that step (an actor inside a
    loop or a nested workflow fires within another actor's step)."""
    tape = read_tape(run_dir / TAPE, warn=False)
    header = tape.header
    known = {a.path: a.kind for a in header.actors}
    if actor is not None and actor not in known:
        raise UsageError(f"run {header.runId} has no actor {actor!r} (its actors: {', '.join(known)})")
    steps = tape.steps()
    if not 1 <= step <= len(steps):
        raise UsageError(f"run {header.runId} has steps 1 to {len(steps)}, not {step}" if steps else f"run {header.runId} has no steps")
    covering = {(s.actor, s.fireCount): s.step for s in steps}
    wanted = (steps[step - 1].actor, steps[step - 1].fireCount)
    chosen: Firing | None = None
    for record in tape.firings():
        top = (record.within[0], record.within[1]) if record.within is not None else (record.actor, record.fireCount)
        if actor is None and (record.actor, record.fireCount) == wanted:
            chosen = record
            break
        if record.actor == actor and covering.get(top, step + 1) <= step:
            chosen = record  # (the last one wins)
    if chosen is None:
        raise UsageError(f"{actor} has not fired by step {step} of run {header.runId}" if actor is not None
                         else f"step {step} of run {header.runId} names a firing its tape does not hold")
    top = (chosen.within[0], chosen.within[1]) if chosen.within is not None else (chosen.actor, chosen.fireCount)
    return Target(chosen.actor, chosen.fireCount, covering[top], header.flowFile, header.workflow, list(chosen.consumed))


def listen(port: int, host: str = "127.0.0.1") -> tuple[str, int]:
    """Start debugpy's adapter on `host:port` (0: a free port) and wait for a client to attach."""
    try:
        import debugpy
    except ImportError:
        raise UsageError("flowtape debug needs debugpy: pip install 'flowtape[debug]' (or pip install debugpy)") from None
    try:
        # in this process: no adapter process outlives the run holding its output (or a client's connection)
        where = debugpy.listen((host, port), in_process_debug_adapter=True)
    except (OSError, RuntimeError) as exc:
        raise UsageError(f"cannot listen for a debugger on {host}:{port}: {exc}") from None
    return str(where[0]), int(where[1])


def wait_for_client() -> None:
    import debugpy

    debugpy.wait_for_client()
    say("flowtape: debugger attached")


def debug_firing(
    run_dir: Path, step: int, actor: str | None = None, *, then: str = "stop", port: int = 5678, flow_file: str | None = None,
    max_workers: int | None = None, runs_dir: Path | None = None, run_id: str | None = None,
) -> bool:
    """`flowtape debug`: say what is debugged, listen, wait for a client, run; whether the firing
    ran and the run ended as asked (succeeded, or stopped after the firing with `then="stop"`)."""
    from .loader import load_flow
    from .runner import execute

    target = find_target(run_dir, step, actor)
    flow = load_flow(flow_file or target.flow_file, target.workflow)
    after = "then the run stops" if then == "stop" else "then the run goes on live"
    say(f"flowtape: debugging {target.actor}'s firing {target.fire_count} (step {target.step} of run {run_dir.name}): "
        f"steps 1 to {target.resume_at} replay from the tape, that firing runs live with its recorded inputs, {after}")
    host, bound = listen(port)
    say(f"flowtape: debugger listening on {host}:{bound} (attach with a DAP client: VS Code's Flowtape debug "
        "configuration, nvim-dap; see the README)")
    wait_for_client()
    source, edits = replay_source(run_dir, target.resume_at)
    result = execute(
        flow, max_workers=max_workers or 1, runs_dir=runs_dir, run_id=run_id,
        resume_from=source, at_step=target.resume_at, max_steps=target.step if then == "stop" else None, edits=edits or None,
    )
    for name, tokens in result.outputs.items():
        print(f"{name}: {preview(tokens, 10_000)}")
    say(f"{result.status} · {result.steps} steps · {result.firings} firings · tape {result.run_dir}")
    took = took_recorded(target, result.run_dir) if result.run_dir is not None else None
    if took is None:
        say(f"flowtape: warning: {target.actor}'s firing {target.fire_count} did not run")
    elif not took:
        say(f"flowtape: warning: {target.actor}'s firing {target.fire_count} took other inputs than it had in run "
            f"{run_dir.name} (a firing before it ran live and answered otherwise)")
    if result.status == "failed" and result.error is not None:
        say(f"flowtape: {result.error.message}")
    stopped_as_asked = result.status == "stopped" and then == "stop" and result.steps >= target.step
    return took is not None and (result.status == "succeeded" or stopped_as_asked)


def replay_source(run_dir: Path, at: int) -> tuple[Path, dict[str, Any]]:
    """What to resume to stand right before the firing: the run at step `at`, or, when the run is
    a fork made at that very step (its edits come after the step), the run it forked, with the
    same edits again."""
    tape = read_tape(run_dir / TAPE, warn=False)
    header = tape.header
    own = [r for r in tape.records() if isinstance(r, Edited) and r.step == at]
    if header.resumedFrom is None or header.resumedAtStep != at or not own:
        return run_dir, {}
    source = run_dir.parent / header.resumedFrom
    if not (source / TAPE).is_file():
        say(f"flowtape: warning: run {header.resumedFrom}, which run {header.runId} forked, is not beside it: "
            f"the firing runs without the fork's edits")
        return run_dir, {}
    edits: dict[str, Any] = {}
    for record in own:
        value = decode(bytes(record.value))
        if record.answer:
            edits[f"{record.actor}.answer"] = value  # (the whole answer: one port's edit kept the others)
        elif record.field:
            edits[record.what] = value[record.field] if isinstance(value, dict) else value
        else:
            edits[record.what] = value
    return source, edits


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def took_recorded(target: Target, new_run: Path) -> bool | None:
    """Whether the debugged firing took what it took in the recorded run (None: it did not fire)."""
    for record in read_tape(new_run / TAPE, warn=False).records():
        if isinstance(record, Firing) and (record.actor, record.fireCount) == (target.actor, target.fire_count):
            return sorted(map(tuple, record.consumed)) == sorted(map(tuple, target.consumed))
    return None
