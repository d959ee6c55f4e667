"""The least the tape's design costs per firing in this interpreter: what recording a chain firing
must do however the engine around it is written, done by Flowtape's own code with no engine.

Per firing that is: encode the token it put (values.encode), digest the token it took
(values.digest_one, the same rule as always), build its one line's record (tape.SimpleFiring: the
firing and its step), encode it, seal it into the hash chain and hand it to the OS with one
write(2) (writer.TapeWriter.write). The write stays per firing on purpose: it is what makes a
SIGKILL lose no completed firing. The figures below break the total into those parts (each timed
alone, best of a few runs), so the bench's "recording costs" figure can be held against it: what
the engine spends beyond this floor is the engine's, not the format's.

    python bench/floor.py [FIRINGS]    # first word of the output: microseconds per firing
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from flowtape.tape import SimpleFiring
from flowtape.values import digest_one, encode
from flowtape.writer import TapeWriter
from msgspec import Raw

REPS = 3


def _best(run: Callable[[int], None], firings: int) -> float:
    """Microseconds per firing, best of REPS runs."""
    best = float("inf")
    for _ in range(REPS):
        t0 = time.perf_counter()
        run(firings)
        best = min(best, time.perf_counter() - t0)
    return best / firings * 1e6


def _record(i: int, token: Raw, digest: str) -> SimpleFiring:
    return SimpleFiring(step=i, seq=i, actor="s1", fireCount=i, consumed=[(1, 1, digest)], produced=[(2, [token])],
                        sizes=[0, 1], round=i, at=i, dur=1)


def pieces(firings: int, tmp: Path) -> dict[str, float]:
    """Each part of recording a firing, timed alone (microseconds per firing)."""
    token = Raw(encode(7))
    digest = digest_one(token)

    def tokens(n: int) -> None:
        for i in range(n):
            Raw(encode(i))

    def digests(n: int) -> None:
        for _ in range(n):
            digest_one(token)

    def records(n: int) -> None:
        for i in range(n):
            _record(i, token, digest)

    def written(n: int) -> None:
        writer = TapeWriter(tmp / f"pieces-{time.monotonic_ns()}.jsonl")
        for i in range(n):
            writer.write(_record(i, token, digest))
        writer.close()

    parts = {"encode the token": _best(tokens, firings), "digest the token taken": _best(digests, firings),
             "build the record": _best(records, firings)}
    parts["encode, seal and write the line"] = _best(written, firings) - parts["build the record"]
    return parts


def recorder_floor(firings: int, tmp: Path) -> float:
    """Microseconds per firing to record `firings` firings of a one-int chain, all parts together."""

    def record_all(n: int) -> None:
        writer = TapeWriter(tmp / f"floor-{time.monotonic_ns()}.jsonl")
        for i in range(n):
            token = Raw(encode(i))
            writer.write(_record(i, token, digest_one(token)))
        writer.close()

    return _best(record_all, firings)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory(prefix="flowtape-floor-") as tmp:
        total = recorder_floor(n, Path(tmp))
        parts = pieces(n, Path(tmp))
    print(f"{total:.2f} us per firing ({', '.join(f'{k} {v:.2f}' for k, v in parts.items())})")
