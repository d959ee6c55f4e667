"""Guard routing: a router with three guarded actions. Guards peek at the waiting token before
anything is taken; the first action (in declaration order) whose guard holds fires.

    flowtape run examples/guards.py
    ->  Small: [1, 2]   Even: [10, 42]   Odd: [7, 99]
"""

from flowtape import Port, action, connect, guard, task, workflow


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
class Router:
    class Ports:
        In = Port[int](direction="in")
        Small = Port[int](direction="out")
        Even = Port[int](direction="out")
        Odd = Port[int](direction="out")

    @action(produces={"Small": 1})
    @guard(lambda self, x: x < 3)
    def small(self, x):
        return x

    @action(produces={"Even": 1})
    @guard(lambda self, x: x % 2 == 0)
    def even(self, x):
        return x

    @action(produces={"Odd": 1})
    def odd(self, x):
        return x


@workflow
def main():
    numbers = Numbers(values=[1, 10, 7, 2, 42, 99])
    router = Router()
    connect(numbers.Out, router.In)
    connect(router.Small, "Small")
    connect(router.Even, "Even")
    connect(router.Odd, "Odd")
