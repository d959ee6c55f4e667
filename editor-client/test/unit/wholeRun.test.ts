import { test } from "node:test";
import assert from "node:assert/strict";
import { groupLabel, groupPath, pageOf, replayedUpTo, runLayout, subGroups } from "../../src/core/groups";
import { initialText, parseInput } from "../../src/core/inputs";
import { Stepper } from "../../src/core/stepper";
import { StepStore } from "../../src/core/stepStore";
import { failureLabel, finishMessage, firingDescription, formatDuration, shortError, stepDescription } from "../../src/core/format";
import type { ErrorDetail, FiringDetail, StepInfo } from "../../src/core/protocol";

const range = { start: { line: 3, character: 0 }, end: { line: 3, character: 9 } };

test("a small run's steps go right under it; a resumed one's replayed region is a group", () => {
  assert.deepEqual(runLayout(40, 0), { groups: [], from: 1, to: 40 });
  assert.deepEqual(runLayout(14, 4), { groups: [{ from: 1, to: 4, replayed: true, span: 0 }], from: 5, to: 14 });
  assert.equal(groupLabel({ from: 1, to: 7000, replayed: true }), "steps 1–7,000 replayed");
});

test("a big run is in groups of 1,000, every step reachable through them", () => {
  const layout = runLayout(15000, 7000);
  assert.deepEqual(layout.groups.map(groupLabel), [
    "steps 1–7,000 replayed", "steps 7,001–8,000", "steps 8,001–9,000", "steps 9,001–10,000", "steps 10,001–11,000",
    "steps 11,001–12,000", "steps 12,001–13,000", "steps 13,001–14,000", "steps 14,001–15,000",
  ]);
  assert.equal(layout.to, 0); // no step right under the run
  assert.equal(subGroups(layout.groups[0]).length, 7);
  assert.deepEqual(subGroups(layout.groups[0])[6], { from: 6001, to: 7000, replayed: true, span: 1000 });
  assert.deepEqual(groupPath(3500, 15000, 7000).map(groupLabel), ["steps 1–7,000 replayed", "steps 3,001–4,000 replayed"]);
  assert.deepEqual(groupPath(14999, 15000, 7000).map(groupLabel), ["steps 14,001–15,000"]);
  // a million steps: groups of groups, never more than 1,000 rows at a level
  const million = runLayout(1_000_000, 0);
  assert.equal(million.groups.length, 1000);
  assert.equal(groupPath(123_456, 2_500_000, 0).length, 2);
  assert.deepEqual(pageOf(14001), { from: 14001, limit: 1000 });
  assert.deepEqual(pageOf(14000), { from: 13001, limit: 1000 });
});

test("the stepper's total is the run's, not only the pages loaded", () => {
  const store = new StepStore({ batchMs: 0 });
  store.setRuns([{ runId: "r", workflow: "w", uri: "u", status: "succeeded", steps: 15000, startedAt: "", runDir: "/d" }]);
  const step = (n: number): StepInfo => ({ step: n, actor: "a", actorKind: "task", fireCount: n, journalSeq: n, replayed: false, uri: "u", range, durationMs: 0 });
  store.putSteps("r", [step(1), step(2)], 15000);
  store.putSteps("r", [step(14001)], 15000);
  assert.equal(store.total("r"), 15000);
  assert.equal(store.loadedCount("r"), 2);
  assert.equal(store.step("r", 14001)?.fireCount, 14001);
});

test("durations under a millisecond are µs; nothing measured shows nothing", () => {
  assert.equal(formatDuration(0.34), "340 µs");
  assert.equal(formatDuration(0.0004), "1 µs");
  assert.equal(formatDuration(0), "");
  assert.equal(stepDescription({ step: 1, actor: "a", actorKind: "task", fireCount: 1, journalSeq: 1, replayed: false, uri: "u", range, durationMs: 0 }), "");
});

test("step into a composite step, over its inner firings, out again", () => {
  const s = new Stepper();
  s.setRun("r", 5, 2);
  assert.equal(s.stepInto(2), true);
  assert.deepEqual([s.index, s.inner], [2, 1]);
  assert.equal(s.stepOver(), true);
  assert.deepEqual([s.index, s.inner], [2, 2]);
  assert.equal(s.stepOut(), true);
  assert.deepEqual([s.index, s.inner], [2, 0]);
  assert.equal(s.stepOut(), false);
  s.stepInto(2);
  s.stepOver();
  s.stepOver(); // past the last inner firing: the next step
  assert.deepEqual([s.index, s.inner], [3, 0]);
  assert.equal(s.stepInto(0), true); // a step without inner firings: into is the next step
  assert.deepEqual([s.index, s.inner], [4, 0]);
  s.stepInto(3);
  s.goTo(1); // any move leaves the inner firing
  assert.deepEqual([s.index, s.inner], [1, 0]);
});

