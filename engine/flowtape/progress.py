"""Live progress on a terminal: firings, rate, current actor. Silent when output is not a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO = sys.stderr, every: float = 0.2) -> None:
        self.stream = stream
        self.every = every
        self.start = time.perf_counter()
        self.last = 0.0
        self.shown = False

    def __call__(self, step: int, firings: int, actor: str) -> None:
        now = time.perf_counter()
        if now - self.last < self.every or now - self.start < 0.5:
            return
        self.last = now
        rate = firings / max(now - self.start, 1e-9)
        self.stream.write(f"\r\x1b[K  step {step:,} · {firings:,} firings · {rate:,.0f}/s · {actor}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
