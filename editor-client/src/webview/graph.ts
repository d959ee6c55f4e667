/**
 * The graph view's page (runs in the webview, bundled with ELK): the flow laid out left to right
 * and drawn as SVG, coloured by the picture state the extension sends at each step; and a timeline
 * of firings. What the user clicks goes back to the extension as a message.
 */
import ELK from "elkjs/lib/elk.bundled.js";
import type { ElkExtendedEdge, ElkNode } from "elkjs/lib/elk-api";
import {
  addTimeline, barsOf, byRow, COMPOSITES, elkInput, emptyTimeline, shortName, timelineBars, visibleBars,
  type Bar, type DrawnBar, type FiringRef, type LaneMode, type PictureState, type Row, type TimelineData,
} from "../core/picture";
import type { FlowGraph, QueueTokensResult, TimelineResult } from "../core/protocol";
import type { ToPage, ToHost } from "./messages";

declare function acquireVsCodeApi(): { postMessage(m: ToHost): void; setState(s: unknown): void; getState(): unknown };

const vscode = acquireVsCodeApi();
const SVG = "http://www.w3.org/2000/svg";
const elk = new ELK();
const $ = <T extends Element>(sel: string): T => document.querySelector(sel) as T;

let graph: FlowGraph | undefined;
let state: PictureState | undefined;
let layoutAsked = 0;
const actorEls = new Map<string, SVGGElement>();
const edgeEls = new Map<number, { label: SVGTextElement; paths: SVGPathElement[] }>();

function el<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, parent?: Element): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  parent?.appendChild(e);
  return e;
}

function post(m: ToHost): void {
  vscode.postMessage(m);
}

// ---- zoom and pan (one transform on a group; the SVG is never re-laid for it) ---------------------

class PanZoom {
  x = 0;
  y = 0;
  k = 1;
  private drag: { x: number; y: number } | undefined;
  constructor(private readonly svg: SVGSVGElement, private readonly group: SVGGElement) {
    svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = svg.getBoundingClientRect();
      const f = Math.exp(-e.deltaY * 0.0015);
      const px = e.clientX - r.left;
      const py = e.clientY - r.top;
      const k = Math.min(8, Math.max(0.05, this.k * f));
      this.x = px - ((px - this.x) * k) / this.k;
      this.y = py - ((py - this.y) * k) / this.k;
      this.k = k;
      this.apply();
    }, { passive: false });
    svg.addEventListener("pointerdown", (e) => {
      if ((e.target as Element).closest(".actor, .edge, .port")) return;
      this.drag = { x: e.clientX - this.x, y: e.clientY - this.y };
      svg.setPointerCapture(e.pointerId);
    });
    svg.addEventListener("pointermove", (e) => {
      if (!this.drag) return;
      this.x = e.clientX - this.drag.x;
      this.y = e.clientY - this.drag.y;
      this.apply();
    });
    svg.addEventListener("pointerup", () => (this.drag = undefined));
  }
  fit(width: number, height: number): void {
    const r = this.svg.getBoundingClientRect();
    this.k = Math.min(2, Math.max(0.05, Math.min((r.width - 24) / Math.max(width, 1), (r.height - 24) / Math.max(height, 1))));
    this.x = (r.width - width * this.k) / 2;
    this.y = (r.height - height * this.k) / 2;
    this.apply();
  }
  apply(): void {
    this.group.setAttribute("transform", `translate(${this.x},${this.y}) scale(${this.k})`);
  }
}

const svg = $<SVGSVGElement>("#svg");
const viewport = $<SVGGElement>("#viewport");
const pan = new PanZoom(svg, viewport);
let laidSize = { w: 0, h: 0 };

// ---- the graph --------------------------------------------------------------------------------------

