/** Types of the Flowtape language-server protocol (docs/protocol.md). No vscode import. */

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export type RunStatus = "succeeded" | "failed" | "stopped" | "running";

export interface StepInfo {
  step: number;
  actor: string;
  actorKind: string;
  fireCount: number;
  journalSeq: number;
  replayed: boolean;
  uri: string;
  range: Range;
  durationMs: number;
  startMs?: number; // when the firing began, ms since the run started
  diverged?: boolean;
}

export interface RunInfo {
  runId: string;
  workflow: string;
  uri: string;
  status: RunStatus | string;
  steps: number;
  startedAt: string | number;
  finishedAt?: string | number | null;
  resumedFrom?: string | null;
  resumedAtStep?: number | null;
  edits?: number; // a fork's edits at resumedAtStep
  runDir: string;
  usage?: Usage | null;
  /** A finished run's output ports, previewed (`flowtape/runOutputs` gives them whole). */
  outputs?: OutputPreview[] | null;
  /** Why a failed run failed. */
  error?: ErrorDetail | null;
}

/** A run's model calls, and what its resume saved (`flowtape.usage.Usage`). */
export interface Usage {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  replayedCalls: number;
  savedInputTokens: number;
  savedOutputTokens: number;
  cost?: number | null;
  savedCost?: number | null;
}

/** One live model call of a firing (`flowtape.usage.ModelCall`). */
export interface ModelCall {
  model: string;
  inputTokens?: number;
  outputTokens?: number;
  ms?: number;
}

/** The messages a firing of an agent added, and its model calls. */
export interface ChatEntry {
  actor: string;
  chat: string;
  calls?: ModelCall[] | null;
  /** The question the firing added (its inputs and parameters), and the answer, each previewed. */
  asked?: string | null;
  answer?: string | null;
}

export interface OutputPreview {
  port: string;
  count: number;
  preview: string;
}

/** One frame of a failure's traceback (innermost last); `own`: the workspace's code. */
export interface Frame {
  file: string;
  line: number; // 0-based
  function: string;
  own: boolean;
  uri?: string | null;
  code?: string | null;
}

export interface ErrorDetail {
  message: string;
  actor?: string | null;
  fireCount?: number | null;
  uri?: string | null;
  line?: number | null; // 0-based: where the actor is created
  raisedUri?: string | null;
  raisedLine?: number | null; // 0-based: the line that raised
  taken?: QueueTokens[] | null;
  traceback?: Frame[] | null;
}

export interface Divergence {
  actor: string;
  fireCount: number;
  reason: string;
  step: number;
  queue?: string | null;
  recorded?: string | null;
  actual?: string | null;
  recordedPreview?: string | null;
  actualPreview?: string | null;
}

export interface RunStartedParams {
  runId: string;
  uri: string;
  workflow: string;
  runDir: string;
  resumedFrom?: string | null;
  resumedAtStep?: number | null;
  edits?: number;
}

export interface StepsParams {
  runId: string;
  steps: StepInfo[];
}

export interface RunFinishedParams {
  runId: string;
  status: "succeeded" | "failed" | "stopped";
  outputs: unknown;
  steps?: number;
  error?: string | null;
  errorDetail?: ErrorDetail | null;
  replayStopped?: Divergence[] | null;
  usage?: Usage | null;
}

export interface RunsParams {
  uri?: string;
}

export interface RunsResult {
  runs: RunInfo[];
}

export interface GetStepsParams {
  runId: string;
  from: number;
  limit: number;
}

export interface GetStepsResult {
  runId: string;
  steps: StepInfo[];
  total: number;
  live: boolean;
}

export interface QueueTokens {
  queue: string;
  tokens: string[];
}

export interface StepDetail {
  runId: string;
  step: number;
  actor: string;
  actorKind: string;
  fireCount: number;
  taken: QueueTokens[];
  put: QueueTokens[];
  queues: { queue: string; size: number; tokens: string[] }[];
  states: { actor: string; state: string | null; fireCount: number }[]; // every actor; state null: it keeps none
  chat?: ChatEntry[] | null;
  /** Every firing of the step, as the tape holds them (a composite step: its own, then the inner ones). */
  firings?: FiringDetail[] | null;
}

export interface FiringDetail {
  actor: string;
  fireCount: number;
  actorKind: string;
  seq: number;
  replayed: boolean;
  taken: QueueTokens[];
  put: QueueTokens[];
  uri: string;
  range: Range;
  chat?: string | null;
}

export interface RunOutputsResult {
  runId: string;
  outputs: Record<string, unknown[]>;
}

export interface InputInfo {
  name: string;
  type: string;
  required: boolean;
}

export interface WorkflowInputsResult {
  workflow: string;
  inputs: InputInfo[];
  known: boolean;
  last?: Record<string, unknown> | null;
}

export interface FindStepsParams {
  runId: string;
  actor?: string;
  text?: string;
  from?: number;
  direction?: "next" | "previous";
  limit?: number;
}

