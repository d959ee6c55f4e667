"""The engine's semantic rules, one test (or a few) per rule."""

from __future__ import annotations

import collections
import inspect
from pathlib import Path
from typing import Any

import flowtape.scheduler
import pytest
from conftest import line_of
from flowtape import FlowError, Port, RunFailed, action, connect, guard, if_, loop, task, workflow
from flowtape import run as run_flow
from flowtape.firing import value_of
from flowtape.network import build_network
from flowtape.runner import execute
from flowtape.scheduler import Engine
from flowtape.tape import Firing, read_tape

HERE = str(Path(__file__).resolve())


# ---- tasks shared by the tests ---------------------------------------------------------------------


@task
class Src:
    """Emits each of `values`, then returns None (nothing emitted, not a firing)."""

    values: list
    _i: int = 0

    class Ports:
        Out = Port[object](direction="out")

    def action(self):
        if self._i < len(self.values):
            self._i += 1
            return self.values[self._i - 1]
        return None


@task
class Five:
    """A source that emits its five `values` in one firing, once: they are all queued at once."""

    values: list
    _done: bool = False

    class Ports:
        Out = Port[object](direction="out")

    @action(consumes={}, produces={"Out": 5})
    @guard(lambda self: not self._done)
    def emit(self):
        self._done = True
        return list(self.values)


@task
class Three:
    """Like Five, with three `values`."""

    values: list
    _done: bool = False

    class Ports:
        Out = Port[object](direction="out")

    @action(consumes={}, produces={"Out": 3})
    @guard(lambda self: not self._done)
    def emit(self):
        self._done = True
        return list(self.values)


@task
class Counter:
    """A guarded zero-input source: emits 1..n."""

    n: int
    _i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    @guard(lambda self: self._i < self.n)
    def emit(self):
        self._i += 1
        return self._i


@task
class Inc:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x + 1


@task
class Echo:
    class Ports:
        In = Port[object](direction="in")
        Out = Port[object](direction="out")

    def action(self, x):
        return x


@task
class Sink:
    total: int = 0

    class Ports:
        In = Port[int](direction="in")

    def action(self, x):
        self.total += x


def _run(flow, inputs=None, workers=1, **kw):
    return execute(flow, inputs, max_workers=workers, tape=False, **kw)


def _header_actors(result) -> dict:
    tape = read_tape(result.run_dir / "tape.jsonl")
    return {a.path: a for a in tape.header.actors}


# ---- parameters and state ----------------------------------------------------------------------------


@task
class Acc:
    label: str
    seen: list = []
    _count: int = 0

    class Ports:
        In = Port[int](direction="in")
        Out = Port[object](direction="out")

    def action(self, x):
        self.seen.append(x)
        self._count += 1
        return [self.label, list(self.seen), self._count]


def test_parameters_are_required_keywords_and_unknown_ones_are_refused():
    with pytest.raises(TypeError, match="missing required parameter 'label'"):
        Acc()
    with pytest.raises(TypeError, match="unexpected parameter.*'colour'"):
        Acc(label="x", colour="red")
    with pytest.raises(TypeError, match="unexpected parameter.*'seen'"):
        Acc(label="x", seen=[1])  # state is not a parameter
    acc = Acc(label="x")
    assert acc.label == "x" and acc.seen == [] and acc._count == 0


def test_state_is_copied_per_instance():
    a, b = Acc(label="a"), Acc(label="b")
    a.seen.append(1)
    assert b.seen == [] and Acc.seen == []


@workflow
def two_accumulators():
    src = Src(values=[1, 2])
    left = Acc(label="L")
    right = Acc(label="R")
    connect(src.Out, left.In)
    connect(src.Out, right.In)
    connect(left.Out, "L")
    connect(right.Out, "R")


def test_state_is_kept_across_firings_and_separate_between_actors():
    out = _run(two_accumulators).outputs
    assert out == {"L": [["L", [1], 1], ["L", [1, 2], 2]], "R": [["R", [1], 1], ["R", [1, 2], 2]]}


def test_each_run_builds_fresh_instances():
    assert _run(two_accumulators).outputs == _run(two_accumulators).outputs


@workflow
def made_in_a_for_loop():
    for i in range(3):
        w = Src(values=[i])
        connect(w.Out, "Out")
    w = Src(values=[3])  # and once more, the same name after the loop
    connect(w.Out, "Out")
    w_1 = Src(values=[4])  # a name the numbering must step over
    connect(w_1.Out, "Out")


def test_actors_one_variable_names_in_turn_are_numbered_and_their_tape_verifies(tmp_path):
    from flowtape.verify import verify_run

    result = execute(made_in_a_for_loop, max_workers=1, runs_dir=tmp_path)
    assert result.status == "succeeded" and sorted(result.outputs["Out"]) == [0, 1, 2, 3, 4]
    names = [a.path for a in read_tape(result.run_dir / "tape.jsonl").header.actors]
    assert sorted(names) == ["w_0", "w_1", "w_2", "w_3", "w_4"]
    verify_run(result.run_dir)  # (each actor's fire counts are its own: it raised before)


@task
class CountsFirst:
    """A source that counts the call before it sees it is done: its last call changes its state
    and gives nothing."""

    values: list
    _i: int = 0

    class Ports:
        Out = Port[object](direction="out")

    def action(self):
        self._i += 1
        if self._i > len(self.values):
            return None
        return self.values[self._i - 1]


@workflow
def counts_first():
    numbers = CountsFirst(values=[1, 2, 3])
    connect(numbers.Out, "Out")


@pytest.mark.parametrize("tape", [False, True])
def test_a_source_that_gives_nothing_is_done_even_if_it_changed_its_state(tmp_path, tape):
    result = execute(counts_first, max_workers=1, tape=tape, runs_dir=tmp_path, max_steps=100)
    assert result.status == "succeeded" and result.outputs == {"Out": [1, 2, 3]} and result.steps == 3
    if tape:
        from flowtape.verify import verify_run

        verify_run(result.run_dir)
        for step in range(4):
            again = execute(counts_first, max_workers=1, runs_dir=tmp_path, resume_from=result.run_dir, at_step=step)
            assert again.outputs == {"Out": [1, 2, 3]} and not again.replay_stopped


# ---- guards and action choice -----------------------------------------------------------------------


@task
class Peeky:
    """The guard records what it peeked and refuses; the fallback takes the same token."""

    saw: list = []

    class Ports:
        In = Port[object](direction="in")
        Out = Port[object](direction="out")

    @action
    @guard(lambda self, x: self.saw.append(x) and False)
    def never(self, x):
        raise AssertionError("a false guard must not fire its action")

    @action
    def take(self, x):
        return {"guard_saw": list(self.saw), "took": x}


@workflow
def peeky_flow():
    p = Peeky()
    connect("In", p.In)
    connect(p.Out, "Out")


def test_guard_peeks_before_anything_is_taken():
    out = _run(peeky_flow, {"In": 5}).outputs
    assert out == {"Out": [{"guard_saw": [5], "took": 5}]}


@task
class Refuser:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    @action
    @guard(lambda self, x: x > 100)
    def big(self, x):
        return x


@workflow
def refuser_flow():
    r = Refuser()
    src = Src(values=[1, 500, 2])
    connect(src.Out, r.In)
    connect(r.Out, "Out")


