"""Reading a tape as a stream: its verdict without holding it (what is held is the run being
rebuilt), and its header and end record from its two ends only (a sealed tape needs no other look)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec

from . import trust
from .chain import split_hash
from .errors import TraceCorruption
from .guarded import open_regular
from .rundir import TAPE, check_ended, read_summary
from .tape import (
    MAPPED_FROM,
    End,
    Header,
    Line,
    StepFiller,
    Tape,
    decode_line,
    decode_record,
    gc_paused,
    is_end_line,
    version_of,
    why_unreadable,
    without_zero_tail,
)
from .tapefile import read_lines
from .verify import ChainCheck, Rebuild, check_header, check_summary


def ends(path: Path) -> tuple[Header, End | None]:
    """A tape's header and end record (None: it has none, or one over a megabyte), read from its
    first and last lines only: for a sealed tape, which needs no other look."""
    with open_regular(path) as fh:
        first = fh.readline().rstrip(b"\n")
        size = fh.seek(0, 2)
        fh.seek(max(size - (1 << 20), 0))
        last = without_zero_tail(fh.read(), version_of(first)).rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        header: object = decode_record(first)
    except (msgspec.DecodeError, msgspec.ValidationError):
        header = None
    if not isinstance(header, Header):
        raise TraceCorruption("the first record is not a header", 1, "header first")
    try:
        end: object = decode_record(last)
    except (msgspec.DecodeError, msgspec.ValidationError):
        end = None
    return header, end if isinstance(end, End) else None



def check_run(run_dir: Path) -> int:
    """Raise TraceCorruption unless the run's tape is sound: byte for byte the one its writer
    sealed on this machine (trust.py: no second look), or one that verifies in full (read as a
    stream: verify_streamed). Returns how many steps it holds."""
    summary = read_summary(run_dir)
    if summary is not None and summary.tape is not None and trust.file_sealed(run_dir / TAPE, summary.tape):
        check_summary(summary, *ends(run_dir / TAPE))
        return summary.steps
    return verify_streamed(run_dir)


def verify_streamed(run_dir: Path) -> int:
    """verify_run's verdict on a run's tape (the same line and rule), read as a stream: what is
    held is the run being rebuilt, never the tape (a language server checks a big tape from
    elsewhere this way, while it answers). Two reads, in verify's order: the records and their
    hash chain, then the rebuild. Returns how many steps the tape holds."""
    path = run_dir / TAPE
    chain = ChainCheck()
    broken: TraceCorruption | None = None  # the chain's first break, told once every record was read, as verify does
    header: Header | None = None
    number = 0
    ends = any_end = False
    with gc_paused():
        for line in _streamed_lines(path):
            number = line.number
            if number == 1 and isinstance(line.record, Header):
                header = line.record
            ends = isinstance(line.record, End)
            any_end = any_end or ends
            if broken is None:
                try:
                    chain.line(line)
                except TraceCorruption as exc:
                    broken = exc
        if number == 0:
            raise TraceCorruption("the tape is empty", 1, "header first")
        if header is None:
            raise TraceCorruption("the first record is not a header", 1, "header first")
        check_header(header)
        if broken is not None:
            raise broken
        rebuild = Rebuild(header)
        for line in _streamed_lines(path):
            if line.number > 1:
                rebuild.apply(line)
    check_ended(read_summary(run_dir), ends, any_end, number, rebuild.step)
    return rebuild.step


def _streamed_lines(path: Path) -> Iterator[Line]:
    """The tape's records one by one, filled in and checked as read_tape reads them (a torn last
    line dropped; CR LF line ends, an unreadable record or bytes after the end refused)."""
    filler = StepFiller()
    number = version = 0
    last_is_end = False
    with open_regular(path) as fh:
        lines = read_lines(fh)
        for raw, whole in lines:
            raw = raw if whole else without_zero_tail(raw, version)
            if not raw and not whole:
                return  # the zero tail a killed writer left (tapefile.py): no part of the tape
            # (tape.being_stored: what follows it is the zero tail)
            stored = b"\0" in raw and version >= MAPPED_FROM and not any(more or rest.strip(b"\0") for rest, more in lines)
            if stored or (not whole and not is_end_line(raw)):
                if last_is_end:  # nothing is written after the end
                    raise TraceCorruption("bytes after the end record", number + 1, "the end record is last")
                return  # a torn last line (a crash mid-write): no part of the tape
            number += 1
            if number == 1 and raw.endswith(b"\r"):
                raise TraceCorruption("unreadable record (its lines end in CR LF: the tape was converted to Windows "
                                      "line endings; convert it back, e.g. with dos2unix)", 1, "well-formed records")
            try:
                records = decode_line(raw)  # (format 6: a simple firing's line holds its step too)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise TraceCorruption(f"unreadable record ({why_unreadable(raw, number, exc)})", number, "well-formed records") from None
            if number == 1 and isinstance(records[0], Header):
                version = records[0].version
            for k, record in enumerate(records):
                filler.see(record)
                last_is_end = isinstance(record, End)
                yield Line(number, raw if k == 0 else b"", record)


def unvouched(tape: Tape) -> tuple[int, int] | None:
    """The lines (first, last) after the last hashed record of a tape without an end record: a
    killed run's last firings and steps, checked against the rebuilt run but vouched for by no
    hash. None when there are none."""
    if tape.end is not None:
        return None
    lines = tape.lines
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].raw and split_hash(lines[i].raw) is not None), -1)
    after = [line for line in lines[last + 1 :] if line.raw]  # (a simple firing's step is on its firing's line)
    return (after[0].number, after[-1].number) if after else None
