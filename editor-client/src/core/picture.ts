/**
 * The graph view's logic, without vscode or the DOM: the layout input for ELK from a flow's graph,
 * what the picture shows at a step (which actor fires, which are ready, queue sizes, colours), and
 * the timeline's bars (lanes per worker or per actor, merged where they would overlap on screen).
 */
import type { FlowGraph, GraphEdge, StepDetail, TimelineFiring, TimelineResult, TimelineStep } from "./protocol";

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
  inner?: number; // the inner firing of the step the stepper is on (0 or absent: the step)
  focus?: string; // that inner firing's actor
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
  detail: Pick<StepDetail, "actor" | "queues"> & { fireCount?: number; firings?: { actor: string; fireCount?: number }[] | null } | undefined,
  marks: RunMarks,
  inner = 0,
): PictureState {
  const ids = queueIndexes(graph);
  const sizes: Record<number, number> = {};
  for (const e of graph.edges) sizes[e.queue] = 0;
  for (const q of detail?.queues ?? []) {
    const i = ids.get(q.queue);
    if (i !== undefined) sizes[i] = q.size;
  }
  const active = detail && step > 0 ? [detail.actor, ...(detail.firings ?? []).map((f) => f.actor)] : [];
  // the inner firing the stepper is on: the step's firings but its own, in the order it steps through them
  const innerFirings = (detail?.firings ?? []).filter((f) => f.actor !== detail?.actor || f.fireCount !== detail?.fireCount);
  const focus = step > 0 && inner > 0 ? innerFirings[inner - 1]?.actor : undefined;
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
    inner: step > 0 ? inner : 0,
    focus,
  };
}

// ---- the run's firings over time --------------------------------------------------------------------

/** A run's timeline as the server gives it (`flowtape/timeline`), grown as a live run streams. */
export interface TimelineData {
  actors: string[];
  steps: TimelineStep[];
  inner: TimelineFiring[];
  total: number;
  complete: boolean;
}

export const emptyTimeline = (): TimelineData => ({ actors: [], steps: [], inner: [], total: 0, complete: false });

/** The next step the timeline wants from the server: the one after the last it has. */
export function nextTimelineStep(data: TimelineData): number {
  return (data.steps.length ? data.steps[data.steps.length - 1][0] : 0) + 1;
}

/** Add what the server answered to `data` (the steps it lacked: an answer for steps it has is dropped). */
export function addTimeline(data: TimelineData, r: Pick<TimelineResult, "actors" | "steps" | "inner" | "total" | "complete">): boolean {
  const next = nextTimelineStep(data);
  if (r.steps.length && r.steps[0][0] !== next) return false; // (an answer to an older question)
  data.actors = r.actors; // (the server's table only grows: indexes stay valid)
  for (const s of r.steps) data.steps.push(s);
  for (const f of r.inner) data.inner.push(f);
  data.total = r.total;
  data.complete = r.complete;
  return true;
}

/** A firing to select: a step, and an inner firing of it (1-based; 0: the step itself). */
export interface FiringRef {
  step: number;
  inner: number;
}

/** What to select for a click on an actor: its latest firing at or before step `at` — a step of its
 *  own, or an inner firing of a composite step (a nested composite's own too); for an inner actor
 *  the timeline has no firing of (a tape from before inner firings were timed, or a server from
 *  before nested composites were given), the latest step of the top-level composite it runs in. */
export function latestFiring(graph: FlowGraph, data: TimelineData, actor: string, at: number): FiringRef | undefined {
  const me = data.actors.indexOf(actor);
  let found: FiringRef | undefined;
  if (me >= 0) {
    for (const f of data.inner) { // (in step order)
      if (f[0] > at) break;
      if (f[2] === me) found = { step: f[0], inner: f[1] };
    }
  }
  const owners = new Map(graph.actors.map((a) => [a.path, a.owner ?? ""]));
  const kind = graph.actors.find((a) => a.path === actor)?.kind ?? "";
  if (found || (owners.get(actor) && data.inner.length && !COMPOSITES.has(kind))) return found; // (timed: it had not fired)
  let top = actor;
  for (let up = owners.get(top); up; up = owners.get(top)) top = up;
  const mine = data.actors.indexOf(top);
  if (mine < 0) return undefined;
  for (const s of data.steps) {
    if (s[0] > at) break;
    if (s[1] === mine) found = { step: s[0], inner: 0 };
  }
  return found;
}

/** The steps marked diverged on the timeline: step -> actor. */
export function divergedSteps(data: TimelineData): Map<number, string> {
  const out = new Map<number, string>();
  for (const s of data.steps) if (s[5]) out.set(s[0], data.actors[s[1]] ?? "");
  return out;
}

