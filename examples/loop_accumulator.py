"""A loop driving an accumulator: `loop(items)` puts one token per item on `lp.item` and runs its
body to quiescence each time; once the items are done it fires `lp.out`, which releases the total.

    flowtape run examples/loop_accumulator.py   ->  Total: [30]   Seen: [[2, 4, 6, 8, 10]]
"""

from flowtape import Port, action, connect, loop, task, workflow


@task
class Double:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return 2 * x


@task
class Accumulate:
    """Adds every value it gets; a token on Done emits the total and what it saw."""

    total: int = 0
    seen: list = []

    class Ports:
        In = Port[int](direction="in")
        Done = Port[object](direction="in")
        Total = Port[int](direction="out")
        Seen = Port[list](direction="out")

    @action(consumes={"In": 1}, produces={})
    def add(self, x):
        self.total += x
        self.seen.append(x)

    @action(consumes={"Done": 1}, produces={"Total": 1, "Seen": 1})
    def finish(self, _done):
        return {"Total": self.total, "Seen": list(self.seen)}


@workflow
def main():
    lp = loop([1, 2, 3, 4, 5])
    with lp:
        double = Double()
    acc = Accumulate()
    connect(lp.item, double.In)
    connect(double.Out, acc.In)
    connect(lp.out, acc.Done)
    connect(acc.Total, "Total")
    connect(acc.Seen, "Seen")
