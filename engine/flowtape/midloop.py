"""Where a top-level loop stands at a step. Between two items its iterator lives only in the
running process, so a resume at that step (a fork's edits with it) puts it back by going over
the same items again, past the ones it handed in: the loop's static items (the recorded run's,
by the header's digest) or the `iter` token its pass began with (from the tape). The last of
them is checked against the item the tape recorded. A loop inside a scope never stands between
two items at a step: its scope's firing runs it to its end first."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from msgspec import Raw

from .network import Network
from .tape import Firing, Header
from .values import NotEncodable, decode, encode, set_order


def iterate(iterable: Any) -> Iterator[Any]:
    """A loop's pass over its items, a set's in the order its encoding has them (set_order);
    TypeError when the value is not iterable."""
    return iter(set_order(iterable) if isinstance(iterable, (set, frozenset)) else iterable)


@dataclass(slots=True)
class _Pass:
    source: Raw | None  # the `iter` token the pass began with; None: the loop's static items
    handed: int  # the loop's firings in this pass so far (its last may be the one that ended it)
    last: Raw | None  # the item its latest firing put, when something takes its items


class LoopPasses:
    """The passes of the top-level loops, told from their firings' records as a tape is read."""

    def __init__(self, header: Header) -> None:
        loops = [a.path for a in header.actors if a.kind == "loop" and not a.owner]
        self._iter = {p: i for i, qid in enumerate(header.queues) for p in loops if qid.endswith(f"->{p}.iter")}
        self._items = {i for i, qid in enumerate(header.queues) for p in loops if qid.startswith(f"{p}.item->")}
        self._loops = set(loops)
        self._passes: dict[str, _Pass] = {}
        self._unknown: set[str] = set()  # whose pass began before the records seen (not at a checkpoint: none)

    def see(self, firing: Firing, taken: list[tuple[int, list[Raw]]]) -> None:
        """A firing's record, with the tokens it took (verify.Rebuild.taken)."""
        path = firing.actor
        if path not in self._loops:
            return
        began = [tokens[0] for index, tokens in taken if index == self._iter.get(path) and tokens]
        last = next((tokens[0] for index, tokens in firing.produced if index in self._items and tokens), None)
        now = self._passes.get(path)
        if began or path not in self._iter:  # a new pass over an `iter` token; a static loop's one pass
            handed = firing.fireCount if not began else 1
            self._passes[path] = _Pass(began[0] if began else None, handed, last)
            self._unknown.discard(path)
        elif now is not None:
            now.handed += 1
            now.last = last
        else:
            self._unknown.add(path)

    def place(self, net: Network) -> tuple[dict[str, Iterator[Any]], str]:
        """Each loop between two items: its iterator, past the items it handed in; or why one
        cannot be put back ("" when all can)."""
        if self._unknown:
            return {}, f"where loop {min(self._unknown)} stands in its items cannot be told from its tape"
        placed: dict[str, Iterator[Any]] = {}
        for path, at in self._passes.items():
            fewer = f"loop {path} has fewer items than the {at.handed - (at.last is None)} its tape says it handed in"
            try:
                iterable = net.by_path[path].obj.iterable if at.source is None else decode(bytes(at.source))
                items = iterate(iterable)
                if sum(1 for _ in islice(items, at.handed - 1)) < at.handed - 1:
                    return {}, fewer
                item = next(items)
            except StopIteration:  # its latest firing ended the pass, unless it put an item
                if at.last is None:
                    continue
                return {}, fewer
            except Exception as exc:  # noqa: BLE001 - a user's iterable, or a token that does not decode
                return {}, f"loop {path}'s items cannot be gone over again ({type(exc).__name__}: {exc})"
            try:
                same = at.last is None or encode(item) == bytes(at.last)
            except NotEncodable:
                same = False
            if not same:
                return {}, f"loop {path}'s item {at.handed} is not the one its tape recorded"
            placed[path] = items
        return placed, ""
