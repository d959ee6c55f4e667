"""The least tape format 7 costs per firing in this interpreter: what recording a chain firing must
do whatever the engine around it, done by Flowtape's own code with no engine.

Per firing that is: encode the token it put (values.encode), digest the token it took
(digests.digest_taken: blake2b over the encoding, the format's rule, without the canonical check a
plain scalar cannot need), make its one line (a tape.SimpleFiring built and encoded by msgspec;
formatting the same bytes with a bytes template was measured as no cheaper), seal the line into
the hash chain (chain.Chain: a blake2b over the last 16 lines once every 16 lines) and store it in
the tape's file through its shared mapping (tapefile.TapeFile: the line, then its newline; no
system call but a page fault every 4 KiB and a new window every 256 KiB). A store into a shared
mapping survives a SIGKILL as a write(2) does, so every completed firing is still on the tape.
Each part is timed alone (best of a few runs), the write(2) a line that format 6 made beside the
store, and all of them together through the real writer (writer.TapeWriter.fired), so that the
bench's "recording costs" figure can be held against it: what the engine spends beyond this floor
is the engine's (its state check, the step's sizes, the calls between), not the format's.

    python bench/floor.py [FIRINGS]    # first word of the output: microseconds per firing
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
from flowtape.chain import Chain
from flowtape.digests import digest_taken
from flowtape.tape import SimpleFiring
from flowtape.tapefile import TapeFile
from flowtape.values import encode
from flowtape.writer import TapeWriter
from msgspec import Raw

REPS = 3
_encode = msgspec.json.Encoder().encode


def _best(run: Callable[[int], None], firings: int) -> float:
    """Microseconds per firing, best of REPS runs."""
    best = float("inf")
    for _ in range(REPS):
        t0 = time.perf_counter()
        run(firings)
        best = min(best, time.perf_counter() - t0)
    return best / firings * 1e6


def _record(i: int, token: Raw, digest: str) -> SimpleFiring:
    """A chain firing's record as the engine hands it to the writer (seq and round as the step's)."""
    return SimpleFiring(step=i, seq=i, actor="s1", fireCount=i, consumed=[(1, 1, digest)], produced=[(2, [token])],
                        sizes=[0, 1], round=0, at=1000 + i, dur=7)


def pieces(firings: int, tmp: Path) -> dict[str, float]:
    """Each part of recording a firing, timed alone (microseconds per firing)."""
    token = Raw(encode(7))
    digest = digest_taken(7, token)
    line = _encode(_record(firings, token, digest))

    def tokens(n: int) -> None:
        for i in range(n):
            Raw(encode(i))

    def digests(n: int) -> None:
        for _ in range(n):
            digest_taken(7, token)

    def lines(n: int) -> None:
        for i in range(n):
            _encode(_record(i, token, digest))

    def sealed(n: int) -> None:
        chain = Chain()
        for _ in range(n):
            chain.sealed_firing(line, False)

    def stores(n: int) -> None:
        file = TapeFile(tmp / f"stores-{time.monotonic_ns()}.jsonl")
        for _ in range(n):
            file.line(line)
        file.close()

    def writes(n: int) -> None:  # (format 6's way, for the comparison: not part of the floor)
        fd = os.open(tmp / f"writes-{time.monotonic_ns()}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for _ in range(n):
                os.write(fd, line + b"\n")
        finally:
            os.close(fd)

    return {"encode the token": _best(tokens, firings), "digest the token taken": _best(digests, firings),
            "build and encode the line": _best(lines, firings), "seal it into the chain": _best(sealed, firings),
            "store it through the mapping": _best(stores, firings), "(format 6: write(2) it)": _best(writes, firings)}


def recorder_floor(firings: int, tmp: Path) -> float:
    """Microseconds per firing to record `firings` firings of a one-int chain, all parts together."""

    def record_all(n: int) -> None:
        writer = TapeWriter(tmp / f"floor-{time.monotonic_ns()}.jsonl")
        for i in range(1, n + 1):
            token = Raw(encode(i))
            writer.fired(_record(i, token, digest_taken(i, token)))
        writer.close()

    return _best(record_all, firings)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory(prefix="flowtape-floor-") as tmp:
        total = recorder_floor(n, Path(tmp))
        parts = pieces(n, Path(tmp))
    print(f"{total:.2f} us per firing ({', '.join(f'{k} {v:.2f}' for k, v in parts.items())})")
