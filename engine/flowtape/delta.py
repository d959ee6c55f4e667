"""A state recorded as an edit of the actor's last recorded state.

An actor that keeps growing a field (results collected in a list, a dict of seen keys) changes its
state at every firing, and the state's encoding grows with the run: written whole each time, its
tape would grow with the square of the firings. The tape writes such a state as one edit of the
last one instead: keep its first `head` bytes, then `middle`, then its last `tail` bytes. Offsets
count bytes of the UTF-8 encodings, and cuts fall between characters, so `middle` is text."""

from __future__ import annotations

from collections.abc import Callable

EDIT_FROM = 256  # bytes: a smaller last state is written whole (an edit would save little)

Edit = tuple[int, int, str]  # head, tail, middle


def edit_between(old: bytes, new: bytes) -> Edit | None:
    """`new` as an edit of `old`, when that is well under half of `new`'s size; else None."""
    if len(old) < EDIT_FROM:
        return None
    most = min(len(old), len(new))
    head = _common(most, lambda k: new.startswith(old[:k]))
    tail = _common(most - head, lambda k: new.endswith(old[len(old) - k :]))
    end = len(new) - tail
    while head and _inside_character(new, head):  # (equal bytes: the cut is the same in both)
        head -= 1
    while tail and _inside_character(new, end):
        tail, end = tail - 1, end + 1
    if end - head > len(new) // 2:
        return None
    return head, tail, new[head:end].decode()


def apply_edit(old: bytes, edit: Edit) -> bytes:
    """The state an edit of `old` gives; ValueError when the edit does not fit `old`."""
    head, tail, middle = edit
    if not (0 <= head and 0 <= tail and head + tail <= len(old)):
        raise ValueError(f"an edit keeping {head} and {tail} bytes of a {len(old)}-byte state")
    return old[:head] + middle.encode() + old[len(old) - tail :]


def _common(most: int, holds: Callable[[int], bool]) -> int:
    """The largest k <= most for which `holds(k)` (true for 0, and for every k below one it is
    true for): a binary search of C-speed comparisons, never a loop over bytes."""
    if holds(most):
        return most
    lo, hi = 0, most  # holds(lo), not holds(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _inside_character(data: bytes, at: int) -> bool:
    """Whether a cut before byte `at` would split a UTF-8 character."""
    return at < len(data) and data[at] & 0xC0 == 0x80
