"""Task classes: `@task`, `@action`, `@guard`, `@agent`, `@tool` turn a class into an actor type."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import FlowError, NoSuchPort
from .ports import PortRef, PortSpec, Resource, collect_ports
from .schedules import STATE_ATTR, Schedule, by_priority, collect_schedule
from .sites import Site, caller_site, class_site

SPEC_ATTR = "__flowtape__"


@dataclass
class ActionSpec:
    """One behaviour of a task: what it takes, what it puts, when it may fire."""

    name: str
    fn: Callable[..., Any]
    consumes: dict[str, int]
    produces: dict[str, int] | None  # None (`@action` without produces=): the return, whole, on every output port
    guard: Callable[..., Any] | None
    line: int
    single: str | None = field(init=False, default=None)  # the port, when it produces one token on one port

    def __post_init__(self) -> None:
        if self.produces is not None and list(self.produces.values()) == [1]:
            self.single = next(iter(self.produces))


@dataclass
class AgentConfig:
    prompt: str
    transport: Any  # a name of agents.names.TRANSPORTS' values, or a callable
    mock_outputs: dict[str, Any]
    model: str
    without_input: int = 0  # how many times an agent with no input port fires (wfpy's fireable_without_input)
    provider: str | None = None  # for transport="http": which API (else the model's "provider/" prefix)
    base_url: str | None = None  # where the model answers (wfpy's endpoint=)
    api_key_env: str | None = None  # the environment variable holding the key
    timeout: float | None = None  # seconds a request may take
    retries: int = 2  # the SDK's retries of a 429, a 5xx, a timeout (with backoff, honouring retry-after)
    repair: int = 2  # times a bad answer is asked again, the error said to the model
    max_tokens: int | None = None  # of an answer: the server's own limit when None (the Messages API's: 4096)
    context_budget: int = 50  # of the chat history, the latest messages sent back to the model (wfpy's)


@dataclass
class ToolConfig:
    cmd: str
    args: list[str]
    cwd: str | None
    env: dict[str, str]
    shell: bool
    timeout: float | None
    inherit_stdio: bool = False  # what the tool prints goes to the console as it comes (else kept for errors)


@dataclass
class TaskSpec:
    """Everything Flowtape knows about a task class, computed once when it is decorated."""

    cls: type
    name: str
    kind: str  # "task" | "agent" | "tool"
    ports: dict[str, PortSpec]
    inputs: dict[str, PortSpec]
    outputs: dict[str, PortSpec]
    actions: list[ActionSpec]
    parameters: dict[str, Any]
    state_defaults: dict[str, Any]
    defined_at: Site
    agent: AgentConfig | None = None
    tool: ToolConfig | None = None
    schedule: Schedule | None = None  # a `Schedule` inner class (see schedules.py)
    zero_input: bool = field(init=False, default=False)
    fixed_attrs: frozenset[str] = field(init=False, default=frozenset())

    def __post_init__(self) -> None:
        self.zero_input = any(not a.consumes for a in self.actions)
        self.refresh()

    def refresh(self) -> None:
        """Instance attributes that are not state: parameters and Flowtape's own bookkeeping."""
        extra = {"chat_history"} if self.kind == "agent" else set()
        self.fixed_attrs = frozenset({*self.parameters, "_ft_name", "_ft_site", *extra})


def spec_of(obj: Any) -> TaskSpec | None:
    spec = getattr(type(obj), SPEC_ATTR, None)
    return spec if isinstance(spec, TaskSpec) else None


def action(
    fn: Callable[..., Any] | None = None,
    *,
    consumes: dict[str, int] | None = None,
    produces: dict[str, int] | None = None,
) -> Any:
    """Mark a method as one of the task's actions. Without `consumes`: one token per input port."""

    def mark(method: Callable[..., Any]) -> Callable[..., Any]:
        method._ft_action = {"consumes": consumes, "produces": produces}  # type: ignore[attr-defined]
        return method

    return mark(fn) if fn is not None else mark


