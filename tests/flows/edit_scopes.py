"""Stateful actors and waiting tokens inside every kind of scope, for forks that edit them: a
running sum (`Acc.total`) and a pairer that takes two tokens at a time (so one waits between
the scope's firings) in a loop body, an if branch, a nested workflow, and a nested workflow in
a loop body. `ticks` goes over an iterator: where it stands cannot be told from a tape; in
`under_way`, with several workers, a nested workflow's firing is still running beside steps."""

from __future__ import annotations

import threading

from flowtape import Port, action, connect, if_, loop, task, workflow


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
        return self.i


@task
class Acc:
    total: int = 0

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        self.total += x
        return self.total


@task
class Pair:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[list](direction="out")

    @action(consumes={"In": 2}, produces={"Out": 1})
    def pair(self, a, b):
        return [a, b]


@task
class Even:
    class Ports:
        In = Port[int](direction="in")
        Cond = Port[bool](direction="out")
        Even = Port[int](direction="out")
        Odd = Port[int](direction="out")

    @action(produces={"Cond": 1, "Even": 1, "Odd": 1})
    def check(self, x):
        even = x % 2 == 0
        return {"Cond": even, "Even" if even else "Odd": x}


@task
class Drop:
    class Ports:
        In = Port[int](direction="in")

    @action(produces={})
    def drop(self, x):
        return None


@workflow
def in_loop():
    """A loop over 1..4 whose body is acc -> pair."""
    lp = loop([1, 2, 3, 4])
    with lp:
        acc = Acc()
        pair = Pair()
        connect(lp.item, acc.In)
        connect(acc.Out, pair.In)
        connect(pair.Out, "Out")


@workflow
def in_branch():
    """An if per number: even ones go through acc -> pair, odd ones are dropped."""
    numbers = Numbers(n=8)
    even = Even()
    c = if_()
    with c.then:
        acc = Acc()
        pair = Pair()
    with c.else_:
        drop = Drop()
    connect(numbers.Out, even.In)
    connect(even.Cond, c.cond)
    connect(even.Even, acc.In)
    connect(even.Odd, drop.In)
    connect(acc.Out, pair.In)
    connect(pair.Out, "Out")


@workflow(inputs={"In": int}, outputs={"Out": list})
def summing():
    acc = Acc()
    pair = Pair()
    connect("In", acc.In)
    connect(acc.Out, pair.In)
    connect(pair.Out, "Out")


@workflow
def in_nested():
    """A nested workflow (acc -> pair) fired once per number."""
    numbers = Numbers(n=4)
    sub = summing()
    connect(numbers.Out, sub.In)
    connect(sub.Out, "Out")


@workflow
def nested_in_loop():
    """A loop over 1..4 whose body is the nested workflow."""
    lp = loop([1, 2, 3, 4])
    with lp:
        sub = summing()
        connect(lp.item, sub.In)
        connect(sub.Out, "Out")


@task
class Lists:
    i: int = 0

    class Ports:
        Out = Port[list](direction="out")

    @action(consumes={}, produces={"Out": 1})
    def emit(self):
        if self.i >= 2:
            return None
        self.i += 1
        return [[1, 2], [3, 4, 5]][self.i - 1]


@workflow
def over_tokens():
    """A loop over each list a task emits (its `iter` port), twice; and one over a set."""
    lists = Lists()
    lp = loop()
    connect(lists.Out, lp.iter)
    with lp:
        acc = Acc()
        connect(lp.item, acc.In)
        connect(acc.Out, "Out")
    over_set = loop({"b", "a", "c"})
    with over_set:
        pair = Pair()
        connect(over_set.item, pair.In)
        connect(pair.Out, "Pairs")


@workflow
def ticks():
    lp = loop(iter([1, 2, 3, 4]))
    with lp:
        acc = Acc()
        connect(lp.item, acc.In)
        connect(acc.Out, "Out")


STARTED, RELEASED = threading.Event(), threading.Event()


@task
class Held:
    """Inside a nested workflow: starts, then waits till `Beside` has fired twice."""

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        STARTED.set()
        RELEASED.wait(30)
        return x


@task
class Beside:
    """At the top level: fires while the nested workflow's firing is under way."""

    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={}, produces={"Out": 1})
    def emit(self):
        if self.i >= 3:
            return None
        STARTED.wait(30)
        self.i += 1
        if self.i == 2:
            RELEASED.set()
        return self.i


@workflow(inputs={"In": int}, outputs={"Out": int})
def holding():
    held = Held()
    connect("In", held.In)
    connect(held.Out, "Out")


@workflow
def under_way():
    """With several workers, `sub` is under way beside `beside`'s first steps."""
    STARTED.clear()  # (each run of it, in whatever process has the module)
    RELEASED.clear()
    numbers = Numbers(n=1)
    sub = holding()
    beside = Beside()
    connect(numbers.Out, sub.In)
    connect(sub.Out, "Out")
    connect(beside.Out, "Beside")
