"""Rebuilding a run from its tape, without running anything, and refusing tapes that cannot
support their own story (`TraceCorruption` names the line and the rule)."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
from msgspec import Raw

from . import edits
from .chain import SIMPLE_TAGS, Chain, chain_seed, split_hash
from .digests import INLINE_MARK, digest
from .errors import TraceCorruption
from .rundir import TAPE, RunSummary, check_not_cut_short, read_summary, valid_run_id
from .tape import (
    END_STATUSES,
    MAX_WORKERS,
    NAMED_FROM,
    READABLE_VERSIONS,
    SIMPLE_FROM,
    Checkpoint,
    Diverged,
    Edited,
    End,
    Final,
    Firing,
    Header,
    Line,
    SimpleFiring,
    Step,
    Tape,
    decode_written,
    gc_paused,
    graph_fingerprint,
    read_tape,
    resolve_state,
)
from .usage import Spending
from .values import canonical, check


class Rebuild:
    """Applies records one by one, checking every invariant, and keeps the run's state."""

    def __init__(self, header: Header, full_checks: bool = True) -> None:
        self.header = header
        # A reader that only follows a tape (the language server), or that trusts it (trust.py),
        # skips re-hashing every token and checking checkpoints.
        self.full_checks = full_checks
        self.queues: list[deque[Raw]] = [deque() for _ in header.queues]
        self.actors = {a.path: a for a in header.actors}
        self.fire_counts: dict[str, int] = {}
        self.rounds: dict[str, int] = {}  # each top-level actor's last step's round (a resume goes on from them)
        self.round = 0  # the last step's
        self.clock = 0  # when the last step ended (µs on the run's clock; 0: not timed): a resume's live clock goes on from it
        self.states: dict[str, Raw] = {}
        self.chats: dict[str, list[Raw]] = {}
        self.spent = Spending()  # the model calls the firings so far record (see Checkpoint.spent)
        self.seq = 0
        self.step = 0
        self.taken: list[tuple[int, list[Raw]]] = []
        self.ended: End | None = None
        self.diverged: list[Diverged] = []
        self.edits: list[Edited] = []  # a fork's
        self.answers: dict[str, Raw] = {}  # an agent's edited next answer, till its next firing
        self._step_taken: dict[tuple[str, int], list[tuple[int, list[Raw]]]] = {}  # by top-level firing
        self._step_live: dict[tuple[str, int], bool] = {}  # by top-level firing: did any of its firings run live
        self.replayed_steps = 0
        self._wired: set[tuple[str, int, bool]] = set()  # (actor, queue index, takes) found to be its edges
        self.last_taken: list[tuple[int, list[Raw]]] = []  # what the latest step's firings took
        self.last_step_seq = 0
        self.outputs = {i for i, qid in enumerate(header.queues) if qid.startswith("$.") and "->" not in qid}
        self.outputs_checkpointed = dict.fromkeys(self.outputs, 0)  # tokens in each output at the last checkpoint
        self.chats_checkpointed: dict[str, int] = {}  # chat messages of each agent at the last checkpoint
        for index, token in seeded(header):
            self.queues[index].append(Raw(token))
            if index in self.outputs:
                self.outputs_checkpointed[index] += 1  # from the header, never from a checkpoint

    def copy(self, chats: bool = True) -> Rebuild:
        """An independent copy, to carry on from later (tokens and states are immutable: shared);
        without the chats' histories if not `chats`."""
        twin = copy.copy(self)
        twin.queues = [q.copy() for q in self.queues]
        twin.fire_counts = dict(self.fire_counts)
        twin.rounds = dict(self.rounds)
        twin.states = dict(self.states)
        twin.chats = {path: list(messages) for path, messages in self.chats.items()} if chats else {}
        twin.diverged = list(self.diverged)
        twin.edits = list(self.edits)
        twin.answers = dict(self.answers)
        twin.taken = list(self.taken)
        twin._step_taken = dict(self._step_taken)
        twin._step_live = dict(self._step_live)
        twin.outputs_checkpointed = dict(self.outputs_checkpointed)
        twin.chats_checkpointed = dict(self.chats_checkpointed)
        twin.spent = Spending(self.spent.listed())
        return twin

    def apply(self, line: Line) -> None:
        record = line.record
        n = line.number
        if self.ended is not None:
            raise TraceCorruption("a record after the end record", n, "the end record is last")
        if isinstance(record, Header):
            raise TraceCorruption("a second header", n, "one header, first")
        if isinstance(record, Firing):
            self._firing(record, n)
        elif isinstance(record, Step):
            self._step(record, n)
        elif isinstance(record, Checkpoint):
            if self.full_checks:
                self._check_checkpoint(record, n)
        elif isinstance(record, Diverged):
            if self.header.resumedFrom is None:
                raise TraceCorruption("a replay that stopped in a run that replays nothing", n, "divergences only in resumed runs")
            self.diverged.append(record)
        elif isinstance(record, Edited):
            self._edit(record, n)
        elif isinstance(record, End):
            self._end(record, n)

    def _edit(self, e: Edited, n: int) -> None:
        """A fork's edit: right after the step it names, in a resumed run, of a value the run holds
        there (by digest); from then on the edited value is the run's. An agent's next answer may
        also come right after the header (a resume that replays firing by firing): its first live
        firing gives it."""
        if self.header.resumedFrom is None:
            raise TraceCorruption("an edit on a tape that resumed no run", n, "edits only in forked runs")
        before_all = e.answer and self.seq == 0 and self.step == 0  # a resume that replays firing by firing: after the header
        if not before_all and (e.step != self.step or self.seq != self.last_step_seq):
            at = f"step {self.step}" + (", with firings after it" if self.seq != self.last_step_seq else "")
            raise TraceCorruption(f"an edit made at step {e.step}, but the tape is at {at}", n, "an edit follows the step it names")
        if e.queue in self.outputs:
            raise TraceCorruption(f"an edit of {self.header.queues[e.queue]}, an output of the run", n, "an edit replaces the value it names")
        try:
            edits.apply(e, self.queues, self.header.queues, self.states, self.answers)
        except ValueError as exc:
            raise TraceCorruption(str(exc), n, "an edit replaces the value it names") from None
        if e.actor and e.actor not in self.actors:
            raise TraceCorruption(f"an edit of unknown actor {e.actor!r}", n, "an edit replaces the value it names")
        self.edits.append(e)

    def _firing(self, f: Firing, n: int) -> None:
        if f.seq != self.seq + 1:
            raise TraceCorruption(f"seq {f.seq} follows seq {self.seq}", n, "seq increases by one")
        if f.actor not in self.actors:
            raise TraceCorruption(f"unknown actor {f.actor!r}", n, "firings name actors of the header")
        expected = self.fire_counts.get(f.actor, 0) + 1
        if f.fireCount != expected:
            raise TraceCorruption(
                f"{f.actor} fireCount {f.fireCount}, expected {expected}", n, "fireCount is one more than the actor's previous"
            )
        taken: list[tuple[int, list[Raw]]] = []
        for index, count, recorded in f.consumed:
            q = self._queue(index, n)
            if (f.actor, index, True) not in self._wired:
                self._check_wired(f.actor, index, True, n)
            if len(q) < count:
                raise TraceCorruption(
                    f"{f.actor} takes {count} token(s) from {self.header.queues[index]} which holds {len(q)}",
                    n, "nothing is taken that was never put",
                )
            items = [q.popleft() for _ in range(count)]
            if self.full_checks and digest(items) != recorded:
                raise TraceCorruption(
                    f"{f.actor} took from {self.header.queues[index]} tokens whose digest is {digest(items)}, "
                    f"not the recorded {recorded}",
                    n, "consumed digests match the tokens produced into the queue, in FIFO order",
                )
            taken.append((index, items))
        top = f.within if f.within is not None else (f.actor, f.fireCount)
        self._step_taken.setdefault((top[0], top[1]), []).extend(taken)
        if f.replayed and not self.header.resumedFrom:
            raise TraceCorruption("a firing marked replayed on a tape that resumed no run", n, "only a resumed run replays")
        self._step_live[(top[0], top[1])] = self._step_live.get((top[0], top[1]), False) or not f.replayed
        for index, tokens in f.produced:
            q = self._queue(index, n)
            if (f.actor, index, False) not in self._wired:
                self._check_wired(f.actor, index, False, n)
            if self.full_checks:
                for i, token in enumerate(tokens):
                    rebuildable(token, n, f"firing {f.fireCount} of {f.actor} puts into {self.header.queues[index]} a token "
                                          f"({i + 1} of {len(tokens)}) that")
            q.extend(tokens)
        if self.answers and f.actor in self.answers and not f.replayed:
            try:
                edits.check_answer(self.answers.pop(f.actor), f.actor, f.produced, self.header.queues)
            except ValueError as exc:
                raise TraceCorruption(str(exc), n, "an edited answer is the one the agent's next firing gives") from None
        self.taken = taken
        self.seq = f.seq
        self.fire_counts[f.actor] = f.fireCount
        edited = f.stateEdit is not None
        try:
            resolve_state(f, self.states)
            if self.full_checks and f.state and memoryview(f.state)[:1] != b"{":
                raise ValueError(f"{f.actor}'s state after firing {f.fireCount} is not a JSON object of its fields")
            if edited and self.full_checks:
                msgspec.json.decode(f.state)
        except msgspec.DecodeError as exc:
            raise TraceCorruption(f"{f.actor}'s state edit gives no JSON value ({exc})", n,
                                  "a state edit gives a state from the actor's last one") from None
        except ValueError as exc:
            raise TraceCorruption(str(exc), n, "a state edit gives a state from the actor's last one") from None
        if self.full_checks and f.state:
            rebuildable(f.state, n, f"the state of {f.actor} after its firing {f.fireCount}")
        if self.full_checks and f.chat:
            rebuildable(f.chat, n, f"the chat firing {f.fireCount} of {f.actor} added")
        if f.chat:
            self.chats.setdefault(f.actor, []).append(f.chat)
        if f.calls:
            self.spent.add(f.calls)

    def _check_wired(self, actor: str, index: int, takes: bool, n: int) -> None:
        """A firing takes only from a queue into its actor (`… ->actor.Port`) and puts only into
        one out of its actor or of a nested workflow holding it (`actor.Port-> …`; `$.Out`, a
        workflow's output, from any actor): a tape whose firings move tokens along other edges
        tells a run no graph could have had."""
        qid = self.header.queues[index]
        if takes:
            owner = qid.rpartition("->")[2].rpartition(".")[0] if "->" in qid else None
            ok = owner == actor
        else:
            owner = qid.partition("->")[0].rpartition(".")[0]
            ok = owner == "$" or actor == owner or actor.startswith(owner + "/")
        if not ok:
            what = "takes from" if takes else "puts into"
            raise TraceCorruption(f"{actor} {what} {qid}, which is not an edge of {actor}'s", n,
                                  "a firing takes from its actor's inputs and puts into its outputs")
        self._wired.add((actor, index, takes))

    def _queue(self, index: int, n: int) -> deque[Raw]:
        if not 0 <= index < len(self.queues):
            raise TraceCorruption(f"queue index {index} is not in the header", n, "queues are those of the header")
        return self.queues[index]

    def _step(self, s: Step, n: int) -> None:
        if s.step != self.step + 1:
            raise TraceCorruption(f"step {s.step} follows step {self.step}", n, "step increases by one")
        if not s.actor:
            raise TraceCorruption("a step that names no actor does not follow a firing", n, "a step names its firing")
        if not 0 < s.journalSeq <= self.seq or s.journalSeq != self.seq:
            raise TraceCorruption(
                f"journalSeq {s.journalSeq} but the last firing written is {self.seq}", n, "journalSeq names the last firing before the step"
            )
        if self.fire_counts.get(s.actor, 0) < s.fireCount or (self.full_checks and (s.actor, s.fireCount) not in self._step_taken):
            raise TraceCorruption(
                f"step names {s.actor} firing {s.fireCount}, which is not a recorded firing without a step", n,
                "steps name completed firings",
            )
        live = self._step_live.pop((s.actor, s.fireCount), False)
        if self.full_checks:
            self._check_sizes(s, n)
            self._check_replayed(s, live, n)
        self.step = s.step
        self.round = s.round
        self.clock = s.at + s.dur
        if s.round:
            self.rounds[s.actor] = s.round
        self.last_taken = self._step_taken.pop((s.actor, s.fireCount), [])
        self.last_step_seq = s.journalSeq

    def _check_replayed(self, s: Step, live: bool, n: int) -> None:
        """A step is replayed exactly when every firing it covers is; and only a resumed run
        replays, at most as many steps as the step it resumed at. (The mark is outside the hash
        chain, so that a resume can copy a recorded prefix as it is and mark it: these rules are
        what holds it.)"""
        if s.replayed == live:
            said = "marked replayed, but a firing it covers ran live" if live else "not marked replayed, but every firing it covers was"
            raise TraceCorruption(f"step {s.step} is {said}", n, "a step is replayed exactly when its firings are")
        resumed_at = self.header.resumedAtStep or 0
        if s.replayed:
            self.replayed_steps += 1
            if self.replayed_steps > resumed_at:
                raise TraceCorruption(
                    f"step {s.step} is replayed, one more than the {resumed_at} step(s) the run resumed at",
                    n, "only a resumed run replays",
                )
        if self.header.chainFrom and s.replayed != (s.step <= resumed_at):
            # a resume that copied its source's first steps as one block replays those, and only those
            said = "not marked replayed, but" if s.step <= resumed_at else "marked replayed, but not"
            raise TraceCorruption(f"step {s.step} is {said} one of the {resumed_at} copied steps", n,
                                  "a copied prefix is exactly the replayed steps")

    def _check_sizes(self, s: Step, n: int) -> None:
        """A step's queue sizes are those of the rebuilt run: exactly so with one worker; with
        more, a queue may hold less (tokens taken by a firing not yet committed), never more. (A
        replayed step was copied from a run that may have had more workers.)"""
        exact = self.header.maxWorkers == 1 and not s.replayed
        for index, size in s.queues:
            held = len(self._queue(index, n))
            if size > held or (exact and size != held):
                raise TraceCorruption(
                    f"step {s.step} says {self.header.queues[index]} holds {size} token(s); the rebuilt run has {held}", n,
                    "step queue sizes match the rebuilt run",
                )

    def chats_since(self) -> dict[str, list[Raw]]:
        """What each agent's chat gained since the last checkpoint."""
        seen = self.chats_checkpointed
        return {path: chats[seen.get(path, 0) :] for path, chats in self.chats.items() if len(chats) > seen.get(path, 0)}

    def gain(self, outputs: list[tuple[int, list[Raw]]], chats: list[tuple[str, list[Raw]]]) -> None:
        """What the outputs and chats gained at a checkpoint before the one restarted from."""
        for index, tokens in outputs:
            self.queues[index].extend(tokens)
        for path, messages in chats:
            self.chats.setdefault(path, []).extend(messages)

    def restart(self, checkpoint: Checkpoint) -> None:
        """Carry on from a checkpoint of a trusted tape, as if every record before it were applied
        (and every checkpoint before it passed to `gain`: each adds what the outputs gained)."""
        for index, q in enumerate(self.queues):
            if index not in self.outputs:
                q.clear()
        for index, tokens in checkpoint.queues:
            self.queues[index].extend(tokens)
        self.gain(checkpoint.outputs, checkpoint.chats)
        self.outputs_checkpointed = {i: len(self.queues[i]) for i in self.outputs}
        self.states = dict(checkpoint.states)
        self.fire_counts = dict(checkpoint.fireCounts)
        self.rounds = dict(checkpoint.rounds)
        self.round = checkpoint.round
        self.chats_checkpointed = {path: len(chats) for path, chats in self.chats.items()}
        self.seq = self.last_step_seq = checkpoint.seq
        self.step = checkpoint.step
        self.spent = Spending(checkpoint.spent)

    def _check_checkpoint(self, c: Checkpoint, n: int) -> None:
        problems = []
        if c.step != self.step or c.seq != self.seq or self.last_step_seq != self.seq:
            problems.append(f"it is at step {c.step} and firing {c.seq}; the tape is at step {self.step} and firing {self.seq}")
        if _tokens(c.queues) != _tokens((i, q) for i, q in enumerate(self.queues) if q and i not in self.outputs):
            problems.append("queue contents")
        seen = self.outputs_checkpointed
        gained = _tokens((i, list(q)[seen[i] :]) for i, q in enumerate(self.queues) if i in self.outputs and len(q) > seen[i])
        if _tokens(c.outputs) != gained:
            problems.append("outputs")
        for i in self.outputs:
            seen[i] = len(self.queues[i])
        if {a: bytes(r) for a, r in c.states} != {a: bytes(r) for a, r in self.states.items()}:
            problems.append("actor states")
        if dict(c.fireCounts) != {a: n for a, n in self.fire_counts.items() if n}:
            problems.append("fire counts")
        if dict(c.rounds) != self.rounds or c.round != self.round:
            problems.append("rounds")
        if {a: _tokens([(0, m)]) for a, m in c.chats} != {a: _tokens([(0, m)]) for a, m in self.chats_since().items()}:
            problems.append("chat messages")
        if sorted(c.spent, key=lambda s: s.model) != sorted(self.spent.listed(), key=lambda s: s.model):
            problems.append("model calls")
        self.chats_checkpointed = {path: len(chats) for path, chats in self.chats.items()}
        if problems:
            raise TraceCorruption(
                f"the checkpoint differs from the rebuilt run: {', '.join(problems)}", n, "checkpoints agree with the rebuilt run"
            )

    def _end(self, e: End, n: int) -> None:
        if e.status not in END_STATUSES:
            raise TraceCorruption(f"the end record's status {e.status!r} is none of {', '.join(END_STATUSES)}", n, "a known end status")
        if (e.status == "failed") != (e.error is not None):
            told = "has no error" if e.error is None else "has an error"
            raise TraceCorruption(f"the end record says {e.status} but {told}", n, "a run fails exactly when it has an error")
        rebuilt = self.outputs_raw()
        if bytes(e.outputs) != rebuilt:
            raise TraceCorruption("the end record's outputs differ from the rebuilt outputs", n, "the end agrees with the rebuilt run")
        if e.steps != self.step or e.firings != self.seq:
            raise TraceCorruption(
                f"the end counts {e.steps} steps and {e.firings} firings; the tape holds {self.step} and {self.seq}",
                n, "the end agrees with the rebuilt run",
            )
        outputs = self.outputs
        left = [(qid, len(q)) for i, (qid, q) in enumerate(zip(self.header.queues, self.queues, strict=True)) if q and i not in outputs]
        # (only a run that went quiet: a stopped or failed one may have dropped a firing under way, whose tokens no record gives back)
        if e.status == "succeeded" and sorted(map(tuple, e.leftovers)) != sorted(left):
            raise TraceCorruption("the end record's leftovers differ from the tokens left in the rebuilt queues", n,
                                  "the end agrees with the rebuilt run")
        if e.final is not None:
            self._check_final(e.final, n)
        self.ended = e

    def _check_final(self, final: Final, n: int) -> None:
        """The end's picture of the run after its last step must be the rebuilt one."""
        tokens = _tokens
        outputs = self.outputs
        rebuilt = tokens((i, q) for i, q in enumerate(self.queues) if q and i not in outputs)
        problems = []
        if self.last_step_seq != self.seq:
            problems.append("firings were recorded after the last step")
        if tokens(final.queues) != rebuilt:
            problems.append("queue contents")
        if {a: bytes(r) for a, r in final.states} != {a: bytes(r) for a, r in self.states.items()}:
            problems.append("actor states")
        if dict(final.fireCounts) != {a: c for a, c in self.fire_counts.items() if c}:
            problems.append("fire counts")
        if tokens(final.lastTaken) != tokens(self.last_taken) or len(final.lastTaken) != len(self.last_taken):
            problems.append("the last step's inputs")
        if problems:
            raise TraceCorruption(
                f"the end record's final state differs from the rebuilt run: {', '.join(problems)}", n, "the end agrees with the rebuilt run"
            )

    def outputs_raw(self) -> bytes:
        return outputs_bytes(
            {qid[2:]: list(self.queues[i]) for i, qid in enumerate(self.header.queues) if qid.startswith("$.") and "->" not in qid}
        )


