"""One run's tape, followed as it is written: a sparse index of step offsets and periodic snapshots
of the rebuilt state, so paging steps and describing any step stay fast on huge tapes while the
memory kept does not grow with the number of steps (beyond one offset per INDEX_EVERY steps and a
bounded number of snapshots)."""

from __future__ import annotations

import bisect
import contextlib
import mmap
import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import msgspec
from flowtape.chain import Chain
from flowtape.errors import TraceCorruption
from flowtape.guarded import open_regular
from flowtape.rundir import TAPE, read_summary, write_summary
from flowtape.seek import AtStep, records_from, top_of, walk_to_step
from flowtape.tape import (
    MAPPED_FROM,
    Diverged,
    End,
    Firing,
    Header,
    Line,
    Record,
    Step,
    decode_line,
    decode_record,
    gc_paused,
)
from flowtape.tape import StepFiller as Filler
from flowtape.tapefile import settled
from flowtape.verify import Rebuild

INDEX_EVERY = 64  # one byte offset kept per this many steps
SNAPSHOT_EVERY = 256  # initial spacing of rebuilt-state snapshots (doubles when too many)
MAX_SNAPSHOTS = 512
CHUNK = 4 << 20
CHUNK_TOKENS = 512


class ChunkQueue:
    """A FIFO of tokens whose copies share its full chunks: a snapshot of a queue holding n tokens
    costs n/CHUNK_TOKENS references, not n (an output queue of a long run holds every token)."""

    __slots__ = ("chunks", "tail", "head", "size")

    def __init__(self, items: Iterable[msgspec.Raw] = ()) -> None:
        self.chunks: deque[tuple[msgspec.Raw, ...]] = deque()
        self.tail: list[msgspec.Raw] = []
        self.head = 0  # tokens already taken from the first segment (chunks[0], else tail)
        self.size = 0
        self.extend(items)

    def __len__(self) -> int:
        return self.size

    def extend(self, items: Iterable[msgspec.Raw]) -> None:
        before = len(self.tail)
        self.tail.extend(items)
        self.size += len(self.tail) - before
        while len(self.tail) >= CHUNK_TOKENS:
            self.chunks.append(tuple(self.tail[:CHUNK_TOKENS]))
            del self.tail[:CHUNK_TOKENS]

    def append(self, item: msgspec.Raw) -> None:
        self.extend((item,))

    def popleft(self) -> msgspec.Raw:
        if self.size == 0:
            raise IndexError("pop from an empty queue")
        if self.chunks:
            first = self.chunks[0]
            item = first[self.head]
            self.head += 1
            if self.head == len(first):
                self.chunks.popleft()
                self.head = 0
        else:
            item = self.tail[self.head]
            self.head += 1
            if self.head == len(self.tail):
                self.tail.clear()
                self.head = 0
        self.size -= 1
        return item

    def __iter__(self) -> Iterator[msgspec.Raw]:
        segments: list[Sequence[msgspec.Raw]] = [*self.chunks, self.tail]
        for i, segment in enumerate(segments):
            yield from (segment[self.head :] if i == 0 else segment)

    def copy(self) -> ChunkQueue:
        twin = ChunkQueue.__new__(ChunkQueue)
        twin.chunks = deque(self.chunks)
        twin.tail = list(self.tail)
        twin.head = self.head
        twin.size = self.size
        return twin


def chunked(rebuild: Rebuild) -> Rebuild:
    rebuild.queues = [ChunkQueue(q) for q in rebuild.queues]  # type: ignore[misc]
    return rebuild


def copy_rebuild(rebuild: Rebuild) -> Rebuild:
    """An independent copy of a rebuilt state, its queues chunked, without the chats (a firing's
    chat is on its record: the index never needs the history)."""
    twin = rebuild.copy(chats=False)
    twin.queues = [q if isinstance(q, ChunkQueue) else ChunkQueue(q) for q in twin.queues]  # type: ignore[misc]
    return twin


@dataclass
class Snapshot:
    step: int
    offset: int  # file offset just after the step's line
    rebuild: Rebuild
    last: tuple[str, int, int] | None  # the last firing before `offset`, for the filler


TAIL_LIMIT = 64 << 20  # how far back from the end a last-step detail may read


