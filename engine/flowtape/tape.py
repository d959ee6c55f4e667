"""The tape: one append-only JSONL record of a run, written as it goes, hash-chained.

Every record is a msgspec Struct defined here once; readers and writers share them.
See docs/tape-format.md for the format."""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Raw

from .errors import TraceCorruption

FORMAT_VERSION = 1
HASH_KEY = b',"h":"'


class ActorInfo(msgspec.Struct, omit_defaults=True):
    """An actor of the run, once, in the header: what steps and firings refer to by path."""

    path: str
    kind: str
    cls: str
    file: str
    line: int
    classFile: str = ""
    classLine: int = 0


class Header(msgspec.Struct, tag="header", tag_field="t", omit_defaults=True):
    version: int
    runId: str
    workflow: str
    flowFile: str
    graph: str
    actors: list[ActorInfo]
    queues: list[str]
    inputs: Raw
    flowtapeVersion: str
    startedAt: str
    maxWorkers: int = 0
    resumedFrom: str | None = None
    resumedAtStep: int | None = None
    h: str = ""


class Firing(msgspec.Struct, tag="f", tag_field="t", omit_defaults=True):
    """A completed firing: what it took (by digest), what it put, the state after it."""

    seq: int
    actor: str
    fireCount: int
    consumed: list[tuple[int, int, str]] = []  # queue index, count, digest of the tokens
    produced: list[tuple[int, list[Raw]]] = []  # queue index, encoded tokens
    state: Raw = Raw()  # present only when the firing changed the state
    chat: Raw = Raw()  # the chat messages this firing added
    within: tuple[str, int] | None = None  # the top-level firing this one ran inside
    replayed: bool = False
    notReplayable: str | None = None
    h: str = ""


class Step(msgspec.Struct, tag="s", tag_field="t", omit_defaults=True):
    """A step of the queue trace: one firing of a top-level actor (composite ones included).

    To keep tapes small, `actor` and `fireCount` are left out when the step is the firing
    written just before it, and `kind` and `line` are always left out (the header's actor table
    has them); readers (`read_tape`, `TapeFollower`) fill all four in."""

    step: int
    journalSeq: int
    actor: str = ""
    fireCount: int = 0
    replayed: bool = False
    queues: list[tuple[int, int]] = msgspec.field(default_factory=list, name="q")  # queue index, size after
    at: int = 0  # microseconds since the run started
    dur: int = 0  # microseconds
    kind: str = ""
    line: int = 0
    h: str = ""


class Divergence(msgspec.Struct, omit_defaults=True):
    """Replay stopped for one actor: its inputs differed, or it could not be replayed.
    The same struct travels in `run.json` and in the language server's messages."""

    actor: str
    fireCount: int
    reason: str
    step: int
    queue: str | None = None
    recorded: str | None = None
    actual: str | None = None
    recordedPreview: str | None = None
    actualPreview: str | None = None

    def plain(self) -> Divergence:
        return Divergence(**{name: getattr(self, name) for name in Divergence.__struct_fields__})


class Diverged(Divergence, tag="diverged", tag_field="t", omit_defaults=True):
    """A divergence as a tape record."""

    h: str = ""


class ErrorInfo(msgspec.Struct, omit_defaults=True):
    message: str
    actor: str | None = None
    fireCount: int | None = None
    file: str | None = None
    line: int | None = None
    raisedFile: str | None = None
    raisedLine: int | None = None
    traceback: str | None = None


class Final(msgspec.Struct, omit_defaults=True):
    """The run as it stands after its last step, so that a reader can describe that step from the
    end of the tape alone (a million-firing tape need not be read to show where it failed).
    Present when nothing was recorded after the last step; `verify` checks it like the rest."""

    queues: list[tuple[int, list[Raw]]] = []  # non-empty queues other than the outputs
    states: list[tuple[str, Raw]] = []  # each actor's latest recorded state
    fireCounts: list[tuple[str, int]] = []
    lastTaken: list[tuple[int, list[Raw]]] = []  # the tokens the last step's firings took


class End(msgspec.Struct, tag="end", tag_field="t", omit_defaults=True):
    status: str  # succeeded | failed | stopped
    outputs: Raw
    steps: int
    firings: int
    finishedAt: str
    error: ErrorInfo | None = None
    replayStopped: list[Diverged] = []
    leftovers: list[tuple[str, int]] = []
    stuck: list[str] = []
    final: Final | None = None
    h: str = ""


Record = Header | Firing | Step | Diverged | End
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)
_many_decoder = msgspec.json.Decoder(list[Record])


class _ReplayedFlag(msgspec.Struct):
    replayed: bool = False


_REPLAYED = msgspec.json.Decoder(_ReplayedFlag)


def chain(previous: str, body: bytes) -> str:
    return hashlib.blake2b(previous.encode() + body, digest_size=6).hexdigest()


def seal(record: msgspec.Struct, previous: str) -> tuple[bytes, str]:
    """The record's line, its hash chained to the previous record's, as the last field."""
    body = _encoder.encode(record)
    h = chain(previous, body)
    return body[:-1] + HASH_KEY + h.encode() + b'"}\n', h