async function draw(g: FlowGraph): Promise<void> {
  const asked = ++layoutAsked;
  const input = elkInput(g) as ElkNode;
  input.layoutOptions = { ...input.layoutOptions, "elk.json.edgeCoords": "ROOT", "elk.json.shapeCoords": "ROOT" };
  let laid: ElkNode;
  try {
    laid = await elk.layout(input);
  } catch (e) {
    showError(`the graph could not be laid out: ${String(e)}`);
    return;
  }
  if (asked !== layoutAsked) return; // a newer graph came meanwhile
  viewport.replaceChildren();
  actorEls.clear();
  edgeEls.clear();
  const kinds = new Map(g.actors.map((a) => [a.path, a]));
  const groups = el("g", { class: "groups" }, viewport);
  const edges = el("g", { class: "edges" }, viewport);
  const nodes = el("g", { class: "nodes" }, viewport);
  const walk = (n: ElkNode): void => {
    for (const c of n.children ?? []) {
      const a = c.id.startsWith("a:") ? kinds.get(c.id.slice(2)) : undefined;
      drawNode(c, kinds, c.id.startsWith("b:") || (a && COMPOSITES.has(a.kind)) ? groups : nodes);
      walk(c);
    }
  };
  walk(laid);
  const allEdges: ElkExtendedEdge[] = [];
  const collect = (n: ElkNode): void => {
    allEdges.push(...((n.edges ?? []) as ElkExtendedEdge[]));
    (n.children ?? []).forEach(collect);
  };
  collect(laid);
  for (const e of allEdges) drawEdge(e, g, edges);
  laidSize = { w: laid.width ?? 0, h: laid.height ?? 0 };
  pan.fit(laidSize.w, laidSize.h);
  $("#empty").textContent = g.actors.length ? "" : "This flow has no actors.";
  if (state) paint(state);
}

function drawNode(n: ElkNode, kinds: Map<string, FlowGraph["actors"][number]>, layer: SVGGElement): void {
  const x = n.x ?? 0;
  const y = n.y ?? 0;
  const w = n.width ?? 0;
  const h = n.height ?? 0;
  const label = n.labels?.[0]?.text ?? "";
  if (n.id.startsWith("a:")) {
    const path = n.id.slice(2);
    const a = kinds.get(path);
    const composite = a && COMPOSITES.has(a.kind);
    const g = el("g", { class: `actor kind-${a?.kind ?? "task"}${composite ? " group" : ""}`, "data-path": path, tabindex: 0 }, layer);
    el("title", {}, g).textContent = `${path} (${a?.kind}, ${a?.cls}) · line ${a?.line}`;
    el("rect", { x, y, width: w, height: h, rx: composite ? 8 : 6 }, g);
    if (composite) {
      el("text", { x: x + 10, y: y + 18, class: "group-label" }, g).textContent = label;
    } else {
      el("text", { x: x + 10, y: y + 18, class: "name" }, g).textContent = shortName(path);
      el("text", { x: x + 10, y: y + 34, class: "cls" }, g).textContent = `${a?.cls ?? ""} · ${a?.kind ?? ""}`;
      el("circle", { cx: x + w - 9, cy: y + 9, r: 4, class: "ready-dot" }, g);
    }
    g.addEventListener("click", (e) => {
      e.stopPropagation();
      post({ type: "actor", path });
    });
    actorEls.set(path, g);
  } else if (n.id.startsWith("b:")) {
    const g = el("g", { class: "branch" }, layer);
    el("rect", { x, y, width: w, height: h, rx: 6 }, g);
    el("text", { x: x + 8, y: y + 15, class: "group-label" }, g).textContent = label;
  } else {
    const g = el("g", { class: `port ${n.id.startsWith("in:") ? "input" : n.id.startsWith("out:") ? "output" : "inner"}` }, layer);
    el("circle", { cx: x + w / 2, cy: y + h / 2, r: w / 2 }, g);
    el("text", { x: x + w / 2, y: y + h + 12, class: "port-label", "text-anchor": "middle" }, g).textContent = label;
  }
}