// ---- the timeline's bars -------------------------------------------------------------------------------

export interface Bar {
  step: number;
  inner: number; // 0: the step's own firing; else its place among the step's inner firings
  parent: number; // an inner firing's: the inner firing it ran in (a nested composite's; 0: the step's)
  depth: number; // 0: a step; 1: a firing inside it; 2: inside a composite inside it; …
  composite: boolean; // firings ran inside it (drawn under it)
  actor: string;
  row: number;
  start: number; // ms since the run started
  end: number;
  replayed: boolean;
  diverged: boolean;
  up?: Bar; // an inner firing's: the bar it ran in (its step's, or a nested composite's)
}

/** A row of the timeline: a lane (a worker, or a top-level actor) or, under it, a row of the firings
 *  that ran inside the bars of the row above it (a lane's composite steps, or nested composites). */
export interface Row {
  label: string;
  lane: number;
  inner: boolean;
  depth: number; // 0: a lane; 1: firings inside its steps; 2: inside the composites of depth 1; …
}

export type LaneMode = "worker" | "actor";

/** First-fit: the first of `free` (each row's end) free at `start`, else a new one (-1). */
function fit(free: number[], start: number, end: number): number {
  let i = free.findIndex((e) => e <= start);
  if (i < 0) {
    i = free.length;
    free.push(0);
  }
  free[i] = Math.max(end, start);
  return i;
}

/** Rows of inner firings under one parent (a lane, or a group of the level above): per worker one
 *  group a level, its firings packed; per actor one group (one row) an inner actor. */
interface Group {
  label: string;
  depth: number;
  children: Map<string, Group>; // in the order first seen
  free: number[]; // each of its rows' end
  first: number; // its first row
}

const group = (label: string, depth: number): Group => ({ label, depth, children: new Map(), free: [], first: 0 });

/** One lane per worker (firings that overlap in time ran on different workers: each goes to the
 *  first lane free at its start), or one per actor; under a lane, the firings its composite steps
 *  ran, and under those the firings their nested composites ran, as deep as the flow nests (per
 *  worker: each level packed in as few rows as do not overlap; per actor: a row per inner actor,
 *  under its composite's). Each row's bars are sorted by start and do not overlap. */
export function timelineBars(data: TimelineData, mode: LaneMode): { bars: Bar[]; rows: Row[] } {
  const name = (i: number): string => data.actors[i] ?? `#${i}`;
  const top: Bar[] = data.steps.map((s) => ({
    step: s[0], inner: 0, parent: 0, depth: 0, composite: false, actor: name(s[1]), row: 0,
    start: s[2] / 1000, end: (s[2] + s[3]) / 1000, replayed: s[4], diverged: s[5],
  }));
  top.sort((a, b) => a.start - b.start || a.step - b.step);
  const laneNames: string[] = [];
  const laneOfStep = new Map<number, number>();
  if (mode === "actor") {
    const laneOf = new Map<string, number>();
    for (const b of top) {
      let lane = laneOf.get(b.actor);
      if (lane === undefined) {
        lane = laneNames.length;
        laneOf.set(b.actor, lane);
        laneNames.push(b.actor);
      }
      b.row = lane;
      laneOfStep.set(b.step, lane);
    }
  } else {
    const free: number[] = [];
    for (const b of top) {
      b.row = fit(free, b.start, b.end);
      if (b.row === laneNames.length) laneNames.push(`worker ${b.row + 1}`);
      laneOfStep.set(b.step, b.row);
    }
  }
  // inner firings, each in the group of rows under the firing it ran in (the server gives a step's
  // inner firings together, a composite's before what it ran)
  const lanes = laneNames.map(() => group("", 0));
  const inner: Bar[] = [];
  const topOf = new Map(top.map((b) => [b.step, b]));
  const groupOf = new Map<Bar, Group>();
  let ofStep = new Map<number, Bar>(); // the current step's inner firings by index
  let current = -1;
  for (const f of data.inner) {
    const lane = laneOfStep.get(f[0]);
    if (lane === undefined) continue;
    if (f[0] !== current) {
      current = f[0];
      ofStep = new Map();
    }
    const up = f[6] ? ofStep.get(f[6]) : undefined;
    const b: Bar = {
      step: f[0], inner: f[1], parent: up ? up.inner : 0, depth: up ? up.depth + 1 : 1, composite: false, actor: name(f[2]),
      row: lane, start: f[3] / 1000, end: (f[3] + f[4]) / 1000, replayed: f[5], diverged: false, up: up ?? topOf.get(f[0]),
    };
    if (up) up.composite = true;
    ofStep.set(b.inner, b);
    const above = up ? groupOf.get(up) ?? lanes[lane] : lanes[lane];
    const key = mode === "actor" ? b.actor : "";
    let g = above.children.get(key);
    if (!g) {
      g = group(mode === "actor" ? `↳ ${shortName(b.actor)}` : "↳ inside", b.depth);
      above.children.set(key, g);
    }
    groupOf.set(b, g);
    inner.push(b);
  }
  inner.sort((a, b) => a.start - b.start || a.step - b.step || a.inner - b.inner);
  const sub = new Map<Bar, number>();
  for (const b of inner) {
    const g = groupOf.get(b) as Group;
    sub.set(b, mode === "actor" ? 0 : fit(g.free, b.start, b.end)); // (per actor: one row a group)
  }
  const rows: Row[] = [];
  const lay = (g: Group, lane: number): void => {
    for (const c of g.children.values()) {
      c.first = rows.length;
      for (let i = 0; i < Math.max(1, c.free.length); i++) rows.push({ label: c.label, lane, inner: true, depth: c.depth });
      lay(c, lane);
    }
  };
  const first: number[] = []; // each lane's row
  laneNames.forEach((label, lane) => {
    first.push(rows.length);
    rows.push({ label, lane, inner: false, depth: 0 });
    lay(lanes[lane], lane);
  });
  for (const b of top) b.row = first[b.row];
  for (const b of inner) b.row = (groupOf.get(b) as Group).first + (sub.get(b) ?? 0);
  return { bars: [...top, ...inner], rows };
}

