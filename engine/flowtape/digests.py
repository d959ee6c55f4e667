"""The digest of the one token a firing took, as the engine takes it for every firing: the rule is
values.digest's (blake2b of the tokens as one JSON list, in canonical form), computed without its
steps where they cannot change anything."""

from __future__ import annotations

import hashlib
from typing import Any

from msgspec import Raw

from .values import digest_one

# Values whose encoding holds no object whose keys the canonical form would sort: the list of one
# is its own canonical form, so its digest is blake2b("[" + encoding + "]") as it stands.
_PLAIN = frozenset({int, str, bool, type(None)})
_OPENED = hashlib.blake2b(b"[", digest_size=8)  # (copied: what every digest of a list starts with)


def digest_taken(value: Any, raw: Raw) -> str:
    """`values.digest_one(raw)`, where `raw` is `value`'s encoding (the engine holds both)."""
    if type(value) not in _PLAIN:
        return digest_one(raw)
    hasher = _OPENED.copy()
    hasher.update(raw)
    hasher.update(b"]")
    return hasher.hexdigest()
