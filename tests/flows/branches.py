"""Fan-out to two independent branches, and a loop over a nested workflow with an agent.

LEFT_SKEW changes what `left` answers (only the left branch); VERDICT is what the mock agent
answers. CALLS counts live action calls per actor."""

from __future__ import annotations

import threading

from flowtape import Port, action, agent, connect, if_, loop, task, workflow

CALLS: dict[str, int] = {}
LEFT_SKEW = 0
VERDICT = "ok"
_count_lock = threading.Lock()


def bump(name: str) -> None:
    with _count_lock:
        CALLS[name] = CALLS.get(name, 0) + 1


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
        bump("numbers")
        return self.i


@task
class Left:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        bump("left")
        return x * 10 + LEFT_SKEW


@task
class Right:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        bump("right")
        return x * 100


@task
class Keep:
    name: str
    kept: list = []

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        bump(self.name)
        self.kept = [*self.kept, x]
        return sum(self.kept)


@task
class Moody:
    """Like Left, but holds a lock in its state: never replayable, so a resume runs it live."""

    _mutex: object = None

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        if self._mutex is None:
            self._mutex = threading.Lock()
        bump("moody")
        return x * 10 + LEFT_SKEW


@workflow
def diverge():
    """Fan-out to two branches; `moody` runs live on every resume, so when LEFT_SKEW changes
    its answers, `left_sink` (which replays) sees different inputs. `right` and `right_sink`
    are independent of it and replay on."""
    numbers = Numbers(n=4)
    moody = Moody()
    left_sink = Keep(name="left_sink")
    right = Right()
    right_sink = Keep(name="right_sink")
    connect(numbers.Out, moody.In)
    connect(numbers.Out, right.In)
    connect(moody.Out, left_sink.In)
    connect(right.Out, right_sink.In)
    connect(left_sink.Out, "LeftOut")
    connect(right_sink.Out, "RightOut")


@workflow
def fanout():
    numbers = Numbers(n=4)
    left = Left()
    right = Right()
    left_sink = Keep(name="left_sink")
    right_sink = Keep(name="right_sink")
    connect(numbers.Out, left.In)
    connect(numbers.Out, right.In)
    connect(left.Out, left_sink.In)
    connect(right.Out, right_sink.In)
    connect(left_sink.Out, "LeftOut")
    connect(right_sink.Out, "RightOut")


@task
class Inc:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        bump("inc")
        return x + 1


@task
class Square:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        bump("square")
        return x * x


@workflow(inputs={"In": int}, outputs={"Out": int})
def child():
    inc = Inc()
    square = Square()
    connect("In", inc.In)
    connect(inc.Out, square.In)
    connect(square.Out, "Out")


@agent(prompt="Is this number fine?", transport="mock", mock_outputs={"Verdict": lambda inputs: VERDICT})
class Reviewer:
    class Ports:
        In = Port[int](direction="in")
        Verdict = Port[str](direction="out")


@task
class Count:
    seen: int = 0

    class Ports:
        In = Port[object](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        bump("count")
        self.seen += 1
        return self.seen


@workflow
def looped():
    lp = loop([1, 2, 3])
    with lp:
        sub = child()
        reviewer = Reviewer()
        connect(lp.item, sub.In)
        connect(sub.Out, reviewer.In)
        connect(sub.Out, "Squares")
        connect(reviewer.Verdict, "Verdicts")
    done = Count()
    connect(lp.out, done.In)
    connect(done.Out, "Done")


@workflow
def nested_top():
    """A nested workflow fired at the top level: one step per firing of `sub`."""
    numbers = Numbers(n=3)
    sub = child()
    connect(numbers.Out, sub.In)
    connect(sub.Out, "Out")


@task
class Parity:
    class Ports:
        In = Port[int](direction="in")
        Cond = Port[bool](direction="out")
        Even = Port[int](direction="out")
        Odd = Port[int](direction="out")

    @action(produces={"Cond": 1, "Even": 1, "Odd": 1})
    def check(self, x):
        bump("parity")
        even = x % 2 == 0
        return {"Cond": even, "Even" if even else "Odd": x}


@task
class Tag:
    label: str

    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        bump(self.label)
        return f"{x} is {self.label}"


@workflow
def gated():
    """An if at the top level: one step per firing of the if, which runs one branch."""
    numbers = Numbers(n=4)
    parity = Parity()
    c = if_()
    with c.then:
        even = Tag(label="even")
    with c.else_:
        odd = Tag(label="odd")
    connect(numbers.Out, parity.In)
    connect(parity.Cond, c.cond)
    connect(parity.Even, even.In)
    connect(parity.Odd, odd.In)
    connect(even.Out, "Tags")
    connect(odd.Out, "Tags")


BROKEN = False


@task
class Fragile:
    """Fails on the item 2 while BROKEN is set."""

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        if BROKEN and x == 2:
            raise RuntimeError("fragile broke on 2")
        bump("fragile")
        return x * 5


@workflow
def looped_fragile():
    lp = loop([1, 2, 3])
    with lp:
        fragile = Fragile()
        acc = Keep(name="acc")
        connect(lp.item, fragile.In)
        connect(fragile.Out, acc.In)
        connect(acc.Out, "Out")
