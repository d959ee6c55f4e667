"""The tape's hash chain: which lines carry a hash, what a hash covers, and the `replayed` mark it
leaves out (docs/tape-format.md, *The hash chain*)."""

from __future__ import annotations

import hashlib
import mmap

import msgspec

from .tape import Header, decode_record

_encode = msgspec.json.Encoder().encode

HASH_KEY = b',"h":"'
HASH_LEN = 12  # hex digits of a record's chained hash
COVERED_LINES = 15  # firing and step lines that may go unhashed in a row; the next firing's line is hashed
# A replayed firing or step starts with its `replayed` mark, right after the tag; the chain leaves
# the mark out, so a resumed run can copy a recorded prefix verbatim and mark it in one pass.
_MARK = b'"replayed":true,'
# a firing's, a step's and a simple firing's line start; all are this long:
_TAGS = (b'{"t":"f",', b'{"t":"s",', b'{"t":"F",')
_TAG_LEN = 9
SIMPLE_TAGS = (_TAGS[2], _TAGS[2] + _MARK)  # a simple firing's line, and a replayed one's
_HEADER_START = b'{"t":"header",'
_MARKED = tuple(tag + _MARK for tag in _TAGS)
_FIRING_TAGS = (_TAGS[0], _TAGS[2])
_UNMARKED_LINE_STARTS = tuple((b"\n" + tag + field, b"\n" + tag + _MARK + field)
                              for tag, field in ((_TAGS[0], b'"seq":'), (_TAGS[0], b'"actor":'), (_TAGS[1], b'"step":'),
                                                 (_TAGS[2], b'"s":')))


def _unmarked(body: bytes) -> bytes:
    """A line as the chain sees it: without its `replayed` mark."""
    if body.startswith(_MARKED):
        return body[:_TAG_LEN] + body[_TAG_LEN + len(_MARK) :]
    return body


def split_hash(raw: bytes) -> tuple[bytes, str] | None:
    """A line's body (as it was hashed) and its claimed hash; None when it has none."""
    cut = len(raw) - HASH_LEN - len(HASH_KEY) - 2
    if cut < 0 or raw[cut : cut + len(HASH_KEY)] != HASH_KEY or not raw.endswith(b'"}'):
        return None
    return raw[:cut] + b"}", raw[cut + len(HASH_KEY) : -2].decode(errors="replace")


class Chain:
    """The tape's hash chain. A hashed line ends with a hash of itself (without the hash, and
    without a `replayed` mark) after the previous hash and the lines since it. Firing and step
    lines, small and frequent, are mostly covered by the next hashed line instead: a step's
    line never has a hash, a firing's only once COVERED_LINES lines wait for one. Every other
    record (header, checkpoint, end, divergence) is hashed."""

    def __init__(self, last: str = "") -> None:
        self.last = last
        # the lines since the last hashed one, as hashed, each with its newline (as a simple
        # firing's line is written: the writer adds it as it is, see TapeWriter.simple)
        self.pending: list[bytes] = []

    def cover(self, line: bytes) -> None:
        """Cover a line without a hash (`line` without its newline)."""
        self.pending.append(_unmarked(line) + b"\n")

    def hash_of(self, body: bytes) -> str:
        covered = self.last.encode() + b"".join(self.pending) + _unmarked(body)
        return hashlib.blake2b(covered, digest_size=HASH_LEN // 2).hexdigest()

    def advance(self, h: str) -> None:
        self.last = h
        self.pending = []

    def seal_line(self, body: bytes) -> bytes:
        """The line to write for a record's encoding `body` (without a hash field)."""
        return self.sealed(body) + b"\n"

    def sealed(self, body: bytes) -> bytes:
        """`seal_line` without the newline."""
        if body.startswith(_TAGS[1]) or (body.startswith(_FIRING_TAGS) and len(self.pending) < COVERED_LINES):
            self.pending.append((_unmarked(body) if body.startswith(_MARKED) else body) + b"\n")
            return body
        h = self.hash_of(body)
        self.advance(h)
        self._after_header(body)
        return body[:-1] + HASH_KEY + h.encode() + b'"}'

    def sealed_firing(self, body: bytes, replayed: bool) -> bytes:
        """`sealed` for a firing's line (its encoding `body`, marked `replayed` or not)."""
        pending = self.pending
        if len(pending) < COVERED_LINES:
            pending.append((_unmarked(body) if replayed else body) + b"\n")
            return body
        return self.sealed(body)

    def seal(self, record: msgspec.Struct) -> bytes:
        return self.seal_line(_encode(record))

    def reseal(self, raw: bytes) -> bytes:
        """A line of another tape chained anew here (its old hash, if any, dropped)."""
        parts = split_hash(raw)
        return self.seal_line(parts[0] if parts is not None else raw)

    def resume_after(self, data: bytes | mmap.mmap, start: int, end: int) -> None:
        """Take up the chain after the whole lines `data[start:end]`, which hold to it."""
        lines: list[bytes] = []
        while end > start:
            cut = max(data.rfind(b"\n", start, end - 1) + 1, start)
            raw = data[cut : end - 1]
            parts = split_hash(raw)
            if parts is not None:
                self.advance(parts[1])
                self._after_header(parts[0])
                break
            lines.append(raw)
            end = cut
        for raw in reversed(lines):
            self.cover(raw)

    def _after_header(self, body: bytes) -> None:
        """After a resumed run's header, the chain goes on from the one its copied records hold to."""
        if body.startswith(_HEADER_START):
            header = decode_record(body)
            if isinstance(header, Header) and header.chainFrom:
                self.last = header.chainFrom


def chain_seed(header: Header) -> str:
    """What the first record after the header chains from."""
    return header.chainFrom or header.h


def reseal(lines: list[bytes]) -> list[bytes]:
    """A whole tape's lines (without newlines) with every hash recomputed, as a forger would."""
    chain = Chain()
    return [chain.reseal(raw)[:-1] for raw in lines]


def mark_replayed(block: bytes) -> bytes:
    """Whole recorded lines with every firing and step marked `replayed`: their hashes still hold."""
    first = block.find(b"\n") + 1
    head = mark_line(block[:first])
    for unmarked, replayed in _UNMARKED_LINE_STARTS:  # a newline then a tag: only ever a line's start
        block = block.replace(unmarked, replayed)
    return head + block[first:]


def mark_line(raw: bytes) -> bytes:
    """One firing's or step's line marked `replayed` (its hash still holds); others as they are."""
    if raw.startswith(_TAGS) and not raw.startswith(_MARKED):
        return raw[:_TAG_LEN] + _MARK + raw[_TAG_LEN:]
    return raw
