"""Live progress on a terminal: a run's firings, rate and current actor, or how far a check of a
long tape has got. Shown once the work has taken half a second; nothing when stderr is not a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class _Line:
    """One line of stderr rewritten in place, at most every `every` seconds, and wiped at the end."""

    def __init__(self, stream: TextIO | None = None, every: float = 0.2) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.start = time.perf_counter()
        self.last = 0.0
        self.shown = False

    def _due(self) -> float | None:
        now = time.perf_counter()
        if now - self.last < self.every or now - self.start < 0.5:
            return None
        self.last = now
        return now

    def _show(self, text: str) -> None:
        self.stream.write(f"\r\x1b[K  {text}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.shown = False
            self.stream.write("\r\x1b[K")
            self.stream.flush()


class Progress(_Line):
    """A run's progress (an engine's on_step)."""

    def __call__(self, step: int, firings: int, actor: str) -> None:
        now = self._due()
        if now is not None:
            rate = firings / max(now - self.start, 1e-9)
            self._show(f"step {step:,} · {firings:,} firings · {rate:,.0f}/s · {actor}")


class Checking(_Line):
    """How far a tape's check has got (verify's `progress`)."""

    def __call__(self, done: int, total: int) -> None:
        if self._due() is not None:
            self._show(f"checking the tape: {done * 100 // max(total, 1)}% ({done:,} of {total:,} records)")
