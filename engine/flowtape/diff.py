"""Two runs side by side: each actor's k-th firing against its k-th firing in the other run (step
numbers differ when the interleavings do), the first firing that differs and why, with the
values on both sides. `flowtape diff` prints it; the golden check reports through it."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
from msgspec import Raw

from .digests import digest
from .show import load
from .tape import Firing, Step, Tape
from .values import canonical, preview_json
from .verify import Rebuild

ASPECTS = ("inputs", "outputs", "state", "chat")  # what of a firing is compared, in this order
DIFF_LINES = 60  # lines of a value's unified diff in the text report


class Taken(msgspec.Struct, omit_defaults=True):
    """What a firing took from one queue: by digest always, the tokens when the source has them
    (a golden keeps digests only)."""

    queue: str
    digest: str
    tokens: list[Raw] = []


class Put(msgspec.Struct):
    queue: str
    tokens: list[Raw]  # tagged JSON, as on the tape


NONE = Raw()  # no value (a field is left out when it holds this very object)


class FiringView(msgspec.Struct, omit_defaults=True):
    """One firing as a diff compares it: what it took and put, the actor's state after it, the
    chat it added."""

    actor: str
    fireCount: int
    step: int = 0  # the step that covers it (0: none yet)
    inputs: list[Taken] = []
    outputs: list[Put] = []
    state: Raw = NONE  # the actor's whole state after the firing (left out: it keeps none)
    chat: Raw = NONE  # (left out: none)


class Difference(msgspec.Struct, omit_defaults=True):
    """An actor's k-th firing in both runs, and what of it differs; `a` or `b` is None when only
    one run has that firing."""

    actor: str
    fireCount: int
    aspects: list[str]  # of ASPECTS, or "only in a" / "only in b"
    a: FiringView | None = None
    b: FiringView | None = None


class Count(msgspec.Struct):
    actor: str
    a: int
    b: int


class OutputsDiff(msgspec.Struct):
    same: bool
    a: Raw
    b: Raw


class RunDiff(msgspec.Struct, omit_defaults=True):
    """`flowtape diff --json` prints this, and the language server sends it."""

    a: str  # the runs' ids (or what a golden stands for)
    b: str
    same: bool
    counts: list[Count]  # firings per actor, every actor either run fired
    outputs: OutputsDiff
    first: Difference | None = None
    differences: list[Difference] = []  # every differing firing, the first first
    statusA: str = ""
    statusB: str = ""
    actor: str | None = None  # --actor: only this actor's firings were compared


def firings_of(tape: Tape) -> list[FiringView]:
    """Every firing of a (verified) tape, in tape order, with the tokens it took."""
    rebuild = Rebuild(tape.header, full_checks=False)
    queues = tape.header.queues
    views: list[FiringView] = []
    waiting: dict[tuple[str, int], list[FiringView]] = {}  # by the top-level firing whose step is to come
    for line in tape.lines[1:]:
        rebuild.apply(line)
        record = line.record
        if isinstance(record, Firing):
            view = FiringView(
                record.actor, record.fireCount,
                inputs=[Taken(queues[i], digest(tokens), list(tokens)) for i, tokens in rebuild.taken],
                outputs=[Put(queues[i], list(tokens)) for i, tokens in record.produced],
                state=rebuild.states.get(record.actor) or NONE, chat=record.chat or NONE,
            )
            top = (record.within[0], record.within[1]) if record.within is not None else (record.actor, record.fireCount)
            waiting.setdefault(top, []).append(view)
            views.append(view)
        elif isinstance(record, Step):
            for view in waiting.pop((record.actor, record.fireCount), []):
                view.step = record.step
    return views


def _canon(raw: Raw | bytes) -> bytes:
    """A value's bytes with its dicts' keys sorted: a dict's order is no difference."""
    return canonical(msgspec.json.decode(bytes(raw)))


def _key(raw: Raw) -> bytes | None:
    return _canon(raw) if raw else None


def aspects_apart(a: FiringView, b: FiringView) -> list[str]:
    """Which of ASPECTS differ between two firings (values compared in canonical form)."""
    apart = []
    if sorted((t.queue, t.digest) for t in a.inputs) != sorted((t.queue, t.digest) for t in b.inputs):
        apart.append("inputs")
    if sorted((p.queue, digest(map(bytes, p.tokens))) for p in a.outputs) != sorted(
        (p.queue, digest(map(bytes, p.tokens))) for p in b.outputs
    ):
        apart.append("outputs")
    if _key(a.state) != _key(b.state):
        apart.append("state")
    if _key(a.chat) != _key(b.chat):
        apart.append("chat")
    return apart


