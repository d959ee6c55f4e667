import { test } from "node:test";
import assert from "node:assert/strict";
import { StepStore, type Scheduler, type StoreChange } from "../../src/core/stepStore";
import type { RunInfo, StepInfo } from "../../src/core/protocol";

function step(n: number, actor = "review", extra: Partial<StepInfo> = {}): StepInfo {
  return {
    step: n,
    actor,
    actorKind: "task",
    fireCount: n,
    journalSeq: n,
    replayed: false,
    uri: "file:///w/flow.py",
    range: { start: { line: 10 + (n % 3), character: 4 }, end: { line: 10 + (n % 3), character: 20 } },
    durationMs: 1,
    ...extra,
  };
}

function run(id: string, extra: Partial<RunInfo> = {}): RunInfo {
  return { runId: id, workflow: "review", uri: "file:///w/flow.py", status: "succeeded", steps: 0, startedAt: "2024-01-01T00:00:00Z", runDir: `/w/.flowtape/runs/${id}`, ...extra };
}

/** A manual scheduler: tests decide when the timer fires. */
function manual(): Scheduler & { fire(): void; pending: number } {
  let fn: (() => void) | undefined;
  return {
    set(f) {
      fn = f;
      return 1;
    },
    clear() {
      fn = undefined;
    },
    fire() {
      const f = fn;
      fn = undefined;
      f?.();
    },
    get pending() {
      return fn ? 1 : 0;
    },
  };
}

test("steps are batched: one change event per flush", () => {
  const sched = manual();
  const store = new StepStore({ scheduler: sched, batchMs: 50 });
  const changes: StoreChange[] = [];
  store.onChange((c) => changes.push(c));
  store.runStarted({ runId: "r1", uri: "file:///w/flow.py", workflow: "review", runDir: "/d" });
  changes.length = 0;
  store.addSteps("r1", [step(1), step(2)]);
  store.addSteps("r1", [step(3)]);
  assert.equal(changes.length, 0, "nothing before the flush");
  assert.equal(store.steps("r1").length, 0);
  assert.equal(sched.pending, 1);
  sched.fire();
  assert.equal(changes.length, 1);
  assert.deepEqual([...changes[0].steps], ["r1"]);
  assert.deepEqual(store.steps("r1").map((s) => s.step), [1, 2, 3]);
  assert.equal(store.run("r1")?.steps, 3);
  assert.equal(store.run("r1")?.status, "running");
});

test("a large burst flushes at once (maxPending)", () => {
  const sched = manual();
  const store = new StepStore({ scheduler: sched, maxPending: 10 });
  let n = 0;
  store.onChange(() => n++);
  store.addSteps("r", Array.from({ length: 12 }, (_, i) => step(i + 1)));
  assert.equal(n, 1);
  assert.equal(store.loadedCount("r"), 12);
  assert.equal(sched.pending, 0);
});

test("runFinished flushes pending steps and records the status", () => {
  const sched = manual();
  const store = new StepStore({ scheduler: sched });
  store.runStarted({ runId: "r1", uri: "u", workflow: "w", runDir: "/d" });
  store.addSteps("r1", [step(1), step(2)]);
  assert.equal(store.isLive("r1"), true);
  store.runFinished("r1", "failed");
  assert.equal(store.isLive("r1"), false);
  assert.equal(store.run("r1")?.status, "failed");
  assert.equal(store.loadedCount("r1"), 2);
  assert.equal(store.complete("r1"), true);
});

test("steps out of order and duplicates merge by step number", () => {
  const store = new StepStore({ scheduler: manual() });
  store.putSteps("r", [step(3), step(1)]);
  assert.equal(store.loadedCount("r"), 1, "hole at step 2");
  assert.deepEqual(store.steps("r").map((s) => s.step), [1, 3]);
  store.putSteps("r", [step(2), step(3, "other")]);
  assert.equal(store.loadedCount("r"), 3);
  assert.equal(store.step("r", 3)?.actor, "other");
});

test("setRuns keeps a live run running and newest-first order", () => {
  const store = new StepStore({ scheduler: manual() });
  store.runStarted({ runId: "live", uri: "u", workflow: "w", runDir: "/d", resumedFrom: "old", resumedAtStep: 4 });
  store.setRuns([run("live", { status: "succeeded", steps: 0 }), run("old", { steps: 9 })]);
  assert.deepEqual(store.runs.map((r) => r.runId), ["live", "old"]);
  assert.equal(store.run("live")?.status, "running");
  assert.equal(store.run("old")?.steps, 9);
  assert.equal(store.complete("old"), false);
});

