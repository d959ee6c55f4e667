"""Bench flow: a source of N items feeding a chain of 5 actors (6 x N firings).

Written once for both frameworks: bench/run.py rewrites the import line below to
`from wfpy import ...` or `from flowtape import ...` before running it."""

import os
import time

from FRAMEWORK import Port, action, connect, guard, task, workflow

N = int(os.environ.get("BENCH_N", "2000"))
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
        if SLEEP:
            time.sleep(SLEEP)
        return self.i


@task
class Step:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x: int) -> int:
        if SLEEP:
            time.sleep(SLEEP)
        return x + 1


@workflow
def chain():
    src = Source(n=N)
    s1 = Step()
    s2 = Step()
    s3 = Step()
    s4 = Step()
    s5 = Step()
    connect(src.Out, s1.In)
    connect(s1.Out, s2.In)
    connect(s2.Out, s3.In)
    connect(s3.Out, s4.In)
    connect(s4.Out, s5.In)
    connect(s5.Out, "Out")
