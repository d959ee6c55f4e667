"""Building a workflow: `@workflow`, `connect`, `loop`, `if_`, nested workflows, and the checks
that make a miswired flow fail at build time with its file and line."""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import FlowError, FlowtapeError, FlowTypeError
from .instances import answer
from .model import spec_of
from .ports import PortRef, type_name, types_compatible
from .sites import Site, caller_site, class_site, traceback_site

ROOT = "$"


@dataclass(eq=False)
class Scope:
    """A loop body or an if branch: its actors fire only inside the control node's firings."""

    control: Node
    branch: str


@dataclass(eq=False)
class Node:
    """One actor of a workflow: a task, agent or tool instance, a nested workflow, a loop or an if."""

    name: str
    kind: str  # task | agent | tool | workflow | loop | if
    obj: Any
    created_at: Site
    defined_at: Site
    scope: Scope | None
    index: int

    @property
    def class_name(self) -> str:
        if self.kind == "workflow":
            return str(self.obj.graph.name)
        if self.kind in ("loop", "if"):
            return self.kind
        return type(self.obj).__name__


@dataclass(eq=False)
class Edge:
    src: Node | None  # None: the workflow's own input port
    src_port: str
    dst: Node | None  # None: the workflow's own output port
    dst_port: str
    site: Site


@dataclass(eq=False)
class Graph:
    """A built workflow: its actors in creation order and its edges."""

    name: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    nodes: list[Node]
    edges: list[Edge]
    site: Site
    max_workers: int | None = None


class LoopControl:
    """`lp = loop(items)`: one firing per item (on `lp.item`), then one on `lp.out` when done."""

    def __init__(self, iterable: Any) -> None:
        self.iterable = iterable
        self.body = Scope(control=None, branch="body")  # type: ignore[arg-type]

    @property
    def item(self) -> PortRef:
        return PortRef(self, "item", True)

    @property
    def out(self) -> PortRef:
        return PortRef(self, "out", True)

    @property
    def iter(self) -> PortRef:
        return PortRef(self, "iter", False)

    def __enter__(self) -> LoopControl:
        _current().scopes.append(self.body)
        return self

    def __exit__(self, *exc: object) -> None:
        _current().scopes.pop()


class _Branch:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def __enter__(self) -> _Branch:
        _current().scopes.append(self.scope)
        return self

    def __exit__(self, *exc: object) -> None:
        _current().scopes.pop()


class IfControl:
    """`c = if_(cond)`: each firing runs `with c.then:` or `with c.else_:` and passes cond on `c.out`."""

    def __init__(self, condition: Any) -> None:
        self.condition = condition
        self.then = _Branch(Scope(control=None, branch="then"))  # type: ignore[arg-type]
        self.else_ = _Branch(Scope(control=None, branch="else"))  # type: ignore[arg-type]

    @property
    def cond(self) -> PortRef:
        return PortRef(self, "cond", False)

    @property
    def out(self) -> PortRef:
        return PortRef(self, "out", True)


class Subflow:
    """A `@workflow` called inside another builder: an actor whose firing runs the child flow."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def __getattr__(self, name: str) -> PortRef:
        if name.startswith("_") or name == "graph":
            raise AttributeError(name)
        graph = self.__dict__["graph"]
        if name in graph.inputs:
            return PortRef(self, name, False, graph.inputs[name])
        if name in graph.outputs:
            return PortRef(self, name, True, graph.outputs[name])
        site = caller_site()
        ports = ", ".join([*graph.inputs, *graph.outputs]) or "none"
        raise FlowError(f"workflow {graph.name} has no port {name!r} (its ports: {ports})", site.file, site.line)


@dataclass(eq=False)
class _Build:
    """The workflow being built: actors register here as they are created."""

    wf: WorkflowDef
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    by_obj: dict[int, Node] = field(default_factory=dict)
    scopes: list[Scope] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    frame: Any = None  # the builder's frame: its locals, read after it returns, name the actors
    runs_dir: Path | None = None  # where a nested workflow's `instance=` run id is looked up

    def add(self, obj: Any, kind: str, site: Site, defined: Site) -> Node:
        if self.frame is None:
            self.frame = _find_frame(self.wf.fn.__code__)
        node = Node("", kind, obj, site, defined, self.scopes[-1] if self.scopes else None, len(self.nodes))
        self.nodes.append(node)
        self.by_obj[id(obj)] = node
        return node


def _find_frame(code: Any) -> Any:
    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back  # type: ignore[assignment]
    return frame


_building: contextvars.ContextVar[_Build | None] = contextvars.ContextVar("flowtape_build", default=None)


def _current() -> _Build:
    build = _building.get()
    if build is None:
        site = caller_site()
        raise FlowError("this can only be used inside a @workflow function", site.file, site.line)
    return build


def register_actor(obj: Any, site: Site) -> None:
    """Called by a task's constructor: inside a builder it becomes an actor of that workflow."""
    build = _building.get()
    if build is None:
        return
    spec = spec_of(obj)
    assert spec is not None
    build.add(obj, spec.kind, site, spec.defined_at)