export interface DrawnBar {
  row: number;
  start: number;
  end: number;
  count: number; // firings merged into it (1: a single firing)
  step: number; // the first firing's step
  lastStep: number; // the last one's
  inner: number; // and its inner index (0: the step's own)
  actor: string;
  replayed: boolean; // every merged firing was replayed
  diverged: boolean;
  composite: boolean; // every merged firing ran others inside it
}

/** The bars in [t0, t1] as drawn at `msPerPx`: firings closer than a pixel merge, so a row draws
 *  at most a few bars a pixel whatever the run's length, and finding the first visible bar is a
 *  bisection (the bars before the window are never looked at). `byRow` holds each row's bars by start,
 *  a row after the rows of the bars its firings ran in. Inner firings merge only under one drawn
 *  bar: a merged bar stays within the bar (merged or not) its firings ran in. */
export function visibleBars(byRow: readonly Bar[][], t0: number, t1: number, msPerPx: number): DrawnBar[] {
  const out: DrawnBar[] = [];
  const drawnAs = new Map<Bar, DrawnBar>(); // (the bars above the row being drawn: what each is drawn in)
  for (const bars of byRow) {
    // the first bar that may reach into the window (bars of one row do not overlap: ends are sorted too)
    let lo = 0;
    let hi = bars.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (bars[mid].end < t0) lo = mid + 1;
      else hi = mid;
    }
    let cur: DrawnBar | undefined;
    let curUnder: DrawnBar | undefined;
    for (let i = lo; i < bars.length && bars[i].start <= t1; i++) {
      const b = bars[i];
      const under = b.up && drawnAs.get(b.up);
      if (cur && under === curUnder && (b.start - cur.end) / msPerPx < 1 && (b.start - cur.start) / msPerPx < 3) {
        drawnAs.set(b, cur);
        cur.end = Math.max(cur.end, b.end);
        cur.count += 1;
        cur.lastStep = b.step;
        cur.replayed &&= b.replayed;
        cur.diverged ||= b.diverged;
        cur.composite &&= b.composite;
        continue;
      }
      cur = {
        row: b.row, start: b.start, end: b.end, count: 1, step: b.step, lastStep: b.step, inner: b.inner, actor: b.actor,
        replayed: b.replayed, diverged: b.diverged, composite: b.composite,
      };
      curUnder = under;
      drawnAs.set(b, cur);
      out.push(cur);
    }
  }
  return out;
}

export function byRow(bars: readonly Bar[], rows: number): Bar[][] {
  const out: Bar[][] = Array.from({ length: rows }, () => []);
  for (const b of bars) out[b.row].push(b);
  return out;
}

/** The bars of a firing: the step's own, and with `inner` that inner firing's and those of the
 *  nested composites it ran in (to highlight). */
export function barsOf(bars: readonly Bar[], at: FiringRef): Bar[] {
  const ofStep = bars.filter((b) => b.step === at.step);
  const byIndex = new Map(ofStep.map((b) => [b.inner, b]));
  const out: Bar[] = [];
  for (let b = byIndex.get(at.inner); b && b.inner; b = byIndex.get(b.parent)) out.push(b);
  const own = byIndex.get(0);
  if (own) out.push(own);
  return out;
}
