/**
 * The graph view's logic, without vscode or the DOM: the layout input for ELK from a flow's graph,
 * what the picture shows at a step (which actor fires, which are ready, queue sizes, colours), and
 * the timeline's bars (lanes per worker or per actor, merged where they would overlap on screen).
 */
import type { FlowGraph, GraphEdge, StepDetail, StepInfo } from "./protocol";

// ---- layout input ---------------------------------------------------------------------------------

export interface ElkLabel {
  text: string;
}

export interface ElkNodeIn {
  id: string;
  width?: number;
  height?: number;
  labels?: ElkLabel[];
  children?: ElkNodeIn[];
  edges?: ElkEdgeIn[];
  layoutOptions?: Record<string, string>;
}

export interface ElkEdgeIn {
  id: string;
  sources: string[];
  targets: string[];
}

export const COMPOSITES = new Set(["workflow", "loop", "if"]);
const CHAR = 7.2; // px per character of a label
const LEAF_HEIGHT = 44;
const PORT = 18;

export const actorId = (path: string): string => `a:${path}`;
export const inputId = (port: string): string => `in:${port}`;
export const outputId = (port: string): string => `out:${port}`;
const innerIn = (path: string, port: string): string => `pin:${path}.${port}`;
const innerOut = (path: string, port: string): string => `pout:${path}.${port}`;
const branchId = (path: string, branch: string): string => `b:${path}:${branch}`;
export const edgeId = (e: GraphEdge, i: number): string => `e:${i}:${e.queue}`;

/** The last part of an actor's path: what its box says (the group around it says the rest). */
export function shortName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

function leafWidth(...texts: string[]): number {
  return Math.max(96, Math.max(...texts.map((t) => t.length)) * CHAR + 28);
}

/** ELK's input for the graph: composites as groups holding their members (an if's members in a
 *  group per branch), the workflow's ports as small nodes, a composite's own ports used from inside
 *  it as port nodes inside the group, each edge in the lowest group holding both its ends. */
export function elkInput(graph: FlowGraph): ElkNodeIn {
  const root: ElkNodeIn = {
    id: "root",
    children: [],
    edges: [],
    layoutOptions: {
      "elk.algorithm": "layered",
      "elk.direction": "RIGHT",
      "elk.hierarchyHandling": "INCLUDE_CHILDREN",
      "elk.layered.spacing.nodeNodeBetweenLayers": "48",
      "elk.spacing.nodeNode": "22",
      "elk.spacing.edgeNode": "16",
      "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
      "elk.edgeRouting": "ORTHOGONAL",
    },
  };
  const nodes = new Map<string, ElkNodeIn>([["root", root]]);
  const parent = new Map<string, string>(); // node id -> the id of the group holding it
  const kinds = new Map(graph.actors.map((a) => [a.path, a.kind]));
  const groupOf = (path: string | undefined, branch: string | undefined): string => {
    if (!path) return "root";
    if (kinds.get(path) === "if" && branch) return branchId(path, branch);
    return actorId(path);
  };
  const add = (node: ElkNodeIn, group: string): void => {
    nodes.set(node.id, node);
    parent.set(node.id, group);
  };
  for (const a of graph.actors) {
    const id = actorId(a.path);
    if (COMPOSITES.has(a.kind)) {
      add({
        id, labels: [{ text: `${shortName(a.path)} · ${a.kind === "workflow" ? a.cls : a.kind}` }], children: [], edges: [],
        layoutOptions: { "elk.padding": "[top=30,left=14,bottom=14,right=14]", "elk.nodeLabels.placement": "INSIDE V_TOP H_LEFT" },
      }, groupOf(a.owner, a.branch));
      if (a.kind === "if") {
        for (const branch of ["then", "else"]) {
          add({
            id: branchId(a.path, branch), labels: [{ text: branch }], children: [], edges: [],
            layoutOptions: { "elk.padding": "[top=24,left=10,bottom=10,right=10]", "elk.nodeLabels.placement": "INSIDE V_TOP H_LEFT" },
          }, id);
        }
      }
    } else {
      add({ id, width: leafWidth(shortName(a.path), a.cls), height: LEAF_HEIGHT, labels: [{ text: shortName(a.path) }] },
        groupOf(a.owner, a.branch));
    }
  }
  const port = (id: string, label: string, group: string): string => {
    if (!nodes.has(id)) add({ id, width: PORT, height: PORT, labels: [{ text: label }] }, group);
    return id;
  };
  for (const p of graph.inputs ?? []) port(inputId(p), p, "root");
  for (const p of graph.outputs ?? []) port(outputId(p), p, "root");
  /** One end of an edge: an actor, the workflow's port, or a composite's port inside it. */
  const end = (path: string, name: string, inner: boolean | undefined, outer: (p: string) => string, within: (a: string, p: string) => string): string => {
    if (!path) return port(outer(name), name, "root");
    if (inner) return port(within(path, name), name, actorId(path));
    return nodes.has(actorId(path)) ? actorId(path) : port(actorId(path), name, "root"); // (a loose end: no such actor)
  };
  const ends = (e: GraphEdge): [string, string] => {
    const src = end(e.src, e.srcPort, e.srcInner, inputId, innerIn);
    const dst = end(e.dst, e.dstPort, e.dstInner, outputId, innerOut);
    return [src, dst];
  };
  const chain = (id: string): string[] => {
    const up: string[] = [];
    for (let at: string | undefined = parent.get(id); at; at = parent.get(at)) up.push(at);
    return up;
  };
  graph.edges.forEach((e, i) => {
    const [src, dst] = ends(e);
    const above = new Set(chain(src));
    const holder = chain(dst).find((g) => above.has(g)) ?? "root";
    nodes.get(holder)?.edges?.push({ id: edgeId(e, i), sources: [src], targets: [dst] });
  });
  for (const [id, group] of parent) nodes.get(group)?.children?.push(nodes.get(id) as ElkNodeIn);
  return root;
}

