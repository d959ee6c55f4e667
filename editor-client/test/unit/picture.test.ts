import { test } from "node:test";
import assert from "node:assert/strict";
import ELK from "elkjs/lib/elk.bundled.js";
import type { ElkNode } from "elkjs/lib/elk-api";
import {
  byLane, elkInput, latestFiringStep, pictureState, timelineBars, visibleBars,
  type ElkNodeIn, type RunMarks,
} from "../../src/core/picture";
import type { FlowGraph, StepInfo } from "../../src/core/protocol";

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

test("clicking an inner actor selects the latest step of the composite it fired in", () => {
  const steps = [{ step: 1, actor: "lp" }, { step: 2, actor: "lp" }, { step: 3, actor: "other" }, { step: 4, actor: "lp" }];
  assert.equal(latestFiringStep(IF_ELSE, steps, "review", 3), 2);
  assert.equal(latestFiringStep(IF_ELSE, steps, "review", 4), 4);
  assert.equal(latestFiringStep(IF_ELSE, steps, "lp", 1), 1);
  assert.equal(latestFiringStep(IF_ELSE, steps, "nobody", 4), undefined);
});

const step = (n: number, actor: string, startMs: number, durationMs: number, replayed = false): StepInfo => ({
  step: n, actor, actorKind: "task", fireCount: 1, journalSeq: n, replayed, uri: "", range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
  durationMs, startMs,
});

test("worker lanes: overlapping firings on different lanes, a free lane reused", () => {
  const { bars, lanes } = timelineBars([step(1, "a", 0, 10), step(2, "b", 2, 10), step(3, "c", 11, 1), step(4, "d", 12.5, 1)], "worker");
  assert.deepEqual(lanes, ["worker 1", "worker 2"]);
  const lane = Object.fromEntries(bars.map((b) => [b.actor, b.lane]));
  assert.notEqual(lane.a, lane.b);
  assert.equal(lane.c, lane.a, "a starts again on the lane that is free");
  const byActor = timelineBars([step(1, "a", 0, 1), step(2, "b", 1, 1), step(3, "a", 2, 1)], "actor");
  assert.deepEqual(byActor.lanes, ["a", "b"]);
});

test("a long run draws at most about a bar a pixel a lane, and loses no firing in the count", () => {
  const steps = Array.from({ length: 100_000 }, (_, i) => step(i + 1, `a${i % 3}`, i * 0.01, 0.005, i < 50_000));
  const { bars, lanes } = timelineBars(steps, "actor");
  const lanesBars = byLane(bars, lanes.length);
  const width = 800;
  const all = visibleBars(lanesBars, 0, 1000, 1000 / width);
  assert.ok(all.length <= width * lanes.length, `${all.length} bars drawn`);
  assert.equal(all.reduce((n, b) => n + b.count, 0), 100_000);
  assert.ok(all.some((b) => b.replayed) && all.some((b) => !b.replayed));
  const zoomed = visibleBars(lanesBars, 100, 100.5, 0.5 / width); // zoomed in: single firings
  assert.ok(zoomed.length > 0 && zoomed.every((b) => b.count === 1));
  assert.ok(zoomed.every((b) => b.end >= 100 && b.start <= 100.5));
});