def guard(predicate: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`predicate(self, *peeked_tokens)` runs before anything is taken; the action fires only if true."""

    def mark(method: Callable[..., Any]) -> Callable[..., Any]:
        method._ft_guard = predicate  # type: ignore[attr-defined]
        return method

    return mark


def _line_of(fn: Callable[..., Any]) -> int:
    code = getattr(fn, "__code__", None)
    return code.co_firstlineno if code is not None else 0


def _check_arity(fn: Callable[..., Any], tokens: int, what: str, cls: type, line: int) -> None:
    """Refuse an action (or guard) whose signature cannot take exactly `tokens` tokens."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        maximum = None
    else:
        maximum = len(positional)
    required = sum(1 for p in positional if p.default is p.empty)
    if tokens < required or (maximum is not None and tokens > maximum):
        takes = f"{required}" if maximum == required else f"{required} to {maximum}"
        file = class_site(cls).file
        raise FlowError(
            f"{cls.__name__}.{what} takes {takes} token argument(s) but consumes {tokens}", file, line
        )


def _collect_actions(cls: type, ports: dict[str, PortSpec]) -> list[ActionSpec]:
    inputs = [p for p in ports.values() if not p.is_output]
    outputs = {p.port_name for p in ports.values() if p.is_output}
    file = class_site(cls).file
    found: dict[str, ActionSpec] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            marks = getattr(value, "_ft_action", None)
            if not callable(value) or marks is None:
                continue
            line = _line_of(value)
            consumes = marks["consumes"]
            if consumes is None:
                consumes = {p.port_name: 1 for p in inputs}
            produces = marks["produces"]
            for port, count in consumes.items():
                if port not in ports:
                    raise FlowError(f"{cls.__name__}.{name} consumes from unknown port {port!r}", file, line)
                if port in outputs:
                    raise FlowError(f"{cls.__name__}.{name} consumes from {port!r}, an output port", file, line)
                if not isinstance(count, int) or count < 1:
                    raise FlowError(f"{cls.__name__}.{name}: consumes[{port!r}] must be >= 1", file, line)
            for port in produces or {}:
                if port not in ports:
                    raise FlowError(f"{cls.__name__}.{name} produces on unknown port {port!r}", file, line)
                if port not in outputs:
                    raise FlowError(f"{cls.__name__}.{name} produces on {port!r}, an input port", file, line)
            found[name] = ActionSpec(name, value, dict(consumes), produces, getattr(value, "_ft_guard", None), line)
    actions = list(found.values())
    if not actions:
        method = getattr(cls, "action", None)
        if callable(method):
            line = _line_of(method)
            consumes = {p.port_name: 1 for p in inputs}
            produces = {p.port_name: 1 for p in ports.values() if p.is_output}  # each output port, as wfpy has it
            actions = [ActionSpec("action", method, consumes, produces, getattr(method, "_ft_guard", None), line)]
    for spec in actions:
        tokens = sum(spec.consumes.values())
        _check_arity(spec.fn, tokens, spec.name, cls, spec.line)
        if spec.guard is not None:
            _check_arity(spec.guard, tokens, f"{spec.name} guard", cls, spec.line)
    return actions


def _classify_fields(cls: type, ports: dict[str, PortSpec]) -> tuple[dict[str, Any], dict[str, Any]]:
    annotations: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        annotations.update(vars(klass).get("__annotations__", {}))
    port_attrs = {p.attr for p in ports.values()}
    parameters: dict[str, Any] = {}
    state: dict[str, Any] = {}
    for name, annotation in annotations.items():
        if name.startswith("__") or name == "Ports" or name in port_attrs:
            continue
        if name.startswith("_") or hasattr(cls, name):
            state[name] = getattr(cls, name, None)
        else:
            parameters[name] = annotation
    return parameters, state


def _install_instance_hooks(cls: type, spec: TaskSpec) -> None:
    user_init = vars(cls).get("__init__")

    def __init__(self: Any, **kwargs: Any) -> None:
        unexpected = sorted(set(kwargs) - set(spec.parameters))
        if unexpected:
            raise TypeError(f"{spec.name}() got unexpected parameter(s): {', '.join(map(repr, unexpected))}")
        for name in spec.parameters:
            if name not in kwargs:
                raise TypeError(f"{spec.name}() missing required parameter {name!r}")
            setattr(self, name, kwargs[name])
        for name, default in spec.state_defaults.items():
            setattr(self, name, copy.deepcopy(default))
        if spec.schedule is not None:
            setattr(self, STATE_ATTR, spec.schedule.initial)
        if spec.kind == "agent":
            self.chat_history = []
        self._ft_name = ""
        self._ft_site = caller_site()
        from .graph import register_actor

        register_actor(self, self._ft_site)
        if user_init is not None:
            user_init(self, **kwargs)

    def __getattr__(self: Any, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        port = spec.ports.get(name) or next((p for p in spec.ports.values() if p.attr == name), None)
        if port is None:
            names = ", ".join(spec.ports) or "none"
            fields = ", ".join([*spec.parameters, *(f for f in spec.state_defaults if not f.startswith("_"))])
            site = caller_site()
            raise NoSuchPort(f"{spec.name} has no port or attribute {name!r} (its ports: {names}"
                             f"{f'; its fields: {fields}' if fields else ''})", site.file, site.line)
        return PortRef(self, port.port_name, port.is_output, port.type)

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__getattr__ = __getattr__  # type: ignore[attr-defined]


def _make_spec(cls: type, kind: str) -> TaskSpec:
    if not isinstance(cls, type):
        raise TypeError(f"@{kind} decorates a class, not {type(cls).__name__}")
    ports = collect_ports(cls)
    parameters, state = _classify_fields(cls, ports)
    actions = _collect_actions(cls, ports) if kind == "task" else []
    site = class_site(cls)
    if kind == "task" and not actions:
        raise FlowError(f"task {cls.__name__} has no action: define `def action(self, ...)` or an @action", site.file, site.line)
    actions = by_priority(cls, actions, site)
    return TaskSpec(
        cls=cls,
        name=cls.__name__,
        kind=kind,
        ports=ports,
        inputs={n: p for n, p in ports.items() if not p.is_output},
        outputs={n: p for n, p in ports.items() if p.is_output},
        actions=actions,
        parameters=parameters,
        state_defaults=state,
        defined_at=site,
        schedule=collect_schedule(cls, [a.name for a in actions], site),
    )


def task(cls: type) -> type:
    """Make `cls` an actor type: annotated fields without default are parameters, the rest state."""
    spec = _make_spec(cls, "task")
    setattr(cls, SPEC_ATTR, spec)
    _install_instance_hooks(cls, spec)
    return cls


def source(cls: type | None = None, *, viewType: str | None = None, action_name: str = "open") -> Any:  # noqa: N803 - wfpy's spelling
    """wfpy's `@source`: a task with one output port that puts its `path` parameter (a `File`, say)
    once. A class that defines its own actions keeps them. `viewType` and `action_name` tell wfpy's
    editor how to open it; Flowtape takes them and leaves them."""

    def decorate(klass: type) -> type:
        site = class_site(klass)
        ports = collect_ports(klass)
        inputs = [n for n, p in ports.items() if not p.is_output]
        outputs = [n for n, p in ports.items() if p.is_output]
        if inputs or len(outputs) != 1:
            raise FlowError(f"@source {klass.__name__} needs one output port and no input port "
                            f"(it has inputs: {', '.join(inputs) or 'none'}; outputs: {', '.join(outputs) or 'none'})",
                            site.file, site.line)
        if not any(hasattr(v, "_ft_action") for v in vars(klass).values()):
            def emit(self: Any) -> Any:
                self._ft_emitted = True
                return str(self.path) if isinstance(self.path, Resource) else self.path  # a File's token is its path

            added = {"emit": action(consumes={}, produces={outputs[0]: 1})(guard(lambda self: not self._ft_emitted)(emit)),
                     "_ft_emitted": False}  # state: once per instance, kept by the tape, restored by a resume
            for name, value in added.items():
                setattr(klass, name, value)
            klass.__annotations__ = {**vars(klass).get("__annotations__", {}), "_ft_emitted": bool}
        task(klass)
        spec = getattr(klass, SPEC_ATTR)
        if "path" not in spec.parameters:
            why = "has a class-level default, which makes it state" if "path" in spec.state_defaults else "is missing"
            raise FlowError(f"@source {klass.__name__} puts its `path` parameter, which {why}: declare `path: File` "
                            "without a default", site.file, site.line)
        return klass

    return decorate(cls) if cls is not None else decorate


def agent(
    cls: type | None = None,
    *,
    prompt: str = "",
    transport: Any = "http",
    mock_outputs: dict[str, Any] | None = None,
    mockOutputs: dict[str, Any] | None = None,  # noqa: N803 - wfpy's camelCase spelling
    model: str = "",
    fireable_without_input: int = 0,
    fireableWithoutInput: int | None = None,  # noqa: N803 - wfpy's camelCase spelling
    provider: str | None = None,
    base_url: str | None = None,
    endpoint: str | None = None,  # wfpy's name for base_url (a whole URL: its path is dropped)
    api_key_env: str | None = None,
    timeout: float | None = None,
    timeout_ms: int | None = None,  # wfpy's
    timeoutMs: int | None = None,  # noqa: N803 - wfpy's camelCase spelling
    retries: int = 2,
    repair: int = 2,
    max_tokens: int | None = None,
    context_budget: int = 50,
    contextBudget: int | None = None,  # noqa: N803 - wfpy's camelCase spelling
    **_ignored: Any,
) -> Any:
    """An LLM agent task. `transport="http"` (the default, as in wfpy), `"openai"` or `"anthropic"`
    calls a model (see agents/config.py for where its settings come from); `transport="mock"`
    answers from `mock_outputs` (or the port types) offline; a callable transport
    `fn(prompt, inputs, history) -> {port: value}` plugs in anything else.
    An agent with no input port fires `fireable_without_input` times."""
    from .agents.names import transport_name

    if cls is not None:
        raise TypeError("@agent needs arguments: @agent(prompt='...')")
    if not callable(transport):
        try:
            transport = transport_name(str(transport or "http"))  # (None or "" is http, as in wfpy)
        except ValueError as exc:
            site = caller_site()
            raise FlowError(str(exc), site.file, site.line) from None
    ms = timeoutMs if timeoutMs is not None else timeout_ms
    seconds = timeout if timeout is not None else (ms / 1000 if ms is not None else None)
    if repair < 0 or retries < 0 or (seconds is not None and seconds <= 0) or (max_tokens is not None and max_tokens < 1):
        site = caller_site()
        raise FlowError("@agent's repair= and retries= are at least 0, its timeout= is above 0 and its max_tokens= at least 1",
                        site.file, site.line)
    outputs = mock_outputs if mockOutputs is None else mockOutputs
    budget = int(fireable_without_input if fireableWithoutInput is None else fireableWithoutInput)

    def decorate(klass: type) -> type:
        spec = _make_spec(klass, "agent")
        unknown = [port for port in outputs or {} if port not in spec.outputs]
        if unknown:  # said when the flow loads, not at the first firing
            site = class_site(klass)
            raise FlowError(f"{klass.__name__}: mock_outputs names {', '.join(map(repr, unknown))}, which is no output port "
                            f"(its outputs: {', '.join(spec.outputs) or 'none'})", site.file, site.line)
        spec.agent = AgentConfig(prompt, transport, dict(outputs or {}), model, max(budget, 0), provider,
                                 base_url or endpoint, api_key_env, seconds, retries, repair, max_tokens,
                                 max(int(context_budget if contextBudget is None else contextBudget), 0))
        spec.kind = "agent"
        spec.refresh()
        setattr(klass, SPEC_ATTR, spec)
        _install_instance_hooks(klass, spec)
        return klass

    return decorate


def tool(
    cls_or_fn: Any = None,
    *,
    cmd: str = "",
    args: list[str] | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    shell: bool = False,
    timeout: float | None = None,
    inherit_stdio: bool = False,
    **_ignored: Any,
) -> Any:
    """An external process. On a class: an actor whose firing runs `cmd` with `{in.X}`, `{out.X}`,
    `{param.X}` placeholders; each output port gets the path of a file the tool writes.
    On a function: the function becomes a call of `cmd` (its keyword arguments fill `{name}`).
    With `inherit_stdio`, what the tool prints is shown as it comes (a long tool's progress)."""
    if cls_or_fn is not None:
        raise TypeError("@tool needs at least cmd=: @tool(cmd='...')")
    if not cmd:
        raise TypeError("@tool needs cmd=")
    config = ToolConfig(cmd, list(args or []), cwd, dict(env or {}), shell, timeout, inherit_stdio)

    def decorate(target: Any) -> Any:
        if isinstance(target, type):
            spec = _make_spec(target, "tool")
            spec.tool = config
            setattr(target, SPEC_ATTR, spec)
            _install_instance_hooks(target, spec)
            return target
        if callable(target):
            from .tools import function_tool

            return function_tool(target, config)
        raise TypeError("@tool decorates a class or a function")

    return decorate
