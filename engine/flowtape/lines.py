"""A simple firing's line built in one step: a bytes format made once per actor and shape, filled
in by one `%` (C code) with what changes from firing to firing.

Most of a run's lines are firings of a simple shape: at most one token taken from one queue and
at most one put into another, no chat, no model calls. For those, building the record's Struct,
encoding it and having the writer leave out what a reader fills in cost more than the rest of
recording them; a format does it at once. Its output is the very bytes msgspec gives for that
record (tests/test_lines.py holds them equal), so readers see nothing new: a top-level firing's
SimpleFiring line, or a nested one's Firing line.

A top-level firing's format takes, in this order: the step, the seq part (`,"seq":N` when a
reader could not infer it, else empty), the fire count, the digest taken (or the token itself:
digests.taken_mark), the token put (its encoding), the two queues' sizes, the round part (`,"r":N` or empty), at, dur and the state part
(the writer's, or empty). A nested firing's: the seq part, the fire count, the digest, the token,
the state part, the top-level firing's count (its `within`), at and dur. A shape without a take
or a put still gets its field: `%.0s` writes nothing of it. (Sizes go in the order of the
queues' indexes, the one a shape lacks first.)"""

from __future__ import annotations

import msgspec

_encode = msgspec.json.encode
_NOTHING = b"%.0s"  # a field the shape has no place for: taken, and nothing written


def _name(text: str) -> bytes:
    return _encode(text).replace(b"%", b"%%")


def line_format(actor: str, q_in: int | None, q_out: int | None, within: str | None = None) -> bytes:
    """`actor`'s simple-firing format for one shape: taking from queue `q_in` and putting into
    `q_out` (None: not), at the top level (`within` None) or inside the firing of the top-level
    composite `within`."""

    top = within is None
    took = b',"%s":[[%d,1,"%%s"]]' % (b"c" if top else b"consumed", q_in) if q_in is not None else _NOTHING
    put = b',"%s":[[%d,[%%s]]]' % (b"p" if top else b"produced", q_out) if q_out is not None else _NOTHING
    if within is None:  # a SimpleFiring's line
        sizes = b"%d,%d" if q_in is not None and q_out is not None else _NOTHING + b"%d"
        return b'{"t":"F","s":%d%s,"a":' + _name(actor) + b',"n":%d' + took + put + b',"q":[' + sizes + b']%s,"at":%d,"d":%d%s}\n'
    # a nested Firing's line: no sizes, no round (its step, a composite's, says them)
    return (b'{"t":"f"%s,"actor":' + _name(actor) + b',"fireCount":%d' + took + put
            + b'%s,"within":[' + _name(within) + b',%d],"at":%d,"dur":%d}\n')


def spread_format(actor: str, takes: tuple[tuple[int, int], ...], puts: tuple[int, ...], within: str | None = None) -> bytes:
    """`actor`'s format for a firing of several queues (a join, a fan-out) or several tokens of
    one: taking from the queues `takes` (index, how many tokens) and putting into `puts`, in their
    order in the record. Its fields: as `line_format`'s, but each take's digest (or its one token
    named by itself) where a digest goes, each put's tokens (encoded, comma-separated) where a
    token goes, and at the top level the sizes of the queues touched, in the order of their
    indexes, as one encoded list."""
    top = within is None
    took = b",".join(b'[%d,%d,"%%s"]' % take for take in takes)
    put = b",".join(b"[%d,[%%s]]" % q for q in puts)
    consumed = b',"%s":[%s]' % (b"c" if top else b"consumed", took) if takes else b""
    produced = b',"%s":[%s]' % (b"p" if top else b"produced", put) if puts else b""
    if within is None:
        return (b'{"t":"F","s":%d%s,"a":' + _name(actor) + b',"n":%d' + consumed + produced
                + b',"q":%s%s,"at":%d,"d":%d%s}\n')
    return (b'{"t":"f"%s,"actor":' + _name(actor) + b',"fireCount":%d' + consumed + produced
            + b'%s,"within":[' + _name(within) + b',%d],"at":%d,"dur":%d}\n')


def start_format(actor: str, takes: tuple[int, ...], puts: tuple[int, ...], within: str | None = None) -> bytes:
    """A composite's own record as its firing starts (a loop handing in an item, an if its
    condition, a nested workflow its inputs), live: a Firing line without times. Its fields: the
    seq part, the fire count, each take's count and digest, each put's tokens (encoded,
    comma-separated), and inside another composite the top-level firing's count."""
    took = b",".join(b'[%d,%%d,"%%s"]' % q for q in takes)
    put = b",".join(b"[%d,[%%s]]" % q for q in puts)
    return (b'{"t":"f"%s,"actor":' + _name(actor) + b',"fireCount":%d'
            + (b',"consumed":[' + took + b"]" if takes else b"") + (b',"produced":[' + put + b"]" if puts else b"")
            + (b',"within":[' + _name(within) + b",%d]" if within is not None else b"") + b"}\n")


def step_format(actor: str) -> bytes:
    """A composite's step, live (its firings are written before it, so it names its own): the
    step, its journal seq, the fire count, the queues part (`,"q":[[index,size],...]`, or empty
    when it touched none), the round part, at and dur."""
    return b'{"t":"s","step":%d,"journalSeq":%d,"actor":' + _name(actor) + b',"fireCount":%d%s%s,"at":%d,"dur":%d}\n'
