"""Actors whose state grows at every firing, for the tests of states written as edits.

`main`: numbers -> collect, which keeps every number it saw (a list that grows at its end, before
a counter that changes too). `two`: that, beside a collector of non-ASCII names in a dict, so
that with several workers their firings interleave on the tape. FT_N sets how many numbers."""

from __future__ import annotations

import os

from flowtape import Port, action, connect, task, workflow

CALLS: dict[str, int] = {}
N = int(os.environ.get("FT_N", "300"))


@task
class Numbers:
    n: int
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={}, produces={"Out": 1})
    def emit(self):
        if self.i >= self.n:
            return None
        self.i += 1
        CALLS["numbers"] = CALLS.get("numbers", 0) + 1
        return self.i


@task
class Collect:
    seen: list = []
    count: int = 0

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        self.seen.append(x)
        self.count += 1
        CALLS["collect"] = CALLS.get("collect", 0) + 1
        return self.count


@task
class Names:
    names: dict = {}

    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        name = f"é{x}ü" * (1 + x % 3)
        self.names[name] = {"x": x, "ß": [x] * (x % 4)}
        CALLS["names"] = CALLS.get("names", 0) + 1
        return name


@workflow
def main():
    numbers = Numbers(n=N)
    collect = Collect()
    connect(numbers.Out, collect.In)
    connect(collect.Out, "Count")


@workflow
def two():
    numbers = Numbers(n=N)
    collect = Collect()
    more = Numbers(n=N)
    names = Names()
    connect(numbers.Out, collect.In)
    connect(more.Out, names.In)
    connect(collect.Out, "Count")
    connect(names.Out, "Names")
