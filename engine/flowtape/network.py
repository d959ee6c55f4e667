"""The running form of a built workflow: actors with paths, FIFO queues with stable ids."""

from __future__ import annotations

import copy
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from msgspec import Raw

from .graph import ROOT, Edge, Graph, IfControl, LoopControl, Node, Subflow
from .model import TaskSpec, spec_of
from .ports import Resource, is_resource
from .values import encode

# A queue item: (value, canonical encoding). The value is LAZY when the token came from a tape
# and nobody has needed it as a Python object yet: a replayed consumer only needs the bytes.
LAZY: Any = object()
Item = tuple[Any, Any]  # (value, encoding as bytes or msgspec.Raw)
IMMUTABLE = frozenset({int, float, str, bool, bytes, type(None)})


def own_copy(item: Item) -> Item:
    """A fanned-out token's own copy: decoded afresh from its encoding, or deep-copied without one
    (a value that could not be encoded, whose encoding is only a placeholder, too)."""
    value, enc = item
    if value is LAZY or type(value) in IMMUTABLE:
        return item
    if enc and not unencodable(enc):
        return (LAZY, enc)
    return (_copied(value), enc)


def _copied(value: Any) -> Any:
    """A deep copy, or the value itself where it has none (a lock, a client: one object, shared)."""
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - whatever a user's __deepcopy__ or __reduce__ raises
        return value


_PLACEHOLDER = b'{"$unencodable":'


def placeholder(where: str, value: Any) -> Item:
    """The token for a value that cannot be encoded: the value itself, beside an encoding that no
    other value shares (a replay finds it never matches, and runs the consumer live)."""
    # a copy as it is now, as an encodable token is its encoding: its producer may change it later
    return (_copied(value), Raw(encode({"$unencodable": f"{where}:{id(value)}:{time.time_ns()}"})))


def unencodable(enc: Any) -> bool:
    return bool(enc) and bytes(memoryview(enc)[: len(_PLACEHOLDER)]) == _PLACEHOLDER


FileOut = tuple[str, str | None]  # (extension, the run's output port) of Actor.file_outs


class Queue:
    """A FIFO of tokens with exactly one consumer (or none, for a workflow's own output)."""

    __slots__ = ("id", "index", "items", "consumer", "port")

    def __init__(self, qid: str, index: int, consumer: Actor | None, port: str) -> None:
        self.id = qid
        self.index = index
        self.items: deque[Item] = deque()
        self.consumer = consumer
        self.port = port

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"<Queue {self.id} ({len(self.items)})>"


