"""Steps of a finished tape found without reading it through: step records carry their number
and are written in order, so the file can be bisected on it. Jumping to the last page of a
million-step run then reads a few kilobytes instead of the whole tape (which the index, built in
the background, still reads for step details)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import BinaryIO

import msgspec
from flowtape.tape import Header, Step, StepFiller, decode_record

# a step's line starts with its tag, the replayed mark if any, then its number
_STEP_LINE = re.compile(rb'\n\{"t":"s",(?:"replayed":true,)?"step":(\d+)')
WINDOW = 1 << 16


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
        with open(path, "rb") as fh:
            fh.readline()
            lo = fh.tell() - 1  # the header's newline: every step line starts after it
            size = fh.seek(0, 2)
            hi = size
            while hi - lo > WINDOW:
                mid = (lo + hi) // 2
                hit = _first_step_after(fh, mid, size)
                if hit is not None and hit[1] < first:
                    lo = hit[0]
                else:
                    hi = mid
            return _read_from(fh, lo, header, first, limit)
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _read_from(fh: BinaryIO, lo: int, header: Header, first: int, limit: int) -> list[Step] | None:
    """Read forward from the newline at `lo`: the line of a step before `first` (or the header's),
    so the firing that step `first` follows, which names its actor, is read too."""
    fh.seek(lo + 1)
    filler = StepFiller(header)
    steps: list[Step] = []
    rest = b""
    while len(steps) < limit:
        chunk = fh.read(1 << 20)
        if not chunk:
            break
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for raw in lines:
            record = decode_record(raw)
            filler.see(record)
            if isinstance(record, Step) and record.step >= first:
                if not steps and record.step != first:
                    return None
                steps.append(record)
                if len(steps) == limit:
                    break
    return steps or None