// ---- what the picture shows at a step ---------------------------------------------------------------

export interface PictureState {
  runId: string;
  step: number;
  total: number;
  active: string[]; // the actors whose firing the step is (the composite and what fired inside it)
  ready: string[]; // actors with a token on every input
  sizes: Record<number, number>; // queue index -> tokens waiting after the step
  replayed: boolean;
  diverged: string[]; // actors whose replay diverged at or before the step
  failed?: string; // the actor the run failed in, once the step is its last
  replayEndedAt?: number; // a resumed run: the last replayed step
  live: boolean;
}

export interface RunMarks {
  divergedSteps: Map<number, string>; // step -> actor
  failedActor?: string;
  resumedAtStep?: number;
  live: boolean;
}

export function queueIndexes(graph: FlowGraph): Map<string, number> {
  return new Map(graph.edges.map((e) => [e.id, e.queue]));
}

/** Inputs of each actor (the queues it takes from), for "ready". */
function inputsOf(graph: FlowGraph): Map<string, number[]> {
  const found = new Map<string, number[]>();
  for (const e of graph.edges) {
    if (!e.dst || e.dstInner) continue;
    const list = found.get(e.dst) ?? [];
    if (!list.includes(e.queue)) list.push(e.queue);
    found.set(e.dst, list);
  }
  return found;
}

export function pictureState(
  graph: FlowGraph, runId: string, step: number, total: number,
  detail: Pick<StepDetail, "actor" | "queues"> & { firings?: { actor: string }[] | null } | undefined,
  marks: RunMarks,
): PictureState {
  const ids = queueIndexes(graph);
  const sizes: Record<number, number> = {};
  for (const e of graph.edges) sizes[e.queue] = 0;
  for (const q of detail?.queues ?? []) {
    const i = ids.get(q.queue);
    if (i !== undefined) sizes[i] = q.size;
  }
  const active = detail && step > 0 ? [detail.actor, ...(detail.firings ?? []).map((f) => f.actor)] : [];
  const ready: string[] = [];
  for (const [actor, queues] of inputsOf(graph)) {
    if (step > 0 && queues.length && queues.every((q) => (sizes[q] ?? 0) > 0)) ready.push(actor);
  }
  const diverged = [...marks.divergedSteps].filter(([s]) => s <= step).map(([, a]) => a);
  const replayEnded = marks.resumedAtStep ?? undefined;
  return {
    runId, step, total,
    active: [...new Set(active)],
    ready,
    sizes,
    replayed: replayEnded !== undefined && step > 0 && step <= replayEnded,
    diverged: [...new Set(diverged)],
    failed: marks.failedActor && step === total && !marks.live ? marks.failedActor : undefined,
    replayEndedAt: replayEnded,
    live: marks.live,
  };
}

