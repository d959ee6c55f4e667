"""Steps of a finished tape found without reading it through: step records carry their number
and are written in order, so the file can be bisected on it. Jumping to the last page of a
million-step run then reads a few kilobytes instead of the whole tape; describing a step in its
middle rebuilds the run from the checkpoints before it and the records since the last one.
No checks are made on the way: this is for tapes verified or trusted already (trust.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TypeVar

import msgspec

from .errors import TraceCorruption
from .guarded import open_regular
from .tape import Checkpoint, Firing, Header, Line, Record, Step, StepFiller, decode_line, decode_record
from .tapefile import read_lines
from .verify import Rebuild


@dataclass
class AtStep:
    """The rebuilt run right after a step, and the firings that made the step (with what each took)."""

    step: Step
    rebuild: Rebuild
    firings: list[tuple[Firing, list[tuple[int, list[msgspec.Raw]]]]] = field(default_factory=list)


# a step's line (or a simple firing's, which is its step's too) starts with its tag, the replayed
# mark if any, then the step's number
_STEP_LINE = re.compile(rb'\n\{"t":(?:"s",(?:"replayed":true,)?"step"|"F",(?:"replayed":true,)?"s"):(\d+)')
_CHECKPOINT_LINE = b'\n{"t":"checkpoint",'
_CHECKPOINT_STEP = _CHECKPOINT_LINE + b'"step":'

T = TypeVar("T")
WINDOW = 1 << 16
SCAN_CHUNK = 8 << 20


def _first_step_after(fh: BinaryIO, offset: int, size: int) -> tuple[int, int] | None:
    """(where its line's newline is, its number) of the first step line that starts after `offset`."""
    pos = offset
    carry = b""
    while pos < size:
        fh.seek(pos)
        chunk = fh.read(WINDOW)
        data = carry + chunk
        found = _STEP_LINE.search(data)
        if found is not None and found.end() < len(data):  # the number is whole
            return pos - len(carry) + found.start(), int(found.group(1))
        carry = data[-64:]
        pos += len(chunk)
    return None


def find_steps(path: Path, header: Header, first: int, limit: int) -> list[Step] | None:
    """Steps `first` .. `first+limit-1` of the tape at `path`, filled in like the index's; None
    when the tape has no step `first`."""
    try:
        with open_regular(path) as fh:
            fh.readline()
            lo = fh.tell() - 1  # the header's newline: every step line starts after it
            return _read_from(fh, _before_step(fh, lo, first), header, first, limit)
    except (OSError, ValueError, TraceCorruption):
        return None


def _before_step(fh: BinaryIO, lo: int, number: int) -> int:
    """A newline (from `lo` on) that step `number`'s line comes after, within a window of it."""
    size = fh.seek(0, 2)
    hi = size
    while hi - lo > WINDOW:
        mid = (lo + hi) // 2
        hit = _first_step_after(fh, mid, size)
        if hit is not None and hit[1] < number:
            lo = hit[0]
        else:
            hi = mid
    return lo


REGION_LIMIT = 16 << 20  # past this many bytes from the last checkpoint (or 20 of its sizes), the index answers better


@dataclass
class _Walked:
    """The run right after the last step a walk reached on a tape, kept so that the next step a
    stepper asks for is a record or two on, not a whole region from a checkpoint."""

    at: AtStep
    offset: int  # where the line after the step's starts


_walked: dict[tuple[str, int, int], _Walked] = {}  # a few tapes' last walks


def at_step_from_checkpoints(path: Path, header: Header, number: int) -> AtStep | None:
    """The run right after step `number` of a finished tape, rebuilt from the checkpoints before
    it (each adds what the outputs gained) and the records since the last one, or from the step
    the last call reached if that is nearer; None when the tape cannot answer that way, or not
    quickly (no checkpoint near enough)."""
    try:
        with open_regular(path) as fh:
            key = _key(path, fh)
            fh.readline()
            body = fh.tell()
            before = [mark for mark in checkpoints_of(path, fh) if mark.step < number]
            nearest = before[-1].step if before else 0
            # the writer spaces checkpoints by 16 times their size: a region that long is expected
            region = max(REGION_LIMIT, 20 * (before[-1].end - before[-1].start)) if before else REGION_LIMIT
            walked = _walked.get(key)
            if walked is not None and walked.at.step.step == number:  # asked again
                return AtStep(walked.at.step, walked.at.rebuild.copy(chats=False), walked.at.firings)
            if walked is not None and nearest <= walked.at.step.step < number:
                rebuild, start = walked.at.rebuild.copy(chats=False), walked.offset
            else:
                rebuild = Rebuild(header, full_checks=False)
                start = restore(path, fh, rebuild, number - 1) or body  # the records after it up to the step
            records = _Records(fh, StepFiller(header, step=rebuild.step), start, start + region)
            found = walk_to_step(records, rebuild, number)
            if found is not None:
                kept = AtStep(found.step, found.rebuild.copy(chats=False), found.firings)
                _keep(_walked, key, _Walked(kept, records.offset))
            return found
    except (OSError, ValueError, TraceCorruption, msgspec.DecodeError, msgspec.ValidationError):
        return None


def walk_to_step(records: Iterable[Record], rebuild: Rebuild, number: int) -> AtStep | None:
    """Apply `records` to `rebuild` up to step `number`: the run right after it, with the step's
    firings (what each took); None if the records end first. A step's firings are those of its
    top-level firing: with several workers, another firing under way may have written some of its
    own (a nested workflow's) before this step's line."""
    pending: dict[tuple[str, int], list[tuple[Firing, list[tuple[int, list[msgspec.Raw]]]]]] = {}
    for record in records:
        rebuild.apply(Line(0, b"", record))
        if isinstance(record, Firing):
            pending.setdefault(top_of(record), []).append((record, rebuild.taken))
        elif isinstance(record, Step):
            mine = pending.pop((record.actor, record.fireCount), [])
            if record.step == number:
                return AtStep(record, rebuild, mine)
            if record.step > number:
                return None
        rebuild.chats.clear()  # a firing's chat is on its record; the history is not needed here
    return None


def top_of(firing: Firing) -> tuple[str, int]:
    """The top-level firing a firing belongs to: its step's actor and fire count."""
    return (firing.within[0], firing.within[1]) if firing.within is not None else (firing.actor, firing.fireCount)


class _Records:
    """The records of a file from `offset` on, steps filled in, until a line starts past the
    offset `until`; `offset` is always where the line after the last one given starts."""

    def __init__(self, fh: BinaryIO, filler: StepFiller, offset: int, until: int = 1 << 62) -> None:
        self.fh, self.filler, self.offset, self.until = fh, filler, offset, until

    def __iter__(self) -> Iterator[Record]:
        self.fh.seek(self.offset)
        for raw in _lines(self.fh):
            if self.offset > self.until:
                return
            try:
                records = decode_line(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                if b"\0" in raw:  # a line still being stored (read_lines read it again): the end of what is written
                    return
                raise TraceCorruption("unreadable record", 0, "well-formed records") from None
            self.offset += len(raw) + 1
            for record in records:
                self.filler.see(record)
                yield record


def records_from(path: Path, offset: int, filler: StepFiller) -> Iterator[Record]:
    """The records of a tape from `offset` (where a line starts) on, steps filled in."""
    with open_regular(path) as fh:
        yield from _Records(fh, filler, offset)


def _key(path: Path, fh: BinaryIO) -> tuple[str, int, int]:
    """A tape as it is now: a finished tape never changes, so a changed one is another tape."""
    stat = os.fstat(fh.fileno())
    return str(path), stat.st_size, stat.st_mtime_ns


def _keep(cache: dict[tuple[str, int, int], T], key: tuple[str, int, int], value: T) -> None:
    while len(cache) >= 4:
        cache.pop(next(iter(cache)))
    cache[key] = value


def last_step_number(path: Path, most: int = SCAN_CHUNK) -> int:
    """The number of a tape's last step, read from its end (0 if none in its last `most` bytes)."""
    with open_regular(path) as fh:
        size = fh.seek(0, os.SEEK_END)
        span = WINDOW
        while True:
            start = max(size - span, 0)
            fh.seek(start)
            found = [int(m[1]) for m in _STEP_LINE.finditer(b"\n" + fh.read(size - start))]
            if found or start == 0 or span >= most:
                return found[-1] if found else 0
            span *= 4


def _lines(fh: BinaryIO) -> Iterator[bytes]:
    """The whole lines from here on (tapefile.read_lines)."""
    for line, whole in read_lines(fh):
        if whole:
            yield line


@dataclass(frozen=True)
class CheckpointAt:
    """Where a checkpoint's line is in a tape: only that is kept, as a checkpoint of a run whose
    queues hold many tokens is large, and a tape may have a thousand of them."""

    step: int
    start: int
    end: int  # where the line after it starts


class _Gains(msgspec.Struct):
    """What a checkpoint adds to the run's outputs and chats, decoded without the rest of it."""

    outputs: list[tuple[int, list[msgspec.Raw]]] = []
    chats: list[tuple[str, list[msgspec.Raw]]] = []


_gains = msgspec.json.Decoder(_Gains)
_known: dict[tuple[str, int, int], list[CheckpointAt]] = {}  # a few tapes' checkpoints


def checkpoints_of(path: Path, fh: BinaryIO) -> list[CheckpointAt]:
    """Every checkpoint of a finished tape, found in one pass over it and kept (a stepper asks
    for one step after another)."""
    key = _key(path, fh)
    found = _known.get(key)
    if found is not None:
        return found
    found = []
    pos, size = 0, key[1]
    prefix = _CHECKPOINT_STEP[1:]
    while pos < size:
        fh.seek(pos)
        chunk = fh.read(SCAN_CHUNK)
        if not chunk:
            break
        next_pos = pos + max(1, len(chunk) - len(_CHECKPOINT_LINE) + 1)  # a pattern cut in two is read again
        at = chunk.find(_CHECKPOINT_LINE)
        while at >= 0:
            start = pos + at + 1
            cut = chunk.find(b"\n", at + 1)
            if cut >= 0:
                end = pos + cut + 1
                head = chunk[at + 1 : min(cut, at + 64)]
            else:  # the line goes on past this chunk
                fh.seek(start)
                head = fh.read(64)
                fh.seek(start)
                end = start + len(fh.readline())
            number = re.match(rb"(\d+)[,}]", head[len(prefix) :]) if head.startswith(prefix) else None
            if number is not None:
                found.append(CheckpointAt(int(number.group(1)), start, end))
            if cut < 0:
                next_pos = end - 1
                break
            at = chunk.find(_CHECKPOINT_LINE, cut)
        pos = next_pos
    _keep(_known, key, found)
    return found


def restore(path: Path, fh: BinaryIO, rebuild: Rebuild, up_to_step: int) -> int | None:
    """Restart `rebuild` from the last checkpoint at or before step `up_to_step`, with what the
    outputs and chats gained at every checkpoint before it; where its line ends (None if the
    tape has no such checkpoint). Each checkpoint is read only when it is needed, once."""
    marks = [mark for mark in checkpoints_of(path, fh) if mark.step <= up_to_step]
    if not marks:
        return None
    for mark in marks[:-1]:
        fh.seek(mark.start)
        gains = _gains.decode(fh.read(mark.end - mark.start))
        rebuild.gain(gains.outputs, gains.chats)
    last = marks[-1]
    fh.seek(last.start)
    checkpoint = decode_record(fh.read(last.end - last.start))
    if not isinstance(checkpoint, Checkpoint) or checkpoint.step != last.step:
        raise TraceCorruption("a checkpoint moved since the tape was read", 0, "a finished tape does not change")
    rebuild.restart(checkpoint)
    rebuild.clock = _ended_before(fh, last.start)
    return last.end


def _ended_before(fh: BinaryIO, start: int) -> int:
    """When the step whose line ends just before byte `start` ended (a checkpoint follows its
    step's line): µs on the run's clock, 0 if that line is not a step's."""
    end = start - 1  # (its newline)
    lo, size = end, 4096
    while lo > 0:
        lo = max(0, end - size)
        fh.seek(lo)
        line = fh.read(end - lo)
        if (cut := line.rfind(b"\n")) >= 0:
            line = line[cut + 1 :]
            break
        size *= 4  # (a long line: a big token)
    steps = [r for r in decode_line(line) if isinstance(r, Step)] if end > 0 else []
    return steps[-1].at + steps[-1].dur if steps else 0


def _read_from(fh: BinaryIO, lo: int, header: Header, first: int, limit: int) -> list[Step] | None:
    """Read forward from the newline at `lo`: the line of a step before `first` (or the header's),
    so the firing that step `first` follows, which names its actor, is read too."""
    steps: list[Step] = []
    for record in _Records(fh, StepFiller(header), lo + 1):
        if isinstance(record, Step) and record.step >= first:
            if not steps and record.step != first:
                return None
            steps.append(record)
            if len(steps) == limit:
                break
    return steps or None