def compare(
    a: list[FiringView], b: list[FiringView], outputs: tuple[Raw, Raw], names: tuple[str, str] = ("a", "b"),
    actor: str | None = None, statuses: tuple[str, str] = ("", ""),
) -> RunDiff:
    """Pair the firings per actor, k-th with k-th, and say what differs."""
    by_actor: dict[str, tuple[list[FiringView], list[FiringView]]] = {}
    place: dict[int, int] = {}  # each firing's place in its run's tape
    for side, views in enumerate((a, b)):
        for at, view in enumerate(views):
            by_actor.setdefault(view.actor, ([], []))[side].append(view)
            place[id(view)] = at
    counts = [Count(name, len(x), len(y)) for name, (x, y) in by_actor.items()]
    differences: list[tuple[tuple[int, int], Difference]] = []
    for name, (xs, ys) in by_actor.items():
        if actor is not None and name != actor:
            continue
        for k in range(max(len(xs), len(ys))):
            x, y = (xs[k] if k < len(xs) else None), (ys[k] if k < len(ys) else None)
            if x is not None and y is not None:
                apart = aspects_apart(x, y)
                if not apart:
                    continue
            else:
                apart = ["only in a" if y is None else "only in b"]
            present = [v for v in (x, y) if v is not None]
            order = min(v.step or 1 << 62 for v in present), min(place[id(v)] for v in present)
            differences.append((order, Difference(name, k + 1, apart, x, y)))
    differences.sort(key=lambda pair: pair[0])
    found = [d for _, d in differences]
    same_outputs = _canon(outputs[0]) == _canon(outputs[1])
    return RunDiff(
        # (narrowed to one actor, only its firings are the question)
        names[0], names[1], not found and (actor is not None or (same_outputs and statuses[0] == statuses[1])),
        counts, OutputsDiff(same_outputs, outputs[0], outputs[1]), found[0] if found else None, found,
        statuses[0], statuses[1], actor,
    )


def diff_runs(run_a: Path, run_b: Path, actor: str | None = None, progress: Callable[[int, int], None] | None = None) -> RunDiff:
    """Verify both runs' tapes (`progress` follows each check, as verify's), then compare them."""
    tapes = load(run_a, progress), load(run_b, progress)
    if actor is not None and not any(actor == info.path for t in tapes for info in t.header.actors):
        known = sorted({info.path for t in tapes for info in t.header.actors})
        raise ValueError(f"no actor {actor!r} in either run (their actors: {', '.join(known)})")
    ends = [t.end for t in tapes]
    outputs = tuple(Raw(bytes(e.outputs)) if e is not None else Raw(b"{}") for e in ends)
    statuses = tuple(e.status if e is not None else "no end record" for e in ends)
    return compare(firings_of(tapes[0]), firings_of(tapes[1]), (outputs[0], outputs[1]),
                   (tapes[0].header.runId, tapes[1].header.runId), actor, (statuses[0], statuses[1]))


# ---- what a person reads


def pretty(raw: Raw | bytes) -> str:
    """A value (tagged JSON) laid out one item a line, keys sorted: what a readable diff compares."""
    if not raw:
        return "(none)"
    return msgspec.json.format(_canon(raw), indent=2).decode()


def _tokens_text(tokens: list[Raw]) -> str:
    """Tokens to diff: one string token as its text, line by line (a draft, a model's answer)."""
    if len(tokens) == 1:
        value = msgspec.json.decode(bytes(tokens[0]))
        if isinstance(value, str):
            return value
    return pretty(_list(tokens))


def aspect_value(view: FiringView | None, aspect: str) -> str:
    """One aspect of a firing as text to diff."""
    if view is None:
        return "(no such firing)"
    if aspect == "inputs":
        return "\n".join(f"{t.queue}:\n" + (_tokens_text(t.tokens) if t.tokens else f"digest {t.digest}")
                         for t in sorted(view.inputs, key=lambda t: t.queue)) or "(nothing)"
    if aspect == "outputs":
        return "\n".join(f"{p.queue}:\n{_tokens_text(p.tokens)}" for p in sorted(view.outputs, key=lambda p: p.queue)) or "(nothing)"
    return pretty(view.state if aspect == "state" else view.chat)


