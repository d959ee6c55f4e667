"""Firings of every shape a line's format takes (lines.py), and of the shapes it leaves to the
record's Struct: a fan-out, an actor putting on two ports, a join, a take of two tokens, a put
of two tokens on one port, objects as tokens, a stateful sink, the same inside a loop, and an
actor that puts back into the queue it takes from (a counter feeding itself)."""

from __future__ import annotations

from flowtape import Port, action, connect, loop, task, workflow


@task
class Numbers:
    n: int = 6
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={}, produces={"Out": 1})
    def emit(self) -> int | None:
        if self.i >= self.n:
            return None
        self.i += 1
        return self.i


@task
class Split:
    class Ports:
        In = Port[int](direction="in")
        Low = Port[int](direction="out")
        High = Port[dict](direction="out")

    def action(self, x: int) -> dict:
        return {"Low": x % 3, "High": {"x": x, "big": x > 3}}


@task
class Join:
    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        C = Port[dict](direction="in")
        Out = Port[list](direction="out")

    def action(self, a: int, b: int, c: dict) -> list:
        return [a, b, c["x"]]


@task
class Pairs:
    class Ports:
        In = Port[list](direction="in")
        Out = Port[int](direction="out")

    @action(consumes={"In": 2}, produces={"Out": 2})
    def pair(self, first: list, second: list) -> list:
        return [sum(first), sum(second)]


@task
class Keep:
    seen: list | None = None

    class Ports:
        In = Port[int](direction="in")

    def action(self, x: int) -> None:
        self.seen = [*(self.seen or []), x]


@task
class Countdown:
    class Ports:
        In = Port[int](direction="in")
        Back = Port[int](direction="in")
        Out = Port[int](direction="out")
        Again = Port[int](direction="out")

    @action(consumes={"In": 1}, produces={"Again": 1})
    def start(self, x: int) -> int:
        return x

    @action(consumes={"Back": 1}, produces={"Out": 1, "Again": 1})
    def again(self, x: int) -> dict:
        return {"Out": x, "Again": x - 1 if x > 0 else None}


@workflow
def main():
    numbers = Numbers()
    split = Split()
    join = Join()
    pairs = Pairs()
    keep = Keep()
    connect(numbers.Out, split.In)
    connect(numbers.Out, join.A)  # (a fan-out: one port, two queues)
    connect(split.Low, join.B)
    connect(split.High, join.C)
    connect(join.Out, pairs.In)
    connect(pairs.Out, keep.In)
    connect(pairs.Out, "Out")


@workflow
def looped():
    lp = loop([[1, 2], [3, 4], [5, 6]])
    with lp:
        pairs = Pairs()
        keep = Keep()
        connect(lp.item, pairs.In)
        connect(pairs.Out, keep.In)
        connect(pairs.Out, "Out")


@workflow(inputs={"In": int}, outputs={"Out": int})
def countdown():
    c = Countdown()
    connect("In", c.In)
    connect(c.Again, c.Back)  # (`again` takes from the queue it puts into: the record's Struct writes it)
    connect(c.Out, "Out")
