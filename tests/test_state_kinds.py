"""State and tokens of the kinds wfpy flows keep: `OrderedDict`, `Counter`, `defaultdict` with a
plain factory, `deque`, and objects of the flow's own classes that say their state themselves
(`__getstate__` / `__setstate__`) are saved as tagged values (never pickle), restored exactly
by a resume, and replayed rather than run again. And a mock agent's `File` output is a file."""

from __future__ import annotations

import json
from collections import Counter, OrderedDict, defaultdict, deque

import pytest
from flowtape.loader import load_flow
from flowtape.runner import execute
from flowtape.show import detail_of
from flowtape.tape import read_tape
from flowtape.values import NotEncodable, decode, encode
from flowtape.verify import verify_run


@pytest.mark.parametrize("value", [
    OrderedDict([("b", 1), ("a", {2: (3,)})]),
    Counter("mississippi"),
    defaultdict(list, {"x": [1], 2: []}),
    defaultdict(Counter, {"k": Counter(a=2)}),
    defaultdict(None, {"n": None}),
    deque([1, [2], {"z": 3}], maxlen=4),
    deque(),
    {"nested": [deque([OrderedDict(z=1, a=2)]), Counter()]},
])
def test_the_standard_containers_come_back_exactly(value):
    back = decode(encode(value))
    assert back == value and type(back) is type(value)
    assert list(back) == list(value)  # the order, too (an OrderedDict's is part of its equality)
    assert getattr(back, "default_factory", None) is getattr(value, "default_factory", None)
    assert getattr(back, "maxlen", None) == getattr(value, "maxlen", None)


def test_a_defaultdict_with_a_function_for_factory_cannot_be_saved_and_says_why():
    with pytest.raises(NotEncodable, match="defaultdict whose factory is a function"):
        encode({"groups": defaultdict(lambda: 0)})


def test_a_tape_naming_a_factory_no_plain_class_is_refused_not_called():
    with pytest.raises(ValueError, match="no factory a tape may name"):
        decode(b'{"$t":"defaultdict","factory":"exec","v":[]}')
    with pytest.raises(ValueError, match="is not the flow's own"):
        decode(b'{"$t":"defaultdict","factory":{"$t":"type","v":"subprocess:Popen"},"v":[]}')


FLOW = '''
from collections import Counter, OrderedDict, defaultdict, deque

from flowtape import Port, connect, task, workflow

LOG = {log!r}


class Tally:
    """Keeps a running total; says its state as one number (pickle's protocol)."""

    def __init__(self):
        self.total = 0
        self.scratch = object()  # never saved: __getstate__ leaves it out

    def __getstate__(self):
        return {{"total": self.total}}

    def __setstate__(self, state):
        self.total = state["total"]
        self.scratch = object()


@task
class Items:
    n: int
    i: int = 0

    class Ports:
        Out = Port[str](direction="out")

    def action(self):
        if self.i >= self.n:
            return None
        self.i += 1
        return "abcab"[self.i - 1]


@task
class Keep:
    order: OrderedDict = OrderedDict()
    counts: Counter = Counter()
    groups: defaultdict = defaultdict(list)
    recent: deque = deque(maxlen=2)
    tally: Tally = Tally()

    class Ports:
        In = Port[str](direction="in")
        Out = Port[str](direction="out")

    def action(self, x):
        with open(LOG, "a") as fh:
            fh.write(x + "\\n")
        self.order[x] = len(self.order)
        self.order.move_to_end(x)
        self.counts[x] += 1
        self.groups[x].append(self.counts[x])
        self.recent.append(x)
        self.tally.total += self.counts[x]
        return (f"{{list(self.order)}} {{self.counts.most_common(1)}} {{dict(self.groups)}} "
                f"{{list(self.recent)}}/{{self.recent.maxlen}} {{self.tally.total}} {{self.groups['new']}}")


@workflow
def main():
    items = Items(n=5)
    keep = Keep()
    connect(items.Out, keep.In)
    connect(keep.Out, "Out")
'''