def loop(iterable: Any = None) -> LoopControl:
    """A loop node over `iterable` (or over iterables arriving on `lp.iter`)."""
    build = _current()
    control = LoopControl(iterable)
    node = build.add(control, "loop", caller_site(), caller_site())
    control.body.control = node
    return control


def if_(condition: Any = None) -> IfControl:
    """An if node on a static `condition` (fires once) or on tokens arriving on `c.cond`."""
    build = _current()
    control = IfControl(condition)
    node = build.add(control, "if", caller_site(), caller_site())
    control.then.scope.control = node
    control.else_.scope.control = node
    return control


def _endpoint(build: _Build, ref: PortRef | str, want_output: bool, site: Site) -> tuple[Node | None, str, Any]:
    """Resolve one side of a connection; a string names the workflow's own port."""
    if isinstance(ref, str):
        declared = build.inputs if want_output else build.outputs
        if (build.wf.declared_inputs if want_output else build.wf.declared_outputs) and ref not in declared:
            kind = "input" if want_output else "output"
            other = build.outputs if want_output else build.inputs
            hint = f"; {ref!r} is one of its {'outputs' if want_output else 'inputs'}" if ref in other else ""
            names = ", ".join(declared) or "none"
            raise FlowError(
                f"workflow {build.wf.name} has no {kind} port {ref!r} (its {kind}s: {names}){hint}",
                site.file, site.line,
            )
        declared.setdefault(ref, None)
        return None, ref, declared.get(ref)
    if not isinstance(ref, PortRef):
        raise FlowError(f"connect() takes ports like a.Out or workflow port names, not {ref!r}", site.file, site.line)
    node = build.by_obj.get(id(ref.owner))
    if node is None:
        raise FlowError(f"{ref} belongs to an actor that is not part of workflow {build.wf.name}", site.file, site.line)
    if ref.is_output != want_output:
        side = "source" if want_output else "target"
        kind = "an output" if ref.is_output else "an input"
        name = _display(node, ref.name)
        raise FlowError(
            f"{name} is {kind} port: it cannot be the {side} of a connection (port wired in the wrong direction)",
            site.file, site.line,
        )
    return node, ref.name, ref.type


def _display(node: Node | None, port: str) -> str:
    if node is None:
        return f"workflow port {port!r}"
    return f"{node.name or node.class_name}.{port}"


def connect(source: PortRef | str, target: PortRef | str) -> None:
    """Wire an output port (or a workflow input name) to an input port (or a workflow output name)."""
    build = _current()
    site = caller_site()
    _name_from_frame(build, sys._getframe(1))
    src, src_port, src_type = _endpoint(build, source, True, site)
    dst, dst_port, dst_type = _endpoint(build, target, False, site)
    for edge in build.edges:
        if edge.dst is dst and edge.dst_port == dst_port and dst is not None:
            raise FlowError(
                f"{_display(dst, dst_port)} already has an incoming edge (from {_display(edge.src, edge.src_port)}, "
                f"line {edge.site.line}); an input port takes one edge: add a second port, or a merging task",
                site.file, site.line,
            )
    if not types_compatible(src_type, dst_type):
        raise FlowError(
            f"type mismatch: {_display(src, src_port)} carries {type_name(src_type)} "
            f"but {_display(dst, dst_port)} expects {type_name(dst_type)}",
            site.file, site.line,
        )
    build.edges.append(Edge(src, src_port, dst, dst_port, site))