def test_a_false_guard_leaves_the_tokens_in_the_queue():
    result = _run(refuser_flow)
    # 1 stays at the head, so nothing behind it can fire: FIFO, the guard sees only the head
    assert result.status == "succeeded"
    assert result.outputs == {"Out": []}
    assert result.leftovers == [("src.Out->r.In", 3)]


@task
class PairGuard:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[object](direction="out")

    @action(consumes={"In": 2})
    @guard(lambda self, a, b: a < b)
    def ordered(self, a, b):
        return ["ordered", a, b]

    @action(consumes={"In": 1})
    def single(self, a):
        return ["single", a]


@workflow
def pair_guard_flow():
    src = Five(values=[1, 2, 9, 3, 4])  # all five queued before g fires: the guard sees pairs
    g = PairGuard()
    connect(src.Out, g.In)
    connect(g.Out, "Out")


def test_a_guard_peeks_at_every_token_the_action_would_take():
    result = _run(pair_guard_flow)
    assert result.firings == 4 and not result.leftovers
    out = result.outputs["Out"]
    # (1, 2) ordered; (9, 3) not: 9 alone; (3, 4) ordered
    assert out == [["ordered", 1, 2], ["single", 9], ["ordered", 3, 4]]


@task
class TwoActions:
    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        Out = Port[str](direction="out")

    @action(consumes={"A": 1, "B": 1})
    def both(self, a, b):
        return f"both {a} {b}"

    @action(consumes={"A": 1})
    def only_a(self, a):
        return f"only_a {a}"

    @action(consumes={"A": 1})
    def shadowed(self, a):
        raise AssertionError("declared after only_a with the same needs: never first")


@workflow
def two_actions_flow():
    t = TwoActions()
    connect("A", t.A)
    connect("B", t.B)
    connect(t.Out, "Out")


def test_the_first_eligible_action_in_declaration_order_fires():
    assert _run(two_actions_flow, {"A": 1, "B": 2}).outputs == {"Out": ["both 1 2"]}
    assert _run(two_actions_flow, {"A": 1}).outputs == {"Out": ["only_a 1"]}


# ---- binding ----------------------------------------------------------------------------------------


@task
class Ordered:
    """Ports declared Zeta, Alpha: the action's arguments bind by position, in that order."""

    class Ports:
        Zeta = Port[str](direction="in")
        Alpha = Port[str](direction="in")
        Out = Port[str](direction="out")

    def action(self, first, second):
        return first + second


@workflow
def ordered_flow():
    o = Ordered()
    connect("Alpha", o.Alpha)
    connect("Zeta", o.Zeta)
    connect(o.Out, "Out")


def test_one_token_per_input_port_bound_in_declared_port_order():
    assert _run(ordered_flow, {"Alpha": "a", "Zeta": "z"}).outputs == {"Out": ["za"]}


def test_a_missing_token_on_one_port_means_no_firing():
    result = _run(ordered_flow, {"Alpha": "a"})
    assert result.outputs == {"Out": []}
    assert result.stuck and result.stuck[0].startswith("o waits on") and "'Zeta'" in result.stuck[0]


@task
class Pairs:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[list](direction="out")

    @action(consumes={"In": 2})
    def pair(self, a, b):
        return [a, b]


@workflow
def pairs_flow():
    src = Src(values=[1, 2, 3, 4, 5])
    p = Pairs()
    connect(src.Out, p.In)
    connect(p.Out, "Out")


def test_consumes_two_binds_two_tokens_in_fifo_order():
    result = _run(pairs_flow)
    assert result.outputs == {"Out": [[1, 2], [3, 4]]}
    assert result.leftovers == [("src.Out->p.In", 1)]


# ---- what an action returns --------------------------------------------------------------------------


@task
class Mutate:
    class Ports:
        In = Port[list](direction="in")
        Out = Port[list](direction="out")

    def action(self, xs):
        xs.append("mutated")
        return xs


@task
class Snapshot:
    class Ports:
        In = Port[list](direction="in")
        Out = Port[list](direction="out")

    def action(self, xs):
        return list(xs)


@workflow
def fanout_flow():
    src = Src(values=[[1], [2]])
    m = Mutate()
    s = Snapshot()
    connect(src.Out, m.In)
    connect(src.Out, s.In)
    connect(m.Out, "M")
    connect(s.Out, "S")


@pytest.mark.parametrize("tape", [True, False])
@pytest.mark.parametrize("workers", [1, 3])
def test_fan_out_gives_each_consumer_its_own_token(tape, workers, runs_dir):
    result = execute(fanout_flow, max_workers=workers, tape=tape, runs_dir=runs_dir)
    assert result.outputs == {"M": [[1, "mutated"], [2, "mutated"]], "S": [[1], [2]]}


@task
class EvensOnly:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        return x if x % 2 == 0 else None


@workflow
def evens_flow():
    src = Src(values=[1, 2, 3, 4])
    e = EvensOnly()
    connect(src.Out, e.In)
    connect(e.Out, "Out")


def test_returning_none_emits_nothing(runs_dir):
    result = execute(evens_flow, max_workers=1, runs_dir=runs_dir)
    assert result.outputs == {"Out": [2, 4]}
    firings = [f for f in read_tape(result.run_dir / "tape.jsonl").firings() if f.actor == "e"]
    assert [len(f.produced) for f in firings] == [0, 1, 0, 1]  # it fired, it took, it put nothing


@task
class Split:
    class Ports:
        In = Port[int](direction="in")
        Even = Port[int](direction="out")
        Odd = Port[int](direction="out")
        Count = Port[int](direction="out")

    _n: int = 0

    @action(produces={"Even": 1, "Odd": 1, "Count": 1})
    def split(self, x):
        self._n += 1
        routed = {"Even": x} if x % 2 == 0 else {"Odd": x}
        if self._n == 3:
            routed["Count"] = self._n
        return routed


@workflow
def split_flow():
    src = Src(values=[1, 2, 3, 4])
    s = Split()
    connect(src.Out, s.In)
    connect(s.Even, "Even")
    connect(s.Odd, "Odd")
    connect(s.Count, "Count")


def test_a_dict_routes_by_port_name_when_an_action_produces_on_several_ports():
    assert _run(split_flow).outputs == {"Even": [2, 4], "Odd": [1, 3], "Count": [3]}


@task
class BadRoute:
    class Ports:
        In = Port[int](direction="in")
        A = Port[int](direction="out")
        B = Port[int](direction="out")

    @action(produces={"A": 1, "B": 1})
    def route(self, x):
        return {"C": x}


@workflow
def bad_route_flow():
    b = BadRoute()
    connect("In", b.In)
    connect(b.A, "A")
    connect(b.B, "B")


def test_a_dict_naming_an_unknown_port_fails_the_run():
    result = _run(bad_route_flow, {"In": 1})
    assert result.status == "failed"
    assert "'C'" in result.error.message and "b.route" in result.error.message


@task
class Both:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")
        Copy = Port[int](direction="out")

    def action(self, x):
        return x * 10


@workflow
def both_flow():
    b = Both()
    connect("In", b.In)
    connect(b.Out, "Out")
    connect(b.Copy, "Copy")


