"""The tape: one append-only JSONL record of a run, written as it goes, hash-chained.

Every record is a msgspec Struct defined here once; readers and writers share them.
See docs/tape-format.md for the format."""

from __future__ import annotations

import gc
import hashlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import msgspec
from msgspec import Raw

from .delta import Edit, apply_edit
from .digests import INLINE_MARK, consumed_digest
from .errors import TraceCorruption
from .guarded import open_regular
from .tapefile import settled
from .usage import ModelCall, Spent, Usage

FORMAT_VERSION = 8
# 3 left hashes off step lines and the journalSeq off simple steps; 4 hashes one firing in eight;
# 5 writes a big state that changed a little as an edit of the last one (`stateEdit`); 6 writes a
# top-level firing and its simple step as one line (`SimpleFiring`); 7 is written through a shared
# mapping (tapefile.py): a killed writer's tape may end in zero bytes, the rest of its last window;
# 8 names a token taken that is an int, a bool or None by itself, not its digest (digests.taken_mark)
READABLE_VERSIONS = (2, 3, 4, 5, 6, 7, 8)
SIMPLE_FROM = 6  # the first version with SimpleFiring lines
MAPPED_FROM = 7  # the first version whose tape may end in a zero-filled tail
NAMED_FROM = 8  # the first version whose lines may name a token taken by itself (digests.taken_mark)


class ActorInfo(msgspec.Struct, omit_defaults=True):
    """An actor of the run, once, in the header: what steps and firings refer to by path."""

    path: str
    kind: str
    cls: str
    file: str
    line: int
    classFile: str = ""
    classLine: int = 0
    # where it sits, for pictures of the flow (a path says a nested workflow's members, not a
    # loop's or an if's): the composite whose firings run it, the if branch, the queues it puts to
    owner: str = ""
    branch: str = ""
    puts: list[int] = []


MAX_WORKERS = 256  # threads, each started up front: a bound that a typo (1e9) cannot get past


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
    chainFrom: str | None = None  # a resumed run that copied its source's prefix: that prefix's chain seed
    # an input wired straight to an output (queue ids do not say so): [input port, output queue index]
    seededOutputs: list[tuple[str, int]] = []
    # each static loop's items and static if's condition as the flow gave them: [actor, digest], the
    # digest "" for one that cannot be told (a generator): a resume sees the flow's edits to them
    statics: list[tuple[str, str]] = []
    h: str = ""


def graph_fingerprint(actors: list[ActorInfo], queues: list[str]) -> str:
    """A graph's identity: its actors' paths, kinds and classes and its queues, in order (Header.graph)."""
    shape = [[a.path, a.kind, a.cls] for a in actors], queues
    return "blake2b:" + hashlib.blake2b(msgspec.json.encode(shape), digest_size=16).hexdigest()


NO_STATE = Raw()  # (a field is left out when it holds its very default: this one)


class Firing(msgspec.Struct, tag="f", tag_field="t", omit_defaults=True, kw_only=True):
    """A completed firing: what it took (by digest), what it put, the state after it.

    `seq` is left out when it is one more than the number of the last step written before it (in
    a flow without nested firings, every firing's): readers fill it in (`StepFiller`)."""

    replayed: bool = False
    seq: int = 0
    actor: str
    fireCount: int
    # queue index, count, digest of the tokens (a line may name one int, bool or None by itself:
    # `"=5"`, format 8; a reader's record holds its digest, see `with_digests`)
    consumed: list[tuple[int, int, str]] = []
    produced: list[tuple[int, list[Raw]]] = []  # queue index, encoded tokens
    state: Raw = NO_STATE  # present only when the firing changed the state
    stateEdit: Edit | None = None  # instead of `state`: the new state as an edit of the last one (delta.py)
    chat: Raw = Raw()  # the chat messages this firing added
    within: tuple[str, int] | None = None  # the top-level firing this one ran inside
    # a nested task's or agent's: when it began (µs since the run started) and its duration, as a
    # step's `at`/`dur` (None: a composite's own record, or a tape from before they were written)
    at: int | None = None
    dur: int | None = None
    notReplayable: str | None = None
    calls: list[ModelCall] = []  # an agent's live model calls (on a replayed record: what they were)
    h: str = ""