class TapeWriter:
    """Appends sealed records; each write reaches the OS at once (and the disk with `durable`)."""

    def __init__(self, path: Path, durable: bool = False) -> None:
        self.path = path
        self.durable = durable
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._last = ""
        self._lock = threading.Lock()
        self._held: list[bytes] | None = None
        self.closed = False

    def write(self, *records: msgspec.Struct) -> None:
        with self._lock:
            if self.closed:
                return
            parts = []
            for record in records:
                line, self._last = seal(record, self._last)
                parts.append(line)
            if self._held is not None:
                self._held.extend(parts)
                return
            os.write(self._fd, b"".join(parts))
            if self.durable:
                os.fsync(self._fd)

    def hold(self) -> None:
        """Keep records until `release`: a loop item's or an if's firings are written in one go
        with the step that completes them. Nothing else is written meanwhile (a loop or an if
        runs alone), and a crash loses only firings that no step covers, which a resume re-runs."""
        with self._lock:
            self._held = []

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held, None
            if held and not self.closed:
                os.write(self._fd, b"".join(held))
                if self.durable:
                    os.fsync(self._fd)

    def copy_replayed(self, lines: list[bytes]) -> None:
        """Append records of another tape, marked `replayed` and chained anew: the prefix a
        resumed run restored instead of replaying firing by firing."""
        replayed = b',"replayed":true'
        with self._lock:
            parts = []
            previous = self._last
            for raw in lines:
                body = raw[: raw.rfind(HASH_KEY)]
                # a token or a state may hold `"replayed":true` too: only the record's own field counts
                if b'"replayed":true' not in body or not _REPLAYED.decode(body + b"}").replayed:
                    body += replayed
                body += b"}"
                previous = chain(previous, body)
                parts.append(body[:-1] + HASH_KEY + previous.encode() + b'"}\n')
            self._last = previous
            os.write(self._fd, b"".join(parts))
            if self.durable:
                os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                os.close(self._fd)


class StepFiller:
    """Fills in what step records leave out: the actor and fire count of the firing written just
    before a simple step, and the kind and source line from the header's actor table. A reader
    that starts mid-tape passes the header and the last firing before its starting point."""

    def __init__(self, header: Header | None = None, last: tuple[str, int] | None = None) -> None:
        self.actors: dict[str, ActorInfo] = {a.path: a for a in header.actors} if header is not None else {}
        self.last = last

    def see(self, record: Record) -> None:
        if isinstance(record, Firing):
            self.last = (record.actor, record.fireCount)
        elif isinstance(record, Step):
            if not record.actor and self.last is not None:
                record.actor, record.fireCount = self.last
            info = self.actors.get(record.actor)
            if info is not None:
                record.kind = record.kind or info.kind
                record.line = record.line or info.line
        elif isinstance(record, Header):
            self.actors = {a.path: a for a in record.actors}


@dataclass(slots=True)
class Line:
    number: int
    raw: bytes
    record: Record


@dataclass
class Tape:
    """A tape as read: its records in order, and whether its last line was torn."""

    path: Path
    lines: list[Line]
    torn: bool = False

    @property
    def header(self) -> Header:
        first = self.lines[0].record if self.lines else None
        if not isinstance(first, Header):
            raise TraceCorruption("the first record is not a header", 1, "header first")
        return first

    @property
    def end(self) -> End | None:
        last = self.lines[-1].record if self.lines else None
        return last if isinstance(last, End) else None

    def records(self) -> Iterator[Record]:
        return (line.record for line in self.lines)

    def steps(self) -> list[Step]:
        return [r for r in self.records() if isinstance(r, Step)]

    def firings(self) -> list[Firing]:
        return [r for r in self.records() if isinstance(r, Firing)]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Reading a tape makes a few hundred thousand long-lived, acyclic objects: the cyclic GC
    would re-scan them again and again (it doubled the time to read a large tape)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_tape(path: Path | str, warn: bool = True) -> Tape:
    with gc_paused():
        return _read_tape(path, warn)


def _read_tape(path: Path | str, warn: bool = True) -> Tape:
    """Read every complete record. A torn last line (a crash mid-write) is dropped with a warning;
    anything unreadable before it is corruption."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TraceCorruption(f"no tape at {path}") from None
    raw_lines = data.split(b"\n")
    torn = False
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    elif raw_lines:
        torn = True  # no newline: the writer died mid-line
    if torn:
        raw_lines.pop()
    try:  # one C call for the whole tape; line by line only to name a bad line
        records = _many_decoder.decode(b"[" + b",".join(raw_lines) + b"]")
        if len(records) != len(raw_lines):  # a line holding two records: find it line by line
            raise msgspec.DecodeError("a line holds more than one record")
    except (msgspec.DecodeError, msgspec.ValidationError):
        records = []
        for number, raw in enumerate(raw_lines, start=1):
            try:
                records.append(_decoder.decode(raw))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise TraceCorruption(f"unreadable record ({exc})", number, "well-formed records") from None
    filler = StepFiller()
    lines: list[Line] = []
    for number, (raw, record) in enumerate(zip(raw_lines, records, strict=True), start=1):
        filler.see(record)
        lines.append(Line(number, raw, record))
    if torn and warn:
        print(f"flowtape: warning: {path}: ignoring a torn last line (the run was cut off mid-write)", file=sys.stderr)
    return Tape(path, lines, torn)


def encode_record(record: msgspec.Struct) -> bytes:
    return _encoder.encode(record)


def to_builtins(record: Any) -> Any:
    return msgspec.to_builtins(record)


class TapeFollower:
    """Reads a tape that is still being written: each `poll()` returns the complete records
    appended since the last one. A line still being written stays for the next poll."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.offset = 0
        self.line_number = 0
        self._partial = b""
        self._filler = StepFiller()

    def poll(self, limit_bytes: int = 8 << 20) -> list[Record]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read(limit_bytes)
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self.offset += len(chunk)
        data = self._partial + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._partial = data
            return []
        self._partial = data[cut + 1 :]
        records: list[Record] = []
        for raw in data[:cut].split(b"\n"):
            self.line_number += 1
            try:
                record = _decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise TraceCorruption("unreadable record", self.line_number, "well-formed records") from None
            self._filler.see(record)
            records.append(record)
        return records