test("a run list asked for before a run started keeps that run", () => {
  const store = new StepStore({ scheduler: manual() });
  store.setRuns([run("a")]);
  store.runStarted({ runId: "new", uri: "u", workflow: "w", runDir: "/d" });
  store.setRuns([run("a"), run("b")]); // the answer was made before "new" existed
  assert.deepEqual(store.runs.map((r) => r.runId), ["new", "a", "b"]);
  store.runFinished("new", "succeeded");
  store.setRuns([run("a")]); // a finished run the list no longer has is gone (deleted on disk)
  assert.deepEqual(store.runs.map((r) => r.runId), ["a"]);
});

test("runStarted puts a new run first", () => {
  const store = new StepStore({ scheduler: manual() });
  store.setRuns([run("a"), run("b")]);
  store.runStarted({ runId: "c", uri: "u", workflow: "w", runDir: "/d", resumedFrom: "a", resumedAtStep: 2 });
  assert.deepEqual(store.runs.map((r) => r.runId), ["c", "a", "b"]);
  assert.equal(store.run("c")?.resumedAtStep, 2);
});

test("listeners can be disposed", () => {
  const store = new StepStore({ scheduler: manual() });
  let n = 0;
  const d = store.onChange(() => n++);
  store.putSteps("r", [step(1)]);
  d.dispose();
  store.putSteps("r", [step(2)]);
  assert.equal(n, 1);
});

test("the default scheduler flushes after batchMs", async () => {
  const store = new StepStore({ batchMs: 5 });
  const seen = new Promise<StoreChange>((resolve) => store.onChange(resolve));
  store.addSteps("r", [step(1)]);
  const c = await seen;
  assert.ok(c.steps.has("r"));
  assert.equal(store.loadedCount("r"), 1);
});

test("markDiverged flags the steps named by replayStopped", () => {
  const sched = manual();
  const store = new StepStore({ scheduler: sched });
  store.addSteps("r", [step(1), step(2), step(3)]);
  let n = 0;
  store.onChange(() => n++);
  store.markDiverged("r", [2, 99]);
  assert.equal(store.step("r", 2)?.diverged, true);
  assert.equal(store.step("r", 1)?.diverged, undefined);
  assert.ok(n >= 1);
  const before = n;
  store.markDiverged("r", [2]);
  assert.equal(n, before, "no event when nothing changes");
});

test("loadedCount counts the steps loaded from step 1 up to the first hole, as pages fill it", () => {
  const store = new StepStore();
  store.setRuns([run("r", { steps: 9 })]);
  store.putSteps("r", [step(1), step(2), step(5), step(6)], 9);
  assert.equal(store.loadedCount("r"), 2);
  store.putSteps("r", [step(3), step(4)], 9);
  assert.equal(store.loadedCount("r"), 6);
  assert.equal(store.complete("r"), false);
  store.putSteps("r", [step(7), step(8), step(9)], 9);
  assert.equal(store.loadedCount("r"), 9);
  assert.equal(store.complete("r"), true);
});

test("an error said for a run is kept until cleared, and tells the listeners", () => {
  const store = new StepStore();
  store.setRuns([run("r", { steps: 10 })]);
  const changes: StoreChange[] = [];
  store.onChange((c) => changes.push(c));
  store.setError("r", "run r's tape is damaged: line 18: hash chain");
  assert.equal(store.error("r"), "run r's tape is damaged: line 18: hash chain");
  assert.deepEqual([...changes[0].steps], ["r"]);
  store.clearError("r");
  assert.equal(store.error("r"), undefined);
});

test("after the server went away no run stays running on the word of runStarted", () => {
  const store = new StepStore();
  store.runStarted({ runId: "r", workflow: "main", uri: "file:///w/flow.py", runDir: "/w/r" });
  store.setRuns([run("r", { status: "failed", steps: 3 })]);
  assert.equal(store.run("r")?.status, "running"); // live: the stream's word wins
  store.resetLive();
  store.setRuns([run("r", { status: "failed", steps: 3 })]);
  assert.equal(store.isLive("r"), false);
  assert.equal(store.run("r")?.status, "failed");
});
