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
    head = _common(most, lambda i, j: old[i:j] == new[i:j])
    n, m = len(old), len(new)
    tail = _common(most - head, lambda i, j: old[n - j : n - i] == new[m - j : m - i])
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


def _common(most: int, same: Callable[[int, int], bool]) -> int:
    """How many bytes, up to `most`, two encodings have in common, given `same(i, j)`: whether
    their bytes i to j agree. Chunks of doubling size, then halving: a few C-speed comparisons
    over about twice the common bytes, never a loop over bytes (states can be megabytes)."""
    lo, step = 0, 64
    while True:
        if lo >= most:
            return most
        hi = min(most, lo + step)
        if not same(lo, hi):
            break
        lo, step = hi, step * 2
    while hi - lo > 1:  # bytes up to lo agree, those up to hi do not
        mid = (lo + hi) // 2
        if same(lo, mid):
            lo = mid
        else:
            hi = mid
    return lo


def _inside_character(data: bytes, at: int) -> bool:
    """Whether a cut before byte `at` would split a UTF-8 character."""
    return at < len(data) and data[at] & 0xC0 == 0x80
