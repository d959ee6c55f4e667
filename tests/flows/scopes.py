"""Firings in every kind of scope, for resumes that must not run a recorded firing again.

Every action appends a line to the file FT_LOG names once it has done its work: the side effect
a resume must not repeat, counted apart from the tape. `Double` raises on the value FT_FAIL
names, and on the value FT_HANG names it says so (FT_LOG + ".hang") and waits to be killed (or
for FT_HANG_FOR seconds, then goes on). With FT_FAIL_AT=k, the k-th action called in this
process (CALLED counts them) raises instead, whichever actor it is."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from flowtape import Port, action, connect, if_, loop, task, workflow

_lock = threading.Lock()


CALLED = [0]


def note(what: str) -> None:
    with _lock:
        CALLED[0] += 1
        if os.environ.get("FT_FAIL_AT") == str(CALLED[0]):
            raise RuntimeError(f"action call {CALLED[0]} broke")
        with open(os.environ["FT_LOG"], "a", encoding="utf-8") as fh:
            fh.write(what + "\n")


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
        note(f"numbers {self.i}")
        return self.i


@task
class Pass:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        note(f"pass {x}")
        return x


@task
class Odd:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        note(f"odd {x}")
        return x


@task
class Double:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        time.sleep(0.002)  # never a quick action, so one that hangs lets the firings beside it commit (scheduler.QUICK_ACTION)
        if os.environ.get("FT_FAIL") == str(x):
            raise RuntimeError(f"double broke on {x}")
        if os.environ.get("FT_HANG") == str(x):
            Path(os.environ["FT_LOG"] + ".hang").write_text(str(x), encoding="utf-8")
            time.sleep(float(os.environ.get("FT_HANG_FOR", "600")))
        note(f"double {x}")
        return 2 * x


@task
class Gate:
    """The condition of an if (is it even?) and the value, on the port of the branch it picks."""

    class Ports:
        In = Port[int](direction="in")
        Cond = Port[bool](direction="out")
        Even = Port[int](direction="out")
        Odd = Port[int](direction="out")

    @action(produces={"Cond": 1, "Even": 1, "Odd": 1})
    def check(self, x):
        note(f"gate {x}")
        even = x % 2 == 0
        return {"Cond": even, "Even" if even else "Odd": x}


@task
class Spread:
    """x -> [10x+1, 10x+2]: what an inner loop goes over."""

    class Ports:
        In = Port[int](direction="in")
        Out = Port[list](direction="out")

    def action(self, x):
        note(f"spread {x}")
        return [10 * x + 1, 10 * x + 2]


@workflow
def loop_body():
    """A loop over 1, 2, 3 whose body is Pass -> Double."""
    lp = loop([1, 2, 3])
    with lp:
        p = Pass()
        d = Double()
        connect(lp.item, p.In)
        connect(p.Out, d.In)
        connect(d.Out, "Out")


@workflow
def if_branch():
    """An if per number: the even branch is Pass -> Double, the odd one Odd."""
    numbers = Numbers(n=4)
    gate = Gate()
    c = if_()
    with c.then:
        p = Pass()
        d = Double()
    with c.else_:
        odd = Odd()
    connect(numbers.Out, gate.In)
    connect(gate.Cond, c.cond)
    connect(gate.Even, p.In)
    connect(p.Out, d.In)
    connect(gate.Odd, odd.In)
    connect(d.Out, "Out")
    connect(odd.Out, "Out")


@workflow(inputs={"In": int}, outputs={"Out": int})
def twice():
    p = Pass()
    d = Double()
    connect("In", p.In)
    connect(p.Out, d.In)
    connect(d.Out, "Out")


@workflow
def nested():
    """A nested workflow (Pass -> Double) fired once per number at the top level."""
    numbers = Numbers(n=3)
    sub = twice()
    connect(numbers.Out, sub.In)
    connect(sub.Out, "Out")


@workflow(inputs={"In": int}, outputs={"Out": int})
def spread_gated():
    """A loop over [10x+1, 10x+2] whose body picks a branch: even -> Double, odd -> Odd."""
    spread = Spread()
    lp = loop()
    connect("In", spread.In)
    connect(spread.Out, lp.iter)
    with lp:
        p = Pass()
        gate = Gate()
        c = if_()
        with c.then:
            d = Double()
        with c.else_:
            odd = Odd()
        connect(lp.item, p.In)
        connect(p.Out, gate.In)
        connect(gate.Cond, c.cond)
        connect(gate.Even, d.In)
        connect(gate.Odd, odd.In)
        connect(d.Out, "Out")
        connect(odd.Out, "Out")


@workflow
def deep():
    """A loop over 1, 2 whose body is a nested workflow holding a loop whose body holds an if."""
    lp = loop([1, 2])
    with lp:
        sub = spread_gated()
        connect(lp.item, sub.In)
        connect(sub.Out, "Out")
