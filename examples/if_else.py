"""An if inside a loop: for each order, `check` puts a condition on `c.cond`; the if fires once per
token and runs either its `then` branch (manual review) or its `else` branch (auto-approval).
A branch runs to quiescence, so the check routes the order itself to the branch that will run
(a dict return routes by port name) and the loop feeds one order at a time.

    flowtape run examples/if_else.py
    ->  Decisions: ['A1: approved automatically (40)', 'A2: sent to review (250)',
                    'A3: approved automatically (99)', 'A4: sent to review (1200)']
"""

from flowtape import Port, action, connect, if_, loop, task, workflow

ORDERS = [
    {"id": "A1", "amount": 40},
    {"id": "A2", "amount": 250},
    {"id": "A3", "amount": 99},
    {"id": "A4", "amount": 1200},
]


@task
class Check:
    """Cond is True for orders above `limit`; the order goes to Big or Small accordingly."""

    limit: int

    class Ports:
        In = Port[dict](direction="in")
        Cond = Port[bool](direction="out")
        Big = Port[dict](direction="out")
        Small = Port[dict](direction="out")

    @action(produces={"Cond": 1, "Big": 1, "Small": 1})
    def check(self, order):
        big = order["amount"] > self.limit
        return {"Cond": big, "Big" if big else "Small": order}


@task
class Review:
    class Ports:
        In = Port[dict](direction="in")
        Out = Port[str](direction="out")

    def action(self, order):
        return f"{order['id']}: sent to review ({order['amount']})"


@task
class Approve:
    class Ports:
        In = Port[dict](direction="in")
        Out = Port[str](direction="out")

    def action(self, order):
        return f"{order['id']}: approved automatically ({order['amount']})"


@workflow
def main():
    lp = loop(ORDERS)
    with lp:
        check = Check(limit=100)
        c = if_()
        with c.then:
            review = Review()
        with c.else_:
            approve = Approve()
    connect(lp.item, check.In)
    connect(check.Cond, c.cond)
    connect(check.Big, review.In)
    connect(check.Small, approve.In)
    connect(review.Out, "Decisions")
    connect(approve.Out, "Decisions")
