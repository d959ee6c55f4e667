"""Digests of tokens, as a firing's record names what it took: 16 hex chars of blake2b over the
tokens as one JSON list, in canonical form (`digest`), and the engine's fast path for the one token
a firing took (`taken_hex`, ASCII bytes for a line's format), which skips the canonical steps where they cannot change anything.

From format 8 a line names one token taken that is an int, a bool or None by the token itself
instead (`taken_mark`: "=" and its encoding, no longer than a digest, and cheaper to write than
to digest); readers see the digest it stands for (`consumed_digest`), so what a record says is
the same either way."""

from __future__ import annotations

import hashlib
import re
from binascii import hexlify
from collections.abc import Iterable
from typing import Any

import msgspec
from msgspec import Raw

from .values import canonical, encode

# A blake2b set up once: a digest copies it (a fifth cheaper than setting one up: the digest is
# taken for every firing's tokens)
_BLAKE8 = hashlib.blake2b(digest_size=8)
_DECODE = msgspec.json.Decoder().decode


def digest(raw_items: Iterable[bytes]) -> str:
    """16 hex chars over the encoded tokens as one JSON list, in canonical form: equal values
    give equal digests, whatever their dicts' insertion order."""
    body = b"[" + b",".join(raw_items) + b"]"
    if b"{" in body:  # objects inside (or a brace in a string): sort their keys first
        body = canonical(_DECODE(body))
    hasher = _BLAKE8.copy()
    hasher.update(body)
    return hasher.hexdigest()


def digest_one(raw: bytes) -> str:
    """`digest([raw])`, for the usual take of one token."""
    body = b"[" + raw + b"]"
    if b"{" in body:
        body = canonical(_DECODE(body))
    hasher = _BLAKE8.copy()
    hasher.update(body)
    return hasher.hexdigest()


def digest_values(values: Iterable[object]) -> str:
    return digest(encode(v) for v in values)


# Values whose encoding holds no object whose keys the canonical form would sort: the list of one
# is its own canonical form, so its digest is blake2b("[" + encoding + "]") as it stands.
_PLAIN = frozenset({int, str, bool, type(None)})
_OPENED = hashlib.blake2b(b"[", digest_size=8)  # (copied: what every digest of a list starts with)


def taken_hex(value: Any, raw: Raw) -> bytes:
    """`digest_one(raw)`, as ASCII bytes (what a line's format takes), where `raw` is `value`'s
    encoding (the engine holds both)."""
    if type(value) not in _PLAIN:
        return digest_one(raw).encode()
    hasher = _OPENED.copy()
    hasher.update(raw)
    hasher.update(b"]")
    return hexlify(hasher.digest())


# A token written in a digest's place: an int, a bool or None, whose encoding is its own canonical
# form, holds nothing a JSON string would escape, and is no longer than a digest.
_INLINE = frozenset({int, bool, type(None)})
INLINE_MARK = "="
_INLINE_MAX = 15  # bytes of the encoding
_INLINE_BODY = re.compile(r"-?(?:0|[1-9][0-9]*)|true|false|null")


def taken_mark(value: Any, raw: Raw) -> bytes:
    """What a line says one token taken was (ASCII bytes for a line's format): the token itself
    after "=" for an int, a bool or None whose encoding is short; else its digest (`taken_hex`)."""
    if type(value) in _INLINE and len(raw) <= _INLINE_MAX:
        return b"=" + raw
    return taken_hex(value, raw)


def consumed_digest(recorded: str) -> str:
    """The digest a record's consumed entry stands for: the one written, or that of the token
    written in its place (`taken_mark`). A mark that holds no such token is left as it is: no
    token's digest equals it, so verify refuses it as a token other than the one the queue held."""
    if recorded[:1] != INLINE_MARK:
        return recorded
    found = _marks_read.get(recorded)
    if found is None:
        body = recorded[1:]
        if len(body) > _INLINE_MAX or _INLINE_BODY.fullmatch(body) is None:
            return recorded
        found = digest_one(body.encode())
        if len(_marks_read) >= _MARKS_KEPT:
            _marks_read.clear()
        _marks_read[recorded] = found
    return found


# Marks read lately, and their digests: a token is read again at every actor that takes it (each
# of a fan-out's, or a chain's next value being this one's), and a digest costs a hash. A few
# thousand, then forgotten all at once: a dict's own operations hold under threads.
_MARKS_KEPT = 4096
_marks_read: dict[str, str] = {}
