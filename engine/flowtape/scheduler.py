"""The scheduler: fires ready actors (in parallel at the top level), records every firing and
step on the tape as it completes, replays recorded firings, and stops cleanly.

Order: within a pool, actors fire in rounds: in each round every ready actor fires once, in
declaration order, and an actor that has fired waits for the next round. So a source that could
go on forever does not starve what it feeds, and queues stay short. Loops and ifs fire only when
nothing else in their pool is ready or running, and nothing else fires while they run.
With max_workers=1 that order is deterministic: one firing at a time, in rounds as above, so two
runs of the same flow on the same inputs write the same steps."""

from __future__ import annotations

import copy
import heapq
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msgspec import Raw

from . import checkpoints
from .agents import Agents
from .composites import fire_control, fire_subflow
from .digests import digest
from .errors import FiringStopped
from .executors import Executor, ThreadExecutor
from .firing import GuardFailed, Outcome, Plan, give_back, select
from .network import IMMUTABLE, LAZY, Actor, Context, Item, Network, Queue, own_copy, placeholder
from .recording import commit_simple, write_record, write_spread
from .replayer import commit_replayed, give_up_replay, replay_plan
from .sites import Site, traceback_site, traceback_text
from .state import recorded_state
from .tape import Diverged, Firing, Step
from .usage import ModelCall, Tally
from .values import NotEncodable, encode
from .writer import TapeWriter

# An action quicker than this runs without the engine letting go of its lock: with the GIL, other
# workers cannot run Python meanwhile anyway, and handing the lock (and the GIL) back and forth
# for every firing of trivial actors costs more than the firings. Slower actions (I/O, a model
# call, anything that releases the GIL) run with the lock released, in parallel.
QUICK_ACTION = 50_000  # nanoseconds
SETTLE_WAIT = 1.0  # seconds a stopping run waits for the lock before it ends without it


class Pool:
    """Actors one drain runs: the top level, or one composite's members (a loop body, an if branch)."""

    def __init__(self, members: list[Actor]) -> None:
        self.heap: list[tuple[int, int, int]] = []  # (round, declaration index, actor key)
        self.round = 0  # the round of the firing being chosen
        self.members = members
        self.controls = [a for a in members if a.control]
        self.idle: list[tuple[Actor, int]] = []
        self.progress = 0  # commits in this pool: an idle source is retried only after progress
        self.in_flight = 0
        self.done = False

    def mark(self, actor: Actor) -> None:
        if not actor.dirty and not actor.control:
            actor.dirty = True
            heapq.heappush(self.heap, (max(actor.turn, self.round), actor.index, id(actor)))


@dataclass
class Failure:
    actor: Actor
    fire_count: int
    exc: BaseException
    tb: str
    raised: Site | None
    taken: list[tuple[int, list[Raw]]] = field(default_factory=list)  # what the firing took (taped runs)

    @property
    def raised_by(self) -> BaseException:
        """What the user's code raised (a failed guard's own exception, not its wrapper)."""
        return self.exc.original if isinstance(self.exc, GuardFailed) else self.exc


