"""A flow as a picture's input: its actors (kind, nesting, where each is created) and its queues
as edges between actors or the workflow's ports. Read from a run's tape header, or from a flow
that never ran by building it (nothing fires). `flowtape graph` prints it; the language server
sends it to the editor's graph view."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from .errors import TraceCorruption
from .graph import ROOT, Graph
from .tape import ActorInfo, Header, decode_record

if TYPE_CHECKING:
    from .network import Network

HEADER_MOST = 64 << 20  # bytes: a header line longer than this is no header this writer wrote


class GraphActor(msgspec.Struct, omit_defaults=True):
    path: str
    kind: str  # task | agent | tool | workflow | loop | if
    cls: str
    file: str
    line: int
    owner: str = ""  # the composite (loop, if, nested workflow) whose firings run it; "" at top level
    branch: str = ""  # an if's member: "then" or "else"


class GraphEdge(msgspec.Struct, omit_defaults=True):
    """One queue. An end that is "" is the workflow's own port; one that is a composite's path with
    `inner` set is that composite's port seen from inside (a nested workflow's input, a loop's item)."""

    queue: int  # its index on the tape (steps' queue sizes refer to it)
    id: str
    src: str
    srcPort: str
    dst: str
    dstPort: str
    srcInner: bool = False
    dstInner: bool = False


class FlowGraph(msgspec.Struct, omit_defaults=True):
    workflow: str
    flowFile: str
    actors: list[GraphActor]
    edges: list[GraphEdge]
    inputs: list[str] = []
    outputs: list[str] = []
    runId: str = ""


def _end(text: str) -> tuple[str, str]:
    path, _, port = text.rpartition(".")
    return ("" if path == ROOT else path), port


def graph_of(workflow: str, flow_file: str, actors: list[ActorInfo], queues: list[str], run_id: str = "") -> FlowGraph:
    """The picture's input from what a tape header records (`replay.shape_of`)."""
    producers: dict[int, list[str]] = {}
    for a in actors:
        for q in a.puts:
            producers.setdefault(q, []).append(a.path)
    owners = {a.path: a.owner for a in actors}
    edges: list[GraphEdge] = []
    inputs: list[str] = []
    outputs: list[str] = []
    for index, qid in enumerate(queues):
        if "->" in qid:
            left, _, right = qid.partition("->")
            src, src_port = _end(left)
            dst, dst_port = _end(right)
            if not src and src_port not in inputs:
                inputs.append(src_port)
            # a composite's own port wired to one of its members: the edge starts (ends) inside it
            edges.append(GraphEdge(queue=index, id=qid, src=src, srcPort=src_port, dst=dst, dstPort=dst_port,
                                   srcInner=_inside(dst, src, owners), dstInner=_inside(src, dst, owners)))
            outer = src
        else:  # the run's own output `$.Port`: drawn from the outermost actors that put into it
            _, port = _end(qid)
            outputs.append(port)
            found = producers.get(index, [])
            outermost = [p for p in found if not any(_inside(p, other, owners) for other in found if other != p)]
            for producer in outermost or [""]:
                edges.append(GraphEdge(queue=index, id=qid, src=producer, srcPort="", dst="", dstPort=port))
            outer, src_port = (outermost[0] if len(outermost) == 1 else ""), port
        # a nested workflow's member that puts straight into its parent's queue: drawn to the
        # nested workflow's own output port, inside it
        for producer in producers.get(index, []):
            if producer != outer and _inside(producer, outer, owners) and owners.get(producer, _parent(producer)) == outer:
                edges.append(GraphEdge(queue=index, id=qid, src=producer, srcPort="", dst=outer, dstPort=src_port, dstInner=True))
    shown = [GraphActor(a.path, a.kind, a.cls, a.file, a.line, a.owner or _parent(a.path), a.branch) for a in actors]
    return FlowGraph(workflow=workflow, flowFile=flow_file, actors=shown, edges=edges, inputs=inputs,
                     outputs=outputs, runId=run_id)


def _parent(path: str) -> str:
    """A nested workflow's member is named under it (`outer/inner`): tapes from before `owner`."""
    return path.rpartition("/")[0]


def _inside(path: str, composite: str, owners: dict[str, str]) -> bool:
    """Whether actor `path` runs inside composite `composite` (at any depth)."""
    if not composite:
        return False
    while path:
        path = owners.get(path) or _parent(path)
        if path == composite:
            return True
    return False


def graph_of_header(header: Header) -> FlowGraph:
    return graph_of(header.workflow, header.flowFile, header.actors, header.queues, header.runId)


def network_of_flow(path: Path | str, workflow: str | None = None) -> tuple[Graph, Network]:
    """Build the flow (its builder runs, no actor fires): its graph and its network, the actors
    as they are before their first firing. Raises FlowError."""
    from .loader import load_flow
    from .network import build_network
    from .values import use_flow_module

    flow = load_flow(path, workflow)
    use_flow_module(getattr(flow.fn, "__module__", None))
    graph = flow.build()
    return graph, build_network(graph)


def graph_of_flow(path: Path | str, workflow: str | None = None) -> FlowGraph:
    """Build the flow (its builder runs, no actor fires) and describe it. Raises FlowError."""
    from .replay import shape_of

    graph, net = network_of_flow(path, workflow)
    actors, queues = shape_of(net)
    return graph_of(graph.name, graph.site.file, actors, queues)


def header_of_tape(tape: Path) -> Header:
    """A tape's first line, read alone (a picture needs no more of a long tape)."""
    with tape.open("rb") as fh:
        line = fh.readline(HEADER_MOST)
    try:
        record = decode_record(line.rstrip(b"\n"))
    except Exception as exc:  # noqa: BLE001 - whatever the bytes are, the answer is the same
        raise TraceCorruption(f"unreadable header: {exc}", 1, "header first") from None
    if not isinstance(record, Header):
        raise TraceCorruption("the first record is not a header", 1, "header first")
    return record


def describe(g: FlowGraph) -> str:
    """The graph as text: actors indented by nesting, then the edges."""
    children: dict[str, list[GraphActor]] = {}
    for a in g.actors:
        children.setdefault(a.owner, []).append(a)
    lines = [f"workflow {g.workflow} · {g.flowFile}"]
    if g.inputs:
        lines.append(f"  inputs: {', '.join(g.inputs)}")
    if g.outputs:
        lines.append(f"  outputs: {', '.join(g.outputs)}")

    def walk(owner: str, depth: int) -> None:
        for a in children.get(owner, []):
            branch = f" [{a.branch}]" if a.branch else ""
            lines.append(f"{'  ' * depth}{a.path} ({a.kind}, {a.cls}){branch} · line {a.line}")
            walk(a.path, depth + 1)

    lines.append("actors:")
    walk("", 1)
    lines.append("edges:")
    for e in g.edges:
        src = f"{e.src}.{e.srcPort}" if e.src and e.srcPort else (e.src or f"{ROOT}.{e.srcPort}")
        dst = f"{e.dst}.{e.dstPort}" if e.dst else f"{ROOT}.{e.dstPort}"
        lines.append(f"  {src} -> {dst}")
    return "\n".join(lines)
