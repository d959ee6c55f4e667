"""A fork's edits as the tape records them (`tape.Edited`): what each replaces, checked by digest,
and the value it puts in its place. The engine applies them to the run it restored, and verify
to the run it rebuilds, through `apply`: both see one story."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from msgspec import Raw

from .digests import digest
from .tape import Edited

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
    answers: dict[str, Raw],
) -> None:
    """Put the edit's value in place of what it names (an agent's next answer: in `answers`, till
    its next firing gives it); ValueError, saying what does not fit, when the run does not hold
    what the edit says it replaced."""
    kinds = (edit.queue >= 0) + bool(edit.field) + edit.answer
    if kinds != 1:
        raise ValueError(f"edit {edit.what!r} names {'no' if not kinds else 'more than one'} value: a token, a field or an answer")
    if not edit.field and digest_of(edit.value) != edit.new:
        raise ValueError(f"edit {edit.what!r}: its value's digest is {digest_of(edit.value)}, not the recorded {edit.new}")
    if edit.queue >= 0:
        if edit.queue >= len(queues):
            raise ValueError(f"edit {edit.what!r}: queue index {edit.queue} is not in the header")
        q = queues[edit.queue]
        if not 0 <= edit.index < len(q):
            raise ValueError(f"edit {edit.what!r}: {queue_ids[edit.queue]} holds {len(q)} token(s), none at {edit.index}")
        tokens = [q.popleft() for _ in range(len(q))]  # (what every reader's FIFOs have: popleft and extend)
        found = digest_of(tokens[edit.index])
        if found == edit.old:
            tokens[edit.index] = edit.value
        q.extend(tokens)
        _same(edit, found, f"the token at {edit.index} of {queue_ids[edit.queue]}")
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
        try:
            _fields.decode(bytes(edit.value))
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise ValueError(f"edit {edit.what!r}: the answer of {edit.actor} is not a JSON object by output port") from None
        answers[edit.actor] = edit.value  # (`old` is the recorded run's answer there: not this run's to check)


def _same(edit: Edited, found: str, what: str) -> None:
    if found != edit.old:
        raise ValueError(f"edit {edit.what!r} replaces a value whose digest is {edit.old or 'none'}, "
                         f"but {what} has {found or 'none'}")


def check_answer(answer: Raw, actor: str, produced: list[tuple[int, list[Raw]]], queue_ids: Sequence[str]) -> None:
    """The agent's next firing after an answer edit put that answer on each of its ports' edges;
    ValueError otherwise. (Its edges to the run's own outputs, `$.X`, do not name the port.)"""
    by_port = _fields.decode(bytes(answer))
    for index, tokens in produced:
        qid = queue_ids[index]
        port = qid.partition("->")[0].rpartition(".")[2] if qid.startswith(actor + ".") and "->" in qid else None
        if port is None or port not in by_port:
            continue
        if [digest_of(t) for t in tokens] != [digest_of(by_port[port])]:
            raise ValueError(f"{actor} was to answer {bytes(by_port[port]).decode(errors='replace')[:80]} on {port} "
                             f"(a fork's edit), but its firing put other tokens into {qid}")
