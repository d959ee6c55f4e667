"""The least a tape can cost per firing in this interpreter: a chain firing's two records (one
firing, one step), built from Flowtape's own structs, encoded, sealed into its own hash chain and
written with one os.write each time, with none of the engine around them. No recorder written in
Python can do less per firing, so this is the bound under the 'tape cost' figures."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import msgspec
from flowtape.tape import Chain, Firing, Step
from flowtape.values import digest
from msgspec import Raw


def recorder_floor(firings: int = 100_000, reps: int = 3) -> float:
    """Microseconds per firing (best of `reps`) to record `firings` firings of a one-int chain."""
    encode = msgspec.json.Encoder().encode
    best = float("inf")
    with tempfile.TemporaryDirectory(prefix="flowtape-floor-") as tmp:
        for rep in range(reps):
            fd = os.open(Path(tmp) / f"tape-{rep}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            chain = Chain()
            t0 = time.perf_counter()
            for i in range(firings):
                token = Raw(encode(i))
                firing = Firing(actor="s1", fireCount=i, consumed=[(1, 1, digest([token]))], produced=[(2, [token])])
                step = Step(step=i, queues=[(1, 0), (2, 1)], at=i, dur=1)
                os.write(fd, chain.seal_line(encode(firing)) + chain.seal_line(encode(step)))
            best = min(best, time.perf_counter() - t0)
            os.close(fd)
    return best / firings * 1e6


if __name__ == "__main__":
    print(f"{recorder_floor(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000):.2f} us per firing")
