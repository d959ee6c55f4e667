"""What a run's end record says of it beyond its status: the run as it stood after its last step,
and the failure that ended it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Raw

from .errors import FlowtapeError
from .tape import ErrorInfo, Final

if TYPE_CHECKING:
    from .scheduler import Engine, Failure


def final_state(engine: Engine) -> Final | None:
    """The run after its last step, for the end record; None if anything was recorded after it."""
    if engine.steps == 0 or engine.last_step_seq != engine.seq or engine.top.in_flight:
        return None  # (a firing still under way holds tokens that are in no queue)
    net = engine.net
    return Final(
        queues=[(q.index, [Raw(bytes(e)) for _, e in q.items]) for q in net.queues if q.consumer is not None and q.items],
        states=[(a.path, Raw(a.state_enc)) for a in net.actors if a.state_enc],
        fireCounts=[(a.path, a.fire_count) for a in net.actors if a.fire_count],
        lastTaken=[(q.index, [Raw(bytes(e)) for _, e in items]) for q, items in engine.last_taken],
    )


def error_info(failure: Failure) -> ErrorInfo:
    actor = failure.actor
    exc = failure.exc
    site = actor.node.created_at
    where = f" (created at {site.file}:{site.line})" if site.line else ""
    raised = failure.raised
    message = str(exc) if isinstance(exc, FlowtapeError) else f"{type(exc).__name__}: {exc}"
    if raised is not None and not isinstance(exc, FlowtapeError):  # the line that raised, as a traceback would
        message += f" (line {raised.line})" if raised.file == site.file else f" ({raised.file}:{raised.line})"
    return ErrorInfo(
        message=f"{actor.path} failed on firing {failure.fire_count}{where}: {message}",
        actor=actor.path,
        fireCount=failure.fire_count,
        file=site.file,
        line=site.line,
        raisedFile=raised.file if raised else None,
        raisedLine=raised.line if raised else None,
        traceback=failure.tb,
        taken=failure.taken,
    )