class Step(msgspec.Struct, tag="s", tag_field="t", omit_defaults=True, kw_only=True):
    """A step of the queue trace: one firing of a top-level actor (composite ones included).

    To keep tapes small, `actor`, `fireCount` and `journalSeq` are left out when the step is the
    firing written just before it, and `kind` and `line` are always left out (the header's actor
    table has them); readers (`read_tape`, `TapeFollower`) fill all five in. A step's line has
    no hash of its own: the next hashed line covers it (see `Chain`)."""

    replayed: bool = False
    step: int
    journalSeq: int = 0
    actor: str = ""
    fireCount: int = 0
    queues: list[tuple[int, int]] = msgspec.field(default_factory=list, name="q")  # queue index, size after
    round: int = msgspec.field(default=-1, name="r")  # the scheduler's round; -1 (left out): the last step's
    at: int = 0  # microseconds since the run started
    dur: int = 0  # microseconds
    kind: str = ""
    line: int = 0
    h: str = ""


class SimpleFiring(msgspec.Struct, tag="F", tag_field="t", omit_defaults=True, kw_only=True):
    """A top-level firing and its simple step, on one line (format 6): what a reader gets from it
    is that Firing and that Step (`split`). Most firings of a run are written this way, so its
    fields have short names, and `q` holds only the sizes after the firing of the queues it took
    from or put into, in the order of their indexes. `seq` is left out when it is the step's number
    (one past the last step's, as a firing's), `r` when it is the last step's round."""

    replayed: bool = False
    step: int = msgspec.field(name="s")
    seq: int = 0
    actor: str = msgspec.field(name="a")
    fireCount: int = msgspec.field(name="n")
    consumed: list[tuple[int, int, str]] = msgspec.field(default_factory=list, name="c")
    produced: list[tuple[int, list[Raw]]] = msgspec.field(default_factory=list, name="p")
    sizes: list[int] = msgspec.field(default_factory=list, name="q")
    round: int = msgspec.field(default=-1, name="r")
    at: int = 0
    dur: int = msgspec.field(default=0, name="d")
    state: Raw = NO_STATE
    stateEdit: Edit | None = None
    chat: Raw = Raw()
    calls: list[ModelCall] = []  # an agent's live model calls, as a Firing's
    notReplayable: str | None = None
    h: str = ""

    def split(self) -> tuple[Firing, Step]:
        """The firing and its step (msgspec.ValidationError when `q` does not fit its queues)."""
        seq = self.seq or self.step
        firing = Firing(
            replayed=self.replayed, seq=seq, actor=self.actor, fireCount=self.fireCount, consumed=with_digests(self.consumed),
            produced=self.produced, stateEdit=self.stateEdit, notReplayable=self.notReplayable, h=self.h,
        )
        if self.state:  # (an empty Raw given is not the default one: it would be encoded, as nothing)
            firing.state = self.state
        if self.chat:
            firing.chat = self.chat
        if self.calls:
            firing.calls = self.calls
        touched = touched_queues(self.consumed, self.produced)
        if len(touched) != len(self.sizes):
            raise msgspec.ValidationError(
                f"step {self.step} gives {len(self.sizes)} queue size(s) for the {len(touched)} queue(s) its firing touched"
            )
        step = Step(
            replayed=self.replayed, step=self.step, journalSeq=seq, actor=self.actor, fireCount=self.fireCount,
            queues=list(zip(touched, self.sizes, strict=True)), round=self.round, at=self.at, dur=self.dur,
        )
        return firing, step