@dataclass(eq=False)
class Actor:
    """One actor of the run. `owner` is the composite whose firings run it (None: top level)."""

    path: str
    node: Node
    spec: TaskSpec | None
    owner: Actor | None
    index: int
    inputs: dict[str, Queue] = field(default_factory=dict)
    outputs: dict[str, list[Queue]] = field(default_factory=dict)
    members: list[Actor] = field(default_factory=list)  # what a composite's firing runs
    branches: dict[str, list[Actor]] = field(default_factory=dict)  # an if's then/else members
    seeds: dict[str, list[Queue]] = field(default_factory=dict)  # a subflow's inner input queues
    # its output ports that feed a workflow's `File` output: a token put there is a copy of the file
    # as it was then (the producer may rewrite it at its next firing). The copy's extension, and
    # the run's own output port it feeds, if any (its copies are named after it, as wfpy's are)
    file_outs: dict[str, FileOut] = field(default_factory=dict)
    fire_count: int = 0
    consumers: list[Actor] = field(default_factory=list)
    # control-node progress
    iterator: Any = None
    static_used: bool = False
    # scheduling and tape bookkeeping
    settled: tuple[tuple[str, Any], ...] = ()  # parameters that cannot change in place, as given
    watched: tuple[tuple[str, Any, bytes], ...] = ()  # parameters that can, as given and encoded then
    unwatched: tuple[tuple[str, Any, bytes], ...] = ()  # ones too big to encode at every firing
    shared: dict[str, str] = field(default_factory=dict)  # watched ones another actor was given too: who
    shared_parts: dict[str, list[tuple[Any, bytes]] | None] = field(default_factory=dict)  # what inside them (state.py)
    given: set[str] = field(default_factory=set)  # parameters changed so far: state from then on (see state.py)
    state_enc: bytes = b""
    # the size of its `__dict__` when it holds Flowtape's own fields and no more: a task given no
    # parameter that may change has no state then (-1: it has some; see state.recorded_state)
    plain_size: int = -1
    state_ids: tuple[int, ...] = ()  # what objects its state's fields held after its last firing (state.py)
    dirty: bool = False
    running: bool = False
    turn: int = 0  # the scheduling round in which it may fire next
    idle: bool = False  # a source whose last try gave nothing: retried only at its pool's quiescence
    quick: bool = False  # its last action took next to no time: run the next one without letting go of the lock
    pool: Any = None
    pools: dict[str, Any] = field(default_factory=dict)  # a composite's pools, by branch
    replay: Any = None  # the recorded firings this actor still has to replay
    answer: dict[str, Any] | None = None  # an agent's next answer, edited by a fork (fork.py): given, not asked
    formats: dict[tuple[int, int], bytes] = field(default_factory=dict)  # its simple firings' line formats, by queues taken from and put into (lines.py)
    spreads: dict[tuple[tuple[tuple[int, int], ...], tuple[int, ...]], tuple[bytes, list[Any]]] = field(default_factory=dict)  # and of many queues (taken from: index and count), with the queues touched (lines.py)
    starts: dict[tuple[tuple[int, ...], tuple[int, ...]], bytes] = field(default_factory=dict)  # a composite's: its own record's, by queues (lines.py)
    step_line: bytes = b""  # and its step's format, once made

    # The node's, copied once: the scheduler reads them for every firing, and a property's call
    # costs more than what it returns.
    kind: str = field(init=False)
    obj: Any = field(init=False)
    composite: bool = field(init=False)  # a workflow, loop or if
    control: bool = field(init=False)  # a loop or an if

    def __post_init__(self) -> None:
        self.kind = self.node.kind
        self.obj = self.node.obj
        self.composite = self.kind in ("workflow", "loop", "if")
        self.control = self.kind in ("loop", "if")

    def __repr__(self) -> str:
        return f"<Actor {self.path}>"


@dataclass
class Context:
    """The top-level firing a nested firing runs inside: it becomes one step."""

    actor: Actor
    fire_count: int
    touched: set[Queue] = field(default_factory=set)
    taken: list[tuple[Queue, list[Item]]] = field(default_factory=list)  # by every firing of the step
    any_live: bool = False


@dataclass(eq=False)
class Network:
    graph: Graph
    actors: list[Actor]
    by_path: dict[str, Actor]
    queues: list[Queue]
    by_id: dict[str, Queue]
    top: list[Actor]
    seeds: dict[str, list[Queue]]  # the main workflow's input ports
    outputs: dict[str, Queue]  # the main workflow's output ports


def _endpoint(prefix: str, node: Node | None, port: str) -> str:
    if node is None:
        return f"{prefix or ROOT}.{port}"
    return f"{prefix}/{node.name}.{port}" if prefix else f"{node.name}.{port}"


