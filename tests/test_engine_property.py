"""Property: a random acyclic flow gives the same outputs with one worker and with four, and
those outputs are what a plain-Python model of the same graph computes."""

from __future__ import annotations

import tempfile

from flowtape import Port, action, connect, task, workflow
from flowtape.runner import execute
from flowtape.tape import read_tape
from hypothesis import given, settings
from hypothesis import strategies as st

BURST = 3  # tokens each source emits per input token


@task
class Burst:
    """A source fed by a workflow input: one token in, BURST tokens out."""

    k: int

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    @action(consumes={"In": 1}, produces={"Out": BURST})
    def burst(self, x):
        return [x + i * self.k for i in range(BURST)]


@task
class Add1:
    k: int

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x + self.k


@task
class Add2:
    """Order-sensitive, so a mix-up of ports or of tokens shows."""

    k: int

    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, a, b):
        return 3 * a + b + self.k


# A spec: (source constants, nodes); a node is (picks, k) where a pick is ("src", i) or ("node", j < own index).
@st.composite
def dags(draw):
    sources = draw(st.lists(st.integers(-3, 3), min_size=1, max_size=3))
    nodes = []
    for i in range(draw(st.integers(1, 12))):
        choices = [("src", s) for s in range(len(sources))] + [("node", j) for j in range(i)]
        arity = draw(st.integers(1, 2))
        picks = [draw(st.sampled_from(choices)) for _ in range(arity)]
        nodes.append((picks, draw(st.integers(-5, 5))))
    return sources, nodes


def make_flow(spec):
    sources, nodes = spec

    @workflow
    def random_dag():
        srcs = [Burst(k=k) for k in sources]
        xs = [Add1(k=k) if len(picks) == 1 else Add2(k=k) for picks, k in nodes]
        for s in range(len(srcs)):
            connect(f"In{s}", srcs[s].In)
        for i, (picks, _) in enumerate(nodes):
            targets = [xs[i].In] if len(picks) == 1 else [xs[i].A, xs[i].B]
            for (kind, j), target in zip(picks, targets, strict=True):
                connect((srcs if kind == "src" else xs)[j].Out, target)
            connect(xs[i].Out, f"Out{i}")

    return random_dag


def model(spec, inputs):
    """What the flow must output, computed directly."""
    sources, nodes = spec
    src_tokens = [[inputs[f"In{s}"] + t * k for t in range(BURST)] for s, k in enumerate(sources)]
    node_tokens: list[list[int]] = []
    for picks, k in nodes:
        streams = [(src_tokens if kind == "src" else node_tokens)[j] for kind, j in picks]
        if len(streams) == 1:
            node_tokens.append([x + k for x in streams[0]])
        else:
            node_tokens.append([3 * a + b + k for a, b in zip(*streams, strict=True)])
    return {f"Out{i}": tokens for i, tokens in enumerate(node_tokens)}


@settings(max_examples=30, deadline=None)
@given(spec=dags(), seed=st.integers(-100, 100))
def test_random_dags_give_the_same_outputs_with_one_worker_and_with_four(spec, seed):
    flow = make_flow(spec)
    inputs = {f"In{s}": seed + s for s in range(len(spec[0]))}
    one = execute(flow, inputs, max_workers=1, tape=False)
    with tempfile.TemporaryDirectory() as runs:
        four = execute(flow, inputs, max_workers=4, runs_dir=runs)
        actors = [a.path for a in read_tape(four.run_dir / "tape.jsonl").header.actors]
    assert one.status == four.status == "succeeded"
    assert one.outputs == four.outputs == model(spec, inputs)
    assert one.leftovers == four.leftovers == []
    assert actors == [f"srcs_{i}" for i in range(len(spec[0]))] + [f"xs_{i}" for i in range(len(spec[1]))]