def _name_from_frame(build: _Build, frame: Any) -> None:
    """Give actors the names of the builder's local variables that hold them."""
    for var, value in list(frame.f_locals.items()):
        if var.startswith("__"):
            continue
        values = list(enumerate(value)) if isinstance(value, (list, tuple)) else [(None, value)]
        for i, item in values:
            node = build.by_obj.get(id(item))
            if node is not None and not node.name:
                node.name = var if i is None else f"{var}_{i}"
                if isinstance(item, (LoopControl, IfControl, Subflow)) or spec_of(item) is not None:
                    try:
                        item._ft_name = node.name
                    except AttributeError:
                        pass


class WorkflowDef:
    """What `@workflow` returns: call it inside another builder to nest it; pass it to `run`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        inputs: dict[str, Any] | None,
        outputs: dict[str, Any] | None,
        max_workers: int | None,
    ) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.inputs = dict(inputs or {})
        self.outputs = dict(outputs or {})
        # each side declared or not on its own: `inputs=` alone leaves the outputs to the wiring
        self.declared_inputs, self.declared_outputs = inputs is not None, outputs is not None
        self.max_workers = max_workers
        code = getattr(fn, "__code__", None)
        self.site = Site(code.co_filename, code.co_firstlineno) if code else class_site(type(fn))
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def build(self, runs_dir: Path | None = None) -> Graph:
        """Run the builder and return the checked graph (`runs_dir`: where a nested workflow's
        `instance=` run id is looked up)."""
        build = _Build(self, inputs=dict(self.inputs), outputs=dict(self.outputs), runs_dir=runs_dir)
        token = _building.set(build)
        try:
            self.fn()
        except FlowtapeError:
            raise
        except Exception as exc:  # the user's builder code raised: a mistake in the flow, named by its line
            site = traceback_site(exc) or self.site
            raise FlowError(f"building workflow {self.name!r} failed: {type(exc).__name__}: {exc}{_hint(exc)}", site.file, site.line) from exc
        finally:
            _building.reset(token)
        if build.frame is not None:
            _name_from_frame(build, build.frame)
            build.frame = None
        graph = Graph(self.name, build.inputs, build.outputs, build.nodes, build.edges, self.site, self.max_workers)
        _finish_names(graph)
        check(graph)
        return graph

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        outer = _building.get()
        site = caller_site()
        instance = kwargs.pop("instance", None)
        if args or kwargs:  # (wfpy takes them and drops them: a typo would go unnoticed)
            said = f"unexpected keyword argument {next(iter(kwargs))!r}" if kwargs else f"{len(args)} positional argument(s)"
            raise FlowTypeError(f"{self.name}() got {said}: a workflow takes only instance= (a recorded run to stand for it)",
                                site.file, site.line)
        if instance is not None:
            if outer is None:
                raise FlowTypeError(f"{self.name}(instance=...) is only meaningful nested in another workflow", site.file, site.line)
            return answer(self, instance, site, outer.runs_dir)
        if outer is None:
            return self.build()
        graph = self.build(outer.runs_dir)
        proxy = Subflow(graph)
        outer.add(proxy, "workflow", site, self.site)
        return proxy

    def __repr__(self) -> str:
        return f"<workflow {self.name}>"


def _hint(exc: Exception) -> str:
    """A likely cause the error itself does not say: a class with ports used as an actor, undecorated."""
    owner = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
    cls = type(owner)
    if owner is not None and hasattr(cls, "Ports") and spec_of(owner) is None:
        return f" ({cls.__name__} has a Ports class but is no actor: decorate it with @task, @agent or @tool)"
    return ""


def workflow(
    fn: Callable[..., Any] | None = None,
    *,
    inputs: dict[str, Any] | None = None,
    outputs: dict[str, Any] | None = None,
    max_workers: int | None = None,
) -> Any:
    """Make a builder function a workflow; `inputs=`/`outputs=` declare its ports for nesting and checks."""

    def decorate(target: Any) -> WorkflowDef:
        if isinstance(target, type):
            site = class_site(target)
            raise FlowError("@workflow decorates a builder function; class-based workflows are not supported", site.file, site.line)
        return WorkflowDef(target, inputs, outputs, max_workers)

    return decorate(fn) if fn is not None else decorate


def _finish_names(graph: Graph) -> None:
    """Name the actors no variable named, and number those that one variable named in turn (`w`
    assigned in a `for` loop: `w_0`, `w_1`, …): every actor's name is its own."""
    by_name: dict[str, list[Node]] = {}
    for node in graph.nodes:
        if node.name:
            by_name.setdefault(node.name, []).append(node)
    taken = set(by_name)
    for name, nodes in by_name.items():
        if len(nodes) > 1:
            i = 0
            for node in nodes:
                while f"{name}_{i}" in taken:
                    i += 1
                _rename(node, f"{name}_{i}")
                taken.add(node.name)
    counters: dict[str, int] = {}
    for node in graph.nodes:
        if node.name:
            continue
        base = node.class_name.lower()
        while True:
            counters[base] = counters.get(base, 0) + 1
            candidate = f"{base}_{counters[base]}"
            if candidate not in taken:
                break
        _rename(node, candidate)
        taken.add(candidate)