function drawEdge(e: ElkExtendedEdge, g: FlowGraph, layer: SVGGElement): void {
  const queue = Number(e.id.split(":")[2]);
  const edge = g.edges.find((x) => x.queue === queue);
  for (const s of e.sections ?? []) {
    const pts = [s.startPoint, ...(s.bendPoints ?? []), s.endPoint];
    const d = pts.map((p, i) => `${i ? "L" : "M"}${p.x},${p.y}`).join(" ");
    const group = el("g", { class: "edge", "data-queue": queue }, layer);
    el("title", {}, group).textContent = edge?.id ?? "";
    el("path", { d, class: "hit" }, group);
    const path = el("path", { d, class: "line", "marker-end": "url(#arrow)" }, group);
    const mid = pts[Math.floor((pts.length - 1) / 2)];
    const next = pts[Math.floor((pts.length - 1) / 2) + 1] ?? mid;
    const entry = edgeEls.get(queue) ?? { label: el("text", { class: "size", "text-anchor": "middle" }, layer), paths: [] };
    if (!entry.paths.length) {
      entry.label.setAttribute("x", String((mid.x + next.x) / 2));
      entry.label.setAttribute("y", String((mid.y + next.y) / 2 - 4));
      entry.label.setAttribute("data-queue", String(queue));
    }
    entry.paths.push(path);
    edgeEls.set(queue, entry);
    group.addEventListener("click", (ev) => {
      ev.stopPropagation();
      post({ type: "edge", queue });
    });
  }
}

/** The state at a step: classes and labels change, nothing moves (no flicker while a run streams). */
function paint(s: PictureState): void {
  const active = new Set(s.active);
  const ready = new Set(s.ready);
  const diverged = new Set(s.diverged);
  for (const [path, g] of actorEls) {
    g.classList.toggle("active", active.has(path));
    g.classList.toggle("focus", s.focus === path);
    g.classList.toggle("ready", ready.has(path) && !active.has(path));
    g.classList.toggle("diverged", diverged.has(path));
    g.classList.toggle("failed", s.failed === path);
    g.classList.toggle("replayed", active.has(path) && s.replayed);
  }
  for (const [queue, { label, paths }] of edgeEls) {
    const n = s.sizes[queue] ?? 0;
    label.textContent = n ? String(n) : "";
    for (const p of paths) p.classList.toggle("holding", n > 0);
  }
  const where = s.step ? `step ${s.step} of ${s.total}` : `before step 1 (${s.total} steps)`;
  const replay = s.replayEndedAt !== undefined ? ` · replayed up to step ${s.replayEndedAt}${s.replayed ? " (this step replayed)" : ", live after"}` : "";
  $("#where").textContent = where + replay + (s.live ? " · live" : "");
  timelineCursor({ step: s.step, inner: s.inner ?? 0 });
}

function showError(message: string): void {
  const banner = $<HTMLDivElement>("#banner");
  banner.textContent = message;
  banner.hidden = !message;
}

// ---- the queue panel ----------------------------------------------------------------------------------

function showQueue(r: QueueTokensResult): void {
  const side = $<HTMLDivElement>("#side");
  side.hidden = false;
  side.replaceChildren();
  const h = document.createElement("h3");
  h.textContent = `${r.id} · ${r.size} token${r.size === 1 ? "" : "s"} after step ${r.step}`;
  side.appendChild(h);
  const list = document.createElement("ol");
  list.start = 0;
  for (const t of r.tokens.slice(0, 50)) {
    const li = document.createElement("li");
    const text = JSON.stringify(t);
    li.textContent = text.length > 200 ? text.slice(0, 199) + "…" : text;
    list.appendChild(li);
  }
  side.appendChild(list);
  if (r.size > 50) side.append(`… and ${r.size - 50} more`);
  const open = document.createElement("button");
  open.textContent = "Open whole";
  open.id = "open-queue";
  open.onclick = () => post({ type: "openQueue", queue: r.queue, step: r.step });
  const close = document.createElement("button");
  close.textContent = "Close";
  close.onclick = () => (side.hidden = true);
  side.append(open, close);
}

// ---- the timeline -----------------------------------------------------------------------------------

const LANE = 22;
const SUB = 14; // a row of inner firings
const TOP = 20;
const LEFT = 130;
let data: TimelineData = emptyTimeline();
let bars: Bar[] = [];
let rowBars: Bar[][] = [];
let rows: Row[] = [];
let rowY: number[] = [];
let mode: LaneMode = "worker";
let span = { t0: 0, t1: 1 };
let end = 1;
let cursor: FiringRef = { step: 0, inner: 0 };
let drawQueued = false;

function addSteps(m: { reset: boolean; result: TimelineResult }): void {
  if (m.reset) data = emptyTimeline();
  if (!addTimeline(data, m.result) && !m.reset) return;
  layTimeline();
}

