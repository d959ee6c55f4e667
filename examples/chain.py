"""A chain: a source emits the numbers 1..5, each is doubled, then incremented.

    flowtape run examples/chain.py      ->  Out: [3, 5, 7, 9, 11]
"""

from flowtape import Port, action, connect, guard, task, workflow


@task
class Numbers:
    """A source: no input, one number per firing until it reaches `upto`."""

    upto: int
    _next: int = 1

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    @guard(lambda self: self._next <= self.upto)
    def emit(self):
        value = self._next
        self._next += 1
        return value


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


@workflow
def main():
    numbers = Numbers(upto=5)
    double = Double()
    add_one = AddOne()
    connect(numbers.Out, double.In)
    connect(double.Out, add_one.In)
    connect(add_one.Out, "Out")
