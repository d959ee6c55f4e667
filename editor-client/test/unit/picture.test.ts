import { test } from "node:test";
import assert from "node:assert/strict";
import ELK from "elkjs/lib/elk.bundled.js";
import type { ElkNode } from "elkjs/lib/elk-api";
import {
  addTimeline, barsOf, byRow, divergedSteps, elkInput, emptyTimeline, latestFiring, nextTimelineStep, pictureState, timelineBars, visibleBars,
  type ElkNodeIn, type RunMarks, type TimelineData,
} from "../../src/core/picture";
import type { FlowGraph, TimelineFiring, TimelineStep } from "../../src/core/protocol";

// examples/if_else.py's graph, as `flowtape graph --json` prints it (a loop holding an if)
const IF_ELSE: FlowGraph = {
  workflow: "main", flowFile: "/ws/if_else.py",
  actors: [
    { path: "lp", kind: "loop", cls: "loop", file: "/ws/if_else.py", line: 61 },
    { path: "check", kind: "task", cls: "Check", file: "/ws/if_else.py", line: 63, owner: "lp" },
    { path: "c", kind: "if", cls: "if", file: "/ws/if_else.py", line: 64, owner: "lp" },
    { path: "review", kind: "task", cls: "Review", file: "/ws/if_else.py", line: 66, owner: "c", branch: "then" },
    { path: "approve", kind: "task", cls: "Approve", file: "/ws/if_else.py", line: 68, owner: "c", branch: "else" },
  ],
  edges: [
    { queue: 0, id: "$.Decisions", src: "review", srcPort: "", dst: "", dstPort: "Decisions" },
    { queue: 0, id: "$.Decisions", src: "approve", srcPort: "", dst: "", dstPort: "Decisions" },
    { queue: 1, id: "lp.item->check.In", src: "lp", srcPort: "item", dst: "check", dstPort: "In", srcInner: true },
    { queue: 2, id: "check.Cond->c.cond", src: "check", srcPort: "Cond", dst: "c", dstPort: "cond" },
    { queue: 3, id: "check.Big->review.In", src: "check", srcPort: "Big", dst: "review", dstPort: "In" },
    { queue: 4, id: "check.Small->approve.In", src: "check", srcPort: "Small", dst: "approve", dstPort: "In" },
  ],
  outputs: ["Decisions"],
};

// examples/nested.py's: two nested workflows in a row
const NESTED: FlowGraph = {
  workflow: "main", flowFile: "/ws/nested.py",
  actors: [
    { path: "numbers", kind: "task", cls: "Numbers", file: "/ws/nested.py", line: 57 },
    { path: "a", kind: "workflow", cls: "bump", file: "/ws/nested.py", line: 58 },
    { path: "a/d", kind: "task", cls: "Double", file: "/ws/nested.py", line: 48, owner: "a" },
    { path: "a/inc", kind: "task", cls: "AddOne", file: "/ws/nested.py", line: 49, owner: "a" },
  ],
  edges: [
    { queue: 0, id: "$.Out", src: "a", srcPort: "", dst: "", dstPort: "Out" },
    { queue: 0, id: "$.Out", src: "a/inc", srcPort: "", dst: "a", dstPort: "Out", dstInner: true },
    { queue: 1, id: "numbers.Out->a.In", src: "numbers", srcPort: "Out", dst: "a", dstPort: "In" },
    { queue: 2, id: "a.In->a/d.In", src: "a", srcPort: "In", dst: "a/d", dstPort: "In", srcInner: true },
    { queue: 3, id: "a/d.Out->a/inc.In", src: "a/d", srcPort: "Out", dst: "a/inc", dstPort: "In" },
  ],
  outputs: ["Out"],
};

function find(node: ElkNodeIn, id: string, path: string[] = []): string[] | undefined {
  if (node.id === id) return [...path, node.id];
  for (const c of node.children ?? []) {
    const found = find(c, id, [...path, node.id]);
    if (found) return found;
  }
  return undefined;
}