test("a declared input is typed as JSON, a str one as text; the last value is offered again", () => {
  assert.deepEqual(parseInput("3", { name: "In", type: "int" }), { value: 3 });
  assert.deepEqual(parseInput("[1, 2]", { name: "In", type: "list[int]" }), { value: [1, 2] });
  assert.match((parseInput("three", { name: "In", type: "int" }) as { error: string }).error, /enter In as JSON \(a int\)/);
  assert.match((parseInput("", { name: "In", type: "int" }) as { error: string }).error, /In needs a value/);
  assert.deepEqual(parseInput("hello world", { name: "Text", type: "str" }), { value: "hello world" });
  assert.deepEqual(parseInput("3", { name: "Text", type: "str" }), { value: "3" });
  assert.deepEqual(parseInput('"quoted"', { name: "Text", type: "str" }), { value: "quoted" });
  assert.equal(initialText("hello", { type: "str" }), "hello");
  assert.equal(initialText([1, 2], { type: "list[int]" }), "[1,2]");
  assert.equal(initialText(undefined, { type: "int" }), "");
});

const failure: ErrorDetail = {
  message: "picky failed on firing 2 (created at /w/fail.py:30): ValueError: two is not allowed (line 24)",
  actor: "picky", fireCount: 2, taken: [{ queue: "src.Out->picky.In", tokens: ["2"] }],
};

test("the failure row names the firing, what it took and the error", () => {
  assert.deepEqual(failureLabel(failure), { label: "picky · fire 2 failed", description: "took 2 · ValueError: two is not allowed (line 24)" });
  assert.equal(shortError({ message: "the flow process exited with code 3" }), "the flow process exited with code 3");
});

test("the finish notification shows the outputs, or why the run failed", () => {
  assert.equal(finishMessage({ runId: "r", status: "succeeded", outputs: { Result: [2, 4] }, steps: 4 }, "r"), "run r succeeded · 4 steps · Result = [2,4]");
  assert.equal(finishMessage({ runId: "r", status: "succeeded", outputs: {}, steps: 0 }, "r"), "run r succeeded · 0 steps · no outputs");
  assert.equal(finishMessage({ runId: "r", status: "failed", outputs: {}, steps: 1, errorDetail: failure }, "r"),
    "run r failed · 1 step: picky · fire 2 failed: ValueError: two is not allowed (line 24)");
});

test("an inner firing's row says replayed or live, what it took and put", () => {
  const f: FiringDetail = { actor: "wrap/mid/leaf", fireCount: 2, actorKind: "task", seq: 5, replayed: false, uri: "u", range,
    taken: [{ queue: "q", tokens: ["2"] }], put: [{ queue: "p", tokens: ["3"] }] };
  assert.equal(firingDescription(f), "live · took 2 · put 3");
  assert.equal(firingDescription({ ...f, replayed: true, taken: [], put: [] }), "replayed");
});

test("a pip failure is said as pip said it; an externally managed Python points to a .venv", async () => {
  const { pipReason } = await import("../../src/core/pip");
  assert.match(pipReason("error: externally-managed-environment\n\n× This environment is externally managed\n"), /externally managed .*Create \.venv/);
  assert.equal(pipReason("Processing x.whl\nERROR: Could not find a version that satisfies the requirement pygls<3,>=2.0\n"),
    "Could not find a version that satisfies the requirement pygls<3,>=2.0");
  assert.equal(pipReason(""), "pip failed");
});

test("the replayed region ends where the resume was, or where the replay stopped", () => {
  const steps = (live: number[], diverged: number[] = []) => (n: number) => ({ replayed: !live.includes(n), diverged: diverged.includes(n) });
  assert.equal(replayedUpTo({ resumedFrom: null, resumedAtStep: null }, 10, steps([])), 0);
  assert.equal(replayedUpTo({ resumedFrom: "r", resumedAtStep: 7 }, 10, steps([8, 9, 10])), 7);
  assert.equal(replayedUpTo({ resumedFrom: "r", resumedAtStep: 7 }, 10, steps([], [3])), 2); // diverged at 3
  assert.equal(replayedUpTo({ resumedFrom: "r", resumedAtStep: 7 }, 10, steps([5, 6, 7, 8, 9, 10])), 4); // ran live from 5
  assert.equal(replayedUpTo({ resumedFrom: "r", resumedAtStep: 7000 }, 2, steps([])), 7000); // pages not loaded: as resumed
});