class _Builder:
    def __init__(self) -> None:
        self.actors: list[Actor] = []
        self.queues: list[Queue] = []

    def queue(self, qid: str, consumer: Actor | None, port: str) -> Queue:
        q = Queue(qid, len(self.queues), consumer, port)
        self.queues.append(q)
        return q

    def build(
        self, graph: Graph, prefix: str, owner: Actor | None, out_targets: dict[str, list[Queue]],
        out_files: dict[str, FileOut] | None = None,
    ) -> tuple[list[Actor], dict[str, list[Queue]]]:
        """Instantiate `graph`; its output ports feed `out_targets` (those in `out_files` are the
        `File` outputs of a workflow around it). Returns its top actors and seeds."""
        from .state import parameters  # (state.py works on actors: it imports this module)
        local: dict[int, Actor] = {}
        for node in graph.nodes:
            actor = Actor(f"{prefix}/{node.name}" if prefix else node.name, node, spec_of(node.obj), owner, len(self.actors))
            if actor.spec is not None:
                actor.settled, actor.watched, actor.unwatched = parameters(actor.spec, node.obj)
                if not actor.settled and not actor.watched:
                    actor.plain_size = len(actor.spec.fixed_attrs)
            self.actors.append(actor)
            local[id(node)] = actor
        for node in graph.nodes:
            actor = local[id(node)]
            if node.scope is None:
                actor.owner = owner
            else:
                control = local[id(node.scope.control)]
                actor.owner = control
                control.branches.setdefault(node.scope.branch, []).append(actor)
        seeds: dict[str, list[Queue]] = {}
        edge_queues: list[tuple[Edge, list[Queue]]] = []
        for edge in graph.edges:
            src_id = _endpoint(prefix, edge.src, edge.src_port)
            if edge.dst is None:
                targets = out_targets.setdefault(edge.dst_port, [])
            else:
                consumer = local[id(edge.dst)]
                q = self.queue(f"{src_id}->{_endpoint(prefix, edge.dst, edge.dst_port)}", consumer, edge.dst_port)
                consumer.inputs[edge.dst_port] = q
                targets = [q]
            edge_queues.append((edge, targets))
        for edge, targets in edge_queues:
            if edge.src is None:
                seeds.setdefault(edge.src_port, []).extend(targets)
            else:
                producer = local[id(edge.src)]
                producer.outputs.setdefault(edge.src_port, []).extend(targets)
                if edge.dst is None:
                    copies = _file_out(graph.outputs.get(edge.dst_port), producer, edge.src_port, out_files or {}, edge.dst_port)
                    if copies is not None:
                        producer.file_outs[edge.src_port] = copies if owner is not None else (copies[0], edge.dst_port)
        for node in graph.nodes:
            actor = local[id(node)]
            if isinstance(node.obj, Subflow):
                children, child_seeds = self.build(node.obj.graph, actor.path, actor, actor.outputs, actor.file_outs)
                actor.members = [a for a in children if a.owner is actor]
                actor.seeds = child_seeds
        top = [local[id(n)] for n in graph.nodes]
        for actor in top:
            if actor.control:
                actor.members = [m for branch in actor.branches.values() for m in branch]
        return top, seeds


def _file_out(declared: Any, producer: Actor, port: str, around: dict[str, FileOut], out: str) -> FileOut | None:
    """How the copies a workflow output port `out` holds are made, when it carries files: it is
    declared `File` (or `Resource`), or its producer's port is, or it feeds such an output of the
    workflow around it (whose run's output port, if it feeds one, names them); None when it
    carries other values."""
    outer = around.get(out)
    own = producer.spec.outputs.get(port) if producer.spec is not None else None
    for t in (declared, own.type if own is not None else None):
        if is_resource(t):
            ext = t.ext if isinstance(t, Resource) else (own.ext if own is not None else "")
            return ext, outer[1] if outer is not None else None
    return outer


def build_network(graph: Graph) -> Network:
    from .state import mark_shared
    builder = _Builder()
    out_targets: dict[str, list[Queue]] = {}
    outputs: dict[str, Queue] = {}
    names = [*graph.outputs, *(e.dst_port for e in graph.edges if e.dst is None)]
    for name in dict.fromkeys(names):
        outputs[name] = builder.queue(f"{ROOT}.{name}", None, name)
        out_targets[name] = [outputs[name]]
    top, seeds = builder.build(graph, "", None, out_targets)
    mark_shared(builder.actors)
    for actor in builder.actors:
        seen: set[int] = set()
        for targets in actor.outputs.values():
            for q in targets:
                if q.consumer is not None and id(q.consumer) not in seen:
                    seen.add(id(q.consumer))
                    actor.consumers.append(q.consumer)
    by_path = {a.path: a for a in builder.actors}
    return Network(
        graph=graph,
        actors=builder.actors,
        by_path=by_path,
        queues=builder.queues,
        by_id={q.id: q for q in builder.queues},
        top=[a for a in top if a.owner is None],
        seeds=seeds,
        outputs=outputs,
    )


def is_control(obj: Any) -> bool:
    return isinstance(obj, (LoopControl, IfControl))
