import { test } from "node:test";
import assert from "node:assert/strict";
import { HintCache, around } from "../../src/core/hintCache";
import type { StepHintsResult } from "../../src/core/protocol";

const URI = "file:///ws/flow.py";

function answer(version: number | null, steps: number[], extra: Partial<StepHintsResult<string>> = {}): StepHintsResult<string> {
  return { runId: "r1", uri: URI, version, shows: true, steps: steps.map((step) => ({ step, hints: [`×${step}`] })), ...extra };
}

test("a step's hints are given for that run, step and text version only", () => {
  const c = new HintCache<string>();
  c.put(answer(3, [7, 8]), c.generation());
  assert.deepEqual(c.get(URI, 3, "r1", 7), ["×7"]);
  assert.deepEqual(c.get(URI, 3, "r1", 8), ["×8"]);
  assert.equal(c.get(URI, 3, "r1", 9), undefined, "another step: not known");
  assert.equal(c.get(URI, 3, "r2", 7), undefined, "another run: not known");
  assert.equal(c.get(URI, 4, "r1", 7), undefined, "another version of the text: not known");
  assert.equal(c.get(URI, 2, "r1", 7), undefined);
  assert.equal(c.get("file:///ws/other.py", 3, "r1", 7), undefined, "another file");
  assert.deepEqual(c.missing(URI, 3, "r1", [6, 7, 8, 9]), [6, 9]);
});

test("a newer version of the text drops the hints placed in the older; an answer for an older one is not kept", () => {
  const c = new HintCache<string>();
  c.put(answer(3, [7]), c.generation());
  c.put(answer(4, [8]), c.generation());
  assert.equal(c.get(URI, 3, "r1", 7), undefined, "placed in the old text: gone");
  assert.equal(c.get(URI, 4, "r1", 7), undefined, "not carried over to the new text");
  assert.deepEqual(c.get(URI, 4, "r1", 8), ["×8"]);
  c.put(answer(3, [9]), c.generation()); // (a late answer to a request sent before the edit)
  assert.equal(c.get(URI, 3, "r1", 9), undefined);
  assert.equal(c.get(URI, 4, "r1", 9), undefined);
  assert.deepEqual(c.get(URI, 4, "r1", 8), ["×8"], "the newer version's hints stay");
});

test("hints placed in the file as saved (no editor version) are not kept", () => {
  const c = new HintCache<string>();
  c.put(answer(null, [1]), c.generation());
  assert.deepEqual(c.missing(URI, 1, "r1", [1]), [1]);
});

test("a save or a close drops the file, and an answer asked before it is not kept", () => {
  const c = new HintCache<string>();
  c.put(answer(3, [7]), c.generation());
  const before = c.generation(); // a request sent now…
  c.forget(URI); // …then the file is saved: the run's lines map anew
  assert.equal(c.get(URI, 3, "r1", 7), undefined);
  c.put(answer(3, [7, 8]), before); // …its answer comes after the save
  assert.equal(c.get(URI, 3, "r1", 7), undefined, "asked before the save: not kept");
  c.put(answer(3, [8]), c.generation());
  assert.deepEqual(c.get(URI, 3, "r1", 8), ["×8"], "asked after it: kept");
});

test("a new server: nothing known holds, nor what the old one is still answering", () => {
  const c = new HintCache<string>();
  c.put(answer(3, [7]), c.generation());
  const before = c.generation();
  const otherBefore = c.generation();
  c.clear();
  assert.equal(c.get(URI, 3, "r1", 7), undefined);
  c.put(answer(3, [7]), before);
  assert.equal(c.get(URI, 3, "r1", 7), undefined);
  c.put(answer(3, [7], { uri: "file:///ws/never-put.py" }), otherBefore);
  assert.equal(c.get("file:///ws/never-put.py", 3, "r1", 7), undefined, "a file with nothing kept yet, asked before: not kept");
});

test("a run with nothing to show in a file says so (null) for every step, other runs not", () => {
  const c = new HintCache<string>();
  c.put(answer(3, [], { shows: false }), c.generation());
  assert.equal(c.get(URI, 3, "r1", 1), null);
  assert.equal(c.get(URI, 3, "r1", 500), null);
  assert.equal(c.get(URI, 3, "r2", 1), undefined);
  assert.equal(c.get(URI, 4, "r1", 1), undefined, "in another text: not known");
});

test("at most `steps` steps of a file are kept (the oldest go first), and at most `files` files", () => {
  const c = new HintCache<string>(3, 2);
  c.put(answer(1, [1, 2, 3]), c.generation());
  c.put(answer(1, [4]), c.generation());
  assert.deepEqual(c.missing(URI, 1, "r1", [1, 2, 3, 4]), [1]);
  c.put(answer(1, [2]), c.generation()); // (asked again: the newest now)
  c.put(answer(1, [5]), c.generation());
  assert.deepEqual(c.missing(URI, 1, "r1", [2, 3, 4, 5]), [3]);
  const a = "file:///ws/a.py";
  const b = "file:///ws/b.py";
  c.put(answer(1, [1], { uri: a }), c.generation());
  c.put(answer(1, [1], { uri: b }), c.generation()); // three files: the one used longest ago goes
  assert.equal(c.get(URI, 1, "r1", 5), undefined);
  assert.deepEqual(c.get(a, 1, "r1", 1), ["×1"]);
  assert.deepEqual(c.get(b, 1, "r1", 1), ["×1"]);
});

test("the steps next to the stepper's, nearest first, within the run", () => {
  assert.deepEqual(around(5, 10, 2), [6, 4, 7, 3]);
  assert.deepEqual(around(1, 10, 2), [2, 3]);
  assert.deepEqual(around(10, 10, 2), [9, 8]);
  assert.deepEqual(around(1, 1, 2), []);
});