def test_state_of_those_kinds_is_recorded_and_a_resume_replays_it_exactly(write_flow, tmp_path):
    log = tmp_path / "live.log"
    flow = load_flow(write_flow(FLOW.format(log=str(log))))
    fresh = execute(flow, max_workers=1, runs_dir=tmp_path / "runs")
    assert fresh.status == "succeeded" and fresh.warnings == []  # nothing notReplayable
    assert log.read_text().split() == list("abcab")
    tape = read_tape(fresh.run_dir / "tape.jsonl")
    assert not [f for f in tape.firings() if f.notReplayable]
    verify_run(fresh.run_dir)
    steps = {s.step: s for s in tape.records() if type(s).__name__ == "Step"}
    at = max(n for n, s in steps.items() if s.actor == "keep" and s.fireCount == 3)
    (after,) = [a for a in detail_of(fresh.run_dir, at).states if a.actor == "keep"]
    state = json.loads(bytes(after.state))  # tagged JSON, as `show --step --json` has it
    assert state["counts"]["$t"] == "counter" and state["recent"] == {"$t": "deque", "v": ["b", "c"], "maxlen": 2}
    assert state["tally"]["state"] == {"total": 3} and state["groups"]["factory"] == "list"
    log.write_text("")
    resumed = execute(flow, max_workers=1, runs_dir=tmp_path / "runs", resume_from=fresh.run_dir, at_step=at)
    assert resumed.outputs == fresh.outputs and resumed.warnings == []
    assert log.read_text().split() == list("ab")  # only the firings after the step ran again


AGENT_FLOW = '''
from flowtape import File, Port, agent, connect, task, workflow


@agent(prompt="Write the report.", transport={transport!r}, mock_outputs={{"Score": 3}})
class Writer:
    class Ports:
        Brief = Port[str](direction="in")
        Report = Port[File(ext=".md")](direction="out")
        Notes = Port[File](direction="out")
        Score = Port[int](direction="out")


@task
class Read:
    class Ports:
        Report = Port[File](direction="in")
        Notes = Port[File](direction="in")
        Out = Port[str](direction="out")

    def action(self, report, notes):
        with open(report) as a, open(notes) as b:
            return a.read() + b.read()


@workflow(inputs={{"Brief": str}})
def main():
    w = Writer()
    r = Read()
    connect("Brief", w.Brief)
    connect(w.Report, r.Report)
    connect(w.Notes, r.Notes)
    connect(r.Out, "Out")
    connect(w.Score, "Score")
'''


@pytest.mark.parametrize("transport", ["mock", "MOCK", " Mock ", "offline", "Offline"])
def test_a_mock_agents_file_outputs_are_files_and_wfpys_mock_names_are_taken(write_flow, tmp_path, transport):
    flow = load_flow(write_flow(AGENT_FLOW.format(transport=transport)))
    result = execute(flow, {"Brief": "b"}, max_workers=1, runs_dir=tmp_path / "runs")
    assert result.status == "succeeded", result.error
    assert result.outputs == {"Out": ["mock output for Report\nmock output for Notes\n"], "Score": [3]}
    written = sorted(p.name for p in (result.run_dir / "work").iterdir())
    assert written == ["w__1__Notes.txt", "w__1__Report.md"]


def test_an_agent_transport_flowtape_lacks_is_still_refused_by_name(write_flow):
    from flowtape import FlowError

    with pytest.raises(FlowError, match="claude-cli"):  # (wfpy's CLI agents: `http` and the SDKs are Flowtape's)
        load_flow(write_flow(AGENT_FLOW.format(transport="claude-cli"))).build()


def test_an_object_says_its_state_on_the_tape_and_one_whose_setstate_refuses_it_is_a_refusal(write_flow, tmp_path):
    """An own class's state is what its __getstate__ says (the tape holds no `scratch`); a tape
    holding a state its __setstate__ raises on is refused as a value that cannot be rebuilt."""
    flow = load_flow(write_flow(FLOW.format(log=str(tmp_path / "live.log"))))
    fresh = execute(flow, max_workers=1, runs_dir=tmp_path / "runs")
    data = (fresh.run_dir / "tape.jsonl").read_bytes()
    assert b'"tally":{"$t":"object","cls":"__flow__:Tally","state":{"total":' in data and b"scratch" not in data
    with pytest.raises(ValueError, match="__setstate__ raised KeyError"):
        decode(b'{"$t":"object","cls":"__flow__:Tally","state":{"sum":1}}')