def with_digests(consumed: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """A record's consumed entries as readers see them: a token a line names by itself (format 8,
    digests.taken_mark) as its digest, as the line would have named it before."""
    for entry in consumed:
        if entry[2][:1] == INLINE_MARK:
            return [(index, count, consumed_digest(named)) for index, count, named in consumed]
    return consumed


def touched_queues(consumed: list[tuple[int, int, str]], produced: list[tuple[int, list[Raw]]]) -> list[int]:
    """The queues a firing took from or put into, by index, in order: a simple firing's `q` is their sizes."""
    return sorted({c[0] for c in consumed}.union([p[0] for p in produced]))


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

    def detail(self) -> str:
        """The reason, with the queue and both tokens when the inputs differed."""
        parts = [self.reason]
        if self.queue:
            parts.append(f"queue {self.queue}")
        if self.recordedPreview is not None or self.actualPreview is not None:
            parts.append(f"recorded {self.recordedPreview or '?'}, now {self.actualPreview or '?'}")
        return "; ".join(parts)


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
    taken: list[tuple[int, list[Raw]]] = []  # what the failed firing took (queue index, tokens): given back, never recorded


class Final(msgspec.Struct, omit_defaults=True):
    """The run as it stands after its last step, so that a reader can describe that step from the
    end of the tape alone (a million-firing tape need not be read to show where it failed).
    Present when nothing was recorded after the last step; `verify` checks it like the rest."""

    queues: list[tuple[int, list[Raw]]] = []  # non-empty queues other than the outputs
    states: list[tuple[str, Raw]] = []  # each actor's latest recorded state
    fireCounts: list[tuple[str, int]] = []
    lastTaken: list[tuple[int, list[Raw]]] = []  # the tokens the last step's firings took


class Checkpoint(msgspec.Struct, tag="checkpoint", tag_field="t", omit_defaults=True):
    """The run as it stands right after a step, written every so often (see scheduler), so that a
    resume rebuilds the run from the nearest checkpoint instead of from the first record. Written
    only when every firing recorded so far is covered by a step and can be replayed."""

    step: int
    seq: int
    queues: list[tuple[int, list[Raw]]] = []  # every non-empty queue but the run's outputs
    outputs: list[tuple[int, list[Raw]]] = []  # what the run's outputs gained since the last checkpoint
    states: list[tuple[str, Raw]] = []  # each actor's latest recorded state
    rounds: list[tuple[str, int]] = []  # each top-level actor's last step's round, when not 0
    round: int = 0  # its step's round
    fireCounts: list[tuple[str, int]] = []
    chats: list[tuple[str, list[Raw]]] = []  # what each agent's chat gained since the last checkpoint
    spent: list[Spent] = []  # per model, the calls every firing so far records (what a resume from here saves)
    h: str = ""


class Edited(msgspec.Struct, tag="edit", tag_field="t", omit_defaults=True, kw_only=True):
    """A fork's edit: a value of the recorded run changed before the fork went on live, written
    right after the copied prefix (edits.py applies it, for the engine and for verify alike).
    Exactly one of `queue` (a token), `field` (a state's field) and `answer` (an agent's next
    answer) says what was edited."""

    step: int  # the step it follows: the fork's resumedAtStep
    what: str  # the edit as it was asked for: `double.In[0]`, `report.approved`, `reviewer.answer`
    queue: int = -1  # a token: its queue's index in the header
    index: int = 0  # and its place in the queue (0: the head, taken next)
    actor: str = ""  # a state's field or an answer: whose
    field: str = ""  # the field of the actor's state
    answer: bool = False  # the agent's next answer, `value` (by output port), given instead of asking its transport
    old: str  # digest of the value it replaces (the token, the field's value, the entry; "": a field the state did not hold)
    new: str  # digest of the new value (of the field's, for a field)
    value: Raw  # the token, the actor's whole new state, or the answer by output port (tagged JSON)
    h: str = ""


END_STATUSES = ("succeeded", "failed", "stopped")


class End(msgspec.Struct, tag="end", tag_field="t", omit_defaults=True):
    status: str  # one of END_STATUSES; failed exactly when there is an error
    outputs: Raw
    steps: int
    firings: int
    finishedAt: str
    error: ErrorInfo | None = None
    replayStopped: list[Diverged] = []
    leftovers: list[tuple[str, int]] = []
    stuck: list[str] = []
    final: Final | None = None
    usage: Usage | None = None  # the run's model calls, and what its resume saved
    h: str = ""


Record = Header | Firing | Step | Checkpoint | Diverged | Edited | End  # what readers see
Written = Record | SimpleFiring  # what a line holds
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)
_line_decoder = msgspec.json.Decoder(Written)
_many_decoder = msgspec.json.Decoder(list[Written])


