"""Fan-out and join: every number goes to three workers at once (each gets its own token),
and a join waits for one result from each before it fires.

    flowtape run examples/fanout_join.py
    ->  Out: [{'n': 1, 'square': 1, 'cube': 1, 'neg': -1}, ... {'n': 4, 'square': 16, ...}]
"""

from flowtape import Port, connect, task, workflow


@task
class Numbers:
    """Emits each of `values` once, then stops by returning None."""

    values: list
    _i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    def action(self):
        if self._i == len(self.values):
            return None
        self._i += 1
        return self.values[self._i - 1]


@task
class Square:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x * x


@task
class Cube:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x**3


@task
class Negate:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return -x


@task
class Join:
    """One token from each input port, bound in port order."""

    class Ports:
        N = Port[int](direction="in")
        Square = Port[int](direction="in")
        Cube = Port[int](direction="in")
        Neg = Port[int](direction="in")
        Out = Port[dict](direction="out")

    def action(self, n, square, cube, neg):
        return {"n": n, "square": square, "cube": cube, "neg": neg}


@workflow
def main():
    numbers = Numbers(values=[1, 2, 3, 4])
    square, cube, negate = Square(), Cube(), Negate()
    join = Join()
    connect(numbers.Out, join.N)
    connect(numbers.Out, square.In)
    connect(numbers.Out, cube.In)
    connect(numbers.Out, negate.In)
    connect(square.Out, join.Square)
    connect(cube.Out, join.Cube)
    connect(negate.Out, join.Neg)
    connect(join.Out, "Out")