/** The step to select for a click on an actor: its latest firing at or before `at` — a step of
 *  its own, or of the top-level composite it fired inside. */
export function latestFiringStep(graph: FlowGraph, steps: readonly Pick<StepInfo, "step" | "actor">[], actor: string, at: number): number | undefined {
  const owners = new Map(graph.actors.map((a) => [a.path, a.owner ?? ""]));
  let top = actor;
  for (let up = owners.get(top); up; up = owners.get(top)) top = up;
  let found: number | undefined;
  for (const s of steps) {
    if (s.step > at) break;
    if (s.actor === actor || s.actor === top) found = s.step;
  }
  return found;
}

// ---- the timeline -------------------------------------------------------------------------------------

export interface Bar {
  step: number;
  actor: string;
  lane: number;
  start: number; // ms since the run started
  end: number;
  replayed: boolean;
  diverged: boolean;
}

export type LaneMode = "worker" | "actor";

/** One lane per worker (firings that overlap in time ran on different workers: each goes to the
 *  first lane free at its start), or one per actor. Bars of a lane are sorted by start. */
export function timelineBars(steps: readonly StepInfo[], mode: LaneMode): { bars: Bar[]; lanes: string[] } {
  const bars: Bar[] = steps.map((s) => ({
    step: s.step, actor: s.actor, lane: 0, start: s.startMs ?? 0, end: (s.startMs ?? 0) + s.durationMs,
    replayed: s.replayed, diverged: !!s.diverged,
  }));
  bars.sort((a, b) => a.start - b.start || a.step - b.step);
  const lanes: string[] = [];
  if (mode === "actor") {
    const laneOf = new Map<string, number>();
    for (const b of bars) {
      let lane = laneOf.get(b.actor);
      if (lane === undefined) {
        lane = lanes.length;
        laneOf.set(b.actor, lane);
        lanes.push(b.actor);
      }
      b.lane = lane;
    }
  } else {
    const free: number[] = []; // each lane's end
    for (const b of bars) {
      let lane = free.findIndex((end) => end <= b.start);
      if (lane < 0) {
        lane = free.length;
        free.push(0);
        lanes.push(`worker ${lane + 1}`);
      }
      free[lane] = Math.max(b.end, b.start);
      b.lane = lane;
    }
  }
  return { bars, lanes };
}

export interface DrawnBar {
  lane: number;
  start: number;
  end: number;
  count: number; // firings merged into it (1: a single firing)
  step: number; // the first firing's step
  actor: string;
  replayed: boolean; // every merged firing was replayed
  diverged: boolean;
}

/** The bars in [t0, t1] as drawn at `msPerPx`: firings closer than a pixel merge, so a lane draws
 *  at most one bar a pixel whatever the run's length. `byLane` holds each lane's bars by start. */
export function visibleBars(byLane: readonly Bar[][], t0: number, t1: number, msPerPx: number): DrawnBar[] {
  const out: DrawnBar[] = [];
  for (const bars of byLane) {
    // the first bar that may reach into the window (bars of one lane do not overlap: ends are sorted too)
    let lo = 0;
    let hi = bars.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (bars[mid].end < t0) lo = mid + 1;
      else hi = mid;
    }
    let cur: DrawnBar | undefined;
    for (let i = lo; i < bars.length && bars[i].start <= t1; i++) {
      const b = bars[i];
      if (cur && (b.start - cur.end) / msPerPx < 1 && (b.start - cur.start) / msPerPx < 3) {
        cur.end = Math.max(cur.end, b.end);
        cur.count += 1;
        cur.replayed &&= b.replayed;
        cur.diverged ||= b.diverged;
        continue;
      }
      cur = { lane: b.lane, start: b.start, end: b.end, count: 1, step: b.step, actor: b.actor, replayed: b.replayed, diverged: b.diverged };
      out.push(cur);
    }
  }
  return out;
}

export function byLane(bars: readonly Bar[], lanes: number): Bar[][] {
  const out: Bar[][] = Array.from({ length: lanes }, () => []);
  for (const b of bars) out[b.lane].push(b);
  return out;
}