def _list(tokens: Iterable[Raw]) -> bytes:
    return b"[" + b",".join(bytes(t) for t in tokens) + b"]"


def unified(left: str, right: str, names: tuple[str, str], limit: int = DIFF_LINES) -> list[str]:
    lines = list(difflib.unified_diff(left.splitlines(), right.splitlines(), names[0], names[1], lineterm="", n=2))
    return lines[:limit] + ([f"… {len(lines) - limit} more diff lines (--json has the values whole)"] if len(lines) > limit else [])


def where(view: FiringView | None) -> str:
    return "—" if view is None else (f"step {view.step}" if view.step else "no step yet")


def describe(d: Difference) -> str:
    """One line: which firing, where in each run, what differs."""
    return f"{d.actor} firing {d.fireCount} (a: {where(d.a)}, b: {where(d.b)}): {', '.join(d.aspects)}"


def explain(d: Difference, names: tuple[str, str] = ("a", "b")) -> list[str]:
    """A difference with both sides' values and a readable diff of each aspect that differs."""
    lines = [describe(d)]
    for aspect in d.aspects if d.a is not None and d.b is not None else ASPECTS[:2]:
        left, right = aspect_value(d.a, aspect), aspect_value(d.b, aspect)
        lines.append(f"  {aspect}:")
        lines += [f"    a: {preview_json(msgspec.json.decode(_side(d.a, aspect)), 200)}",
                  f"    b: {preview_json(msgspec.json.decode(_side(d.b, aspect)), 200)}"]
        if left.count("\n") > 1 or right.count("\n") > 1:
            lines += ["    " + line for line in unified(left, right, (f"{names[0]} {aspect}", f"{names[1]} {aspect}"))]
    return lines


def _side(view: FiringView | None, aspect: str) -> bytes:
    """An aspect of one side as one JSON value (for the one-line preview)."""
    if view is None:
        return b"null"
    if aspect == "inputs":
        return b"{" + b",".join(msgspec.json.encode(t.queue) + b":" + (_list(t.tokens) if t.tokens else msgspec.json.encode(t.digest))
                                for t in view.inputs) + b"}"
    if aspect == "outputs":
        return b"{" + b",".join(msgspec.json.encode(p.queue) + b":" + _list(p.tokens) for p in view.outputs) + b"}"
    raw = view.state if aspect == "state" else view.chat
    return bytes(raw) if raw else b"null"


def format_diff(diff: RunDiff, more: int = 10) -> str:
    """`flowtape diff`'s text: the verdict, the first difference in full, the others one a line,
    firings per actor, and the outputs."""
    names = (f"a ({diff.a})", f"b ({diff.b})")
    narrowed = f" (actor {diff.actor})" if diff.actor else ""
    if diff.same:
        out = [f"no difference{narrowed}: every firing of run {diff.a} matches run {diff.b}'s, and so do the outputs"]
    else:
        out = [f"runs differ{narrowed}: a = {diff.a}, b = {diff.b}"]
    if diff.first is not None:
        out += ["", "first difference: " + "\n".join(explain(diff.first, names))]
        rest = diff.differences[1:]
        if rest:
            out += ["", f"{len(rest)} more differing firing(s):"] + [f"  {describe(d)}" for d in rest[:more]]
            if len(rest) > more:
                out.append(f"  … and {len(rest) - more} more (--json lists them all)")
    out += ["", "firings per actor (a / b):"]
    out += [f"  {c.actor}: {c.a} / {c.b}{'' if c.a == c.b else '  ≠'}" for c in diff.counts]
    if diff.statusA != diff.statusB:
        out.append(f"status: a {diff.statusA}, b {diff.statusB}")
    if diff.outputs.same:
        out.append("outputs: the same")
    else:
        out += ["outputs differ:", f"  a: {preview_json(msgspec.json.decode(diff.outputs.a), 300)}",
                f"  b: {preview_json(msgspec.json.decode(diff.outputs.b), 300)}"]
        out += ["  " + line for line in unified(pretty(diff.outputs.a), pretty(diff.outputs.b), (f"{names[0]} outputs", f"{names[1]} outputs"))]
    return "\n".join(out)