def last_step_from_end(path: Path, number: int) -> AtStep | None:
    """The detail of a finished run's last step, read from the two ends of its tape only: the
    header, the end record (whose `final` holds the run as it stood after the last step) and
    the records back to the step before the last one. None when the tape cannot answer that way
    (not finished, not the last step, or firings recorded after it): read the tape instead."""
    try:
        with open_regular(path) as fh:
            header = decode_record(fh.readline())
            body = fh.tell()
            size = fh.seek(0, os.SEEK_END)
            end_at = _line_start(fh, size - 1, body)
            fh.seek(end_at)
            end = decode_record(fh.read(size - end_at).rstrip(b"\n"))
            if not isinstance(header, Header) or not isinstance(end, End) or end.final is None or end.steps != number:
                return None
            found, span = None, 1 << 16
            while found is None and span <= TAIL_LIMIT:
                start = max(body, end_at - span)
                fh.seek(start)
                lines = fh.read(end_at - start).split(b"\n")
                if start > body:
                    lines = lines[1:]  # cut mid-line
                found = _last_step_window([r for raw in lines if raw for r in decode_line(raw)], whole=start == body)
                if start == body:
                    break
                span *= 4
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if found is None:
        return None
    step = found[-1]  # the window ends with the last step and starts right after the one before
    assert isinstance(step, Step)
    filler = Filler(header, step=step.step - 1)
    for record in found:
        filler.see(record)
    rebuild = Rebuild(header, full_checks=False)
    final = end.final
    for index, tokens in final.queues:
        rebuild.queues[index].extend(tokens)
    outputs = msgspec.json.decode(end.outputs, type=dict[str, list[msgspec.Raw]])
    for index, qid in enumerate(header.queues):
        if qid.startswith("$.") and "->" not in qid:
            rebuild.queues[index].clear()  # (an output an input is wired to is seeded already: the end has it all)
            rebuild.queues[index].extend(outputs.get(qid[2:], []))
    rebuild.states = dict(final.states)
    rebuild.fire_counts = dict(final.fireCounts)
    firings = [r for r in found if isinstance(r, Firing) and top_of(r) == (step.actor, step.fireCount)]
    if step.kind in ("workflow", "loop", "if") and not any(f.actor == step.actor for f in firings):
        return None  # the composite began before the step before: its firings are not all in the window
    return AtStep(step, rebuild, _attributed(firings, final.lastTaken))


def _attributed(firings: list[Firing], taken: list[tuple[int, list[msgspec.Raw]]]) -> list[tuple[Firing, list[tuple[int, list[msgspec.Raw]]]]]:
    """What each firing of the last step took: the end's tokens the step took (merged by queue),
    handed out in order by what each firing consumed from each queue."""
    pool = {index: list(tokens) for index, tokens in taken}
    out = []
    for f in firings:
        took = []
        for index, count, _ in f.consumed:
            left = pool.get(index, [])
            if left[:count]:
                took.append((index, left[:count]))
                del left[:count]
        out.append((f, took))
    return out


def _line_start(fh: Any, last: int, floor: int) -> int:
    """Where the line holding byte `last` starts, searching backwards (not before `floor`)."""
    pos = last
    while pos > floor:
        step = min(1 << 16, pos - floor)
        fh.seek(pos - step)
        cut = fh.read(step).rfind(b"\n", 0, step if pos < last else step - 1)
        if cut >= 0:
            return pos - step + cut + 1
        pos -= step
    return floor


def _last_step_window(records: list[Record], whole: bool) -> list[Record] | None:
    """The records from just after the step before the last one up to the last step (the records
    given end just before the end record)."""
    last = None
    for i in range(len(records) - 1, -1, -1):
        record = records[i]
        if isinstance(record, Step):
            last = i
            break
        if isinstance(record, Firing):
            return None  # recorded after the last step: the end's picture is not the step's
    if last is None:
        return None
    previous = next((i for i in range(last - 1, -1, -1) if isinstance(records[i], Step)), None)
    if previous is None and not whole:
        return None  # the window does not reach back to the step before
    return records[(previous if previous is not None else -1) + 1 : last + 1]