def expand(written: Written) -> tuple[Record, ...]:
    """The records a line stands for: a simple firing's firing and step, else the record itself."""
    if isinstance(written, SimpleFiring):
        return written.split()
    if isinstance(written, Firing) and written.consumed:
        written.consumed = with_digests(written.consumed)
    return (written,)


def decode_written(raw: bytes) -> Written:
    """What one line holds; a msgspec.DecodeError for a line that holds none (a value nested too
    deep for msgspec, or for Python's recursion, included)."""
    try:
        return _line_decoder.decode(raw)
    except RecursionError:
        raise msgspec.DecodeError(TOO_DEEP) from None


def decode_line(raw: bytes) -> tuple[Record, ...]:
    """The records of one line (msgspec errors for a line that holds none)."""
    return expand(decode_written(raw))


def resolve_state(firing: Firing, states: dict[str, Raw]) -> None:
    """Fill in a firing's state given as an edit of its actor's last one (in `states`, which
    takes the firing's state). ValueError when there is no last state or the edit does not fit it."""
    if firing.stateEdit is not None:
        if firing.state:
            raise ValueError(f"{firing.actor}'s firing {firing.fireCount} gives both a state and a state edit")
        last = states.get(firing.actor)
        if last is None:
            raise ValueError(f"{firing.actor}'s state is written as an edit, but no state of it was recorded before")
        try:
            firing.state, firing.stateEdit = Raw(apply_edit(bytes(last), firing.stateEdit)), None
        except ValueError as exc:
            raise ValueError(f"{firing.actor}'s state edit does not fit its last state ({exc})") from None
    if firing.state:
        states[firing.actor] = firing.state


TOO_DEEP = "a value in it is nested too deeply to read"


def decode_record(raw: bytes) -> Record:
    """A header, checkpoint, divergence or end line's record (and older tapes' lines; a simple
    firing's line holds two records: `decode_line`); a msgspec.DecodeError for a line that is none (msgspec's own depth
    limit, a RecursionError, included: a value nested a thousand deep is a bad line, not a crash)."""
    try:
        return _decoder.decode(raw)
    except RecursionError:
        raise msgspec.DecodeError(TOO_DEEP) from None


class StepFiller:
    """Fills in what records leave out: a firing's seq (one past the last step's number), the
    actor, fire count and seq of the firing written just before a simple step, a step's round (the
    last step's), and its kind and source line from the header's actor table. A reader that starts
    mid-tape passes the header, the firing its first step follows and the number (and round) of
    the last step before it."""

    def __init__(
        self, header: Header | None = None, last: tuple[str, int, int] | None = None, step: int = 0, round_: int = 0
    ) -> None:
        self.actors: dict[str, ActorInfo] = {a.path: a for a in header.actors} if header is not None else {}
        self.last = last  # actor, fireCount, seq
        self.step = step
        self.round = round_

    def see(self, record: Record) -> None:
        if isinstance(record, Firing):
            if not record.seq:
                record.seq = self.step + 1
            self.last = (record.actor, record.fireCount, record.seq)
        elif isinstance(record, Step):
            self.step = record.step
            if record.round < 0:
                record.round = self.round
            self.round = record.round
            if not record.actor and self.last is not None:
                record.actor, record.fireCount, seq = self.last
                record.journalSeq = record.journalSeq or seq
            self.last = None  # a step after a step names its actor: a simple one follows its firing
            info = self.actors.get(record.actor)
            if info is not None:
                record.kind = record.kind or info.kind
                record.line = record.line or info.line
        elif isinstance(record, Header):
            self.actors = {a.path: a for a in record.actors}
        elif isinstance(record, Checkpoint):
            self.step = record.step


@dataclass(slots=True)
class Line:
    """A record as read, and its line; a simple firing's step has the same number and no raw (its
    line is its firing's)."""

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
        if not self.lines:
            raise TraceCorruption("the tape is empty", 1, "header first")
        first = self.lines[0].record
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


def is_end_line(raw: bytes) -> bool:
    try:
        return isinstance(decode_record(raw), End)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