function layTimeline(): void {
  const wasWhole = span.t0 <= 0 && span.t1 >= end;
  const t = timelineBars(data, mode);
  bars = t.bars;
  rows = t.rows;
  rowBars = byRow(bars, rows.length);
  rowY = [];
  let y = TOP;
  for (const r of rows) {
    rowY.push(y);
    y += r.inner ? SUB : LANE;
  }
  end = 1e-3;
  for (const b of bars) if (b.end > end) end = b.end;
  if (wasWhole || span.t1 <= span.t0) span = { t0: 0, t1: end };
  queueTimeline();
}

function queueTimeline(): void {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => {
    drawQueued = false;
    drawTimeline();
  });
}

const rowHeight = (row: number): number => (rows[row]?.inner ? SUB : LANE);

function drawTimeline(): void {
  const t = $<SVGSVGElement>("#tsvg");
  if ($<HTMLDivElement>("#timeline").hidden) return;
  const width = Math.max(200, t.getBoundingClientRect().width - LEFT - 10);
  t.replaceChildren();
  const bottom = rows.length ? rowY[rows.length - 1] + rowHeight(rows.length - 1) : TOP;
  t.setAttribute("height", String(Math.max(60, bottom + 10)));
  const msPerPx = Math.max((span.t1 - span.t0) / width, 1e-6);
  const x = (ms: number): number => LEFT + (ms - span.t0) / msPerPx;
  rows.forEach((r, i) => {
    const name = r.label.length > 18 ? r.label.slice(0, 17) + "…" : r.label;
    el("text", { x: 4 + 8 * r.depth, y: rowY[i] + rowHeight(i) - 6, class: r.inner ? "lane sub" : "lane" }, t).textContent = name;
    if (!rows[i + 1]?.inner) el("line", { x1: LEFT, x2: LEFT + width, y1: rowY[i] + rowHeight(i) - 1, y2: rowY[i] + rowHeight(i) - 1, class: "lane-line" }, t);
  });
  for (let i = 0; i <= 4; i++) {
    const ms = span.t0 + ((span.t1 - span.t0) * i) / 4;
    el("text", { x: x(ms), y: 12, class: "tick", "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, t).textContent = formatMs(ms);
  }
  const drawn = visibleBars(rowBars, span.t0, span.t1, msPerPx);
  const bar = (b: DrawnBar, extra: string): SVGRectElement => {
    const h = rowHeight(b.row);
    const rect = el("rect", {
      x: x(b.start), y: rowY[b.row] + (rows[b.row]?.inner ? 2 : 3), width: Math.max(1, (b.end - b.start) / msPerPx), height: h - (rows[b.row]?.inner ? 4 : 7),
      class: `bar${rows[b.row]?.inner ? " inner" : ""}${b.composite ? " composite" : ""}${b.replayed ? " replayed" : ""}${b.diverged ? " diverged" : ""}${b.count > 1 ? " merged" : ""}${extra}`,
      "data-step": b.step, "data-last-step": b.lastStep, "data-inner": b.inner,
    }, t);
    const what = b.inner ? `step ${b.step} · inner firing ${b.inner}` : `step ${b.step}`;
    el("title", {}, rect).textContent = b.count > 1
      ? `${b.count} firings from ${what} (zoom in to see each)`
      : `${what} · ${b.actor} · ${formatMs(b.end - b.start)}${b.composite ? " · what it ran is in the rows under it" : ""}${b.replayed ? " · replayed" : ""}`;
    rect.addEventListener("click", () => post({ type: "step", step: b.step, inner: b.inner }));
    return rect;
  };
  for (const b of drawn) bar(b, "");
  const ended = state?.replayEndedAt;
  if (ended !== undefined) {
    const first = bars.find((b) => b.step === ended + 1 && !b.inner);
    if (first) el("line", { x1: x(first.start), x2: x(first.start), y1: 16, y2: bottom, class: "replay-end" }, t);
  }
  // the stepper's firing, drawn on top whatever was merged around it
  const current = barsOf(bars, cursor);
  for (const b of current) {
    const selected = cursor.inner ? b.inner === cursor.inner : b.inner === 0;
    if (b.end >= span.t0 && b.start <= span.t1) bar({ ...b, count: 1, lastStep: b.step }, selected ? " current" : " current-step");
  }
  const own = current.find((b) => (cursor.inner ? b.inner === cursor.inner : b.inner === 0));
  if (own) el("line", { x1: x(own.start), x2: x(own.start), y1: 16, y2: bottom, class: "cursor", "data-step": own.step }, t);
  const innerCount = data.inner.length;
  $("#tinfo").textContent = `${data.steps.length} step${data.steps.length === 1 ? "" : "s"}`
    + (innerCount ? ` · ${innerCount} inner firing${innerCount === 1 ? "" : "s"}` : "")
    + ` · ${drawn.length} bars drawn · ${formatMs(span.t1 - span.t0)} shown`;
}

function timelineCursor(at: FiringRef): void {
  cursor = at;
  const own = barsOf(bars, at).find((b) => (at.inner ? b.inner === at.inner : b.inner === 0));
  if (own && (own.start < span.t0 || own.start > span.t1)) {
    const w = span.t1 - span.t0;
    span = { t0: Math.max(0, own.start - w / 2), t1: Math.max(0, own.start - w / 2) + w };
  }
  queueTimeline();
}

function formatMs(ms: number): string {
  if (ms < 1) return `${Math.round(ms * 1000)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 2 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

{
  const t = $<SVGSVGElement>("#tsvg");
  t.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = t.getBoundingClientRect();
    const width = Math.max(200, r.width - LEFT - 10);
    const at = span.t0 + ((e.clientX - r.left - LEFT) / width) * (span.t1 - span.t0);
    const f = Math.exp(e.deltaY * 0.002);
    const w = Math.min(end * 1.05, Math.max(1e-3, (span.t1 - span.t0) * f));
    const t0 = Math.max(0, at - ((at - span.t0) * w) / (span.t1 - span.t0));
    span = { t0, t1: t0 + w };
    queueTimeline();
  }, { passive: false });
  let drag: { x: number; t0: number } | undefined;
  t.addEventListener("pointerdown", (e) => {
    if ((e.target as Element).classList.contains("bar")) return;
    drag = { x: e.clientX, t0: span.t0 };
  });
  t.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const width = Math.max(200, t.getBoundingClientRect().width - LEFT - 10);
    const w = span.t1 - span.t0;
    const t0 = Math.max(0, drag.t0 - ((e.clientX - drag.x) / width) * w);
    span = { t0, t1: t0 + w };
    queueTimeline();
  });
  t.addEventListener("pointerup", () => (drag = undefined));
}

// ---- tabs, buttons, messages ------------------------------------------------------------------------

function showTab(name: string): void {
  $<HTMLDivElement>("#side").hidden = true;
  $<HTMLDivElement>("#graph").hidden = name !== "graph";
  $<HTMLDivElement>("#timeline").hidden = name !== "timeline";
  for (const b of document.querySelectorAll<HTMLButtonElement>("[data-tab]")) b.classList.toggle("on", b.dataset.tab === name);
  vscode.setState({ tab: name });
  if (name === "timeline") queueTimeline();
}

for (const b of document.querySelectorAll<HTMLButtonElement>("[data-tab]")) b.onclick = () => showTab(b.dataset.tab ?? "graph");
$<HTMLButtonElement>("#fit").onclick = () => pan.fit(laidSize.w, laidSize.h);
$<HTMLSelectElement>("#lanes").onchange = (e) => {
  mode = (e.target as HTMLSelectElement).value as LaneMode;
  layTimeline();
};
window.addEventListener("resize", () => queueTimeline());
showTab(((vscode.getState() as { tab?: string } | undefined)?.tab) ?? "graph");

window.addEventListener("message", (event: MessageEvent<ToPage>) => {
  const m = event.data;
  switch (m.type) {
    case "graph":
      graph = m.graph;
      $("#title").textContent = m.title;
      showError("");
      void draw(m.graph);
      break;
    case "state":
      state = m.state;
      if (graph) paint(m.state);
      break;
    case "timeline":
      addSteps(m);
      break;
    case "queue":
      showQueue(m.result);
      break;
    case "error":
      showError(m.message);
      break;
  }
});
post({ type: "ready" });
