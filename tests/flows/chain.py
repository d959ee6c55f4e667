"""A chain for the tape, replay and crash tests: source -> double -> add -> total -> Out.

Module-level knobs the tests flip: CALLS counts live action calls per actor, BROKEN makes
`add` raise on its 3rd firing, SKEW makes `double` answer differently. FT_N (items) and
FT_SLEEP (seconds per firing) come from the environment so child processes can be tuned."""

from __future__ import annotations

import os
import threading
import time

from flowtape import Port, action, connect, task, workflow

CALLS: dict[str, int] = {}
BROKEN = False
SKEW = 0
SLEEP = float(os.environ.get("FT_SLEEP", "0"))
_count_lock = threading.Lock()


def bump(name: str) -> None:
    with _count_lock:
        CALLS[name] = CALLS.get(name, 0) + 1


def nap() -> None:
    if SLEEP:
        time.sleep(SLEEP)


@task
class Source:
    n: int
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={}, produces={"Out": 1})
    def emit(self):
        if self.i >= self.n:
            return None
        nap()
        self.i += 1
        bump("source")
        return self.i


@task
class Double:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        nap()
        bump("double")
        return x * 2 + SKEW


@task
class Add:
    k: int
    seen: int = 0

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        nap()
        if BROKEN and self.seen == 2:
            raise RuntimeError("power cut")
        self.seen += 1
        bump("add")
        return x + self.k


@task
class Total:
    total: int = 0

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        nap()
        self.total += x
        bump("total")
        return self.total


@task
class Locky:
    """Holds a threading.Lock in its state: its firings cannot be replayed."""

    _guard: object = None
    n: int = 0

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        if self._guard is None:
            self._guard = threading.Lock()
        self.n += 1
        bump("locky")
        return x + self.n


@workflow
def main():
    source = Source(n=int(os.environ.get("FT_N", "5")))
    double = Double()
    add = Add(k=3)
    total = Total()
    connect(source.Out, double.In)
    connect(double.Out, add.In)
    connect(add.Out, total.In)
    connect(total.Out, "Out")


@workflow
def locked():
    source = Source(n=4)
    locky = Locky()
    double = Double()
    connect(source.Out, locky.In)
    connect(locky.Out, double.In)
    connect(double.Out, "Out")


@workflow
def seeded():
    """A flow with an input port: `In` feeds the chain once."""
    double = Double()
    add = Add(k=1)
    connect("In", double.In)
    connect(double.Out, add.In)
    connect(add.Out, "Out")


@workflow
def echoed():
    """An input wired straight to an output beside the chain: nothing fires to put it there."""
    source = Source(n=int(os.environ.get("FT_N", "5")))
    double = Double()
    connect("Tag", "Echo")
    connect(source.Out, double.In)
    connect(double.Out, "Out")