REBUILDABLE = "recorded values can be rebuilt"


def rebuildable(raw: Raw | bytes, n: int, what: str) -> None:
    """Refuse a recorded value no reader could rebuild (values.check), naming what it is."""
    try:
        check(bytes(raw))
    except ValueError as exc:
        raise TraceCorruption(f"{what} cannot be rebuilt: {exc}", n, REBUILDABLE) from None


def seeded(header: Header) -> list[tuple[int, bytes]]:
    """The tokens no record puts: each input's, on every queue it feeds (`$.P->x.Y`, and an output
    it is wired straight to, `seededOutputs`), as (queue index, encoded token)."""
    inputs = msgspec.json.decode(header.inputs, type=dict[str, Raw]) if header.inputs else {}
    found = []
    for index, qid in enumerate(header.queues):
        if qid.startswith("$.") and "->" in qid and qid[2 : qid.index("->")] in inputs:
            found.append((index, bytes(inputs[qid[2 : qid.index("->")]])))
    queues = header.queues
    for port, index in header.seededOutputs:
        if port in inputs and 0 <= index < len(queues) and queues[index].startswith("$.") and "->" not in queues[index]:
            found.append((index, bytes(inputs[port])))
    return found


def _tokens(pairs: Iterable[tuple[int, Iterable[Raw]]]) -> dict[int, list[bytes]]:
    return {i: [bytes(t) for t in toks] for i, toks in pairs}