def _read_tape(path: Path | str, warn: bool = True) -> Tape:
    """Read every complete record. A torn last line (a crash mid-write) is dropped with a warning;
    anything unreadable before it is corruption."""
    path = Path(path)
    try:
        with open_regular(path) as fh:
            data = settled(fh.read(), fh.fileno(), 0)
    except FileNotFoundError:
        raise TraceCorruption(f"no tape at {path}") from None
    if data.endswith(b"\0"):
        data = without_zero_tail(data, version_of(data[: data.find(b"\n")]))
    raw_lines = data.split(b"\n")
    torn = False
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    elif raw_lines:
        torn = not is_end_line(raw_lines[-1])  # no newline: the writer died mid-line, unless it is a
        # whole end record whose newline alone was lost (an editor or a copy dropped it)
    if torn:
        raw_lines.pop()
    if raw_lines and being_stored(raw_lines[-1], raw_lines[0]):
        torn = True
        raw_lines.pop()
    try:  # one C call for the whole tape; line by line only to name a bad line
        records = _many_decoder.decode(b"[" + b",".join(raw_lines) + b"]")
        if len(records) != len(raw_lines):  # a line holding two records: find it line by line
            raise msgspec.DecodeError("a line holds more than one record")
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        records = []
        for number, raw in enumerate(raw_lines, start=1):
            try:
                records.append(decode_written(raw))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise TraceCorruption(f"unreadable record ({why_unreadable(raw, number, exc)})", number, "well-formed records") from None
    if raw_lines and raw_lines[0].endswith(b"\r"):
        raise TraceCorruption(
            "unreadable record (its lines end in CR LF: the tape was converted to Windows line endings, "
            "by git's autocrlf or an editor; convert it back, e.g. with dos2unix)", 1, "well-formed records",
        )
    filler = StepFiller()
    lines: list[Line] = []
    for number, (raw, written) in enumerate(zip(raw_lines, records, strict=True), start=1):
        if isinstance(written, SimpleFiring):  # two records, one line: its raw goes with the first
            try:
                firing, step = written.split()
            except msgspec.ValidationError as exc:
                raise TraceCorruption(f"unreadable record ({exc})", number, "well-formed records") from None
            filler.see(firing)
            filler.see(step)
            lines.append(Line(number, raw, firing))
            lines.append(Line(number, b"", step))
        else:
            (record,) = expand(written)  # (a firing's tokens named by themselves, as their digests)
            filler.see(record)
            lines.append(Line(number, raw, record))
    if torn and lines and isinstance(lines[-1].record, End):  # nothing is written after the end
        raise TraceCorruption("bytes after the end record", lines[-1].number + 1, "the end record is last")
    if torn and warn:
        print(f"flowtape: warning: {path}: ignoring a torn last line (the run was cut off mid-write)", file=sys.stderr)
    return Tape(path, lines, torn)


def without_zero_tail(data: bytes, version: int) -> bytes:
    """A tape's bytes without the zero bytes at its end that a killed writer of format `version`
    (MAPPED_FROM on) left: the rest of the window it was writing into (tapefile.py). No record
    holds a zero byte, and what is cut before them is read as any tape cut there is (a line cut
    short is a torn last line). An older tape's zero bytes are read as they always were."""
    return data.rstrip(b"\0") if version >= MAPPED_FROM and data.endswith(b"\0") else data


def being_stored(last: bytes, first: bytes) -> bool:
    """Whether a format-7 tape's last line, read whole, holds a zero byte: a line whose store was
    under way when it was read (or when its writer was killed), its newline stored but not yet all
    of the rest (a copy does not store in order, and a read that meets the mapping's zeros ahead
    of the copy sees them). No record holds a zero byte: it is a torn line, not corruption."""
    return b"\0" in last and version_of(first) >= MAPPED_FROM


def version_of(first: bytes) -> int:
    """The format version its header line says (0: it is no header)."""
    try:
        header = decode_record(first)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return 0
    return header.version if isinstance(header, Header) else 0


def why_unreadable(raw: bytes, number: int, exc: Exception) -> str:
    """What is wrong with a line that is not a record, in words for the usual accidents."""
    if not raw.strip():
        return "an empty line"
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        return "a byte order mark before the header: the tape was re-saved by an editor"
    return str(exc)


def encode_record(record: msgspec.Struct) -> bytes:
    return _encoder.encode(record)
