"""Bench flow: `lp = loop(range(N))` with a body of 3 chained actors (3 x N actor firings,
plus the loop's own N + 1 firings).

Written once for both frameworks: bench/run.py rewrites the import line below."""

import os
import time

from FRAMEWORK import Port, connect, loop, task, workflow

N = int(os.environ.get("BENCH_N", "2000"))
SLEEP = float(os.environ.get("BENCH_SLEEP", "0"))


@task
class Step:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x: int) -> int:
        if SLEEP:
            time.sleep(SLEEP)
        return x + 1


@task
class Sink:
    total: int = 0

    class Ports:
        In = Port[int](direction="in")

    def action(self, x: int) -> None:
        self.total += x


@workflow
def looped():
    lp = loop(range(N))
    with lp:
        a = Step()
        b = Step()
        c = Sink()
        connect(lp.item, a.In)
        connect(a.Out, b.In)
        connect(b.Out, c.In)
