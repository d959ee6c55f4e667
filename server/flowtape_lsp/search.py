"""Finding steps (`flowtape/findSteps`): the steps an actor fired in (at the top level, or inside a
composite step), and the steps whose firings put a value or left a state holding some text. The
stepper's "next / previous firing of this actor", the tree's filter and its value search."""

from __future__ import annotations

import asyncio
import bisect
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowtape.seek import records_from
from flowtape.tape import Firing, Step

from . import protocol as P
from .commands import READ_ERRORS, unreadable
from .tapeindex import Filler

if TYPE_CHECKING:
    from .server import FlowtapeServer

_found: dict[tuple[str, int, str | None, str | None], list[int]] = {}  # (tape, size, actor, text): steps


def _holds(firing: Firing, needle: bytes) -> bool:
    if firing.state and needle in bytes(firing.state).lower():
        return True
    return any(needle in bytes(token).lower() for _, tokens in firing.produced for token in tokens)


def matching(path: Path, actor: str | None, text: str | None) -> list[int]:
    """Every step of the tape that matches, in order (one pass; kept for the tape as it is)."""
    key = (str(path), os.path.getsize(path), actor, text)
    known = _found.get(key)
    if known is not None:
        return known
    needle = text.lower().encode() if text else None
    open_steps: dict[tuple[str, int], bool] = {}  # a top-level firing not closed by its step yet: matched
    found: list[int] = []
    for record in records_from(path, 0, Filler()):
        if isinstance(record, Firing):
            top = (record.within[0], record.within[1]) if record.within is not None else (record.actor, record.fireCount)
            hit = (actor is None or record.actor == actor) and (needle is None or _holds(record, needle))
            open_steps[top] = open_steps.get(top, False) or hit
        elif isinstance(record, Step):
            hit = open_steps.pop((record.actor, record.fireCount), False)
            if actor is not None and needle is None and record.actor == actor:
                hit = True  # (a replayed composite step need not have its inner firings on this tape)
            if hit:
                found.append(record.step)
    if len(_found) > 32:
        _found.clear()
    _found[key] = found
    return found


def pick(steps: list[int], start: int, direction: str, limit: int) -> list[int]:
    """Up to `limit` of `steps` after `start` (`next`), or before it, nearest first (`previous`)."""
    if direction == "next":
        i = bisect.bisect_right(steps, start)
        return steps[i : i + limit]
    i = bisect.bisect_left(steps, start)
    return steps[max(0, i - limit) : i][::-1]


def register(server: FlowtapeServer) -> None:
    @server.feature(P.FIND_STEPS)
    async def find_steps(params: Any) -> Any:
        p = P.decode_params(params, P.FindStepsParams)
        if p.actor is None and p.text is None:
            raise P.invalid("name what to find: `actor`, `text` or both")
        run = server.manager.get(p.runId)
        index = await server.manager.ready(run)
        try:
            steps = await asyncio.to_thread(matching, index.path, p.actor, p.text)
        except READ_ERRORS as exc:
            raise unreadable(run, exc) from None
        start = p.from_ if p.direction == "next" or p.from_ else index.steps + 1
        return P.FindStepsResult(runId=run.run_id, steps=pick(steps, start, p.direction, p.limit), total=len(steps)).to_json()
