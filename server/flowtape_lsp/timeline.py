"""The graph view's timeline: `flowtape/timeline`, every step's bar and each composite step's
timed inner firings, read from the tape, each naming the firing it ran in (a nested composite's
too, timed by what it contains). A run's reader is kept between requests, so a live run's timeline
asks only for what was written since (the file is read on from where it stopped)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowtape.errors import TraceCorruption
from flowtape.guarded import open_regular
from flowtape.tape import End, Firing, Header, Step, StepFiller, decode_line
from flowtape.tapefile import settled

from . import protocol as P
from .commands import READ_ERRORS, unreadable

if TYPE_CHECKING:
    from .run import Run
    from .server import FlowtapeServer

CHUNK = 16 << 20  # bytes read at a time
READERS = 8  # runs whose reader is kept


class Scope:
    """A composite step under way: its inner firings so far, and the latest firing of each actor in
    it. The firings of one step run one after the other (on the thread that fired the step), so an
    inner firing ran inside the latest firing of its owner: a nested composite's firing is written
    when it starts and what it runs follows it."""

    __slots__ = ("count", "firings", "latest")

    def __init__(self) -> None:
        self.count = 0  # inner firings seen
        self.firings: list[Inner] = []
        self.latest: dict[str, int] = {}  # actor -> the index of its latest firing


class Inner:
    """An inner firing as read: `at` None for a composite's own (timed at its step by what it holds)."""

    __slots__ = ("actor", "at", "end", "index", "parent", "replayed", "timed")

    def __init__(self, index: int, actor: str, at: int | None, end: int | None, replayed: bool, parent: int) -> None:
        self.index = index
        self.actor = actor
        self.at = at
        self.end = end
        self.replayed = replayed
        self.parent = parent  # the index of the inner firing it ran in; 0: the step's own
        self.timed = at is not None  # its own record is timed (not a composite's)