class Engine:
    # Slots keep every attribute load in the firing loop a fast one: past 30 attributes, a plain
    # instance falls back to a dict, which cost 4% of an untaped firing.
    __slots__ = (
        "_by_id", "_checkpointed", "_wake", "agents", "base_dir", "broken", "can_checkpoint", "chats_since", "check_actions", "checkpoint_at",
        "cond", "covered", "diverged", "exclusive", "executor", "failure", "firings", "last_round", "last_step_seq", "last_taken",
        "loops_mid", "max_workers", "net", "on_step", "outputs_checkpointed", "returning", "rounds", "seq", "step_limit", "steps",
        "live_queues", "stop_requested", "t0", "taken_named", "taken_token", "tally", "tape", "top", "unfinished", "unreplayable", "work_dir",
    )

    def __init__(
        self,
        net: Network,
        *,
        max_workers: int,
        tape: TapeWriter | None,
        work_dir: Path,
        base_dir: Path,
        covered: dict[tuple[str, int], list[tuple[int, str]]] | None = None,
        unfinished: set[tuple[str, int]] | None = None,
        on_step: Callable[[int, int, str], None] | None = None,
        step_limit: int | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.net = net
        self.executor: Executor = executor or ThreadExecutor()  # where live firings' actions run
        self.executor.watch(lambda: self.stop_requested)
        self.max_workers = max(1, max_workers)
        self.tape = tape
        self.work_dir = work_dir
        self.base_dir = base_dir
        self.covered = covered or {}
        self.unfinished = unfinished or set()  # top-level composite firings recorded without their step (replay.py)
        self.check_actions = False  # a resume: replays check the recorded action is the one chosen now
        self.live_queues: set[int] = set()  # then: the queues a live firing has put into (replayer.py)
        self.on_step = on_step
        self.step_limit = step_limit  # (on_step stops the run when it is reached)
        # Workers back from an action run without the lock, waiting for it to commit: a worker
        # firing quick actors (which keep the lock) lets them in first, or a source that is
        # always ready would starve what they fired. (A list: append and pop need no lock.)
        self.returning: list[None] = []
        self.cond = threading.Condition()
        self.seq = 0
        self.steps = 0
        self.firings = 0
        self.t0 = time.perf_counter_ns()  # (the clock of a record's `at` and `dur`: integers, as they are written)
        self.failure: Failure | None = None
        self.last_round = 0  # the last step's round
        self.rounds: dict[str, int] = {}  # each top-level actor's last step's round, when not 0 (see Checkpoint)
        self.broken: Exception | None = None  # Flowtape itself failed (a full disk, say): the run stops
        self.stop_requested = False
        self.agents = Agents(lambda: self.stop_requested)  # (a stop ends the model calls under way)
        self.tally = Tally()  # the model calls the tape records: live ones, and those replayed
        self.exclusive: threading.Thread | None = None
        self.diverged: list[Diverged] = []
        self.unreplayable: dict[str, tuple[int, str]] = {}  # actor: its firings a resume cannot replay, the first reason
        self.last_taken: list[tuple[Queue, list[Item]]] = []  # what the latest step took, for the end record
        self.last_step_seq = -1
        self.chats_since: dict[str, list[Raw]] = {}  # chat messages added since the last checkpoint
        self.loops_mid: set[str] = set()  # loops between two items: no checkpoint then
        self.can_checkpoint = True  # until a firing cannot be replayed
        self._checkpointed = (0, 0)  # tape bytes at the latest checkpoint, and its size
        self.checkpoint_at = checkpoints.CHECKPOINT_STEPS
        self.outputs_checkpointed = {q.index: 0 for q in net.outputs.values()}  # tokens in each output then
        self._wake = False
        # The token last named and what its line named it by (its digest, or itself): its consumers'
        # firings follow one another in a round, and holding it keeps its id from being reused while
        # it is compared by identity.
        self.taken_token: Any = None  # (recording.commit_simple)
        self.taken_named = b""
        self.top = Pool(net.top)
        self._by_id = {id(a): a for a in net.actors}
        for actor in net.actors:
            if actor.owner is None:
                actor.pool = self.top
        for actor in net.actors:
            if actor.kind == "workflow":
                actor.pools = {"": Pool(actor.members)}
                for member in actor.members:
                    member.pool = actor.pools[""]
            elif actor.control:
                actor.pools = {branch: Pool(members) for branch, members in actor.branches.items()}
                for branch, members in actor.branches.items():
                    for member in members:
                        member.pool = actor.pools[branch]
        for actor in net.actors:
            actor.pool.mark(actor)

    # ---- public ---------------------------------------------------------------------------

    @property
    def halted(self) -> bool:
        return self.failure is not None or self.stop_requested or self.broken is not None

    def stop(self) -> None:
        with self.cond:
            self.stop_requested = True
            self.cond.notify_all()

    def seed(self, port_items: dict[str, list[Item]]) -> None:
        """Put the run's inputs on the main workflow's input queues."""
        with self.cond:
            for port, items in port_items.items():
                for i, q in enumerate(self.net.seeds.get(port, [])):
                    # fan-out: each consumer gets its own token, decoded from its encoding on first use
                    q.items.extend(items if i == 0 else [own_copy(item) for item in items])
                    if q.consumer is not None:
                        self._mark(q.consumer)
                    else:  # an input wired straight to an output: the header says so, not a checkpoint
                        self.outputs_checkpointed[q.index] = len(q.items)

    def run(self) -> None:
        """Fire until quiescence, failure or stop."""
        if self.max_workers == 1:
            self._worker()
            return
        threads = [threading.Thread(target=self._worker, name=f"flowtape-{i}", daemon=True) for i in range(self.max_workers)]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)

    @contextmanager
    def settled(self) -> Iterator[None]:
        """The lock, for the run's last look at itself. Without it after a while, go on anyway: a
        firing stuck in its action holds it (a quick actor's keeps the lock), and changes nothing."""
        locked = self.cond.acquire(timeout=SETTLE_WAIT)
        try:
            yield
        finally:
            if locked:
                self.cond.release()

    def wait_in_flight(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        # a quick actor's firing keeps the lock through its action: one that hangs keeps it for good
        if not self.cond.acquire(timeout=timeout):
            return False
        try:
            while self.top.in_flight and time.monotonic() < deadline:
                self.cond.wait(0.05)
            return self.top.in_flight == 0
        finally:
            self.cond.release()

    # ---- the drain loop -----------------------------------------------------------------------

    def _worker(self) -> None:
        try:
            with self.cond:
                self._work(self.top, None)
        except Exception as exc:  # noqa: BLE001 - not the flow's code (that fails its firing): ours, or the disk
            with self.cond:
                self.broken = self.broken or exc
                self.cond.notify_all()

    def _mark(self, actor: Actor) -> None:
        pool = actor.pool
        pool.mark(actor)
        if pool is self.top:
            self._wake = True

    def _work(self, pool: Pool, ctx: Context | None) -> None:
        """Run `pool` to quiescence. Called, and returns, with the lock held."""
        pool.done = False
        me = threading.current_thread()
        while True:
            if pool.done or self.failure is not None or self.stop_requested or self.broken is not None:  # (halted, without its call)
                self.cond.notify_all()
                return
            if ctx is None and self.exclusive is not None and self.exclusive is not me:
                self.cond.wait()
                continue
            if self.returning and ctx is None:
                self.cond.wait(0.01)  # it commits, then notifies
                continue
            if ctx is None and pool.in_flight and self.step_limit is not None and self.steps + pool.in_flight >= self.step_limit:
                self.cond.wait()  # the firings under way may take the steps left: start none beside them
                continue
            try:
                actor, plan = self._next(pool)
            except GuardFailed as exc:
                self._fail(exc.actor, exc.actor.fire_count + 1, exc)
                continue
            if actor is None or plan is None:
                if pool.in_flight == 0:
                    if self._retry_idle(pool):
                        continue
                    if fire_control(self, pool, ctx):
                        continue
                    if ctx is None and give_up_replay(self):
                        continue
                    pool.done = True
                    self.cond.notify_all()
                    return
                self.cond.wait()
                continue
            self._fire(actor, plan, pool, ctx)

    def _retry_idle(self, pool: Pool) -> bool:
        """Sources that gave nothing get one more try at quiescence, if anything fired since."""
        retry = [a for a, seen in pool.idle if seen != pool.progress]
        if not retry:
            return False
        pool.idle = [(a, seen) for a, seen in pool.idle if seen == pool.progress]
        for actor in retry:
            actor.idle = False
            pool.mark(actor)
        return True

    def _next(self, pool: Pool) -> tuple[Actor | None, Plan | None]:
        heap = pool.heap
        while heap:
            pool.round, _, key = heapq.heappop(heap)
            actor = self._by_id[key]
            actor.dirty = False
            if actor.running:
                continue  # re-marked when its firing completes
            plan = self._plan(actor)
            if plan is not None:
                return actor, plan
        return None, None

    def _plan(self, actor: Actor) -> Plan | None:
        pending = actor.replay
        if pending:
            plan = replay_plan(self, actor, pending[0])
            if plan is not None or actor.replay:
                return plan
        return select(actor)

    # ---- firing ---------------------------------------------------------------------------------

    def _fire(self, actor: Actor, plan: Plan, pool: Pool, ctx: Context | None) -> None:
        actor.turn = pool.round + 1
        actor.running = True
        pool.in_flight += 1
        fire_count = actor.fire_count + 1
        start = time.perf_counter_ns()
        try:
            if plan.entry is not None:
                commit_replayed(self, actor, plan, fire_count, ctx, start)
            elif actor.kind == "workflow":
                fire_subflow(self, actor, plan, fire_count, ctx, start)
            else:
                self._fire_live(actor, plan, fire_count, ctx, start)
        finally:
            actor.running = False
            pool.in_flight -= 1
            if not actor.idle:
                self._mark(actor)
            if ctx is None or self._wake:  # inside a composite, only top-level news wakes workers
                self._wake = False
                self.cond.notify_all()

    def _fire_live(self, actor: Actor, plan: Plan, fire_count: int, ctx: Context | None, start: int) -> None:
        # Inside a loop or if nothing else may fire anyway: letting go of the lock would only
        # let idle workers wake up to find that out, once per firing. (And see QUICK_ACTION.)
        release = self.exclusive is None and not actor.quick
        if release:
            self.cond.release()
        taped = self.tape is not None
        encoded: tuple[list[tuple[Queue, list[Item]]], str | None, Raw | None] | None = None
        state: Raw | None = None
        state_problem: str | None = None
        recorded = b""
        error: BaseException | None = None
        try:
            outcome = self.executor.execute(actor, plan, self.work_dir, self.base_dir, self.agents)
            ended = time.perf_counter_ns()
            actor.quick = ended - start < QUICK_ACTION
            if taped:
                recorded = actor.state_enc
                if recorded or len(actor.obj.__dict__) != actor.plain_size:
                    state, state_problem = recorded_state(actor)
                # (else recorded_state's first test, without its call: most actors hold no state)
            else:  # nothing is recorded: skip the encodings altogether
                encoded = self._plain_outputs(actor, outcome.outputs), None, None
        except BaseException as exc:  # noqa: BLE001 - any failure of user code fails the run
            error = exc
        finally:
            if release:
                self.returning.append(None)
                self.cond.acquire()
                self.returning.pop()
        if encoded is None and error is None:  # a taped run's firing (its outputs are encoded with the lock held: the GIL
            # is held while they are anyway, so letting go of the lock would let no other firing go on meanwhile)
            if state_problem is None and commit_simple(self, actor, plan.takes, outcome, fire_count, state, ctx, start, ended):
                return
            try:
                encoded = self._encoded(actor, outcome)
            except BaseException as exc:  # noqa: BLE001 - a value of the user's that failed to encode
                error = exc
        if error is not None:
            give_back(plan.takes)
            if isinstance(error, KeyboardInterrupt) and self.stop_requested:
                raise error  # a second stop signal interrupted the action: the user stops the run, the flow did not fail
            if isinstance(error, FiringStopped):
                return  # the stop ended its tool or model call: the firing did not happen, the run is stopped, not failed
            self._fail(actor, fire_count, error, plan.takes)
            return
        assert encoded is not None
        produced, problem, chat = encoded
        if not plan.takes and not produced and actor.spec is not None:
            # A source with nothing to give: not a firing, even if it changed its state (it counted
            # the call first, say); the tape holds the state its last firing left, as it would untaped.
            if taped:
                actor.state_enc = recorded
            actor.idle = True
            actor.pool.idle.append((actor, actor.pool.progress))
            return
        self._commit(actor, fire_count, plan.takes, produced, state, chat, ctx, start, False, problem or state_problem,
                     calls=outcome.calls)

    def _encoded(self, actor: Actor, outcome: Outcome) -> tuple[list[tuple[Queue, list[Item]]], str | None, Raw | None]:
        """What a firing put, as tokens with their encodings (and what could not be encoded), and its chat."""
        produced, problem = self._encode_outputs(actor, outcome.outputs)
        return produced, problem, Raw(encode(outcome.chat)) if outcome.chat else None

    def _plain_outputs(self, actor: Actor, outputs: list[tuple[str, Any]]) -> list[tuple[Queue, list[Item]]]:
        produced: list[tuple[Queue, list[Item]]] = []
        for port, value in outputs:
            for q in actor.outputs.get(port, ()):
                # a token is the value as it was put: each consumer gets its own copy (see _encode_outputs)
                produced.append((q, [(value if type(value) in IMMUTABLE else _copy(value), b"")]))
        return produced

    def _encode_outputs(self, actor: Actor, outputs: list[tuple[str, Any]]) -> tuple[list[tuple[Queue, list[Item]]], str | None]:
        if len(outputs) == 1:  # the usual firing: one value on a port wired to one queue
            port, value = outputs[0]
            queues = actor.outputs.get(port)
            if queues is not None and len(queues) == 1 and type(value) in IMMUTABLE:
                try:
                    return [(queues[0], [(value, Raw(encode(value)))])], None
                except NotEncodable:
                    pass  # (a string with a lone surrogate, say: said below)
        produced: dict[int, tuple[Queue, list[Item]]] = {}
        problem: str | None = None
        for port, value in outputs:
            queues = actor.outputs.get(port)
            if not queues:
                continue
            # A token is the value as it was put, not an object the producer may change later (its
            # own state, say): a mutable one reaches each consumer decoded from these bytes, so the
            # run, the tape and a resume all see the same token.
            try:
                item = (value if type(value) in IMMUTABLE else LAZY, Raw(encode(value)))
            except NotEncodable as exc:
                problem = problem or f"{actor.path}.{port}: {exc}"
                item = placeholder(f"{actor.path}#{actor.fire_count + 1}", value)
            shared = item[0] is LAZY or type(item[0]) in IMMUTABLE  # else a value that could not be encoded
            for i, q in enumerate(queues):
                mine = item if shared or i == 0 else own_copy(item)  # (that one: a copy each)
                entry = produced.get(q.index)
                if entry is None:
                    produced[q.index] = (q, [mine])
                else:
                    entry[1].append(mine)
        return list(produced.values()), problem

    def _commit(
        self,
        actor: Actor,
        fire_count: int,
        takes: list[tuple[Queue, list[Item]]],
        produced: list[tuple[Queue, list[Item]]],
        state: Raw | None,
        chat: Raw | None,
        ctx: Context | None,
        start: int,
        replayed: bool,
        not_replayable: str | None = None,
        digests: list[tuple[int, int, str]] | None = None,
        calls: list[ModelCall] | None = None,
    ) -> None:
        """Put what a firing produced and write its record (and its step, at the top level)."""
        actor.fire_count = fire_count
        self.firings += 1
        if calls:
            self.tally.add(calls, replayed)
        if self.check_actions and not replayed:
            self.live_queues.update(q.index for q, _ in produced)
        self._put(produced)
        pool = actor.pool
        pool.progress += 1
        self.seq += 1
        if self.tape is None:
            if ctx is None:
                self.steps += 1
                if self.on_step is not None:
                    self.on_step(self.steps, self.firings, actor.path)
            return
        if digests is None and chat is None and not calls and not not_replayable:  # (live: a replay has its digests)
            if write_spread(self, actor, fire_count, takes, produced, state, ctx, start):
                return
        write_record(self, actor, fire_count, takes, produced, state, chat, ctx, start, replayed, not_replayable, digests, calls)

    def _put(self, produced: list[tuple[Queue, list[Item]]]) -> None:
        for q, items in produced:
            q.items.extend(items)
            if q.consumer is not None:
                self._mark(q.consumer)

    def _firing_record(
        self,
        actor: Actor,
        fire_count: int,
        takes: list[tuple[Queue, list[Item]]],
        produced: list[tuple[Queue, list[Item]]],
        ctx: Context | None,
        replayed: bool,
        digests: list[tuple[int, int, str]] | None = None,
    ) -> Firing:
        return Firing(
            seq=self.seq,
            actor=actor.path,
            fireCount=fire_count,
            consumed=digests if digests is not None else [(q.index, len(items), digest([e for _, e in items])) for q, items in takes or ()],
            produced=[(q.index, [e for _, e in items]) for q, items in produced],
            within=(ctx.actor.path, ctx.fire_count) if ctx is not None else None,
            replayed=replayed,
        )

    def _step(self, actor: Actor, fire_count: int, replayed: bool, touched: set[Queue], start: int) -> Step:
        """A composite's step record: it follows the firings it ran, so it names its own."""
        step, round_, at, dur = self.count_step(actor, start)
        return Step(
            step=step, replayed=replayed, queues=sorted([(q.index, len(q.items)) for q in touched]), round=round_,
            at=at, dur=dur, actor=actor.path, fireCount=fire_count, journalSeq=self.seq,
        )

    def count_step(self, actor: Actor, start: int) -> tuple[int, int, int, int]:
        """Count a step: its number, its round, when it began and its duration (microseconds)."""
        steps = self.steps = self.steps + 1
        round_ = self.last_round = (actor.turn or 1) - 1 if actor.pool is self.top else 0  # the round it was chosen in (max(turn - 1, 0) without a call)
        if round_:
            self.rounds[actor.path] = round_
        now = time.perf_counter_ns()
        if self.on_step is not None:
            self.on_step(steps, self.firings, actor.path)
        self.last_step_seq = self.seq
        return steps, round_, (start - self.t0) // 1000, (now - start) // 1000

    def _write(self, *records: Any) -> None:
        if self.tape is not None:
            self.tape.write(*records)

    def _fail(self, actor: Actor, fire_count: int, exc: BaseException,
              takes: list[tuple[Queue, list[Item]]] | None = None) -> None:
        if self.failure is None:
            tb = traceback_text(exc)
            raised = traceback_site(exc.original if isinstance(exc, GuardFailed) else exc)
            taken = [(q.index, [Raw(bytes(enc)) for _, enc in items if enc is not None]) for q, items in takes or ()]
            self.failure = Failure(actor, fire_count, exc, tb, raised, [t for t in taken if t[1]])
        self.cond.notify_all()



def _copy(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - a value that cannot be copied (a lock, say) goes as it is
        return value