def outputs_bytes(outputs: dict[str, list[Raw]]) -> bytes:
    """The canonical encoding of a run's outputs from their token encodings: `{"Port": [...]}`."""
    parts = [canonical(port) + b":[" + b",".join(bytes(t) for t in tokens) + b"]" for port, tokens in sorted(outputs.items())]
    return b"{" + b",".join(parts) + b"}"


def check_header(header: Header) -> None:
    """The header's format version is one this Flowtape reads, its inputs are an object, its
    graph fingerprint is that of its actors and queues, and its run id, worker count and resume
    origin are ones a run can have."""
    if header.version not in READABLE_VERSIONS:
        *earlier, last = (str(v) for v in READABLE_VERSIONS)
        known = f"{', '.join(earlier)} and {last}" if earlier else last
        raise TraceCorruption(
            f"tape format version {header.version}; this Flowtape reads versions {known}", 1, "a known format version"
        )
    try:
        inputs = msgspec.json.decode(header.inputs, type=dict[str, Raw])
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise TraceCorruption("the header's inputs are not an object of input ports", 1, "a well-formed header") from None
    ports = {port for port, _ in header.seededOutputs}
    ports.update(q[2 : q.index("->")] for q in header.queues if q.startswith("$.") and "->" in q)
    strangers = [port for port in inputs if port not in ports]
    if strangers:
        raise TraceCorruption(
            f"the header's inputs name {', '.join(map(repr, strangers[:5]))}, which the graph has no input port for "
            f"(its input ports: {', '.join(map(repr, sorted(ports))) or 'none'})", 1, "a well-formed header",
        )
    for port, raw in inputs.items():
        rebuildable(raw, 1, f"the header's input {port!r}")
    if header.graph != graph_fingerprint(header.actors, header.queues):
        raise TraceCorruption("the header's graph fingerprint is not that of its actors and queues", 1, "a well-formed header")
    if not valid_run_id(header.runId):
        raise TraceCorruption(f"the header's run id {header.runId!r} is no run id", 1, "a well-formed header")
    if not 0 <= header.maxWorkers <= MAX_WORKERS:  # (0: a tape from before it was recorded)
        raise TraceCorruption(f"the header's maxWorkers {header.maxWorkers} is not from 0 (not recorded) to {MAX_WORKERS}", 1, "a well-formed header")
    if (header.resumedFrom is None) != (header.resumedAtStep is None) or (header.resumedAtStep or 0) < 0:
        raise TraceCorruption(
            f"the header says resumedFrom {header.resumedFrom!r} at step {header.resumedAtStep!r}: a resumed run has both, "
            "the step 0 or more; a fresh run neither", 1, "a well-formed header",
        )
    queues = header.queues
    for port, index in header.seededOutputs:
        if not (0 <= index < len(queues) and queues[index] == f"$.{queues[index][2:]}" and "->" not in queues[index]):
            raise TraceCorruption(f"the header seeds input {port!r} into queue {index}, which is no output", 1, "a well-formed header")