test("groups hold their members: a loop its body, an if a group per branch, a nested workflow its actors", () => {
  const root = elkInput(IF_ELSE);
  assert.deepEqual(find(root, "a:check"), ["root", "a:lp", "a:check"]);
  assert.deepEqual(find(root, "a:review"), ["root", "a:lp", "a:c", "b:c:then", "a:review"]);
  assert.deepEqual(find(root, "a:approve"), ["root", "a:lp", "a:c", "b:c:else", "a:approve"]);
  assert.deepEqual(find(root, "out:Decisions"), ["root", "out:Decisions"]);
  assert.deepEqual(find(root, "pin:lp.item"), ["root", "a:lp", "pin:lp.item"], "the loop's item is a port inside it");
  const nested = elkInput(NESTED);
  assert.deepEqual(find(nested, "a:a/inc"), ["root", "a:a", "a:a/inc"]);
  assert.deepEqual(find(nested, "pout:a.Out"), ["root", "a:a", "pout:a.Out"]);
});

test("each edge sits in the lowest group that holds both its ends", () => {
  const root = elkInput(IF_ELSE);
  const lp = root.children?.find((c) => c.id === "a:lp");
  assert.ok(lp?.edges?.some((e) => e.sources[0] === "a:check" && e.targets[0] === "a:review"), "check -> review inside the loop");
  assert.ok(root.edges?.some((e) => e.sources[0] === "a:review" && e.targets[0] === "out:Decisions"), "to the run's output at the top");
});

test("ELK lays the input out: every node placed, members inside their group", async () => {
  const elk = new ELK();
  for (const graph of [IF_ELSE, NESTED]) {
    const laid = await elk.layout(elkInput(graph) as ElkNode);
    const check = (node: ElkNode, w: number, h: number): void => {
      for (const c of node.children ?? []) {
        assert.ok(c.x !== undefined && c.y !== undefined, `${c.id} placed`);
        assert.ok((c.x ?? 0) >= 0 && (c.y ?? 0) >= 0 && (c.x ?? 0) + (c.width ?? 0) <= w + 0.5 && (c.y ?? 0) + (c.height ?? 0) <= h + 0.5,
          `${c.id} inside its group`);
        check(c, c.width ?? 0, c.height ?? 0);
      }
    };
    check(laid, laid.width ?? 0, laid.height ?? 0);
  }
});

test("a 200-actor flow lays out", async () => {
  const actors = Array.from({ length: 200 }, (_, i) => ({ path: `t${i}`, kind: "task", cls: "Task", file: "/f.py", line: i + 1 }));
  const edges = actors.slice(1).map((a, i) => ({ queue: i, id: `t${i % 40}.Out->${a.path}.In`, src: `t${i % 40}`, srcPort: "Out", dst: a.path, dstPort: "In" }));
  const laid = await new ELK().layout(elkInput({ workflow: "big", flowFile: "/f.py", actors, edges }) as ElkNode);
  assert.equal(laid.children?.length, 200);
  assert.ok(laid.children?.every((c) => c.x !== undefined));
  // readable: no two boxes overlap, and each is as wide as its label needs
  const boxes = (laid.children ?? []).map((c) => ({ x: c.x ?? 0, y: c.y ?? 0, w: c.width ?? 0, h: c.height ?? 0, label: c.labels?.[0]?.text ?? "" }));
  for (const b of boxes) assert.ok(b.w >= b.label.length * 7, `${b.label} fits its box`);
  const sorted = [...boxes].sort((a, b) => a.x - b.x);
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length && sorted[j].x < sorted[i].x + sorted[i].w; j++) {
      const a = sorted[i];
      const b = sorted[j];
      assert.ok(a.y + a.h <= b.y || b.y + b.h <= a.y, `${a.label} and ${b.label} overlap`);
    }
  }
});

const marks = (over: Partial<RunMarks> = {}): RunMarks => ({ divergedSteps: new Map(), live: false, ...over });

