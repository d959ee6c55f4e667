"""The graph view's timeline: `flowtape/timeline`, every step's bar and each composite step's
timed inner firings, read from the tape. A run's reader is kept between requests, so a live run's
timeline asks only for what was written since (the file is read on from where it stopped)."""

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

from . import protocol as P
from .commands import READ_ERRORS, unreadable

if TYPE_CHECKING:
    from .run import Run
    from .server import FlowtapeServer

CHUNK = 16 << 20  # bytes read at a time
READERS = 8  # runs whose reader is kept


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
        self.open: dict[tuple[str, int], list[tuple[int, str, int, int, bool]]] = {}  # composite firing -> its inner ones
        self.counts: dict[tuple[str, int], int] = {}  # composite firing -> inner firings seen

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
                        key = (record.within[0], record.within[1])
                        index = self.counts.get(key, 0) + 1
                        self.counts[key] = index
                        if record.at is not None:
                            self.open.setdefault(key, []).append((index, record.actor, record.at, record.dur or 0, record.replayed))
                elif isinstance(record, Step):
                    self.steps = record.step
                    key = (record.actor, record.fireCount)
                    self.counts.pop(key, None)
                    within = self.open.pop(key, [])
                    if record.step >= first:
                        steps.append(P.TimelineStep(record.step, self._name(record.actor), record.at, record.dur, record.replayed, False))
                        inner.extend(P.TimelineFiring(record.step, i, self._name(a), at, dur, r) for i, a, at, dur, r in within)
                elif isinstance(record, Header):
                    for a in record.actors:
                        self._name(a.path)
                elif isinstance(record, End):
                    self.ended = True

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
