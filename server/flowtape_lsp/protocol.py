"""Every custom message of the Flowtape language server, defined once (see docs/protocol.md).

Params arrive as raw JSON values and are validated here with `decode_params`, so a bad request
gets a JSON-RPC error that says what is wrong instead of no answer at all."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec
from flowtape.flowgraph import FlowGraph
from flowtape.runner import MAX_WORKERS
from flowtape.tape import Divergence
from flowtape.usage import ModelCall, Usage
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

# ---- method and command names ------------------------------------------------------------------

RUN_STARTED = "flowtape/runStarted"
STEPS = "flowtape/steps"
RUN_FINISHED = "flowtape/runFinished"
RUNS = "flowtape/runs"
GET_STEPS = "flowtape/getSteps"
STEP_DETAIL = "flowtape/stepDetail"
SELECT_STEP = "flowtape/selectStep"
STEP_HINTS = "flowtape/stepHints"
RUN_OUTPUTS = "flowtape/runOutputs"
WORKFLOW_INPUTS = "flowtape/workflowInputs"
FIND_STEPS = "flowtape/findSteps"
GRAPH = "flowtape/graph"
QUEUE_TOKENS = "flowtape/queueTokens"
TIMELINE = "flowtape/timeline"

CMD_RUN = "flowtape.run"
CMD_RESUME = "flowtape.resumeAtStep"
CMD_RERUN_ACTOR = "flowtape.rerunActor"
CMD_STOP = "flowtape.stop"
CMD_FORK = "flowtape.fork"
CMD_SHOW_RUNS = "flowtape.showRuns"
COMMANDS = (CMD_RUN, CMD_RESUME, CMD_RERUN_ACTOR, CMD_STOP, CMD_SHOW_RUNS, CMD_FORK)
DIFF = "flowtape/diff"
EDITABLES = "flowtape/editables"
FIRING_AT = "flowtape/firingAt"
# A client-side command: the diff of a resumed run against the run it resumed (a divergence links to it)
CLIENT_COMPARE = "flowtape.compareRuns"
# A client-side command (the VS Code client's runs view); the "Runs (n)" lens points at it for a
# client that says it has it (`ClientOptions.clientCommands`), else at `flowtape.showRuns`.
CLIENT_SHOW_RUNS = "flowtape.view.refresh"


# ---- errors ---------------------------------------------------------------------------------------


class RunNotFound(JsonRpcException):
    """-32001: an unknown run id, or a step that the run does not have."""

    CODE = -32001
    MESSAGE = "Not found"


class TapeDamaged(JsonRpcException):
    """-32003: the run's tape cannot be read where the request needs it."""

    CODE = -32003
    MESSAGE = "Tape damaged"


def invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message=message)


def not_found(message: str) -> RunNotFound:
    return RunNotFound(message=message)


def damaged(run_id: str, problem: object) -> TapeDamaged:
    return TapeDamaged(message=f"run {run_id}'s tape is damaged: {problem} (`flowtape verify {run_id}` names the line)")


# ---- params (client -> server) --------------------------------------------------------------------

Step = Annotated[int, msgspec.Meta(ge=0)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
Workers = Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS)]
Name = Annotated[str, msgspec.Meta(min_length=1)]
ExecutorName = Literal["threads", "ray"]  # flowtape.executors.EXECUTORS