class TimelineReader:
    """One tape read from its start, a step at a time: what is kept between reads is where it
    stopped and the inner firings of the composite steps still under way (not every step)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self._start(None)

    def _start(self, identity: tuple[int, int] | None) -> None:
        self.identity = identity  # the file's (device, inode)
        self.offset = 0  # just after the last whole line read
        self.filler = StepFiller()
        self.steps = 0
        self.ended = False
        self.names: dict[str, int] = {}
        self.actors: list[str] = []
        self.owners: dict[str, str] = {}  # actor -> the composite whose firings run it ("" at the top)
        self.open: dict[tuple[str, int], Scope] = {}  # composite step under way -> its inner firings

    def read(self, first: int) -> tuple[list[P.TimelineStep], list[P.TimelineFiring]]:
        """The steps from `first` on written so far, and their timed inner firings."""
        steps: list[P.TimelineStep] = []
        inner: list[P.TimelineFiring] = []
        with open_regular(self.path) as fh:
            stat = os.fstat(fh.fileno())
            identity = (stat.st_dev, stat.st_ino)
            if first <= self.steps or identity != self.identity or stat.st_size < self.offset:
                self._start(identity)  # asked again from before, or another file: read it anew
            fh.seek(self.offset)
            while not self.ended and (data := fh.read(CHUNK)):
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    if len(data) < CHUNK:
                        break  # a line being written
                    data += fh.readline()  # a line longer than a chunk
                    cut = data.rfind(b"\n") + 1
                    if cut == 0:
                        break
                data = settled(data, fh.fileno(), self.offset)
                last = data.rfind(b"\n", 0, cut - 1) + 1
                if b"\0" in data[last:cut] and not data[cut:].strip(b"\0"):
                    cut = last  # a line being stored as it was read (tape.being_stored): read it again next time
                    if cut == 0:
                        break
                self._lines(data[:cut], first, steps, inner)
                self.offset += cut
                fh.seek(self.offset)
        return steps, inner

    def _lines(self, data: bytes, first: int, steps: list[P.TimelineStep], inner: list[P.TimelineFiring]) -> None:
        for raw in data.split(b"\n")[:-1]:
            for record in decode_line(raw):
                self.filler.see(record)
                if isinstance(record, Firing):
                    if record.within is not None:
                        self._inner(record, record.within[0], record.within[1])
                elif isinstance(record, Step):
                    self.steps = record.step
                    scope = self.open.pop((record.actor, record.fireCount), None)
                    if record.step >= first:
                        steps.append(P.TimelineStep(record.step, self._name(record.actor), record.at, record.dur, record.replayed, False))
                        if scope is not None:
                            inner.extend(self._timed(record, scope))
                elif isinstance(record, Header):
                    for a in record.actors:
                        self._name(a.path)
                        # (a tape from before `owner`: a path still says a nested workflow's members)
                        self.owners[a.path] = a.owner or a.path.rpartition("/")[0]
                elif isinstance(record, End):
                    self.ended = True

    def _inner(self, record: Firing, top: str, fire_count: int) -> None:
        scope = self.open.get((top, fire_count))
        if scope is None:
            scope = self.open[(top, fire_count)] = Scope()
        scope.count += 1
        owner = self.owners.get(record.actor, "")
        parent = 0 if owner == top else scope.latest.get(owner, 0)
        scope.latest[record.actor] = scope.count
        end = record.at + (record.dur or 0) if record.at is not None else None
        scope.firings.append(Inner(scope.count, record.actor, record.at, end, record.replayed, parent))

    def _timed(self, step: Step, scope: Scope) -> list[P.TimelineFiring]:
        """A step's timed inner firings. A nested composite's own record is not timed: it began
        when the firing before it ended (a step's firings run one after another) and lasted until
        the last it holds, at any depth, ended (one that holds none, as a loop's last `out` firing,
        is a mark between its neighbours). A tape from before inner firings were timed gives none."""
        firings = scope.firings
        if not any(f.timed for f in firings):
            return []
        by_index = {f.index: f for f in firings}
        for f in reversed(firings):  # (a firing comes after the composite it ran in)
            up = by_index.get(f.parent)
            if up is not None and f.at is not None and f.end is not None:
                up.at = f.at if up.at is None else min(up.at, f.at)
                up.end = f.end if up.end is None else max(up.end, f.end)
        out: list[P.TimelineFiring] = []
        last = step.at  # when the step's firing before this one ended
        for f in firings:
            if not f.timed:
                f.at = last if f.at is None else min(last, f.at)
                f.end = f.at if f.end is None else max(f.end, f.at)
            at, end = f.at or 0, f.end or 0
            last = end if f.timed else at  # (what a composite holds follows it)
            out.append(P.TimelineFiring(step.step, f.index, self._name(f.actor), at, end - at, f.replayed, f.parent))
        return out

    def _name(self, actor: str) -> int:
        index = self.names.get(actor)
        if index is None:
            index = self.names[actor] = len(self.actors)
            self.actors.append(actor)
        return index


def register(server: FlowtapeServer) -> None:
    manager = server.manager
    readers: OrderedDict[str, TimelineReader] = OrderedDict()

    def reader_of(run: Run) -> TimelineReader:
        reader = readers.pop(run.run_id, None) or TimelineReader(run.index.path)
        readers[run.run_id] = reader
        while len(readers) > READERS:
            readers.popitem(last=False)
        return reader

    def read(run: Run, reader: TimelineReader, first: int) -> P.TimelineResult:
        with reader.lock:
            steps, inner = reader.read(first)
            diverged = run.index.diverged_steps
            for s in steps:
                s.diverged = s.step in diverged
            return P.TimelineResult(runId=run.run_id, actors=list(reader.actors), steps=steps, inner=inner,
                                    total=reader.steps, complete=reader.ended)

    @server.feature(P.TIMELINE)
    async def timeline(params: Any) -> Any:
        p = P.decode_params(params, P.TimelineParams)
        run = manager.get(p.runId)
        if run.starting():  # no tape yet
            return P.TimelineResult(runId=run.run_id, actors=[], steps=[], inner=[], total=0, complete=False).to_json()
        try:
            await manager.checked(run)
            result = await asyncio.to_thread(read, run, reader_of(run), p.from_)
        except FileNotFoundError:
            raise P.not_found(f"run {run.run_id} has no tape: it failed or was stopped before it started") from None
        except (*READ_ERRORS, TraceCorruption) as exc:
            readers.pop(run.run_id, None)  # (read anew next time)
            raise unreadable(run, exc) from None
        return result.to_json()
