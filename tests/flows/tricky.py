"""Values that look like tape fields: a token and a state attribute both named `replayed`."""

from __future__ import annotations

from flowtape import Port, action, connect, task, workflow

CALLS: dict[str, int] = {}


@task
class Emit:
    i: int = 0

    class Ports:
        Out = Port[dict](direction="out")

    @action(consumes={}, produces={"Out": 1})
    def emit(self):
        if self.i >= 3:
            return None
        self.i += 1
        CALLS["emit"] = CALLS.get("emit", 0) + 1
        return {"replayed": True, "n": self.i}


@task
class Flip:
    replayed: bool = False

    class Ports:
        In = Port[dict](direction="in")
        Out = Port[int](direction="out")

    def action(self, token):
        self.replayed = not self.replayed
        CALLS["flip"] = CALLS.get("flip", 0) + 1
        return token["n"] * 10 + int(self.replayed)


@workflow
def main():
    emit = Emit()
    flip = Flip()
    connect(emit.Out, flip.In)
    connect(flip.Out, "Out")
