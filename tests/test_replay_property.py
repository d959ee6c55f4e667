"""Property: for a random small flow (a random DAG of 2-8 tasks), a random step and a random
worker count, a resumed run's outputs equal a clean run's."""

from __future__ import annotations

from flowtape import Port, action, connect, scheduler, task, workflow
from flowtape.runner import execute
from flowtape.tape import read_tape
from flowtape.verify import verify
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@task
class Emit:
    n: int
    i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={}, produces={"Out": 1})
    def emit(self):
        if self.i >= self.n:
            return None
        self.i += 1
        return self.i


@task
class One:
    k: int
    acc: int = 0

    class Ports:
        A = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, a):
        self.acc = (self.acc * 7 + a + self.k) % 10007
        return self.acc


@task
class Two:
    k: int

    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, a, b):
        return (a * 31 + b * 17 + self.k) % 10007


@task
class Three:
    k: int
    seen: list = []

    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        C = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, a, b, c):
        self.seen = [*self.seen[-2:], a]
        return (a + 3 * b + 5 * c + sum(self.seen) + self.k) % 10007


KINDS = {1: One, 2: Two, 3: Three}
PORTS = ("A", "B", "C")


@st.composite
def dags(draw):
    """Node 0 is the source; node i (1..n-1) takes 1-3 inputs from earlier nodes."""
    size = draw(st.integers(2, 8))
    nodes = []
    for i in range(1, size):
        arity = draw(st.integers(1, min(3, i)))
        parents = draw(st.lists(st.integers(0, i - 1), min_size=arity, max_size=arity))
        nodes.append(parents)
    items = draw(st.integers(1, 4))
    return items, nodes


def build(items: int, nodes: list[list[int]]):
    @workflow
    def dag():
        actors = [Emit(n=items)]
        for index, parents in enumerate(nodes):
            actors.append(KINDS[len(parents)](k=index + 1))
        for index, parents in enumerate(nodes, start=1):
            for port, parent in zip(PORTS, parents, strict=False):
                connect(actors[parent].Out, getattr(actors[index], port))
        used = {p for parents in nodes for p in parents}
        for index in range(1, len(actors)):
            if index not in used:
                connect(actors[index].Out, f"Out{index}")

    return dag


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dag=dags(), data=st.data(), workers=st.sampled_from([1, 3]), every=st.sampled_from([1, 3, 1024]))
def test_resumed_outputs_equal_a_clean_run(tmp_path_factory, dag, data, workers, every):
    items, nodes = dag
    flow = build(items, nodes)
    scheduler.CHECKPOINT_STEPS, scheduler.CHECKPOINT_GROWTH = every, 0 if every < 1024 else 16
    try:
        check(flow, tmp_path_factory, data, workers)
    finally:
        scheduler.CHECKPOINT_STEPS, scheduler.CHECKPOINT_GROWTH = 1024, 16


def check(flow, tmp_path_factory, data, workers: int) -> None:
    runs = tmp_path_factory.mktemp("runs")
    clean = execute(flow, max_workers=1, runs_dir=runs)
    assert clean.status == "succeeded", clean.error
    original = execute(flow, max_workers=workers, runs_dir=runs)
    assert original.outputs == clean.outputs
    at_step = data.draw(st.integers(0, original.steps), label="at_step")
    resumed = execute(flow, max_workers=data.draw(st.sampled_from([1, 3]), label="resume workers"),
                      runs_dir=runs, resume_from=original.run_dir, at_step=at_step)
    assert resumed.status == "succeeded", resumed.error
    assert resumed.outputs == clean.outputs
    assert resumed.replay_stopped == []
    tape = read_tape(resumed.run_dir / "tape.jsonl")
    assert sum(1 for s in tape.steps() if s.replayed) == at_step
    assert sum(1 for f in tape.firings() if f.replayed) == at_step  # flat flow: one firing per step
    verify(resumed.run_dir / "tape.jsonl")