def test_without_produces_the_return_goes_to_every_output_port():
    assert _run(both_flow, {"In": 4}).outputs == {"Out": [40], "Copy": [40]}


@task
class PlainSplit:
    """wfpy's way to split a plain `action`'s return across its ports: a dict by port name, a
    tuple by position; a dict naming the one output port gives its value."""

    class Ports:
        In = Port[object](direction="in")
        A = Port[object](direction="out")
        B = Port[object](direction="out")

    def action(self, x) -> dict:
        return x


@task
class PlainOne:
    class Ports:
        In = Port[object](direction="in")
        Out = Port[object](direction="out")

    def action(self, x):
        return x


@workflow
def plain_split_flow():
    s = PlainSplit()
    one = PlainOne()
    connect("In", s.In)
    connect(s.A, "A")
    connect(s.B, one.In)
    connect(one.Out, "B")


@pytest.mark.parametrize("given, a, b", [
    ({"A": 1, "B": -1}, [1], [-1]),
    ({"A": 100}, [100], []),  # a missing key puts nothing there
    ((1, 2), [1], [2]),
    ([3, None], [3], []),  # by position, None puts nothing
    (7, [7], [7]),  # anything else goes to every port
    ({"B": {"Out": 5}}, [], [5]),  # the one port's own name: its value
    ({"B": {"k": 1}}, [], [{"k": 1}]),  # any other dict goes whole
])
def test_a_plain_action_routes_a_dict_by_port_name_and_a_tuple_by_position(given, a, b):
    result = _run(plain_split_flow, {"In": given})
    assert result.status == "succeeded", result.error
    assert result.outputs == {"A": a, "B": b}


@task
class Whole:
    class Ports:
        In = Port[object](direction="in")
        A = Port[object](direction="out")
        B = Port[object](direction="out")

    @action(consumes={"In": 1})
    def go(self, x):
        return x


@workflow
def whole_flow():
    w = Whole()
    connect("In", w.In)
    connect(w.A, "A")
    connect(w.B, "B")


@pytest.mark.parametrize("given", [{"A": 1}, (2, "t")])
def test_an_action_without_produces_puts_its_return_whole_on_every_port(given):
    assert _run(whole_flow, {"In": given}).outputs == {"A": [given], "B": [given]}


def test_a_plain_action_returning_a_dict_naming_no_port_of_its_own_fails_the_run():
    result = _run(plain_split_flow, {"In": {"A": 1, "C": 2}})
    assert result.status == "failed"
    assert "s.action returned a dict with key(s) 'C', but it produces on 'A', 'B'" in result.error.message

    result = _run(plain_split_flow, {"In": (1, 2, 3)})  # more values than ports: none is dropped unsaid
    assert result.status == "failed"
    assert "s.action returned 3 values by position, but it produces on 2 ports ('A', 'B')" in result.error.message


@task
class PairAndTen:
    class Ports:
        In = Port[int](direction="in")
        A = Port[int](direction="out")
        B = Port[int](direction="out")

    @action(produces={"A": 2, "B": 1})
    def go(self, x):
        return ([x, x + 1], x * 10) if x % 2 else {"A": [x, x + 1], "B": x * 10}


@workflow
def pair_and_ten_flow():
    p = PairAndTen()
    connect("In", p.In)
    connect(p.A, "A")
    connect(p.B, "B")


@pytest.mark.parametrize("given", [1, 2])  # by position, and by name
def test_a_port_produced_n_at_a_time_takes_a_list_of_n_by_position_as_by_name(given):
    assert _run(pair_and_ten_flow, {"In": given}).outputs == {"A": [given, given + 1], "B": [given * 10]}


# ---- inputs --------------------------------------------------------------------------------------------


@workflow
def echo_flow():
    e = Echo()
    connect("In", e.In)
    connect(e.Out, "Out")


def test_inputs_seed_exactly_one_token_per_port():
    result = _run(echo_flow, {"In": [1, 2, 3]})
    assert result.outputs == {"Out": [[1, 2, 3]]}
    assert result.firings == 1


def test_an_unknown_input_port_is_a_usage_error():
    from flowtape.errors import UsageError

    with pytest.raises(UsageError, match="no input port 'Nope'"):
        _run(echo_flow, {"Nope": 1})


# ---- names, paths, sites --------------------------------------------------------------------------------


@workflow
def named_flow():
    source = Src(values=[1])  # site:source
    xs = [Inc(), Inc()]
    sink = Sink()
    connect(source.Out, xs[0].In)
    connect(xs[0].Out, xs[1].In)
    connect(xs[1].Out, Echo().In)  # an actor held by no variable gets a generated name
    connect("Never", sink.In)


def test_local_variable_names_name_the_actors(runs_dir):
    result = execute(named_flow, max_workers=1, runs_dir=runs_dir)
    assert list(_header_actors(result)) == ["source", "xs_0", "xs_1", "sink", "echo_1"]


def test_actor_creation_sites_and_class_definition_sites_are_recorded(runs_dir):
    result = execute(named_flow, max_workers=1, runs_dir=runs_dir)
    source = _header_actors(result)["source"]
    assert (source.file, source.line) == (HERE, line_of(Path(HERE), "site:source"))
    assert (source.classFile, source.classLine) == (HERE, inspect.getsourcelines(Src)[1] + 1)  # after @task
    assert source.kind == "task" and source.cls == "Src"


@workflow(inputs={"In": int}, outputs={"Out": int})
def double_inc():
    d = Inc()
    e = Inc()
    connect("In", d.In)
    connect(d.Out, e.In)
    connect(e.Out, "Out")


@workflow
def nested_twice():
    src = Src(values=[1, 2])
    a = double_inc()
    b = double_inc()
    connect(src.Out, a.In)
    connect(a.Out, b.In)
    connect(b.Out, "Out")


def test_a_nested_workflow_used_twice_has_distinct_paths(runs_dir):
    result = execute(nested_twice, max_workers=1, runs_dir=runs_dir)
    assert result.outputs == {"Out": [5, 6]}
    actors = _header_actors(result)
    assert list(actors) == ["src", "a", "b", "a/d", "a/e", "b/d", "b/e"]
    assert actors["a"].kind == "workflow" and actors["a"].cls == "double_inc"
    assert actors["a/d"].line == actors["b/d"].line  # same creation site, different actors
    firing_actors = {f.actor for f in read_tape(result.run_dir / "tape.jsonl").firings()}
    assert {"a/d", "a/e", "b/d", "b/e"} <= firing_actors


# ---- loop and if -----------------------------------------------------------------------------------


@task
class Collect:
    """Collects In; a Done token releases the list (and the done token's value)."""

    got: list = []

    class Ports:
        In = Port[object](direction="in")
        Done = Port[object](direction="in")
        Out = Port[list](direction="out")

    @action(consumes={"In": 1}, produces={})
    def add(self, x):
        self.got.append(x)

    @action(consumes={"Done": 1}, produces={"Out": 1})
    def done(self, d):
        return [list(self.got), d]


@workflow
def loop_flow():
    lp = loop(["a", "b", "c"])
    with lp:
        e = Echo()
    c = Collect()
    connect(lp.item, e.In)
    connect(e.Out, c.In)
    connect(lp.out, c.Done)
    connect(c.Out, "Out")