def check_chain(tape: Tape) -> None:
    check = ChainCheck()
    for line in tape.lines:
        check.line(line)


FORMAT_VERSION_UNKNOWN = 1 << 30  # before the header is read: any line is of its version


def _names_a_token(raw: bytes) -> bool:
    """Whether a firing's line names a token it took by itself (format 8), as written: a reader's
    record holds the digest instead (tape.with_digests)."""
    written = decode_written(raw)
    return isinstance(written, (Firing, SimpleFiring)) and any(named[:1] == INLINE_MARK for _, _, named in written.consumed)


class ChainCheck:
    """The hash chain, checked line by line (a whole tape, or one read as a stream)."""

    def __init__(self) -> None:
        self.chain = Chain()
        self.since = 1  # the first line the next hash covers
        self.version = FORMAT_VERSION_UNKNOWN  # the header's, once read

    def line(self, line: Line) -> None:
        if not line.raw:
            return  # a simple firing's step: its line is its firing's
        if self.version < SIMPLE_FROM and line.raw.startswith(SIMPLE_TAGS):
            raise TraceCorruption(
                f"a firing and its step on one line, in a version {self.version} tape",
                line.number, "records of the tape's format version",
            )
        if self.version < NAMED_FROM and b'"=' in line.raw and _names_a_token(line.raw):
            raise TraceCorruption(
                f"a token taken named by itself, not by its digest, in a version {self.version} tape",
                line.number, "records of the tape's format version",
            )
        chain = self.chain
        parts = split_hash(line.raw)
        if parts is None:
            if not isinstance(line.record, (Step, Firing)):
                raise TraceCorruption(
                    "a record without a well-formed hash", line.number, "every record but a firing or a step is hash-chained"
                )
            chain.cover(line.raw)
            return
        body, claimed = parts
        if chain.hash_of(body) != claimed:
            where = f"lines {self.since}-{line.number}" if self.since < line.number else "this line"
            raise TraceCorruption(
                f"the hash does not follow from the records before it: {where} edited, or a line dropped, "
                "inserted, reordered or re-appended there",
                line.number, "hash chain",
            )
        chain.advance(claimed)
        self.since = line.number + 1
        if isinstance(line.record, Header) and line.number == 1:
            chain.last = chain_seed(line.record)
            self.version = line.record.version