class Params(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every params object. A field it does not know is refused: a misspelt `stpe` would
    otherwise resume at the last step instead of failing."""


class ClientOptions(msgspec.Struct, kw_only=True):
    """What the client says it can do, in `initializationOptions` (docs/protocol.md). Unknown
    fields are other options: ignored here. A client that says nothing is a plain LSP client: its
    lenses carry server commands only, each with everything it needs."""

    clientCommands: list[str] = msgspec.field(default_factory=list)  # client-side commands it implements
    asksForStep: bool = False  # it asks the user for the step of a lens `flowtape.resumeAtStep {runId}`
    stepHints: bool = False  # it asks for its stepper's hints (flowtape/stepHints) and redraws them itself
    trust: Literal["none", "workspace", "all"] = "workspace"  # how far the folder is trusted to run code (permits.py)


class ShowRunsParams(Params):
    uri: Name
    workflow: Name | None = None


class RunParams(Params):
    uri: Name
    workflow: Name | None = None
    inputs: dict[str, Any] | None = None
    maxWorkers: Workers | None = None
    executor: ExecutorName | None = None  # where its firings run (None: threads)
    rayAddress: Name | None = None  # the Ray cluster to join (None: a local instance for the run)


class ResumeAtStepParams(Params):
    runId: Name
    step: Step | None = None  # None: where the run stopped (its last step, and inside the composite it stopped in)
    maxWorkers: Workers | None = None  # None: the recorded run's
    executor: ExecutorName | None = None  # as for RunParams (None: threads, whatever the recorded run used)
    rayAddress: Name | None = None


class RerunActorParams(Params):
    runId: Name
    actor: Name | None = None  # or the line that creates it:
    uri: Name | None = None
    line: Step | None = None  # 0-based, in the file's text as the editor holds it
    executor: ExecutorName | None = None  # as for RunParams
    rayAddress: Name | None = None


class StopParams(Params):
    runId: Name


class RunsParams(Params):
    uri: Name | None = None


class GetStepsParams(Params, rename={"from_": "from"}):
    runId: Name
    from_: PositiveInt = 1
    limit: Annotated[int, msgspec.Meta(ge=1, le=10000)] = 500


class StepDetailParams(Params):
    runId: Name
    step: PositiveInt


class GraphParams(Params):
    runId: Name | None = None  # a run's graph, from its tape's header
    uri: Name | None = None  # or a flow file's, built without running it
    workflow: Name | None = None


class QueueTokensParams(Params):
    runId: Name
    step: PositiveInt
    queue: Annotated[int, msgspec.Meta(ge=0)]
    limit: Annotated[int, msgspec.Meta(ge=1, le=10000)] = 200


class TimelineParams(Params, rename={"from_": "from"}):
    runId: Name
    from_: PositiveInt = 1  # the first step wanted: a live run's next ones, asked as it streams


class SelectStepParams(Params):
    runId: Name
    step: Step


class StepHintsParams(Params):
    """The inlay hints of file `uri` at each of `steps` of a run, whatever step is selected: a
    client that follows its own stepper asks for the step it shows, and the ones next to it."""

    runId: Name
    uri: Name
    steps: Annotated[list[Step], msgspec.Meta(min_length=1, max_length=64)]


class RunOutputsParams(Params):
    runId: Name


class WorkflowInputsParams(Params):
    uri: Name
    workflow: Name | None = None


class FindStepsParams(Params, rename={"from_": "from"}):
    """Steps of a run that match: fired by `actor` (a top-level one, or one firing inside the step),
    and/or holding `text` in what a firing put or the state it left. Searched from step `from_` on
    (`next`) or back (`previous`), at most `limit` found."""

    runId: Name
    actor: Name | None = None
    text: Name | None = None
    from_: Step = 0
    direction: Literal["next", "previous"] = "next"
    limit: Annotated[int, msgspec.Meta(ge=1, le=100000)] = 1


P = TypeVar("P", bound=Params)


def decode_params(raw: Any, kind: type[P]) -> P:
    """Validate raw JSON params into `kind`; a clear InvalidParams error otherwise."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise invalid(f"params must be an object with {_fields(kind)}, not {type(raw).__name__}")
    try:
        return msgspec.convert(raw, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise invalid(f"bad params: {exc} (expected {_fields(kind)})") from None


def command_params(args: tuple[Any, ...], kind: type[P]) -> P:
    """A command's params: `arguments` is a one-element list holding the params object."""
    if len(args) != 1:
        raise invalid(f"this command takes one argument, the params object {_fields(kind)}; got {len(args)}")
    return decode_params(args[0], kind)


def _fields(kind: type[Params]) -> str:
    names = []
    for field in msgspec.structs.fields(kind):
        optional = field.default is not msgspec.NODEFAULT or field.default_factory is not msgspec.NODEFAULT
        names.append(field.encode_name + ("?" if optional else ""))
    return "{" + ", ".join(names) + "}"


# ---- results and notifications (server -> client) -------------------------------------------------


class Message(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Base of every message the server sends; `to_json` makes it what pygls can write."""

    def to_json(self) -> Any:
        return msgspec.to_builtins(self)


class Position(Message):
    line: int
    character: int


class Range(Message):
    start: Position
    end: Position


class RunStartResult(Message):
    runId: str
    runDir: str


class StopResult(Message):
    runId: str
    stopped: bool
    status: str


class StepInfo(Message):
    step: int
    actor: str
    actorKind: str
    fireCount: int
    journalSeq: int
    replayed: bool
    uri: str
    range: Range
    durationMs: float
    startMs: float = 0.0  # when the firing began, in ms since the run started
    diverged: bool = False


class RunStarted(Message):
    runId: str
    uri: str
    workflow: str
    runDir: str
    resumedFrom: str | None = None
    resumedAtStep: int | None = None
    edits: int = 0  # a fork's edits at resumedAtStep


class Steps(Message):
    runId: str
    steps: list[StepInfo]


class QueueTokens(Message):
    queue: str
    tokens: list[str]


class Frame(Message):
    """One frame of a failure's traceback, innermost last; `own`: in the workspace's code (not
    Flowtape's, not an installed package's), the frames a user clicks."""

    file: str
    line: int  # 0-based, like LSP
    function: str
    own: bool
    uri: str | None = None
    code: str | None = None


class ErrorDetail(Message):
    message: str
    actor: str | None = None
    fireCount: int | None = None
    uri: str | None = None
    line: int | None = None  # 0-based, like LSP: where the actor is created
    raisedUri: str | None = None
    raisedLine: int | None = None  # 0-based: the line that raised
    taken: list[QueueTokens] | None = None  # what the failed firing took
    traceback: list[Frame] | None = None


class OutputPreview(Message):
    port: str
    count: int
    preview: str  # the tokens, shortened


class RunFinished(Message):
    runId: str
    status: str  # succeeded | failed | stopped
    outputs: Any
    steps: int
    error: str | None = None
    errorDetail: ErrorDetail | None = None
    replayStopped: list[Divergence] | None = None
    usage: Usage | None = None  # its model calls, and what its resume saved


class RunInfo(Message):
    runId: str
    workflow: str
    uri: str
    status: str
    steps: int
    startedAt: str
    runDir: str
    finishedAt: str | None = None
    resumedFrom: str | None = None
    resumedAtStep: int | None = None
    outputs: list[OutputPreview] | None = None  # a finished run's
    error: ErrorDetail | None = None  # why a failed run failed
    edits: int = 0  # a fork's edits at resumedAtStep
    usage: Usage | None = None


class RunsResult(Message):
    runs: list[RunInfo]


class GetStepsResult(Message):
    runId: str
    steps: list[StepInfo]
    total: int
    live: bool


class QueueState(Message):
    queue: str
    size: int
    tokens: list[str]


class ActorState(Message):
    actor: str
    state: str | None  # a preview; null for an actor that keeps no state (both always written)
    fireCount: int


class ChatEntry(Message):
    actor: str
    chat: str  # a preview of the messages the firing added: its prompt and the answer
    calls: list[ModelCall] | None = None  # its live model calls (on a replayed step: the recorded ones)
    asked: str | None = None  # the question it added (the user message: inputs and parameters), previewed
    answer: str | None = None  # the answer it added (the assistant's message), previewed at more length


class FiringDetail(Message):
    """One firing inside a step: the step's own, and each inner one of a composite step."""

    actor: str
    fireCount: int
    actorKind: str
    seq: int
    replayed: bool
    taken: list[QueueTokens]
    put: list[QueueTokens]
    uri: str
    range: Range
    chat: str | None = None


class FlowBroken(JsonRpcException):
    """-32004: the flow file asked for does not load or build."""

    CODE = -32004
    MESSAGE = "Flow does not build"


class GraphResult(Message):
    graph: FlowGraph  # lines in it are 1-based, as on the tape
    files: dict[str, str]  # each file the graph names -> its uri, as the client names it


class QueueTokensResult(Message):
    runId: str
    step: int
    queue: int
    id: str
    size: int
    tokens: list[Any]  # the first `limit` tokens, whole, as the tape's tagged JSON


class TimelineStep(msgspec.Struct, array_like=True):
    """A step's bar, as an array (a long run has many): [step, actor, at, dur, replayed, diverged],
    `actor` an index into the result's `actors`, `at` µs since the run started, `dur` µs."""

    step: int
    actor: int
    at: int
    dur: int
    replayed: bool
    diverged: bool


class TimelineFiring(msgspec.Struct, array_like=True):
    """An inner firing of a composite step, timed: [step, index, actor, at, dur, replayed, parent],
    `index` its place (1-based) among the step's inner firings, as the stepper steps into them,
    `parent` the index of the nested composite firing it ran in (0: the step's own)."""

    step: int
    index: int
    actor: int
    at: int
    dur: int
    replayed: bool
    parent: int = 0


class TimelineResult(Message):
    runId: str
    actors: list[str]  # the actor paths the bars name by index
    steps: list[TimelineStep]  # from the asked step on, as far as the tape is written
    inner: list[TimelineFiring]  # the timed inner firings of those steps (tapes before they were timed: none)
    total: int  # steps on the tape so far
    complete: bool  # the tape has ended: no step will follow


class StepDetailResult(Message):
    runId: str
    step: int
    actor: str
    actorKind: str
    fireCount: int
    journalSeq: int
    replayed: bool
    taken: list[QueueTokens]
    put: list[QueueTokens]
    queues: list[QueueState]
    states: list[ActorState]
    chat: list[ChatEntry] | None = None
    firings: list[FiringDetail] | None = None  # every firing of the step, as the tape holds them (a composite: its own first)


class RunOutputsResult(Message):
    runId: str
    outputs: Any  # every token of every output port, as the run gave them


class InputInfo(Message):
    name: str
    type: str  # as the source spells it ("" when not said)
    required: bool  # (every declared input is: a run without it gets no token on its port)


class WorkflowInputsResult(Message):
    workflow: str
    inputs: list[InputInfo]
    known: bool  # False: the declared inputs could not be read from the source
    last: dict[str, Any] | None = None  # the inputs of this workflow's latest run


class StepHints(Message):
    step: int
    hints: list[Any]  # LSP InlayHint objects, as `textDocument/inlayHint` answers them (whole file)


class StepHintsResult(Message):
    runId: str
    uri: str
    version: int | None  # the editor's version of the text they were placed in (None: as saved)
    shows: bool  # whether the run has anything to show in the file (else: `steps` is empty)
    steps: list[StepHints]


class FindStepsResult(Message):
    runId: str
    steps: list[int]
    total: int


# ---- what-if: fork with edits, diff two runs, the firing to debug (whatif.py) ----------------------


class ForkParams(Params):
    runId: Name
    step: PositiveInt
    edits: dict[Name, Any]  # {"QUEUE[i]" | "ACTOR.field" | "AGENT.answer[.PORT]": JSON value}, as `--set` takes them
    maxWorkers: Workers | None = None


class DiffParams(Params):
    runA: Name
    runB: Name
    actor: Name | None = None


class EditablesParams(Params):
    runId: Name
    step: PositiveInt


class FiringAtParams(Params):
    runId: Name
    step: PositiveInt  # the stepper's step
    uri: Name | None = None  # with `line`: the actor created there, its last firing at or before `step`
    line: Step | None = None


class Editable(Message):
    """A value a fork may edit at the step: `where` is what `--set` and ForkParams.edits take."""

    where: str
    kind: str  # "token" | "field" | "answer"
    actor: str
    value: Any = None  # the value as the tape holds it (tagged JSON); an answer's: null
    queue: str | None = None


class EditablesResult(Message):
    runId: str
    step: int
    editables: list[Editable]


class FiringAtResult(Message):
    runId: str
    actor: str
    fireCount: int
    step: int  # the step that holds that firing (what `flowtape debug --step` takes)