def test_a_loop_fires_once_per_item_then_once_on_out(runs_dir):
    result = execute(loop_flow, max_workers=1, runs_dir=runs_dir)
    assert result.outputs == {"Out": [[["a", "b", "c"], None]]}
    tape = read_tape(result.run_dir / "tape.jsonl")
    loop_steps = [s for s in tape.steps() if s.actor == "lp"]
    assert [s.fireCount for s in loop_steps] == [1, 2, 3, 4]
    # the body fires inside the loop's firings: no step of its own, `within` names the loop firing
    body = [f for f in tape.firings() if f.actor == "e"]
    assert [f.within for f in body] == [("lp", 1), ("lp", 2), ("lp", 3)]


@workflow
def loop_over_port():
    lp = loop()
    with lp:
        e = Echo()
    connect("Items", lp.iter)
    connect(lp.item, e.In)
    connect(e.Out, "Out")


def test_a_loop_can_take_its_iterable_from_a_port():
    assert _run(loop_over_port, {"Items": [3, 1, 2]}).outputs == {"Out": [3, 1, 2]}


def _static_if(condition):
    @workflow
    def static_if():
        c = if_(condition)
        with c.then:
            yes = Src(values=["then"])
        with c.else_:
            no = Src(values=["else"])
        connect(yes.Out, "Out")
        connect(no.Out, "Out")
        connect(c.out, "Cond")

    return static_if


def test_a_static_if_runs_one_branch_once():
    assert _run(_static_if(True)).outputs == {"Out": ["then"], "Cond": [True]}
    assert _run(_static_if(0)).outputs == {"Out": ["else"], "Cond": [0]}


@workflow
def _static_if_in_a_loop():
    lp = loop([1, 2, 3])
    with lp:
        e = Echo()
        c = if_(False)
        with c.else_:
            no = Echo()
        inner = loop(["a", "b"])
        with inner:
            t = Echo()
    connect(lp.item, e.In)
    connect(e.Out, no.In)
    connect(no.Out, "Else")
    connect(inner.item, t.In)
    connect(t.Out, "Inner")


@workflow(inputs={"In": int}, outputs={"Out": int})
def _gate():
    c = if_(True)
    with c.then:
        e = Echo()
    connect("In", e.In)
    connect(e.Out, "Out")


@workflow
def _gate_thrice():
    src = Src(values=[1, 2, 3])
    g = _gate()
    connect(src.Out, g.In)
    connect(g.Out, "Out")


@workflow
def _stamp():  # no inputs: it fires once in each firing of the workflow around it
    lp = loop([7])
    with lp:
        e = Echo()
    connect(lp.item, e.In)
    connect(e.Out, "Out")


@task
class _Drop:
    class Ports:
        In = Port[object](direction="in")

    def action(self, x):
        return None


@workflow(inputs={"In": int}, outputs={"Out": int})
def _stamped():
    s = _stamp()
    d = _Drop()
    connect("In", d.In)
    connect(s.Out, "Out")


@workflow
def _stamped_thrice():
    src = Src(values=[1, 2, 3])
    g = _stamped()
    connect(src.Out, g.In)
    connect(g.Out, "Out")


@pytest.mark.parametrize("workers", [1, 3])
def test_a_static_if_or_loop_runs_once_in_each_run_of_its_scope(workers, tmp_path):
    """Inside a loop's body, or a nested workflow that fires again, a static if or loop runs once
    for each item or firing, not once in the whole run; live and resumed alike."""
    result = execute(_static_if_in_a_loop, max_workers=workers, runs_dir=tmp_path, run_id=f"loop{workers}")
    assert result.outputs == {"Else": [1, 2, 3], "Inner": ["a", "b"] * 3}
    assert execute(_gate_thrice, max_workers=workers, tape=False).outputs == {"Out": [1, 2, 3]}
    for step in range(result.steps + 1):
        resumed = execute(_static_if_in_a_loop, max_workers=workers, runs_dir=tmp_path, resume_from=f"loop{workers}", at_step=step)
        assert resumed.outputs == result.outputs, step
    stamped = execute(_stamped_thrice, max_workers=workers, runs_dir=tmp_path, run_id=f"stamp{workers}")
    assert stamped.outputs == {"Out": [7, 7, 7]}  # a nested workflow without inputs, nested: once per firing
    for step in range(stamped.steps + 1):
        resumed = execute(_stamped_thrice, max_workers=workers, runs_dir=tmp_path, resume_from=f"stamp{workers}", at_step=step)
        assert resumed.outputs == stamped.outputs, step


@task
class IsBig:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[bool](direction="out")

    def action(self, x):
        return x > 10


@workflow
def if_on_port():
    src = Src(values=[1, 50, 2])
    big = IsBig()
    c = if_()
    with c.then:
        yes = Counter(n=1)
    with c.else_:
        no = Counter(n=5)
    connect(src.Out, big.In)
    connect(big.Out, c.cond)
    connect(yes.Out, "Then")
    connect(no.Out, "Else")


def test_an_if_fires_once_per_cond_token_and_runs_its_branch_to_quiescence():
    # the else branch's source emits all it can the first time the branch runs
    assert _run(if_on_port).outputs == {"Then": [1], "Else": [1, 2, 3, 4, 5]}


# ---- sources stop ----------------------------------------------------------------------------------


@workflow
def guarded_source():
    c = Counter(n=4)
    s = Sink()
    i = Inc()
    connect(c.Out, i.In)
    connect(i.Out, s.In)


@workflow
def none_source():
    src = Src(values=[1, 2, 3])
    e = Echo()
    connect(src.Out, e.In)
    connect(e.Out, "Out")


@pytest.mark.parametrize("workers", [1, 4])
def test_zero_input_sources_stop(workers):
    result = _run(guarded_source, workers=workers)
    assert result.status == "succeeded" and result.firings == 12
    result = _run(none_source, workers=workers)
    assert result.status == "succeeded" and result.outputs == {"Out": [1, 2, 3]}
    assert result.firings == 6  # the final None is not a firing


# ---- atomic firings and failures ----------------------------------------------------------------------


class Boom(Exception):
    pass


@task
class FailSecond:
    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        Out = Port[list](direction="out")

    _fired: int = 0

    @action(consumes={"A": 2, "B": 1})
    def take(self, a1, a2, b):
        self._fired += 1
        if self._fired == 2:
            raise Boom("second firing")
        return [a1, a2, b]


@workflow
def atomic_flow():
    # each source queues all its tokens in its first firing, so f's second firing takes from the
    # head of queues that still hold tokens behind what it took
    xs = Five(values=[1, 2, 3, 4, 5])
    ys = Three(values=[10, 20, 30])
    f = FailSecond()
    connect(xs.Out, f.A)
    connect(ys.Out, f.B)
    connect(f.Out, "Out")


def test_a_failed_firing_gives_back_what_it_took_at_the_head_of_its_queues(tmp_path):
    net = build_network(atomic_flow.build())
    engine = Engine(net, max_workers=1, tape=None, work_dir=tmp_path, base_dir=tmp_path)
    engine.run()
    assert engine.failure is not None and isinstance(engine.failure.exc, Boom)
    assert engine.failure.actor.path == "f" and engine.failure.fire_count == 2
    queues = {q.id: [value_of(item) for item in q.items] for q in net.queues}
    assert queues["xs.Out->f.A"] == [3, 4, 5]
    assert queues["ys.Out->f.B"] == [20, 30]
    assert queues["$.Out"] == [[1, 2, 10]]


