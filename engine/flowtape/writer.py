"""Writing a run's tape as it goes: each record sealed into the hash chain and stored in the file
at once (through its mapping, tapefile.py; to the disk with `durable`); a resumed run's restored
prefix copied in."""

from __future__ import annotations

import threading
from pathlib import Path

import msgspec
from msgspec import Raw

from .chain import COVERED_LINES, Chain, mark_line, mark_replayed
from .delta import EDIT_FROM, Edit, edit_between
from .tape import NO_STATE, Checkpoint, Firing, SimpleFiring, Step
from .tapefile import TapeFile

COPY_CHUNK = 8 << 20  # a resumed run copies its source's prefix this much at a time
_encode = msgspec.json.Encoder().encode  # (bound once: two records a firing)


class TapeWriter:
    """Appends sealed records; each is in the file (the OS's page cache) at once, and on the disk
    with `durable`."""

    def __init__(self, path: Path, durable: bool = False) -> None:
        self.path = path
        self.durable = durable
        self._file = TapeFile(path, durable)
        self._line = self._file.line
        self._chain = Chain()
        self.step = 0  # the number of the last step written: a firing's seq one past it is left out
        self.round = 0  # and its round: a step (or a simple firing's line, lines.py) of the same round leaves it out
        self._states: dict[str, Raw] = {}  # each actor's last state written: the next may be an edit of it
        self._lock = threading.Lock()
        self.closed = False

    @property
    def written(self) -> int:
        """Bytes written, for checkpoints and the tape's seal (trust.py)."""
        return self._file.size

    def write(self, *records: msgspec.Struct) -> None:
        """Seal and write records (a simple firing's goes by `fired`)."""
        with self._lock:
            if self.closed:
                return
            for record in records:
                self._line(self._seal(record))

    def fired(self, record: SimpleFiring, checkpoint: Checkpoint | None = None) -> None:
        """Write a simple firing's line from its record (and a checkpoint after it): a top-level
        firing whose shape lines.py leaves to the Struct (a replayed one, an agent's, ...). The
        record was built to be written, so it is changed in place."""
        with self._lock:
            if self.closed:
                return
            self.step = record.step
            if record.round == self.round:
                record.round = -1
            else:
                self.round = record.round
            if record.seq == record.step:
                record.seq = 0
            if record.state:
                edit = self._edit_of(record.actor, record.state)
                if edit is not None:
                    record.state, record.stateEdit = NO_STATE, edit
            self._line(self._chain.sealed_firing(_encode(record), record.replayed))
            if checkpoint is not None:
                self._line(self._seal(checkpoint))

    def simple(self, line: bytes, step: int, round_: int) -> None:
        """Write a line the engine filled into a format of lines.py (a simple firing's, or a
        composite's own record or step; its newline included), at step `step` of round `round_`
        (a record that counts no step: the writer's own). Called with the engine's lock
        held, as every firing's record is written, so the writer's own lock would only cost its
        time (2,000 instructions a firing). A run that ends without the engine's lock (a firing
        stuck in its action keeps it) may close the tape beside a late call: its store then finds
        the mapping closed, and the file refuses a new window (`TapeFile.closed`), so nothing is
        written after the end."""
        if self.closed:
            return
        self.step = step
        self.round = round_
        pending = self._chain.pending
        if len(pending) < COVERED_LINES:
            pending.append(line)
        else:
            line = self._chain.sealed(line[:-1]) + b"\n"
        try:
            self._file.store(line)  # (TapeFile.append, its usual case without its call)
        except ValueError:
            self._file.append(line)
        else:
            if self.durable:
                self._file.sync()

    def state_part(self, actor: str, state: Raw) -> bytes:
        """A simple firing's line's state field (lines.py): the state whole, or as an edit of the
        actor's last one."""
        edit = self._edit_of(actor, state)
        return b',"state":' + state if edit is None else b',"stateEdit":' + _encode(edit)

    def _seal(self, record: msgspec.Struct) -> bytes:
        kind = type(record)
        if kind is Step:
            assert isinstance(record, Step)
            self.step = record.step
            if record.round != self.round:
                self.round = record.round
            else:  # the same round as the last step: left out
                record.round = -1
                try:
                    return self._chain.sealed(_encode(record))
                finally:
                    record.round = self.round
        elif kind is Firing:
            assert isinstance(record, Firing)
            state = record.state
            if state:
                edit = self._edit_of(record.actor, state)
                if edit is not None:
                    record.state, record.stateEdit = NO_STATE, edit
                    try:
                        return self._seal_firing(record)
                    finally:
                        record.state, record.stateEdit = state, None
            return self._seal_firing(record)
        return self._chain.sealed(_encode(record))

    def _seal_firing(self, record: Firing) -> bytes:
        seq = record.seq
        if seq != self.step + 1:
            return self._chain.sealed(_encode(record))
        record.seq = 0
        try:
            return self._chain.sealed(_encode(record))
        finally:
            record.seq = seq

    def _edit_of(self, actor: str, state: Raw) -> Edit | None:
        """`state` as an edit of the actor's last state, when that is big and they differ little."""
        last = self._states.get(actor)
        self._states[actor] = state
        if last is not None and len(last) >= EDIT_FROM:
            return edit_between(bytes(last), bytes(state))
        return None

    def copy_prefix(self, data: bytes, start: int, end: int) -> None:
        """Append another tape's records `data[start:end]` (whole lines) verbatim, marked
        `replayed`: the prefix a resumed run restored. The header said `chainFrom`, so their hashes
        hold as they are, and the chain goes on from them. Copied a few megabytes at a time: a
        long prefix is never copied whole."""
        with self._lock:
            if start >= end:
                return
            self._chain.resume_after(data, start, end)
            while start < end:
                cut = data.find(b"\n", min(end, start + COPY_CHUNK) - 1) + 1  # on a line's end
                cut = end if not start < cut <= end else cut
                self._file.block(mark_replayed(data[start:cut]))
                start = cut

    def copy_replayed(self, lines: list[bytes]) -> None:
        """Append some records of another tape, marked `replayed` and chained anew (when the
        prefix a resumed run restored is not one block of the recorded tape)."""
        with self._lock:
            self._file.block(b"".join(self._chain.reseal(mark_line(raw)) for raw in lines))

    def follow(self, step: int, round_: int, states: dict[str, Raw]) -> None:
        """After a copied prefix: the step and round its last step had (what later records leave
        out), and each actor's last state in it (what later states may be edits of)."""
        with self._lock:
            self.step, self.round = step, round_
            self._states.update(states)

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._file.close()