PROGRESS_EVERY = 1 << 14  # records checked between two calls of verify's `progress`


def verify(path: Path | str, warn: bool = True, progress: Callable[[int, int], None] | None = None) -> tuple[Tape, Rebuild]:
    """Read, check and rebuild a tape. Raises TraceCorruption on the first broken rule.
    `progress(records checked, records)` is called every PROGRESS_EVERY records."""
    tape = read_tape(path, warn=warn)
    if not tape.lines:
        raise TraceCorruption("the tape is empty", 1, "header first")
    header = tape.header
    check_header(header)
    check_chain(tape)
    rebuild = Rebuild(header)
    lines = tape.lines
    total = len(lines) - 1
    with gc_paused():
        for start in range(1, len(lines), PROGRESS_EVERY):
            if progress is not None:
                progress(start - 1, total)
            for line in lines[start : start + PROGRESS_EVERY]:
                rebuild.apply(line)
    return tape, rebuild


def verify_run(run_dir: Path, warn: bool = True, progress: Callable[[int, int], None] | None = None) -> tuple[Tape, Rebuild]:
    """`verify` a run directory's tape, and hold it to its run.json's word that the run ended (a
    tape cut short, see check_not_cut_short): what show, resume and the language server rely on."""
    tape, rebuild = verify(run_dir / TAPE, warn=warn, progress=progress)
    summary = read_summary(run_dir)
    check_not_cut_short(summary, tape, rebuild.step)
    check_summary(summary, tape.header, tape.end)
    if summary is not None:
        from .fork import fork_edits  # (fork.py plans resumes: it stands above this module)

        made = fork_edits(tape)
        if summary.edits != made:
            raise TraceCorruption(f"run.json disagrees with the tape, which holds together: edits {summary.edits} "
                                  f"(the tape: {made}) (run.json was edited, or copied from another run)", 0, RUN_JSON)
    return tape, rebuild


RUN_JSON = "run.json tells the tape's story"


def check_summary(summary: RunSummary | None, header: Header, end: End | None) -> None:
    """`runs` lists what run.json says: it must tell the tape's story, not an edited or stale one
    (every reader holds it to the tape, so that none tells what another refuses)."""
    if summary is None:
        return
    told: list[tuple[str, object, object]] = [("id", summary.id, header.runId), ("workflow", summary.workflow, header.workflow)]
    stale = summary.status == "running"  # (the run died after its end record, before run.json said so)
    if end is not None and not stale:
        told += [("status", summary.status, end.status), ("steps", summary.steps, end.steps),
                 ("firings", summary.firings, end.firings)]
    wrong = [f"{name} {said!r} (the tape: {held!r})" for name, said, held in told if said != held]
    if end is not None and not stale and _json_of(summary.outputs or b"{}") != _json_of(end.outputs):
        wrong.append("other outputs than the tape's end record")
    if wrong:
        raise TraceCorruption(f"run.json disagrees with the tape, which holds together: {'; '.join(wrong)} "
                              "(run.json was edited, or copied from another run)", 0, RUN_JSON)


def _json_of(raw: bytes | Raw) -> object:
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return raw