def test_a_failed_firing_is_not_on_the_tape_and_the_end_counts_the_given_back_tokens(runs_dir):
    result = execute(atomic_flow, max_workers=1, runs_dir=runs_dir)
    assert result.status == "failed"
    tape = read_tape(result.run_dir / "tape.jsonl")
    assert [f.fireCount for f in tape.firings() if f.actor == "f"] == [1]
    assert tape.end.status == "failed"
    assert dict(tape.end.leftovers) == {"xs.Out->f.A": 3, "ys.Out->f.B": 2}
    assert tape.end.error.actor == "f" and tape.end.error.fireCount == 2


@task
class Leaf:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x):
        if x == 2:
            raise ValueError(f"cannot take {x}")  # site:raise
        return x


@workflow(inputs={"In": int}, outputs={"Out": int})
def inner_wf():
    leaf = Leaf()  # site:leaf
    connect("In", leaf.In)
    connect(leaf.Out, "Out")


@workflow(inputs={"In": int}, outputs={"Out": int})
def outer_wf():
    inner = inner_wf()
    connect("In", inner.In)
    connect(inner.Out, "Out")


@workflow
def failing_flow():
    src = Src(values=[1, 2, 3])
    outer = outer_wf()
    connect(src.Out, outer.In)
    connect(outer.Out, "Out")


def test_a_failing_actor_fails_the_run_naming_its_path_firing_and_line(runs_dir):
    leaf_line = line_of(Path(HERE), "site:leaf")
    with pytest.raises(RunFailed) as info:
        run_flow(failing_flow, max_workers=1, runs_dir=runs_dir)
    exc = info.value
    assert exc.actor == "outer/inner/leaf" and exc.fire_count == 2
    assert (exc.file, exc.line) == (HERE, leaf_line)
    assert "outer/inner/leaf failed on firing 2" in str(exc)
    assert f"{HERE}:{leaf_line}" in str(exc) and "ValueError: cannot take 2" in str(exc)
    assert "\n" not in str(exc)
    assert exc.outputs == {"Out": [1]}
    result = execute(failing_flow, max_workers=1, tape=False)
    assert result.error.raisedLine == line_of(Path(HERE), "site:raise")
    assert "Traceback" in result.error.traceback


@task
class Join2:
    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, a, b):
        return a + b


@workflow
def stuck_flow():
    xs = Src(values=[1, 2, 3])
    ys = Src(values=[10])
    join = Join2()
    connect(xs.Out, join.A)
    connect(ys.Out, join.B)
    connect(join.Out, "Out")


def test_leftover_tokens_are_reported_and_a_join_that_can_never_fire_is_named(runs_dir):
    result = execute(stuck_flow, max_workers=1, runs_dir=runs_dir)
    assert result.status == "succeeded" and result.outputs == {"Out": [11]}
    assert result.leftovers == [("xs.Out->join.A", 2)]
    assert len(result.stuck) == 1
    assert result.stuck[0].startswith("join waits on 'B', which nothing will fill")
    end = read_tape(result.run_dir / "tape.jsonl").end
    assert end.stuck == result.stuck and [tuple(x) for x in end.leftovers] == result.leftovers


# ---- scale and order -----------------------------------------------------------------------------------


@workflow
def long_chain():
    c = Counter(n=50_000)
    i = Inc()
    s = Sink()
    connect(c.Out, i.In)
    connect(i.Out, s.In)


def test_there_is_no_cap_on_the_number_of_firings():
    result = _run(long_chain)
    assert result.status == "succeeded"
    assert result.firings == 150_000  # wfpy stops at 100,000


def test_max_workers_1_order_is_documented_and_deterministic(runs_dir):
    doc = flowtape.scheduler.__doc__
    assert "max_workers=1" in doc and "declaration order" in doc

    def steps(run_id):
        execute(guarded_source, max_workers=1, runs_dir=runs_dir, run_id=run_id)
        tape = read_tape(runs_dir / run_id / "tape.jsonl")
        return [(s.actor, s.fireCount) for s in tape.steps()], [
            (f.actor, f.fireCount) for f in tape.records() if isinstance(f, Firing)
        ]

    first = steps("one")
    assert first == steps("two")
    # rounds: every ready actor fires once per round, in declaration order (c, s, i), so the
    # source does not drain first: c emits one token, i (ready; s is not) takes it, and s, given a
    # token by i and not yet fired in this round, fires in it too; then c again in the next round
    assert first[0] == [(a, n) for n in range(1, 5) for a in ("c", "i", "s")]
    assert first[1] == first[0]  # one firing per step at the top level


@task
class Burst3:
    """Each token in gives three out, in one firing."""

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    @action(consumes={"In": 1}, produces={"Out": 3})
    def burst(self, x):
        return [x, x + 1, x + 2]


@workflow
def round_flow():
    c = Counter(n=2)
    b = Burst3()
    e = Echo()
    i = Inc()
    connect(c.Out, b.In)
    connect(b.Out, e.In)
    connect(e.Out, i.In)
    connect(i.Out, "Out")


def test_max_workers_1_an_actor_that_has_fired_waits_for_the_next_round(runs_dir):
    doc = flowtape.scheduler.__doc__
    assert "rounds" in doc and "waits for the next round" in doc
    result = execute(round_flow, max_workers=1, runs_dir=runs_dir)
    steps = [s.actor for s in read_tape(result.run_dir / "tape.jsonl").steps()]
    # round 1: c, b, then e and i once each though e holds three tokens; round 2: c (its second
    # number), b, e, i; round 3 on: c and b have nothing left, e and i once per round until empty
    assert steps == ["c", "b", "e", "i", "c", "b", "e", "i"] + ["e", "i"] * 4
    assert result.outputs == {"Out": [2, 3, 4, 3, 4, 5]}


@workflow(inputs={"In": list}, outputs={"M": list, "S": list})
def fanout_child():
    m = Mutate()
    s = Snapshot()
    connect("In", m.In)
    connect("In", s.In)
    connect(m.Out, "M")
    connect(s.Out, "S")


@workflow
def fanout_inputs():
    child = fanout_child()
    m = Mutate()
    s = Snapshot()
    connect("In", child.In)
    connect("In", m.In)
    connect("In", s.In)
    connect(child.M, "ChildM")
    connect(child.S, "ChildS")
    connect(m.Out, "M")
    connect(s.Out, "S")


@pytest.mark.parametrize("tape", [True, False])
@pytest.mark.parametrize("workers", [1, 3])
def test_workflow_inputs_fan_out_as_separate_tokens_too(tape, workers, runs_dir):
    result = execute(fanout_inputs, {"In": [0]}, max_workers=workers, tape=tape, runs_dir=runs_dir)
    assert result.outputs == {"ChildM": [[0, "mutated"]], "ChildS": [[0]], "M": [[0, "mutated"]], "S": [[0]]}


# ---- parallel workers: slow actions overlap, quick ones do not hold them up ------------------------

ACTIVE = {"now": 0, "most": 0}