export interface FindStepsResult {
  runId: string;
  steps: number[];
  total: number;
}

export interface StepHintsParams {
  runId: string;
  uri: string;
  steps: number[];
}

/** The inlay hints of a file at steps of a run (`H`: LSP InlayHint as JSON), placed in the text
 *  version the server had (`null`: the file as saved); `shows` false: the run shows nothing there. */
export interface StepHintsResult<H = unknown> {
  runId: string;
  uri: string;
  version: number | null;
  shows: boolean;
  steps: { step: number; hints: H[] }[];
}

export interface RunStartResult {
  runId: string;
  runDir: string;
}

export const Methods = {
  runStarted: "flowtape/runStarted",
  steps: "flowtape/steps",
  runFinished: "flowtape/runFinished",
  runs: "flowtape/runs",
  getSteps: "flowtape/getSteps",
  stepDetail: "flowtape/stepDetail",
  selectStep: "flowtape/selectStep",
  stepHints: "flowtape/stepHints",
  runOutputs: "flowtape/runOutputs",
  workflowInputs: "flowtape/workflowInputs",
  findSteps: "flowtape/findSteps",
  diff: "flowtape/diff",
  editables: "flowtape/editables",
  firingAt: "flowtape/firingAt",
  graph: "flowtape/graph",
  queueTokens: "flowtape/queueTokens",
  timeline: "flowtape/timeline",
} as const;

/** Server-side command ids: the language client registers these itself. */
export const ServerCommands = {
  run: "flowtape.run",
  resumeAtStep: "flowtape.resumeAtStep",
  rerunActor: "flowtape.rerunActor",
  stop: "flowtape.stop",
  fork: "flowtape.fork",
} as const;

// ---- what-if: fork, diff, debug (docs/protocol.md) ----

/** What a firing took from one queue (by digest; the tokens when the run has them). */
export interface Taken {
  queue: string;
  digest: string;
  tokens?: unknown[];
}

export interface FiringView {
  actor: string;
  fireCount: number;
  step?: number;
  inputs?: Taken[];
  outputs?: { queue: string; tokens: unknown[] }[];
  state?: unknown;
  chat?: unknown;
}

export interface Difference {
  actor: string;
  fireCount: number;
  aspects: string[]; // "inputs" | "outputs" | "state" | "chat" | "only in a" | "only in b"
  a?: FiringView | null;
  b?: FiringView | null;
}

export interface RunDiff {
  a: string;
  b: string;
  same: boolean;
  counts: { actor: string; a: number; b: number }[];
  outputs: { same: boolean; a: unknown; b: unknown };
  first?: Difference | null;
  differences?: Difference[];
  statusA?: string;
  statusB?: string;
  actor?: string | null;
}

export interface Editable {
  where: string; // what flowtape.fork's `edits` (and `--set`) take
  kind: "token" | "field" | "answer";
  actor: string;
  value?: unknown;
  queue?: string | null;
}

export interface EditablesResult {
  runId: string;
  step: number;
  editables: Editable[];
}

export interface FiringAtResult {
  runId: string;
  actor: string;
  fireCount: number;
  step: number;
}

// ---- the graph view (flowtape/graph, flowtape/queueTokens, flowtape/timeline) --------------------------------------

export interface GraphActor {
  path: string;
  kind: string; // task | agent | tool | workflow | loop | if
  cls: string;
  file: string;
  line: number; // 1-based, as on the tape
  owner?: string; // the composite whose firings run it
  branch?: string; // an if's member: then | else
}

export interface GraphEdge {
  queue: number;
  id: string;
  src: string; // "" : the workflow's input port srcPort
  srcPort: string;
  dst: string; // "" : the workflow's output port dstPort
  dstPort: string;
  srcInner?: boolean; // src is a composite, the edge starts at its port inside it
  dstInner?: boolean;
}

export interface FlowGraph {
  workflow: string;
  flowFile: string;
  actors: GraphActor[];
  edges: GraphEdge[];
  inputs?: string[];
  outputs?: string[];
  runId?: string;
}

export interface GraphResult {
  graph: FlowGraph;
  files: Record<string, string>;
}

export interface QueueTokensResult {
  runId: string;
  step: number;
  queue: number;
  id: string;
  size: number;
  tokens: unknown[];
}

/** A step's bar: [step, actor (an index into `actors`), at (µs since the run started), dur (µs), replayed, diverged]. */
export type TimelineStep = [number, number, number, number, boolean, boolean];
/** A composite step's timed inner firing: [step, index (1-based among the step's inner firings), actor, at, dur, replayed,
 *  parent (the index of the nested composite firing it ran in; 0 or absent: the step's own)]. */
export type TimelineFiring = [number, number, number, number, number, boolean, number?];

export interface TimelineResult {
  runId: string;
  actors: string[];
  steps: TimelineStep[];
  inner: TimelineFiring[];
  total: number;
  complete: boolean;
}
