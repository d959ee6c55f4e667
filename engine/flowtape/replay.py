"""Resuming a run at a step: which recorded firings each actor replays, and the refusals.

A step covers the top-level firings up to it; every nested firing carries (`within`) the
top-level firing it ran inside, so the firings a step covers are exact for every actor.
Resumed where it stopped (no step named), a run also replays the firings of the composites that
never completed (a loop item, an if branch or a nested workflow's firing that failed, was stopped
or was killed inside): they have no step, and the composite, entered again, replays what it
recorded and goes on live from the first firing not on the tape, however deep the scopes inside
it. Resumed at a step, the run is as it was right after that step, and everything after runs live."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from msgspec import Raw

from . import trust
from .agents import calls_model
from .chain import chain_seed
from .digests import digest, digest_values
from .errors import ResumeRefused, TraceCorruption
from .guarded import open_regular
from .midloop import LoopPasses
from .model import AgentConfig
from .network import Network, Queue
from .rundir import TAPE, check_not_cut_short, read_summary, still_running
from .seek import restore, top_of
from .streamed import ends
from .tape import (
    ActorInfo,
    Checkpoint,
    Diverged,
    Edited,
    End,
    Firing,
    Header,
    Line,
    Step,
    StepFiller,
    decode_line,
    decode_record,
    gc_paused,
    read_tape,
)
from .usage import ModelCall, Spent
from .values import preview_json
from .verify import PROGRESS_EVERY, Rebuild, check_chain, check_header, check_summary

LEAF_KINDS = frozenset({"task", "agent", "tool"})


@dataclass(slots=True)
class Entry:
    """One recorded firing to replay."""

    fire_count: int
    takes: list[tuple[Queue, int, str]]
    puts: list[tuple[Queue, list[Raw]]]
    state: Raw | None
    chat: Raw | None
    not_replayable: str | None
    recorded: dict[int, list[Raw]] = field(default_factory=dict)
    calls: list[ModelCall] = field(default_factory=list)  # the model calls it made: replaying saves them

    def preview(self, queue: Queue) -> str | None:
        tokens = self.recorded.get(queue.index)
        if not tokens:
            return None
        values = [msgspec.json.decode(t) for t in tokens]
        return preview_json(values[0] if len(values) == 1 else values)


@dataclass
class Snapshot:
    """The recorded run as it stood at the step. Used instead of replaying firing by firing when
    every firing written before the step is one the step covers (always so for one worker):
    restoring it is then exactly what replaying would do, only without the per-firing work."""

    lines: list[bytes]  # the firing and step records up to the step, copied into the new tape
    queues: list[list[Raw]]
    fire_counts: dict[str, int]
    states: dict[str, Raw]
    chats: dict[str, list[Raw]]
    seq: int
    steps: int
    # When those records are all the recorded tape holds up to the step, they are copied as one
    # block with their hashes (the new header's `chainFrom` is `chain_from`): the recorded
    # tape's bytes and where that block begins and ends in them.
    block: tuple[bytes, int, int] | None = None
    chain_from: str | None = None
    outputs_checkpointed: dict[int, int] = field(default_factory=dict)  # see Checkpoint.outputs
    rounds: dict[str, int] | None = None  # see Checkpoint.rounds (None: a tape from before version 4)
    round: int = 0  # the step's round
    chats_since: dict[str, list[Raw]] = field(default_factory=dict)  # see Checkpoint.chats
    spent: list[Spent] = field(default_factory=list)  # the model calls its firings record: what restoring it saves
    # each top-level loop between two items at the step: its iterator, past the items it handed in (midloop.py)
    loops: dict[str, Iterator[object]] = field(default_factory=dict)
    clock: int = 0  # when the step ended on the recorded run's clock (µs): the copied records' times are on it


@dataclass
class ReplayPlan:
    source: Path
    source_id: str
    at_step: int
    inputs: Raw
    entries: dict[str, list[Entry]]
    covered: dict[tuple[str, int], list[tuple[int, str]]]  # recorded composite firings: what each handed in, by digest
    snapshot: Snapshot | None = None
    max_workers: int = 0  # the recorded run's pool (0: not recorded): a resume runs with it unless told otherwise
    unfinished: set[tuple[str, int]] = field(default_factory=set)  # top-level composite firings that never got their step
    no_snapshot: str = ""  # why the run at the step is not restored from a snapshot (a fork needs one)

    def install(self, net: Network) -> None:
        for path, entries in self.entries.items():
            net.by_path[path].replay = deque(entries)


def shape_of(net: Network) -> tuple[list[ActorInfo], list[str]]:
    actors = []
    for a in net.actors:
        created, defined = a.node.created_at, a.node.defined_at
        scope = a.node.scope
        puts = sorted({q.index for targets in a.outputs.values() for q in targets})
        actors.append(ActorInfo(
            a.path, a.kind, a.node.class_name, created.file, created.line, defined.file, defined.line,
            owner=a.owner.path if a.owner is not None else "", branch=scope.branch if scope is not None and scope.control.kind == "if" else "", puts=puts,
        ))
    return actors, [q.id for q in net.queues]


STATIC_ITEMS_TOLD = 100_000  # a static loop over more items is not digested at every run's start


def statics_of(net: Network) -> list[tuple[str, str]]:
    """The flow's static loop items and if conditions, by digest (Header.statics): a loop over a
    collection by its items, one over an iterator (which a look would use up) as ""."""
    found = []
    for a in net.actors:
        if a.kind == "loop" and a.obj.iterable is not None:
            value = a.obj.iterable
        elif a.kind == "if" and a.obj.condition is not None:
            value = a.obj.condition
        else:
            continue
        told = ""
        try:
            if a.kind == "if":  # its truth too: what picks the branch (an object's __bool__ need not be saved)
                told = digest_values([[bool(value), value]])
            elif isinstance(value, range):  # told by its bounds, not its (maybe ten million) items
                told = digest_values([["range", value.start, value.stop, value.step]])
            elif isinstance(value, (set, frozenset)):  # sorted as encoded: its order differs from process to process
                told = digest_values([value]) if len(value) <= STATIC_ITEMS_TOLD else ""
            elif iter(value) is not value and len(value) <= STATIC_ITEMS_TOLD:  # (an iterator: one pass only, the run's)
                told = digest_values([list(value)])
        except Exception:  # noqa: BLE001 - NotEncodable, no len(), or whatever a user's iterable raises: not told
            pass
        found.append((a.path, told))
    # an agent's prompt: a resume sees it changed (its recorded answers were to another question)
    found.extend((a.path, _prompt_digest(a.spec.agent)) for a in net.actors if a.spec is not None and calls_model(a.spec.agent))
    return found


def _prompt_digest(config: AgentConfig | None) -> str:
    return digest_values([["prompt", config.prompt if config is not None else ""]])


def _mark_changed_prompts(header: Header, net: Network, entries: dict[str, list[Entry]]) -> None:
    """The recorded firings of an agent whose prompt changed do not replay: it diverges there."""
    recorded = dict(header.statics)
    for path, told in statics_of(net):
        actor = net.by_path[path]
        if actor.kind == "agent" and recorded.get(path, told) != told:
            for entry in entries.get(path, []):
                entry.not_replayable = "the agent's prompt changed since the recorded run"


def _statics_differ(header: Header, net: Network) -> str:
    """Why the static loops and ifs (and the agents' prompts) may not be as the recorded run had
    them; "" when they are, for sure: only then may a snapshot stand for their firings (a replay
    per actor runs them again, and sees the change)."""
    now = statics_of(net)
    recorded = dict(header.statics)
    for path, told in now:
        kind = net.by_path[path].kind
        if not told:
            what = "goes over an iterator, or values a tape cannot hold," if kind == "loop" else "has a condition a tape cannot hold,"
            return f"{kind} {path} {what} which cannot be told the same as in the recorded run"
        if recorded.get(path) != told:
            return f"{kind} {path} " + ("has another prompt" if kind == "agent" else "goes over other values") + " than in the recorded run"
    return "" if header.statics == now else "the flow's static loops and ifs are not the recorded run's"


def describe_change(old: Header, actors: list[ActorInfo], queues: list[str]) -> str | None:
    """What changed in the graph since the recorded run, in words; None when nothing did."""
    before = {a.path: a for a in old.actors}
    after = {a.path: a for a in actors}
    removed = [p for p in before if p not in after]
    added = [p for p in after if p not in before]
    changes: list[str] = []
    renamed: set[str] = set()
    for gone in list(removed):
        match = next((p for p in added if after[p].cls == before[gone].cls and after[p].kind == before[gone].kind and p not in renamed), None)
        if match is not None:
            changes.append(f"actor {gone!r} was renamed {match!r}")
            renamed.add(match)
            removed.remove(gone)
    added = [p for p in added if p not in renamed]
    changes += [f"actor {p!r} ({after[p].cls}) was added" for p in added]
    changes += [f"actor {p!r} ({before[p].cls}) was removed" for p in removed]
    for path in before.keys() & after.keys():
        if before[path].cls != after[path].cls or before[path].kind != after[path].kind:
            changes.append(f"actor {path!r} changed from {before[path].cls} to {after[path].cls}")
    if not changes and list(old.queues) != list(queues):
        lost = [q for q in old.queues if q not in queues]
        new = [q for q in queues if q not in old.queues]
        detail = "; ".join([*(f"{q} removed" for q in lost), *(f"{q} added" for q in new)]) or "queue order changed"
        changes.append(f"rewired: {detail}")
    return "; ".join(changes) if changes else None


def plan_resume(
    run_dir: Path, at_step: int | None, net: Network, workflow: str, progress: Callable[[int, int], None] | None = None
) -> ReplayPlan:
    """Check that resuming `run_dir` at `at_step` is sound, and say what each actor replays.
    A tape that must be verified first calls `progress(records checked, records)` as verify does."""
    with gc_paused():  # the plan's objects are many and long-lived (see gc_paused)
        try:
            with open_regular(run_dir / TAPE) as fh:
                data = fh.read()
        except OSError as exc:
            raise ResumeRefused(f"cannot resume from {run_dir}: its tape cannot be read ({exc.strerror or exc})") from None
        summary = read_summary(run_dir)
        if summary is not None and still_running(summary):
            raise ResumeRefused(
                f"cannot resume from run {summary.id}: it is still running (process {summary.pid}), and its tape is not "
                f"finished; wait for it to end, or stop it (Ctrl-C, or kill -TERM {summary.pid}), then resume"
            )
        plan: ReplayPlan | None = None
        if trust.seals(data, summary.tape if summary is not None else None):
            try:  # (what verify would hold a sealed tape to: run.json telling its story)
                check_summary(summary, *ends(run_dir / TAPE))
            except TraceCorruption as exc:
                raise ResumeRefused(f"cannot resume from {run_dir}: its tape fails verification: {exc}") from None
            try:
                plan = _trusted_plan(run_dir, data, at_step, net, workflow)
            except ResumeRefused:  # (a ValueError too): said as the full path would say it
                raise
            except (TraceCorruption, ValueError, msgspec.DecodeError, msgspec.ValidationError):
                plan = None  # not what this Flowtape writes after all: the full path says why
        if plan is None:
            plan = _verified_plan(run_dir, at_step, net, workflow, progress)
        _check_fields(plan, net)
        return plan


_field_names = msgspec.json.Decoder(dict[str, Raw])


def _check_fields(plan: ReplayPlan, net: Network) -> None:
    """Refuse to put a recorded state back on an actor whose class has fields it lacks: a field
    renamed or added since the recording would start at its default beside the recorded ones,
    and the run would go on from a state no run ever had."""
    last: dict[str, Raw] = dict(plan.snapshot.states) if plan.snapshot is not None else {}
    for path, entries in plan.entries.items():
        states = [e.state for e in entries if e.state]
        if states:
            last[path] = states[-1]
    for path, raw in last.items():
        actor = net.by_path.get(path)
        if actor is None or actor.spec is None:
            continue
        try:
            recorded = _field_names.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue  # not a plain record of fields: nothing to compare
        missing = [name for name in actor.spec.state_defaults if name not in recorded]
        if missing:
            raise ResumeRefused(
                f"cannot resume: the fields of {actor.spec.name} changed since run {plan.source_id}: actor {path!r} "
                f"has {', '.join(map(repr, missing))}, which its recorded state lacks (it holds "
                f"{', '.join(map(repr, recorded)) or 'nothing'}); resume at a step before its first firing, or run it afresh"
            )


def _check_resumable(header: Header, net: Network, workflow: str, at_step: int | None, last: int) -> int:
    """The refusals that do not depend on the tape's records; the step to resume at."""
    check_header(header)
    if header.workflow != workflow:
        raise ResumeRefused(f"cannot resume: run {header.runId} ran workflow {header.workflow!r}, not {workflow!r}")
    actors, queues = shape_of(net)
    change = describe_change(header, actors, queues)
    if change is not None:
        moved = net.graph.site.file != header.flowFile  # another file: most likely the wrong flow, not an edit
        since = f"run {header.runId}, which ran {header.flowFile}" if moved else f"run {header.runId}"
        raise ResumeRefused(f"cannot resume: the flow's graph changed since {since}: {change}")
    if at_step is None:
        at_step = last
    if not 0 <= at_step <= last:
        raise ResumeRefused(f"cannot resume at step {at_step}: run {header.runId} has steps 0 to {last}")
    return at_step


def _snapshot(
    rebuild: Rebuild, lines: list[bytes], block: tuple[bytes, int, int] | None, header: Header, loops: dict[str, Iterator[object]]
) -> Snapshot:
    return Snapshot(
        lines, [list(q) for q in rebuild.queues], dict(rebuild.fire_counts), dict(rebuild.states),
        {k: list(v) for k, v in rebuild.chats.items()}, rebuild.seq, rebuild.step,
        block, chain_seed(header) if block is not None else None, dict(rebuild.outputs_checkpointed),
        chats_since=rebuild.chats_since(), rounds=dict(rebuild.rounds) if header.version >= 4 else None, round=rebuild.round,
        spent=rebuild.spent.listed(), loops=loops, clock=rebuild.clock,
    )


_DIVERGED_AT = b'\n{"t":"diverged"'


def _trusted_plan(run_dir: Path, data: bytes, at_step: int | None, net: Network, workflow: str) -> ReplayPlan | None:
    """A tape this machine wrote and nobody changed (trust.py): no re-verification, and the run at
    the step is rebuilt from the nearest checkpoint, not from the first record. None when the
    recorded prefix is not one a snapshot can restore (the full path then plans per actor)."""
    body_start = data.index(b"\n") + 1
    header = decode_record(data[: body_start - 1])
    end = decode_record(data[data.rfind(b"\n", 0, len(data) - 1) + 1 : -1])
    if not isinstance(header, Header) or not isinstance(end, End):
        return None
    to_end = at_step is None
    at_step = _check_resumable(header, net, workflow, at_step, end.steps)
    if at_step == 0:
        if to_end:
            return None  # failed, stopped or killed inside its first step: the full path plans it
        return ReplayPlan(run_dir, header.runId, 0, header.inputs, {}, {}, max_workers=header.maxWorkers)
    if _statics_differ(header, net):
        return None
    rebuild = Rebuild(header, full_checks=False)
    start = body_start  # where the records after the last checkpoint up to the step begin
    with open_regular(run_dir / TAPE) as fh:
        start = restore(run_dir / TAPE, fh, rebuild, at_step) or start
    number = data.count(b"\n", 0, start) + 1
    filler = StepFiller(header, step=rebuild.step, round_=rebuild.round)
    kinds = {a.path: a.kind for a in header.actors}
    region: list[Firing] = []  # firings since the checkpoint: covered by the steps up to at_step?
    tops: set[tuple[str, int]] = set()
    passes = LoopPasses(header)  # (a checkpoint is written with no loop between two items: none is before it)
    offset = start
    while rebuild.step < at_step:
        cut = data.index(b"\n", offset)
        raw = data[offset:cut]
        for record in decode_line(raw):
            filler.see(record)
            if isinstance(record, Checkpoint | Diverged | End | Header):
                return None
            rebuild.apply(Line(number, raw, record))
            if isinstance(record, Step):
                tops.add((record.actor, record.fireCount))
            elif isinstance(record, Firing):
                if record.notReplayable:
                    return None
                region.append(record)
                passes.see(record, rebuild.taken)
        offset, number = cut + 1, number + 1
    if data.find(_DIVERGED_AT, body_start - 1, offset) >= 0:
        return None
    if any(top_of(f) not in tops for f in region):
        return None
    loops, why = passes.place(net)
    if why:
        return None  # (the full path says why)
    snapshot = _snapshot(rebuild, [], (data, body_start, offset), header, loops)
    unfinished: list[tuple[Firing, list[tuple[int, list[Raw]]]]] = []
    if to_end:  # after the last step: only the firings of composites that never completed
        for raw in data[offset:].splitlines():
            records = decode_line(raw)  # (a simple firing's line holds its step too: it is a step, not after the last)
            for record in records:
                filler.see(record)
            record = records[0]
            if len(records) == 1 and isinstance(record, Firing):
                rebuild.apply(Line(number, raw, record))
                if kinds.get(top_of(record)[0]) not in LEAF_KINDS:  # (a leaf's step is written with it: a torn write)
                    unfinished.append((record, rebuild.taken))
            number += 1
    entries, covered = _replays(unfinished, kinds, header, net)
    return ReplayPlan(run_dir, header.runId, at_step, header.inputs, entries, covered, snapshot, header.maxWorkers,
                      {top_of(f) for f, _ in unfinished})


def _verified_plan(
    run_dir: Path, at_step: int | None, net: Network, workflow: str, progress: Callable[[int, int], None] | None
) -> ReplayPlan:
    """Read and verify the whole recorded tape, then plan: a snapshot when the prefix allows it,
    else the recorded firings each actor replays."""
    try:
        tape = read_tape(run_dir / TAPE)
        header = tape.header
        check_header(header)
        check_chain(tape)
        steps = [line.record for line in tape.lines if isinstance(line.record, Step)]
        check_not_cut_short(read_summary(run_dir), tape, len(steps))
    except TraceCorruption as exc:
        raise ResumeRefused(f"cannot resume from {run_dir}: its tape fails verification: {exc}") from None
    # Resumed where it stopped, a firing no step covers is one of a composite that never completed
    # (see the module's doc): it replays too. At a step, everything after it runs live.
    to_end = at_step is None
    at_step = _check_resumable(header, net, workflow, at_step, len(steps))
    tops = {(s.actor, s.fireCount) for s in steps[:at_step]}
    kinds = {a.path: a.kind for a in header.actors}
    rebuild = Rebuild(header)
    snapshot: Snapshot | None = None
    why = _statics_differ(header, net) if at_step > 0 else ""
    clean = at_step > 0 and not why  # so far every firing is covered and replayable
    passes = LoopPasses(header)  # a loop between two items at the step: where it stands
    prefix: list[bytes] = []
    contiguous = True  # the prefix is every record after the header, up to the step
    chosen: list[tuple[Firing, list[tuple[int, list[Raw]]]]] = []  # the firings that replay
    tail = 0  # with a snapshot, those from chosen[tail] on replay after it (an unfinished composite's)
    edited_at: int | None = None  # a fork's edits among the records the step covers: at that step
    total = len(tape.lines) - 1
    try:
        for done, line in enumerate(tape.lines[1:], start=1):  # (records, not lines: a simple firing's line holds two)
            if progress is not None and not (done + 1) % PROGRESS_EVERY:
                progress(done, total)
            rebuild.apply(line)
            record = line.record
            if isinstance(record, Step | Checkpoint):
                if clean and snapshot is None:
                    if line.raw:  # (a simple firing's step: its line went in with its firing)
                        prefix.append(line.raw)
                    if isinstance(record, Step) and record.step == at_step:
                        loops, why = passes.place(net)
                        clean = not why  # (no snapshot then, and the reason stays the one said)
                        if clean:
                            joined = b"".join(raw + b"\n" for raw in prefix) if contiguous else None
                            block = (joined, 0, len(joined)) if joined is not None else None
                            snapshot = _snapshot(rebuild, prefix, block, header, loops)
                            tail = len(chosen)
                continue
            if isinstance(record, Edited):
                if record.step < at_step:  # made before the step: part of the run resumed
                    edited_at = record.step
                    if clean and snapshot is None:
                        prefix.append(line.raw)
                continue
            if not isinstance(record, Firing):
                contiguous = False
                continue
            top = top_of(record)
            if top not in tops:
                if snapshot is None and clean:  # (an unfinished nested workflow's firing among the steps, with several workers)
                    clean = False
                    why = why or (f"{record.actor}'s firing {record.fireCount} was under way beside step {at_step} "
                                  "(a run with one worker, --max-workers 1, takes no step beside another)")
                if not to_end or kinds.get(top[0]) in LEAF_KINDS:  # (a leaf's step is written with it: a torn write)
                    continue
            if clean and snapshot is None:
                prefix.append(line.raw)
                clean = not record.notReplayable
                if not clean:
                    why = f"{record.actor}'s firing {record.fireCount} cannot be replayed ({record.notReplayable})"
                passes.see(record, rebuild.taken)
            chosen.append((record, rebuild.taken))
    except TraceCorruption as exc:
        raise ResumeRefused(f"cannot resume from {run_dir}: its tape fails verification: {exc}") from None
    if edited_at is not None and snapshot is None:  # replaying firing by firing would not make the edits
        raise ResumeRefused(
            f"cannot resume run {header.runId} at step {at_step}: it was forked with edits at step {edited_at}, and the run "
            f"at step {at_step} does not stand as one picture that holds them (firings under way beside it); resume at "
            f"step {edited_at} or before, or at a step where no firing was under way"
        )
    entries, covered = _replays(chosen[tail:] if snapshot is not None else chosen, kinds, header, net)
    unfinished = {top for top in (top_of(f) for f, _ in chosen) if top not in tops}
    return ReplayPlan(run_dir, header.runId, at_step, header.inputs, entries, covered, snapshot, header.maxWorkers, unfinished,
                      no_snapshot=why)


def _replays(
    chosen: list[tuple[Firing, list[tuple[int, list[Raw]]]]], kinds: dict[str, str], header: Header, net: Network
) -> tuple[dict[str, list[Entry]], dict[tuple[str, int], list[tuple[int, str]]]]:
    """The recorded firings to replay, with what each took: each leaf actor's entries, and what
    each composite firing handed in (a composite is entered anew, and replays only if it hands in
    the same)."""
    by_index = [net.by_id[qid] for qid in header.queues]
    entries: dict[str, list[Entry]] = {}
    covered: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for record, taken in chosen:
        if kinds.get(record.actor) not in LEAF_KINDS:  # a loop's, an if's, a nested workflow's firing
            covered[(record.actor, record.fireCount)] = sorted((i, digest(tokens)) for i, tokens in record.produced)
        else:
            entries.setdefault(record.actor, []).append(
                Entry(
                    fire_count=record.fireCount,
                    takes=[(by_index[i], count, d) for i, count, d in record.consumed],
                    puts=[(by_index[i], tokens) for i, tokens in record.produced],
                    state=record.state or None,
                    chat=record.chat or None,
                    not_replayable=record.notReplayable,
                    recorded=dict(taken),
                    calls=record.calls,
                )
            )
    _mark_changed_prompts(header, net, entries)
    return entries, covered
