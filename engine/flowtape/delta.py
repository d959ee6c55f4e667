"""A state recorded as an edit of the actor's last recorded state.

An actor that keeps growing a field (results collected in a list, a dict of seen keys) changes its
state at every firing, and the state's encoding grows with the run: written whole each time, its
tape would grow with the square of the firings. The tape writes such a state as an edit of the
last one instead: a list of operations on the last state's encoding, in order, from its start: a
number n >= 0 copies its next n bytes, a number -n skips n of them, a string is inserted (UTF-8);
what is left of the last state after the last operation is copied. Offsets count bytes of the UTF-8
encodings, and cuts fall between characters, so what is inserted is text. Several changes far
apart (a counter before a list that grew) are several operations, not one span over the state."""

from __future__ import annotations

from collections.abc import Callable

EDIT_FROM = 256  # bytes: a smaller last state is written whole (an edit would save little)
ANCHOR = 32  # bytes of the last state looked for in the new one, to find what two changes left alike
MIN_KEPT = 64  # bytes: a stretch shorter than this, between two changes, is written again
DEPTH = 6  # at most 2**DEPTH stretches kept between changes
_PLACES = (1 / 2, 1 / 4, 3 / 4, 1 / 8, 3 / 8, 5 / 8, 7 / 8)  # where anchors are taken: one may straddle a change

Edit = list[int | str]


def edit_between(old: bytes, new: bytes) -> Edit | None:
    """`new` as an edit of `old`, when that is well under half of `new`'s size; else None."""
    if len(old) < EDIT_FROM:
        return None
    ops: Edit = []
    _diff(old, new, 0, len(old), 0, len(new), DEPTH, ops)
    while ops and isinstance(ops[-1], int) and ops[-1] >= 0:  # the rest is copied anyway
        ops.pop()
    if sum(len(op.encode()) + 4 if isinstance(op, str) else 8 for op in ops) > len(new) // 2:
        return None
    return ops


def apply_edit(old: bytes, edit: Edit) -> bytes:
    """The state an edit of `old` gives; ValueError when the edit does not fit `old`."""
    out: list[bytes] = []
    at = 0
    for op in edit:
        if isinstance(op, str):
            out.append(op.encode())
            continue
        if at + abs(op) > len(old):
            raise ValueError(f"an edit that {'copies' if op >= 0 else 'skips'} {abs(op)} bytes at byte {at} "
                             f"of a {len(old)}-byte state")
        if op >= 0:
            out.append(old[at : at + op])
        at += abs(op)
    out.append(old[at:])
    return b"".join(out)


def _diff(old: bytes, new: bytes, o0: int, o1: int, n0: int, n1: int, depth: int, ops: Edit) -> None:
    """Append to `ops` what turns old[o0:o1] into new[n0:n1]: their common start and end copied,
    and between them, if an anchor shows a long stretch both still share, the same again on each
    side of it; else the old bytes skipped and the new ones inserted."""
    most = min(o1 - o0, n1 - n0)
    head = _shared_after(old, new, o0, n0, most)
    while head and _inside_character(new, n0 + head):  # (equal bytes: the cut is the same in both)
        head -= 1
    tail = _shared_before(old, new, o1, n1, most - head)
    while tail and _inside_character(new, n1 - tail):
        tail -= 1
    _add(ops, head)
    o0, n0, o1, n1 = o0 + head, n0 + head, o1 - tail, n1 - tail
    kept = _kept(old, new, o0, o1, n0, n1) if depth else None
    if kept is None:
        _add(ops, o0 - o1)
        if n1 > n0:
            ops.append(new[n0:n1].decode())
    else:
        ko, kn, size = kept
        _diff(old, new, o0, ko, n0, kn, depth - 1, ops)
        _add(ops, size)
        _diff(old, new, ko + size, o1, kn + size, n1, depth - 1, ops)
    _add(ops, tail)


def _kept(old: bytes, new: bytes, o0: int, o1: int, n0: int, n1: int) -> tuple[int, int, int] | None:
    """A stretch of old[o0:o1] found again in new[n0:n1], at least MIN_KEPT long: where it is in
    each, and how long; None when no anchor taken at _PLACES of old[o0:o1] leads to one."""
    if o1 - o0 < MIN_KEPT or n1 - n0 < MIN_KEPT:
        return None
    grown = (n1 - n0) - (o1 - o0)
    for part in _PLACES:
        at = o0 + int((o1 - o0 - ANCHOR) * part)
        anchor, near = old[at : at + ANCHOR], n0 + (at - o0)
        # where it is if every change came before it, or after it; then ever farther: a state repeats itself
        for found in (near + grown, near):
            if n0 <= found and new.startswith(anchor, found, n1):
                break
        else:
            for slack in (abs(grown) + 16, abs(grown) + 1024, n1 - n0):
                found = new.find(anchor, max(n0, near - slack), min(n1, near + slack + ANCHOR))
                if found >= 0:
                    break
            else:
                continue
        back = _shared_before(old, new, at, found, min(at - o0, found - n0))
        ahead = _shared_after(old, new, at, found, min(o1 - at, n1 - found))
        ko, kn, size = at - back, found - back, back + ahead
        while size and _inside_character(new, kn):
            ko, kn, size = ko + 1, kn + 1, size - 1
        while size and _inside_character(new, kn + size):
            size -= 1
        if size >= MIN_KEPT:
            return ko, kn, size
    return None


def _add(ops: Edit, n: int) -> None:
    """Copy n bytes (n > 0) or skip -n (n < 0), merged into the last operation when it is the same kind."""
    if n:
        last = ops[-1] if ops else None
        if isinstance(last, int) and (last > 0) == (n > 0):
            ops[-1] = last + n
        else:
            ops.append(n)


def _shared_after(old: bytes, new: bytes, a: int, b: int, most: int) -> int:
    """How many bytes from old[a] on and from new[b] on are alike (at most `most`)."""
    return _common(most, lambda i, j: old[a + i : a + j] == new[b + i : b + j])


def _shared_before(old: bytes, new: bytes, a: int, b: int, most: int) -> int:
    """How many bytes just before old[a] and just before new[b] are alike (at most `most`)."""
    return _common(most, lambda i, j: old[a - j : a - i] == new[b - j : b - i])


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
    return 0 <= at < len(data) and data[at] & 0xC0 == 0x80