test("at a step: queue sizes by index, the firing actor, the ready ones", () => {
  const detail = {
    actor: "lp", firings: [{ actor: "check" }],
    queues: [{ queue: "check.Cond->c.cond", size: 1, tokens: [] }, { queue: "check.Big->review.In", size: 1, tokens: [] }, { queue: "$.Decisions", size: 2, tokens: [] }],
  };
  const s = pictureState(IF_ELSE, "r", 3, 9, detail, marks());
  assert.equal(s.sizes[2], 1);
  assert.equal(s.sizes[3], 1);
  assert.equal(s.sizes[0], 2);
  assert.equal(s.sizes[4], 0, "a queue the detail does not list is empty");
  assert.deepEqual(s.active, ["lp", "check"]);
  assert.deepEqual(s.ready.sort(), ["c", "review"]);
  assert.equal(s.failed, undefined);
  assert.equal(s.focus, undefined, "on the step itself: no inner firing in focus");
  const firings = [{ actor: "lp", fireCount: 3 }, { actor: "check", fireCount: 3 }, { actor: "c", fireCount: 3 }, { actor: "review", fireCount: 1 }];
  const into = pictureState(IF_ELSE, "r", 3, 9, { ...detail, fireCount: 3, firings }, marks(), 3);
  assert.equal(into.focus, "review", "stepped into its third inner firing (the step's own left out)");
  assert.equal(into.inner, 3);
});

test("divergences up to the step, the failure at the last step, the replayed region", () => {
  const m = marks({ divergedSteps: new Map([[2, "check"], [6, "review"]]), failedActor: "approve", resumedAtStep: 4 });
  const early = pictureState(IF_ELSE, "r", 3, 9, undefined, m);
  assert.deepEqual(early.diverged, ["check"]);
  assert.equal(early.replayed, true);
  assert.equal(early.failed, undefined);
  const last = pictureState(IF_ELSE, "r", 9, 9, undefined, m);
  assert.deepEqual(last.diverged, ["check", "review"]);
  assert.equal(last.replayed, false);
  assert.equal(last.failed, "approve");
  assert.equal(pictureState(IF_ELSE, "r", 9, 9, undefined, { ...m, live: true }).failed, undefined, "a live run has not failed yet");
});

/** A timeline as the server gives it: times in ms here (µs on the wire). */
function timeline(actors: string[], steps: [number, string, number, number, boolean?][], inner: [number, number, string, number, number, number?][] = []): TimelineData {
  const us = (ms: number): number => Math.round(ms * 1000);
  return {
    actors, total: steps.length, complete: true,
    steps: steps.map(([n, a, at, dur, replayed]): TimelineStep => [n, actors.indexOf(a), us(at), us(dur), !!replayed, false]),
    inner: inner.map(([n, i, a, at, dur, parent]): TimelineFiring => [n, i, actors.indexOf(a), us(at), us(dur), false, parent ?? 0]),
  };
}

const LOOP_RUN = timeline(["lp", "check", "c", "review", "approve", "other"],
  [[1, "lp", 0, 10], [2, "lp", 10, 10], [3, "other", 20, 1], [4, "lp", 21, 10]],
  [[1, 1, "check", 1, 2], [1, 3, "approve", 4, 2], [2, 1, "check", 11, 2], [2, 3, "review", 14, 4], [4, 1, "check", 22, 2]]);

test("clicking an actor selects its latest firing at or before the step: an inner one, or its composite's step", () => {
  assert.deepEqual(latestFiring(IF_ELSE, LOOP_RUN, "review", 3), { step: 2, inner: 3 });
  assert.deepEqual(latestFiring(IF_ELSE, LOOP_RUN, "review", 4), { step: 2, inner: 3 }, "step 4 ran review's loop, not review");
  assert.equal(latestFiring(IF_ELSE, LOOP_RUN, "review", 1), undefined, "review had not fired by step 1");
  assert.deepEqual(latestFiring(IF_ELSE, LOOP_RUN, "check", 4), { step: 4, inner: 1 });
  assert.deepEqual(latestFiring(IF_ELSE, LOOP_RUN, "c", 2), { step: 2, inner: 0 }, "an answer without the if's own firing (an older server's): its loop's step");
  assert.deepEqual(latestFiring(IF_ELSE, LOOP_RUN, "lp", 1), { step: 1, inner: 0 });
  assert.equal(latestFiring(IF_ELSE, LOOP_RUN, "nobody", 4), undefined);
  assert.equal(latestFiring(IF_ELSE, emptyTimeline(), "review", 4), undefined);
  const untimed = { ...LOOP_RUN, inner: [] }; // a tape from before inner firings were timed
  assert.deepEqual(latestFiring(IF_ELSE, untimed, "review", 3), { step: 2, inner: 0 });
});