def _rename(node: Node, name: str) -> None:
    node.name = name
    try:
        node.obj._ft_name = name
    except AttributeError:
        pass


def _connected_inputs(graph: Graph) -> dict[int, set[str]]:
    wired: dict[int, set[str]] = {}
    for edge in graph.edges:
        if edge.dst is not None:
            wired.setdefault(id(edge.dst), set()).add(edge.dst_port)
    return wired


def _check_branches(graph: Graph) -> None:
    """Refuse one output wired into both branches of an if: each firing runs one branch, so the
    token at the other would wait there and run it later, under another firing's condition."""
    seen: dict[tuple[int, str, int], tuple[str, Edge]] = {}
    for edge in graph.edges:
        scope = edge.dst.scope if edge.dst is not None else None
        if edge.src is None or scope is None or scope.control.kind != "if" or edge.src.scope is scope:
            continue
        if edge.src is scope.control:  # the if's own `out`: only the branch that runs gets it
            continue
        key = (id(edge.src), edge.src_port, id(scope.control))
        other = seen.setdefault(key, (scope.branch, edge))
        if other[0] != scope.branch:
            raise FlowError(
                f"{edge.src.name}.{edge.src_port} is wired into both branches of the if {scope.control.name}: a "
                "firing runs one branch, and the token left at the other would run it later, under another "
                "condition. Route the value to the branch that will run (return {'Cond': c, 'Then' if c else "
                "'Else': value}), as examples/if_else.py does",
                edge.site.file, edge.site.line,
            )


def check(graph: Graph) -> None:
    """Refuse actors that can never fire because what they consume is not wired."""
    _check_branches(graph)
    wired = _connected_inputs(graph)
    for node in graph.nodes:
        have = wired.get(id(node), set())
        spec = spec_of(node.obj)
        if isinstance(node.obj, (LoopControl, IfControl)):
            port, given = ("iter", node.obj.iterable) if isinstance(node.obj, LoopControl) else ("cond", node.obj.condition)
            if given is None and port not in have:
                what = "loop(items)" if port == "iter" else "if_(condition)"
                raise FlowError(
                    f"{node.kind} {node.name} has nothing to go on: give {what}, or wire its {port!r} port",
                    node.created_at.file, node.created_at.line,
                )
        if spec is None:
            continue
        if spec.kind == "task":
            needs = [set(a.consumes) for a in spec.actions]
            if all(need - have for need in needs):
                missing = sorted(set().union(*needs) - have)
                raise FlowError(
                    f"{node.name} ({spec.name}) can never fire: its input port(s) {', '.join(map(repr, missing))} "
                    "are not connected",
                    node.created_at.file, node.created_at.line,
                )
        else:
            missing = sorted(set(spec.inputs) - have)
            if missing:
                raise FlowError(
                    f"{node.name} ({spec.name}) can never fire: its input port(s) {', '.join(map(repr, missing))} "
                    "are not connected",
                    node.created_at.file, node.created_at.line,
                )
            if spec.kind == "agent" and spec.agent is not None and not spec.inputs and not spec.agent.without_input:
                raise FlowError(
                    f"agent {node.name} ({spec.name}) has no input port, so it would never fire: give it "
                    "fireable_without_input=N to fire N times without input",
                    node.created_at.file, node.created_at.line,
                )
