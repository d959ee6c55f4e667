"""Bench flow: a source of N items feeding a collector that keeps every item it saw (2 x N firings).

The collector's state grows at every firing: how a tape records a state that changes a little
each time decides whether it grows with the firings or with their square.
Written once for both frameworks (see chain.py)."""

import os

from FRAMEWORK import Port, action, connect, guard, task, workflow

N = int(os.environ.get("BENCH_N", "2000"))


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
class Collect:
    seen: list = []
    total: int = 0

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x: int) -> int:
        self.seen.append(x)
        self.total += x
        return self.total


@workflow
def accumulate():
    src = Source(n=N)
    collect = Collect()
    connect(src.Out, collect.In)
    connect(collect.Out, "Out")