@task
class Napper:
    """Sleeps for each token (a stand-in for a model call) and counts how many naps overlap."""

    nap: float

    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x: int) -> int:
        import time

        ACTIVE["now"] += 1
        ACTIVE["most"] = max(ACTIVE["most"], ACTIVE["now"])
        time.sleep(self.nap)
        ACTIVE["now"] -= 1
        return x


@task
class Quick:
    class Ports:
        In = Port[int](direction="in")
        Out = Port[int](direction="out")

    def action(self, x: int) -> int:
        return x + 1


@workflow
def naps():
    src = Src(values=[1, 2, 3, 4, 5, 6])
    quick = Quick()
    a, b, c = Napper(nap=0.05), Napper(nap=0.05), Napper(nap=0.05)
    connect(src.Out, quick.In)
    connect(quick.Out, a.In)
    connect(quick.Out, b.In)
    connect(quick.Out, c.In)
    connect(a.Out, "A")
    connect(b.Out, "B")
    connect(c.Out, "C")


@pytest.mark.parametrize("workers", [1, 4])
def test_slow_actions_run_in_parallel_and_quick_ones_inline(workers, tmp_path):
    ACTIVE.update(now=0, most=0)
    result = execute(naps, max_workers=workers, runs_dir=tmp_path)
    assert result.outputs == {"A": [2, 3, 4, 5, 6, 7], "B": [2, 3, 4, 5, 6, 7], "C": [2, 3, 4, 5, 6, 7]}
    # one worker: one nap at a time; four: the three nappers nap together
    assert ACTIVE["most"] == (1 if workers == 1 else 3)


@task
class _Numbers4:
    _i: int = 0

    class Ports:
        Out = Port[int](direction="out")

    @action(consumes={})
    def emit(self):
        if self._i >= 4:
            return None
        self._i += 1
        return self._i


@task
class _History:
    hist: list = []

    class Ports:
        In = Port[int](direction="in")
        Out = Port[list](direction="out")

    def action(self, x):
        self.hist.append(x)
        return self.hist  # its own state, not a copy


@task
class _Lengths:
    class Ports:
        In = Port[object](direction="in")  # a list, or a Counter (_aliasing_unsaveable)
        Out = Port[str](direction="out")

    @action(consumes={"In": 4})
    def measure(self, a, b, c, d):
        return f"{len(a)},{len(b)},{len(c)},{len(d)}"


@workflow
def _aliasing():
    n = _Numbers4()
    h = _History()
    m = _Lengths()
    connect(n.Out, h.In)
    connect(h.Out, m.In)
    connect(m.Out, "Len")


@pytest.mark.parametrize("tape", [True, False])
def test_a_token_is_the_value_as_it_was_put(tmp_path, tape):
    """An actor that puts its own list and changes it later does not change the tokens already
    put: with the tape on or off, live or resumed at any step, the consumer sees the same."""
    result = execute(_aliasing, max_workers=1, runs_dir=tmp_path, tape=tape, run_id="live")
    assert result.outputs == {"Len": ["1,2,3,4"]}
    if tape:
        for step in range(result.steps + 1):
            resumed = execute(_aliasing, max_workers=1, runs_dir=tmp_path, resume_from="live", at_step=step)
            assert resumed.outputs == result.outputs, step


@task
class _CountingHistory:
    """As _History, with a Counter: a value the tape cannot save (a dict subclass), and so no
    encoding to copy the token from."""

    hist: Any = None

    class Ports:
        In = Port[int](direction="in")
        Out = Port[object](direction="out")

    def action(self, x):
        if self.hist is None:
            self.hist = collections.Counter()
        self.hist[x] += 1
        return self.hist


@task
class _Spoiler:
    class Ports:
        In = Port[object](direction="in")
        Out = Port[int](direction="out")

    def action(self, counts):
        counts["spoiled"] = 1
        return len(counts)


@workflow
def _aliasing_unsaveable():
    n = _Numbers4()
    h = _CountingHistory()
    spoil = _Spoiler()
    m = _Lengths()
    connect(n.Out, h.In)
    connect(h.Out, spoil.In)  # fanned out: one consumer changes its token ...
    connect(h.Out, m.In)  # ... and the other must not see it
    connect(spoil.Out, "Spoiled")
    connect(m.Out, "Len")


def test_a_token_the_tape_cannot_save_is_still_the_value_as_it_was_put_for_each_consumer(tmp_path):
    result = execute(_aliasing_unsaveable, max_workers=1, runs_dir=tmp_path)
    assert result.status == "succeeded", result.error
    assert result.outputs == {"Len": ["1,2,3,4"], "Spoiled": [2, 3, 4, 5]}


@task
class _FairMerge:
    class Ports:
        A = Port[int](direction="in")
        B = Port[int](direction="in")
        Out = Port[int](direction="out")

    @action(consumes={"A": 1})
    def a(self, x):
        return x

    @action(consumes={"B": 1})
    def b(self, x):
        return x

    class Schedule:
        initial = "s1"
        transitions = [("s1", "a", "s2"), ("s2", "b", "s1")]


@task
class _Urgent:
    class Ports:
        In = Port[str](direction="in")
        Out = Port[str](direction="out")

    @action(consumes={"In": 1})
    def low(self, x):  # defined first: without the Priority, tried first
        return f"low:{x}"

    @action(consumes={"In": 1})
    def high(self, x):
        return f"high:{x}"

    class Priority:
        rules = [["high"]]


@workflow
def _scheduled():
    merge = _FairMerge()
    first = loop([1, 3, 5])
    with first:
        connect(first.item, merge.A)
    second = loop([2, 4, 6])
    with second:
        connect(second.item, merge.B)
    connect(merge.Out, "Out")
    urgent = _Urgent()
    words = loop(["a", "b"])
    with words:
        connect(words.item, urgent.In)
    connect(urgent.Out, "Urgent")


@pytest.mark.parametrize("workers", [1, 4])
def test_a_schedule_and_a_priority_order_a_tasks_actions(tmp_path, workers):
    """wfpy's Schedule (a state machine over the actions) and Priority (the order they are
    tried in); the schedule's state is the actor's, so a resume at any step goes on alike."""
    result = execute(_scheduled, max_workers=workers, runs_dir=tmp_path, run_id="s")
    assert result.outputs["Out"] == [1, 2, 3, 4, 5, 6]
    assert sorted(result.outputs["Urgent"]) == ["high:a", "high:b"]
    for step in range(0, result.steps + 1, 3):
        resumed = execute(_scheduled, max_workers=workers, runs_dir=tmp_path, resume_from="s", at_step=step)
        assert resumed.outputs["Out"] == [1, 2, 3, 4, 5, 6], step


def test_a_schedule_naming_no_action_is_a_flow_error():
    with pytest.raises(FlowError, match=r"_Bad.Schedule: transitions\[0\] names no action of the task: 'nope'") as info:
        @task
        class _Bad:  # BAD-SCHEDULE
            class Ports:
                In = Port[int](direction="in")

            def action(self, x):
                return None

            class Schedule:
                initial = "s"
                transitions = [("s", "nope", "s")]
    assert info.value.line == line_of(Path(__file__), "BAD-SCHEDULE")  # the class statement


@task
class _Parity:
    class Ports:
        In = Port[int](direction="in")
        Cond = Port[bool](direction="out")
        Val = Port[int](direction="out")

    @action(produces={"Cond": 1, "Val": 1})
    def check(self, x):
        return (x % 2 == 0, x)


