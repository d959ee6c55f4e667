"""The least the tape costs per firing in this interpreter: what recording a chain firing must do
whatever the engine around it, done by Flowtape's own code with no engine.

Per firing that is: encode the token it put (values.encode), name the token it took
(digests.taken_mark: an int, as the chain's are, by itself since format 8; a token of another
type by its digest, digests.taken_hex: blake2b over the encoding, timed beside it), fill in its line's format (lines.py: one bytes `%` with what changes
from firing to firing; the very bytes msgspec gives for the record), seal the line into the hash
chain (chain.Chain: a blake2b over the last 16 lines once every 16 lines) and store it in the
tape's file through its shared mapping (tapefile.TapeFile: the line and its newline in one copy; no
system call but a page fault every 4 KiB and a new window every 256 KiB). A store into a shared mapping
survives a SIGKILL as a write(2) does, so every completed firing is still on the tape. Each part
is timed alone (best of a few runs), the write(2) a line that format 6 made beside the store, and
all of them together through the real writer (writer.TapeWriter.simple, as the engine calls it),
so that the bench's "recording costs" figure can be held against it. In a run, each part costs
two to three times what it costs here (docs/tape-format.md, *What the tape costs*: the engine's
code and data take the caches between two firings), and the engine adds its share (the firing's
shape, its state, the step's count and round).

    python bench/floor.py [FIRINGS]    # first word of the output: microseconds per firing
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from flowtape.chain import Chain
from flowtape.digests import taken_hex, taken_mark
from flowtape.lines import line_format
from flowtape.tapefile import TapeFile
from flowtape.values import encode
from flowtape.writer import TapeWriter
from msgspec import Raw

REPS = 3
LINE = line_format("s1", 1, 2)  # a chain actor's: one token taken from queue 1, one put into queue 2


def _best(run: Callable[[int], None], firings: int) -> float:
    """Microseconds per firing, best of REPS runs."""
    best = float("inf")
    for _ in range(REPS):
        t0 = time.perf_counter()
        run(firings)
        best = min(best, time.perf_counter() - t0)
    return best / firings * 1e6


def _line(i: int, token: Raw, named: bytes) -> bytes:
    """A chain firing's line as the engine fills it in (seq and round as the step's, no state),
    its newline included."""
    return LINE % (i, b"", i, named, token, 0, 1, b"", 1000 + i, 7, b"")


def pieces(firings: int, tmp: Path) -> dict[str, float]:
    """Each part of recording a firing, timed alone (microseconds per firing)."""
    token = Raw(encode(7))
    named = taken_mark(7, token)
    line = _line(firings, token, named)

    def tokens(n: int) -> None:
        for i in range(n):
            Raw(encode(i))

    def names(n: int) -> None:
        for _ in range(n):
            taken_mark(7, token)

    def digests(n: int) -> None:  # (a token that is no int, bool or None: not part of the chain's floor)
        for _ in range(n):
            taken_hex(7, token)

    def lines(n: int) -> None:
        for i in range(n):
            _line(i, token, named)

    def sealed(n: int) -> None:
        chain = Chain()
        body = line[:-1]
        for _ in range(n):
            chain.sealed_firing(body, False)

    def stores(n: int) -> None:
        file = TapeFile(tmp / f"stores-{time.monotonic_ns()}.jsonl")
        for _ in range(n):
            file.append(line)
        file.close()

    def writes(n: int) -> None:  # (format 6's way, for the comparison: not part of the floor)
        fd = os.open(tmp / f"writes-{time.monotonic_ns()}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for _ in range(n):
                os.write(fd, line)
        finally:
            os.close(fd)

    return {"encode the token": _best(tokens, firings), "name the token taken": _best(names, firings),
            "(another type: digest it)": _best(digests, firings),
            "fill in the line's format": _best(lines, firings), "seal it into the chain": _best(sealed, firings),
            "store it through the mapping": _best(stores, firings), "(format 6: write(2) it)": _best(writes, firings)}


def recorder_floor(firings: int, tmp: Path) -> float:
    """Microseconds per firing to record `firings` firings of a one-int chain, all parts together."""

    def record_all(n: int) -> None:
        writer = TapeWriter(tmp / f"floor-{time.monotonic_ns()}.jsonl")
        for i in range(1, n + 1):
            token = Raw(encode(i))
            writer.simple(_line(i, token, taken_mark(i, token)), i, 0)
        writer.close()

    return _best(record_all, firings)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory(prefix="flowtape-floor-") as tmp:
        total = recorder_floor(n, Path(tmp))
        parts = pieces(n, Path(tmp))
    print(f"{total:.2f} us per firing ({', '.join(f'{k} {v:.2f}' for k, v in parts.items())})")
