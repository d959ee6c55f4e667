"""Bench flow: a source of N items fanned out to 8 parallel actors, then a join with 8 inputs
(10 x N firings: N source + 8 N workers + N join).

Written once for both frameworks: bench/run.py rewrites the import line below."""

import os
import time

from FRAMEWORK import Port, action, connect, guard, task, workflow

N = int(os.environ.get("BENCH_N", "1400"))
SLEEP = float(os.environ.get("BENCH_SLEEP", "0"))


@task
class Source:
    n: int
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={}, produces={"Out": 1})
    @guard(lambda self: self.i < self.n)
    def emit(self) -> int:
        self.i += 1
        return self.i


@task
class Work:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x: int) -> int:
        if SLEEP:
            time.sleep(SLEEP)
        return x * 2


@task
class Join:
    class Ports:
        In1 = Port[int](direction="in")
        In2 = Port[int](direction="in")
        In3 = Port[int](direction="in")
        In4 = Port[int](direction="in")
        In5 = Port[int](direction="in")
        In6 = Port[int](direction="in")
        In7 = Port[int](direction="in")
        In8 = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int) -> int:
        return a + b + c + d + e + f + g + h


@workflow
def fanout():
    src = Source(n=N)
    w1 = Work()
    w2 = Work()
    w3 = Work()
    w4 = Work()
    w5 = Work()
    w6 = Work()
    w7 = Work()
    w8 = Work()
    join = Join()
    connect(src.Out, w1.In)
    connect(src.Out, w2.In)
    connect(src.Out, w3.In)
    connect(src.Out, w4.In)
    connect(src.Out, w5.In)
    connect(src.Out, w6.In)
    connect(src.Out, w7.In)
    connect(src.Out, w8.In)
    connect(w1.Out, join.In1)
    connect(w2.Out, join.In2)
    connect(w3.Out, join.In3)
    connect(w4.Out, join.In4)
    connect(w5.Out, join.In5)
    connect(w6.Out, join.In6)
    connect(w7.Out, join.In7)
    connect(w8.Out, join.In8)
    connect(join.Out, "Out")