@task
class _Tag:
    word: str

    class Ports:
        In = Port[int](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        return f"{self.word}:{x}"


def test_a_value_wired_into_both_branches_of_an_if_is_refused(write_flow):
    """Each firing of an if runs one branch: a token at the other would wait and run it later,
    under another firing's condition. Such wiring is refused before anything runs."""
    from flowtape.loader import load_flow

    path = write_flow("""
        from flowtape import Port, action, connect, if_, loop, task, workflow
        from test_engine_semantics import _Parity, _Tag

        @workflow
        def main():
            lp = loop([1, 2, 3, 4])
            with lp:
                parity = _Parity()
                c = if_()
                with c.then:
                    even = _Tag(word="even")
                with c.else_:
                    odd = _Tag(word="odd")
            connect(lp.item, parity.In)
            connect(parity.Cond, c.cond)
            connect(parity.Val, even.In)
            connect(parity.Val, odd.In)  # BOTH
            connect(even.Out, "Results")
            connect(odd.Out, "Results")
    """)
    with pytest.raises(FlowError, match="parity.Val is wired into both branches of the if c") as info:
        load_flow(path).build()
    assert info.value.line == line_of(path, "BOTH")


def test_an_agent_without_inputs_fires_as_often_as_it_was_given(tmp_path):
    from flowtape import agent

    @agent(prompt="Invent a name", transport="mock", mock_outputs={"Name": "Zed"}, fireable_without_input=2)
    class Namer:
        class Ports:
            Name = Port[str](direction="out")

    @workflow
    def names():
        n = Namer()
        connect(n.Name, "Names")

    result = execute(names, max_workers=1, runs_dir=tmp_path, run_id="n")
    assert result.outputs == {"Names": ["Zed", "Zed"]} and result.steps == 2
    for step in range(3):
        assert execute(names, max_workers=1, runs_dir=tmp_path, resume_from="n", at_step=step).outputs == result.outputs

    @agent(prompt="Invent a name", transport="mock", mock_outputs={"Name": "Zed"})
    class Silent:
        class Ports:
            Name = Port[str](direction="out")

    @workflow
    def silent():
        s = Silent()
        connect(s.Name, "Names")

    with pytest.raises(FlowError, match="has no input port, so it would never fire: give it fireable_without_input=N"):
        silent.build()


def test_a_tuple_return_is_routed_by_position_none_included(tmp_path):
    @task
    class Split:
        class Ports:
            In = Port[int](direction="in")
            Odd = Port[object](direction="out")
            Same = Port[int](direction="out")

        @action(produces={"Odd": 1, "Same": 1})
        def split(self, x):
            return (x if x % 2 else None, x)

    @workflow
    def split_flow():
        sp = Split()
        connect("In", sp.In)
        connect(sp.Odd, "Odd")
        connect(sp.Same, "Same")

    for x, odd in ((1, [1]), (2, [None])):
        assert execute(split_flow, {"In": x}, max_workers=1, runs_dir=tmp_path).outputs == {"Odd": odd, "Same": [x]}


@workflow
def _if_out_into_branches():
    lp = loop([1, 2, 3, 4])
    with lp:
        parity = _Parity()
        c = if_()
        with c.then:
            even = _Tag(word="even")
        with c.else_:
            odd = _Tag(word="odd")
    connect(lp.item, parity.In)
    connect(parity.Cond, c.cond)
    connect(c.out, even.In)  # the if's own out: only the branch that runs gets it
    connect(c.out, odd.In)
    connect(even.Out, "Results")
    connect(odd.Out, "Results")


def test_an_ifs_out_reaches_only_the_branch_that_runs(tmp_path):
    result = execute(_if_out_into_branches, max_workers=1, runs_dir=tmp_path, run_id="o")
    assert result.outputs == {"Results": ["odd:False", "even:True", "odd:False", "even:True"]}
    assert result.leftovers == []
    for step in range(result.steps + 1):
        resumed = execute(_if_out_into_branches, max_workers=1, runs_dir=tmp_path, resume_from="o", at_step=step)
        assert resumed.outputs == result.outputs, step


ALIASED = '''
from flowtape import Port, connect, loop, task, workflow

ITEMS = [{"id": 1, "tags": []}, {"id": 2, "tags": []}]


@task
class Tagger:
    class Ports:
        In = Port[dict](direction="in")
        Out = Port[list](direction="out")

    def action(self, d):
        d["tags"].append("seen")  # changes its own copy of the item
        return d["tags"]


@task
class Grow:
    class Ports:
        In = Port[list](direction="in")
        Out = Port[list](direction="out")

    def action(self, xs):
        xs.append("grown")
        return xs


@workflow(inputs={"Xs": list})
def main():
    lp = loop(ITEMS)
    with lp:
        t = Tagger()
    connect(lp.item, t.In)
    connect(t.Out, "Tags")
    g = Grow()
    connect("Xs", g.In)
    connect(g.Out, "Grown")
'''


def test_loop_items_and_inputs_reach_the_flow_as_copies(write_flow, tmp_path):
    """A token is the value as it was put: a loop body that changes its item changes its own copy,
    not the iterable's object (which a later loop or a resume would then see changed), and an
    input given through the API is not the caller's object."""
    from flowtape.loader import load_module
    from flowtape.runner import execute

    path = write_flow(ALIASED)
    module = load_module(path)
    given = ["x"]
    fresh = execute(module.main, {"Xs": given}, max_workers=1, runs_dir=tmp_path)
    assert fresh.outputs == {"Tags": [["seen"], ["seen"]], "Grown": [["x", "grown"]]}
    assert module.ITEMS == [{"id": 1, "tags": []}, {"id": 2, "tags": []}] and given == ["x"]
    for at_step in range(fresh.steps + 1):
        resumed = execute(module.main, max_workers=1, runs_dir=tmp_path, resume_from=fresh.run_dir, at_step=at_step)
        assert resumed.outputs == fresh.outputs, at_step


def test_only_a_run_that_went_quiet_reports_actors_that_can_never_fire(write_flow, tmp_path):
    """`stuck` says an actor can never fire: true only when the run went quiet by itself, and only
    when every one of its actions lacks an input (one action may wait on a port another does not)."""
    from flowtape.loader import load_flow
    from flowtape.runner import execute

    flow = load_flow(write_flow('''
        from flowtape import Port, action, connect, task, workflow

        @task
        class Seeds:
            class Ports:
                Out = Port[int](direction="out")
            i: int = 0

            def action(self):
                if self.i >= 3:
                    return None
                self.i += 1
                return self.i

        @task
        class Loop:
            class Ports:
                Seed = Port[int](direction="in")
                Back = Port[int](direction="in")
                Next = Port[int](direction="out")
                Done = Port[int](direction="out")

            @action(consumes={"Back": 1}, produces={"Next": 1, "Done": 1})
            def cont(self, n):
                return {"Done": n} if n > 50 else {"Next": n * 2}

            @action(consumes={"Seed": 1}, produces={"Next": 1})
            def start(self, s):
                return s

        @workflow
        def main():
            seeds = Seeds()
            loop = Loop()
            connect(seeds.Out, loop.Seed)
            connect(loop.Next, loop.Back)
            connect(loop.Done, "Done")
    '''))
    done = execute(flow, max_workers=1, runs_dir=tmp_path)
    assert done.status == "succeeded" and sorted(done.outputs["Done"]) == [64, 64, 96] and done.stuck == []
    stopped = execute(flow, max_workers=1, runs_dir=tmp_path, max_steps=4)
    assert stopped.status == "stopped" and stopped.leftovers and stopped.stuck == []  # it was stopped, not stuck


# A source that never runs dry, for flows whose runs are cut short (indented as the flow texts
# below are: write_flow takes their common indentation away).
ENDLESS = '''
        import time
        from flowtape import Port, connect, task, workflow

        @task
        class Endless:
            class Ports:
                Out = Port[int](direction="out")
            i: int = 0

            def action(self):
                self.i += 1
                return self.i

'''


def test_max_steps_stops_at_exactly_n_steps_with_several_workers(write_flow, tmp_path):
    """Four workers busy on slow firings: none is started that could take a step past the limit."""
    from flowtape.loader import load_flow
    from flowtape.runner import execute
    from flowtape.tape import read_tape

    flow = load_flow(write_flow(ENDLESS + '''
        def make(name):
            @task
            class Slow:
                class Ports:
                    In = Port[int](direction="in")
                    Out = Port[int](direction="out")

                def action(self, n):
                    time.sleep(0.003)
                    return n
            Slow.__name__ = Slow.__qualname__ = name
            return Slow

        A, B, C, D = (make(n) for n in "ABCD")

        @workflow
        def main():
            numbers = Endless()
            for worker in (A(), B(), C(), D()):
                connect(numbers.Out, worker.In)
                connect(worker.Out, "Out" + type(worker).__name__)
    '''))
    for limit in (2, 5, 9, 14, 23, 31):
        stopped = execute(flow, max_workers=4, runs_dir=tmp_path, run_id=f"limit-{limit}", max_steps=limit)
        steps = read_tape(tmp_path / f"limit-{limit}" / "tape.jsonl").steps()
        assert (stopped.status, stopped.steps, len(steps)) == ("stopped", limit, limit)


def test_a_source_always_ready_does_not_starve_a_firing_that_let_go_of_the_lock(write_flow, tmp_path):
    """The consumer's first firing is slow, so it runs without the engine's lock; the source is
    quick, so its worker keeps the lock through its firings. The consumer's worker, back from its
    action, gets the lock next: the two go on taking turns."""
    from flowtape.loader import load_flow
    from flowtape.runner import execute
    from flowtape.tape import read_tape

    flow = load_flow(write_flow(ENDLESS + '''
        @task
        class SlowOnce:
            class Ports:
                In = Port[int](direction="in")
                Out = Port[int](direction="out")
            n: int = 0

            def action(self, x):
                self.n += 1
                if self.n == 1:
                    time.sleep(0.005)
                return x

        @workflow
        def main():
            e = Endless()
            s = SlowOnce()
            connect(e.Out, s.In)
            connect(s.Out, "Out")
    '''))
    stopped = execute(flow, max_workers=4, runs_dir=tmp_path, run_id="r", max_steps=5000)
    steps = read_tape(tmp_path / "r" / "tape.jsonl").steps()
    assert stopped.status == "stopped" and sum(s.actor == "s" for s in steps) > 1500


def test_hasattr_and_getattr_with_a_default_work_inside_an_action(write_flow, tmp_path):
    """As on any object (and in wfpy): an attribute a task does not have is no error to look for."""
    from flowtape.loader import load_flow
    from flowtape.runner import execute

    flow = load_flow(write_flow('''
        from flowtape import Port, connect, task, workflow

        @task
        class Count:
            class Ports:
                In = Port[int](direction="in")
                Out = Port[int](direction="out")

            def action(self, x):
                self.seen = getattr(self, "seen", 0) + 1
                return self.seen if hasattr(self, "seen") and not hasattr(self, "nope") else -1

        @workflow(inputs={"In": int})
        def main():
            c = Count()
            connect("In", c.In)
            connect(c.Out, "Out")
    '''))
    result = execute(flow, {"In": 5}, runs_dir=tmp_path)
    assert result.status == "succeeded" and result.outputs == {"Out": [1]}


AGENT = '''
from flowtape import Port, agent, connect, workflow


@agent(prompt="count", transport="mock", mock_outputs={MOCKS})
class Counter:
    class Ports:
        In = Port[list](direction="in")
        Out = Port[int](direction="out")


@workflow(inputs={"In": list})
def main():
    c = Counter()
    connect("In", c.In)
    connect(c.Out, "Out")
'''


def test_an_agent_chat_holds_the_values_whole_and_a_mock_for_no_port_is_an_error(write_flow, tmp_path):
    """The chat is what a model would read: the inputs and answers as JSON, whole (not previews cut
    at a few hundred characters). A mock answer for a port the agent does not have is a mistake."""
    import json

    from flowtape.loader import load_flow
    from flowtape.runner import execute
    from flowtape.tape import read_tape

    long_list = list(range(300))
    ok = execute(load_flow(write_flow(AGENT.replace("MOCKS", '"Out": 1'))), {"In": long_list}, runs_dir=tmp_path)
    assert ok.status == "succeeded" and ok.outputs == {"Out": [1]}
    (firing,) = [f for f in read_tape(ok.run_dir / "tape.jsonl").firings() if f.chat]
    user, assistant = json.loads(bytes(firing.chat))
    assert json.loads(user["content"].split("\n\n", 1)[1]) == {"In": long_list}
    assert json.loads(assistant["content"]) == {"outputs": {"Out": 1}}
    typo = write_flow(AGENT.replace("MOCKS", '"Outt": 1'), name="typo.py")
    with pytest.raises(FlowError, match=r"typo.py:\d+: Counter: mock_outputs names 'Outt', which is no output port \(its outputs: Out\)"):
        load_flow(typo)  # when the flow loads, before anything runs


UNSAVEABLE_FANNED = '''
import threading

from flowtape import Port, connect, task, workflow


@task
class Make:
    class Ports:
        Out = Port[object](direction="out")
    done: bool = False

    def action(self):
        if self.done:
            return None
        self.done = True
        return threading.Lock()  # cannot be saved: the firing is notReplayable, the value goes as it is


@task
class Kind:
    class Ports:
        In = Port[object](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        return type(x).__name__


@workflow(inputs={"In": object}, outputs={"A": str, "B": str})
def both():
    a = Kind()
    b = Kind()
    connect("In", a.In)
    connect("In", b.In)
    connect(a.Out, "A")
    connect(b.Out, "B")


@workflow
def main():
    make = Make()
    inner = both()
    connect(make.Out, inner.In)
    connect(inner.A, "A")
    connect(inner.B, "B")
'''


def test_a_value_that_cannot_be_saved_reaches_every_consumer_it_fans_out_to_as_itself(write_flow, tmp_path):
    """Its encoding is only a placeholder: a copy decoded from it would be a dict, not the value."""
    from flowtape.loader import load_flow
    from flowtape.runner import execute

    result = execute(load_flow(write_flow(UNSAVEABLE_FANNED)), max_workers=1, runs_dir=tmp_path)
    assert result.status == "succeeded", result.error
    assert result.outputs == {"A": ["lock"], "B": ["lock"]}