class TapeIndex:
    """Reads a tape incrementally (`ingest`) and answers questions about any step of it."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / TAPE
        self.lock = threading.RLock()
        self.offset = 0  # just after the last complete line read
        self.lines = 0
        self.header: Header | None = None
        self.rebuild: Rebuild | None = None
        self.end: End | None = None
        self.corrupt: str | None = None
        self.steps = 0
        self.last_step: Step | None = None
        self.step_offsets: list[tuple[int, str, int, int]] = []  # [k]: step k*INDEX_EVERY+1's line offset, actor, fireCount, journalSeq
        self.filler = Filler()
        self.snapshots: list[Snapshot] = []
        self.snapshot_every = SNAPSHOT_EVERY
        self.diverged: list[Diverged] = []
        self.unreplayable: dict[str, tuple[int, str]] = {}  # actor: its firings a resume cannot replay, the first reason
        self.diverged_steps: set[int] = set()
        self.actor_last_step: dict[str, int] = {}  # the top-level step holding each actor's last firing
        self._awaiting_step: dict[tuple[str, int], list[str]] = {}
        self.torn = 0  # bytes after the last whole line, at the last read: a line being written, or a torn one
        self.closing = False  # the server is shutting down: stop reading

    def firing_after_last_step(self, actor: str) -> bool:
        """Whether `actor` fired inside a top-level firing with no step (yet): the composite a
        finished run stopped in (a loop item, an if branch, a nested workflow's firing)."""
        return any(actor in actors for actors in self._awaiting_step.values())

    # ---- following ------------------------------------------------------------------------------

    def read_through(self) -> bool:
        """Whether every whole line of the file as it is now has been read."""
        try:
            return self.offset + self.torn >= os.path.getsize(self.path)
        except OSError:
            return False

    @property
    def finished(self) -> bool:
        return self.end is not None or self.corrupt is not None

    def ingest(self, limit: int = CHUNK) -> list[Step]:
        """Read what was appended since the last call; returns the new steps."""
        with self.lock, gc_paused():
            if self.finished:
                return []
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                return []
            if size <= self.offset:
                return []
            try:
                with open_regular(self.path) as fh:
                    fh.seek(self.offset)
                    data = fh.read(limit)
                    if data and not data.endswith(b"\n"):
                        data += fh.readline()  # the chunk ends mid-line: read on to the line's end, however long
                    data = settled(data, fh.fileno(), self.offset)
            except OSError:
                return []
            new: list[Step] = []
            pos = 0
            while True:
                cut = data.find(b"\n", pos)
                if cut < 0:
                    break
                raw = data[pos:cut]
                if b"\0" in raw and (self.header is None or self.header.version >= MAPPED_FROM) \
                        and not data[cut + 1 :].strip(b"\0"):
                    break  # a line being stored as it was read (tape.being_stored): read it again next time
                try:
                    self._apply(raw, self.offset + pos, self.offset + cut + 1, new)
                except (TraceCorruption, msgspec.DecodeError, msgspec.ValidationError) as exc:
                    self.corrupt = f"line {self.lines}: {exc}"
                    break
                pos = cut + 1
            self.offset += pos
            self.torn = len(data) - pos
            return new

    def _apply(self, raw: bytes, start: int, after: int, new: list[Step]) -> None:
        self.lines += 1
        for record in decode_line(raw):
            self._apply_record(record, start, after, new)

    def _apply_record(self, record: Record, start: int, after: int, new: list[Step]) -> None:
        self.filler.see(record)
        if isinstance(record, Header):
            if self.header is not None:
                raise TraceCorruption("a second header", self.lines, "one header, first")
            self.header = record
            self.rebuild = chunked(Rebuild(record, full_checks=False))  # `flowtape verify` checks them
            self.snapshots.append(Snapshot(0, after, copy_rebuild(self.rebuild), None))
            return
        if self.rebuild is None:
            raise TraceCorruption("the first record is not a header", self.lines, "header first")
        if isinstance(record, Firing) and record.produced:
            # a decoded Raw keeps the whole line it came from alive: keep just the token's bytes
            # (plain bytes, not a Raw around them: half the objects for every token held in a queue)
            record.produced = [(i, cast(list[msgspec.Raw], [bytes(t) for t in tokens])) for i, tokens in record.produced]
        self.rebuild.apply(Line(self.lines, b"", record))
        if isinstance(record, Firing):
            top = record.within if record.within is not None else (record.actor, record.fireCount)
            self._awaiting_step.setdefault((top[0], top[1]), []).append(record.actor)
            if record.notReplayable:
                count, reason = self.unreplayable.get(record.actor, (0, record.notReplayable))
                self.unreplayable[record.actor] = (count + 1, reason)
        elif isinstance(record, Step):
            self.steps = record.step
            self.last_step = record
            if (record.step - 1) % INDEX_EVERY == 0:
                self.step_offsets.append((start, record.actor, record.fireCount, record.journalSeq))
            for actor in self._awaiting_step.pop((record.actor, record.fireCount), []):
                self.actor_last_step[actor] = record.step
            if record.step % self.snapshot_every == 0:
                self._snapshot(record.step, after)
            new.append(record)
        elif isinstance(record, Diverged):
            self.diverged.append(record)
            self.diverged_steps.add(record.step)
        elif isinstance(record, End):
            self.end = record
        if self.rebuild.chats:
            self.rebuild.chats.clear()

    def _snapshot(self, step: int, after: int) -> None:
        assert self.rebuild is not None
        self.snapshots.append(Snapshot(step, after, copy_rebuild(self.rebuild), self.filler.last))
        if len(self.snapshots) > MAX_SNAPSHOTS:
            self.snapshot_every *= 2
            self.snapshots = [s for s in self.snapshots if s.step % self.snapshot_every == 0]

    def ingest_all(self, until_step: int | None = None) -> None:
        """Read to the end of what is written (or only until `until_step` steps are indexed)."""
        while not self.finished and not self.closing and (until_step is None or self.steps < until_step):
            before = self.offset
            self.ingest(CHUNK if until_step is None else CHUNK // 16)
            if self.offset == before:
                return

    # ---- questions --------------------------------------------------------------------------------

    def fire_counts(self) -> dict[str, int]:
        with self.lock:
            return dict(self.rebuild.fire_counts) if self.rebuild is not None else {}

    def read_steps(self, first: int, limit: int) -> list[Step]:
        """Steps `first` .. `first+limit-1` (1-based) of those indexed so far, read from the file."""
        with self.lock:
            total = self.steps
            if first > total or not self.step_offsets:
                return []
            offset, actor, fire_count, seq = self.step_offsets[(first - 1) // INDEX_EVERY]
            filler = Filler(self.header, (actor, fire_count, seq))
        last = min(total, first + limit - 1)
        found: list[Step] = []
        for record in records_from(self.path, offset, filler):
            if isinstance(record, Step):
                if record.step > last:
                    break
                if record.step >= first:
                    found.append(record)
        return found

    def at_step(self, number: int) -> AtStep:
        """The rebuilt state right after step `number` (1 <= number <= steps)."""
        with self.lock:
            if not 1 <= number <= self.steps:
                raise IndexError(number)
            steps = [s.step for s in self.snapshots]
            snap = self.snapshots[bisect.bisect_right(steps, number - 1) - 1]
            rebuild = copy_rebuild(snap.rebuild)
            filler = Filler(self.header, snap.last, snap.step)
        found = walk_to_step(records_from(self.path, snap.offset, filler), rebuild, number)
        if found is None:
            raise IndexError(number)
        return found

    # ---- closing a tape whose writer died -------------------------------------------------------------

    def seal_run(self, status: str, message: str | None) -> None:
        """End the tape of a flow whose process died without an end record (seal_end), and its
        run.json with it, telling the same end, so that the run verifies."""
        summary = read_summary(self.run_dir)
        if self.seal_end(status, message) and summary is not None and summary.status == "running":
            end = self.end
            assert end is not None
            summary.status, summary.finishedAt, summary.pid, summary.process = status, end.finishedAt, None, None
            summary.steps, summary.firings, summary.error = end.steps, end.firings, end.error
            summary.outputs, summary.replayStopped = end.outputs, list(end.replayStopped)
            with contextlib.suppress(OSError):
                write_summary(self.run_dir, summary)

    def seal_end(self, status: str, message: str | None) -> bool:
        """Append an End record to a tape whose process died without writing one, dropping a torn
        last line first, so the tape verifies and can be resumed. False if it cannot be done."""
        from flowtape.rundir import now_iso
        from flowtape.tape import ErrorInfo

        with self.lock:
            self.ingest_all()
            if self.end is not None or self.corrupt is not None or self.rebuild is None:
                return False
            rebuild = self.rebuild
            end = End(
                status=status, outputs=msgspec.Raw(rebuild.outputs_raw()), steps=rebuild.step,
                firings=rebuild.seq, finishedAt=now_iso(),
                error=ErrorInfo(message) if message else None, replayStopped=list(self.diverged),
            )
            chain = Chain()
            try:
                with open(self.path, "r+b") as fh:
                    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                        if not _torn_rest(data[self.offset :]):
                            return False  # whole lines not read yet: what follows is no torn line to drop
                        chain.resume_after(data, 0, self.offset)
                    line = chain.seal(end)
                    fh.truncate(self.offset)
                    fh.seek(self.offset)
                    fh.write(line)
            except OSError:
                return False
            self.ingest_all()
            return self.end is not None


def _torn_rest(rest: bytes) -> bool:
    """Whether what follows a dead writer's last whole line is at most a torn line and its zero
    tail: a line without its newline, or one whose newline its copy stored before all of the rest
    (a zero byte inside: tape.being_stored), the process killed mid-copy."""
    rest = rest.rstrip(b"\0")
    cut = rest.find(b"\n")
    return cut < 0 or (cut == len(rest) - 1 and b"\0" in rest)