test("inner firings are drawn inside their composite's lane: rows under it, within its bar", () => {
  const { bars, rows } = timelineBars(LOOP_RUN, "worker");
  assert.deepEqual(rows.map((r) => [r.label, r.inner]), [["worker 1", false], ["↳ inside", true]]);
  for (const b of bars.filter((x) => x.inner)) {
    const step = bars.find((x) => x.step === b.step && !x.inner);
    assert.ok(step && b.row > step.row && rows[b.row].lane === rows[step.row].lane);
    assert.ok(step.start <= b.start && b.end <= step.end, `step ${b.step}'s inner firing ${b.inner} inside its bar`);
  }
  // two inner firings at once (a nested workflow's members on two workers): two rows, no overlap in a row
  const parallel = timeline(["wf", "wf/a", "wf/b"], [[1, "wf", 0, 10]], [[1, 1, "wf/a", 1, 5], [1, 2, "wf/b", 2, 5], [1, 3, "wf/a", 7, 2]]);
  const p = timelineBars(parallel, "worker");
  assert.equal(p.rows.filter((r) => r.inner).length, 2);
  for (const row of byRow(p.bars, p.rows.length)) {
    for (let i = 1; i < row.length; i++) assert.ok(row[i].start >= row[i - 1].end, "a row's bars do not overlap");
  }
  const byActor = timelineBars(LOOP_RUN, "actor");
  assert.deepEqual(byActor.rows.map((r) => r.label), ["lp", "↳ check", "↳ approve", "↳ review", "other"]);
  const review = byActor.bars.find((b) => b.actor === "review");
  assert.equal(byActor.rows[review?.row ?? -1].label, "↳ review");
});

const IF_ELSE_BIG: FlowGraph = {
  workflow: "main", flowFile: "/ws/scopes.py", outputs: ["Big", "Small"], edges: [],
  actors: [
    { path: "lp", kind: "loop", cls: "loop", file: "/ws/scopes.py", line: 35 },
    { path: "check", kind: "task", cls: "Check", file: "/ws/scopes.py", line: 37, owner: "lp" },
    { path: "c", kind: "if", cls: "if", file: "/ws/scopes.py", line: 39, owner: "lp" },
    { path: "big", kind: "workflow", cls: "inner", file: "/ws/scopes.py", line: 42, owner: "c", branch: "then" },
    { path: "small", kind: "task", cls: "Keep", file: "/ws/scopes.py", line: 46, owner: "c", branch: "else" },
    { path: "big/k", kind: "task", cls: "Keep", file: "/ws/scopes.py", line: 28, owner: "big" },
  ],
};

// a loop holding an if holding a nested workflow (tests/lsp/test_graph.py's flow), as the server
// answers: each inner firing names the one it ran in, a nested composite spans what it holds
const NESTED_RUN = timeline(["lp", "check", "c", "big", "big/k", "small"],
  [[1, "lp", 0, 10], [2, "lp", 10, 10], [3, "lp", 20, 1]],
  [[1, 1, "check", 1, 2, 0], [1, 2, "c", 3, 3, 0], [1, 3, "small", 4, 1, 2],
    [2, 1, "check", 11, 2, 0], [2, 2, "c", 13, 5, 0], [2, 3, "big", 13, 5, 2], [2, 4, "big/k", 15, 2, 3]]);

