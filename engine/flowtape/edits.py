"""A fork's edits as the tape records them (`tape.Edited`): what each replaces, checked by digest,
and the value it puts in its place. The engine applies them to the run it restored, and verify
to the run it rebuilds, through `apply`: both see one story."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from msgspec import Raw

from .tape import Edited
from .values import digest

_fields = msgspec.json.Decoder(dict[str, Raw])


def digest_of(raw: bytes | Raw) -> str:
    """One value's digest, as an edit record names it."""
    return digest([bytes(raw)])


def field_digest(state: Raw | None, name: str) -> str:
    """The digest of one field of a state; "" when the state does not hold it."""
    if not state:
        return ""
    fields = _fields.decode(bytes(state))
    return digest_of(fields[name]) if name in fields else ""


def apply(
    edit: Edited,
    queues: Sequence[Any],  # FIFOs of tokens: popleft, extend and len
    queue_ids: Sequence[str],
    states: dict[str, Raw],
    chats: dict[str, list[Raw]],
) -> None:
    """Put the edit's value in place of what it names; ValueError, saying what does not fit, when
    the run does not hold what the edit says it replaced."""
    kinds = (edit.queue >= 0) + bool(edit.field) + (edit.chat >= 0)
    if kinds != 1:
        raise ValueError(f"edit {edit.what!r} names {'no' if not kinds else 'more than one'} value: a token, a field or a chat entry")
    if not edit.field and digest_of(edit.value) != edit.new:
        raise ValueError(f"edit {edit.what!r}: its value's digest is {digest_of(edit.value)}, not the recorded {edit.new}")
    if edit.queue >= 0:
        if edit.queue >= len(queues):
            raise ValueError(f"edit {edit.what!r}: queue index {edit.queue} is not in the header")
        q = queues[edit.queue]
        if not 0 <= edit.index < len(q):
            raise ValueError(f"edit {edit.what!r}: {queue_ids[edit.queue]} holds {len(q)} token(s), none at {edit.index}")
        tokens = [q.popleft() for _ in range(len(q))]  # (FIFOs of every kind readers keep: popleft and extend)
        q.extend(tokens)
        _same(edit, digest_of(tokens[edit.index]), f"the token at {edit.index} of {queue_ids[edit.queue]}")
        tokens[edit.index] = edit.value
        for _ in range(len(q)):
            q.popleft()
        q.extend(tokens)
    elif edit.field:
        before = states.get(edit.actor)
        _same(edit, field_digest(before, edit.field), f"{edit.actor}.{edit.field}")
        try:
            after = _fields.decode(bytes(edit.value))
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise ValueError(f"edit {edit.what!r}: the new state of {edit.actor} is not a JSON object of its fields") from None
        rest = {k: bytes(v) for k, v in _fields.decode(bytes(before)).items() if k != edit.field} if before else None
        if rest is not None and rest != {k: bytes(v) for k, v in after.items() if k != edit.field}:
            raise ValueError(f"edit {edit.what!r} changes other fields of {edit.actor} than {edit.field!r}")
        if edit.field not in after or digest_of(after[edit.field]) != edit.new:
            raise ValueError(f"edit {edit.what!r}: the new state does not hold the new {edit.field!r}")
        states[edit.actor] = edit.value
    else:
        entries = chats.get(edit.actor, [])
        if not 0 <= edit.chat < len(entries):
            raise ValueError(f"edit {edit.what!r}: {edit.actor} has {len(entries)} chat entries, none at {edit.chat}")
        _same(edit, digest_of(entries[edit.chat]), f"{edit.actor}'s chat entry {edit.chat}")
        entries[edit.chat] = edit.value


def _same(edit: Edited, found: str, what: str) -> None:
    if found != edit.old:
        raise ValueError(f"edit {edit.what!r} replaces a value whose digest is {edit.old or 'none'}, "
                         f"but {what} has {found or 'none'}")
