"""A nested workflow used twice: `bump` (double, then add one) is a workflow with declared ports;
calling it inside another builder makes an actor. Its two instances are `a` and `b`, so their
inner actors have distinct paths: a/d, a/inc, b/d, b/inc.

    flowtape run examples/nested.py     ->  Out: [7, 11, 15]      (x -> 2x+1 -> 2(2x+1)+1)
"""

from flowtape import Port, connect, task, workflow


@task
class Numbers:
    values: list
    _i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    def action(self):
        if self._i < len(self.values):
            self._i += 1
            return self.values[self._i - 1]
        return None


@task
class Double:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return 2 * x


@task
class AddOne:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x + 1


@workflow(inputs={"In": int}, outputs={"Out": int})
def bump():
    d = Double()
    inc = AddOne()
    connect("In", d.In)
    connect(d.Out, inc.In)
    connect(inc.Out, "Out")


@workflow
def main():
    numbers = Numbers(values=[1, 2, 3])
    a = bump()
    b = bump()
    connect(numbers.Out, a.In)
    connect(a.Out, b.In)
    connect(b.Out, "Out")