test("a composite inside a composite has its own bar, what it ran in rows under it, as deep as the flow nests", () => {
  for (const mode of ["worker", "actor"] as const) {
    const { bars, rows } = timelineBars(NESTED_RUN, mode);
    const of = (step: number, inner: number) => bars.find((b) => b.step === step && b.inner === inner);
    for (const b of bars) {
      assert.equal(rows[b.row].depth, b.depth, `${mode}: ${b.actor}'s row is at its depth`);
      if (!b.depth) continue;
      const up = of(b.step, b.parent);
      assert.ok(up && up.row < b.row && rows[up.row].lane === rows[b.row].lane, `${mode}: ${b.actor} under ${up?.actor}`);
      assert.ok(up.start <= b.start && b.end <= up.end, `${mode}: ${b.actor} within ${up.actor}'s bar`);
      assert.equal(up.composite || up.depth === 0, true);
    }
    assert.deepEqual([of(2, 2), of(2, 3), of(2, 4)].map((b) => [b?.actor, b?.depth, b?.composite]),
      [["c", 1, true], ["big", 2, true], ["big/k", 3, false]]);
    assert.equal(of(1, 1)?.composite, false, "a task's firing holds nothing");
  }
  assert.deepEqual(timelineBars(NESTED_RUN, "worker").rows.map((r) => [r.label, r.depth]),
    [["worker 1", 0], ["↳ inside", 1], ["↳ inside", 2], ["↳ inside", 3]]);
  assert.deepEqual(timelineBars(NESTED_RUN, "actor").rows.map((r) => [r.label, r.depth]),
    [["lp", 0], ["↳ check", 1], ["↳ c", 1], ["↳ small", 2], ["↳ big", 2], ["↳ k", 3]], "each inner actor's row under its composite's");
  // the stepper on the nested workflow's member: its bar, the composites it ran in, and the step's
  const { bars } = timelineBars(NESTED_RUN, "worker");
  assert.deepEqual(barsOf(bars, { step: 2, inner: 4 }).map((b) => b.actor), ["big/k", "big", "c", "lp"]);
  assert.deepEqual(barsOf(bars, { step: 2, inner: 3 }).map((b) => b.actor), ["big", "c", "lp"]);
  // drawn, a nested composite's bar is its own (a click on it selects that inner firing)
  const drawn = visibleBars(byRow(bars, 4), 10, 20, 0.01);
  const big = drawn.find((b) => b.actor === "big");
  assert.ok(big && big.step === 2 && big.inner === 3 && big.composite && big.count === 1);
  // clicking the nested workflow in the graph selects its latest firing
  assert.deepEqual(latestFiring(IF_ELSE_BIG, NESTED_RUN, "big", 3), { step: 2, inner: 3 });
  assert.deepEqual(latestFiring(IF_ELSE_BIG, NESTED_RUN, "c", 1), { step: 1, inner: 2 });
});

test("worker lanes: overlapping firings on different lanes, a free lane reused", () => {
  const data = timeline(["a", "b", "c", "d"], [[1, "a", 0, 10], [2, "b", 2, 10], [3, "c", 11, 1], [4, "d", 12.5, 1]]);
  const { bars, rows } = timelineBars(data, "worker");
  assert.deepEqual(rows.map((r) => r.label), ["worker 1", "worker 2"]);
  const lane = Object.fromEntries(bars.map((b) => [b.actor, b.row]));
  assert.notEqual(lane.a, lane.b);
  assert.equal(lane.c, lane.a, "a starts again on the lane that is free");
  const byActor = timelineBars(timeline(["a", "b"], [[1, "a", 0, 1], [2, "b", 1, 1], [3, "a", 2, 1]]), "actor");
  assert.deepEqual(byActor.rows.map((r) => r.label), ["a", "b"]);
});

test("a live run's timeline grows by what follows; an answer to an older question is dropped", () => {
  const data = emptyTimeline();
  assert.equal(nextTimelineStep(data), 1);
  const first = timeline(["lp", "check"], [[1, "lp", 0, 1], [2, "lp", 1, 1]], [[1, 1, "check", 0.2, 0.1]]);
  assert.ok(addTimeline(data, { ...first, complete: false }));
  assert.equal(nextTimelineStep(data), 3);
  assert.equal(addTimeline(data, first), false, "steps 1-2 again: already there");
  assert.equal(data.steps.length, 2);
  const next = timeline(["lp", "check"], [[3, "lp", 2, 1]], [[3, 1, "check", 2.2, 0.1]]);
  assert.ok(addTimeline(data, next));
  assert.deepEqual(data.steps.map((s) => s[0]), [1, 2, 3]);
  assert.equal(data.inner.length, 2);
  assert.equal(data.complete, true);
});

test("the stepper's firing: its step's bar and its inner firing's; diverged steps by actor", () => {
  const { bars } = timelineBars(LOOP_RUN, "worker");
  assert.deepEqual(barsOf(bars, { step: 2, inner: 3 }).map((b) => [b.actor, b.inner]).sort(), [["lp", 0], ["review", 3]]);
  assert.deepEqual(barsOf(bars, { step: 3, inner: 0 }).map((b) => b.actor), ["other"]);
  const d = timeline(["a"], [[1, "a", 0, 1], [2, "a", 1, 1]]);
  d.steps[1][5] = true;
  assert.deepEqual([...divergedSteps(d)], [[2, "a"]]);
});

test("100,000 firings: only what is in view is looked at, and zoomed out they merge (no firing lost in the count)", () => {
  const actors = ["a0", "a1", "a2", "wf", "wf/sub", "wf/sub/x"];
  const steps: [number, string, number, number, boolean?][] = [];
  const inner: [number, number, string, number, number, number?][] = [];
  for (let i = 0; i < 90_000; i++) steps.push([i + 1, actors[i % 3], i * 0.01, 0.005, i < 45_000]);
  for (let i = 0; i < 5_000; i++) {
    const n = 90_001 + i;
    steps.push([n, "wf", 900 + i * 0.02, 0.015]);
    inner.push([n, 1, "wf/sub", 900 + i * 0.02 + 0.001, 0.012, 0], [n, 2, "wf/sub/x", 900 + i * 0.02 + 0.008, 0.004, 1]);
  }
  const data = timeline(actors, steps, inner);
  const { bars, rows } = timelineBars(data, "actor");
  assert.equal(bars.length, 105_000);
  const perRow = byRow(bars, rows.length);
  const width = 800;
  const all = visibleBars(perRow, 0, 1000, 1000 / width);
  assert.ok(all.length <= 3 * width * rows.length, `${all.length} bars drawn for 105,000 firings`);
  assert.equal(all.reduce((n, b) => n + b.count, 0), 105_000, "merged bars count every firing");
  assert.ok(all.some((b) => b.replayed) && all.some((b) => !b.replayed), "replayed and live stay apart");
  assert.ok(all.some((b) => b.row === rows.findIndex((r) => r.inner) && b.count > 1), "inner firings merge too");
  const zoomed = visibleBars(perRow, 100, 100.5, 0.5 / width); // zoomed in: single firings, only those in view
  assert.ok(zoomed.length > 0 && zoomed.length < 200 && zoomed.every((b) => b.count === 1));
  assert.ok(zoomed.every((b) => b.end >= 100 && b.start <= 100.5));
  const late = visibleBars(perRow, 950, 950.1, 0.1 / width);
  assert.ok(late.some((b) => b.inner === 2 && b.actor === "wf/sub/x"), "a nested composite's firing in view, drawn alone");
  assert.ok(late.some((b) => b.inner === 1 && b.composite && rows[b.row].depth === 1), "and the nested composite's bar, a row above it");
  assert.ok(all.some((b) => rows[b.row].depth === 2 && b.count > 1), "the deepest rows merge too");
});

test("merged bars stay within the bar their firings ran in, merged or not", () => {
  // four loop steps a pixel or less apart, each with one inner firing; the inner row's merges start
  // at another place than the step row's, so an inner bar merged on would reach past its steps' bar
  const data = timeline(["lp", "item"],
    [[1, "lp", 0, 1], [2, "lp", 1.5, 1], [3, "lp", 2.6, 0.9], [4, "lp", 3.6, 0.4]],
    [[1, 1, "item", 0.9, 0.1], [2, 1, "item", 1.6, 0.8], [3, 1, "item", 2.7, 0.7], [4, 1, "item", 3.7, 0.2]]);
  const { bars, rows } = timelineBars(data, "worker");
  const drawn = visibleBars(byRow(bars, rows.length), 0, 4, 1); // (1 ms a pixel)
  const tops = drawn.filter((b) => !rows[b.row].inner);
  assert.deepEqual(tops.map((b) => [b.step, b.lastStep, b.count]), [[1, 3, 3], [4, 4, 1]]);
  for (const b of drawn.filter((x) => rows[x.row].inner)) {
    const top = tops.find((t) => t.step <= b.step && b.lastStep <= t.lastStep);
    assert.ok(top && top.start <= b.start && b.end <= top.end, `inner bar of steps ${b.step}–${b.lastStep} within ${JSON.stringify(top)}`);
  }
  assert.equal(drawn.filter((x) => rows[x.row].inner).reduce((n, b) => n + b.count, 0), 4, "every inner firing drawn");
});
