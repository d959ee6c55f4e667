import { test } from "node:test";
import assert from "node:assert/strict";
import { diffItems, diffSummary, firingText, outputsText } from "../../src/core/diffView";
import type { RunDiff } from "../../src/core/protocol";

const diff: RunDiff = {
  a: "ra", b: "rb", same: false,
  counts: [{ actor: "double", a: 5, b: 5 }],
  outputs: { same: false, a: { Out: [3, 5] }, b: { Out: [3, 7] } },
  differences: [
    { actor: "double", fireCount: 2, aspects: ["inputs", "outputs"],
      a: { actor: "double", fireCount: 2, step: 5, inputs: [{ queue: "n.Out->double.In", digest: "x", tokens: [2] }], outputs: [{ queue: "double.Out->$", tokens: [4] }], state: { b: 1, a: 2 } },
      b: { actor: "double", fireCount: 2, step: 5, inputs: [{ queue: "n.Out->double.In", digest: "y", tokens: [3] }], outputs: [{ queue: "double.Out->$", tokens: [6] }] } },
    { actor: "add", fireCount: 3, aspects: ["only in b"], a: null, b: { actor: "add", fireCount: 3 } },
  ],
};

test("the list: each differing firing, the first marked, then the outputs", () => {
  const items = diffItems(diff);
  assert.deepEqual(items.map((i) => i.label), ["$(debug-breakpoint-unverified) double firing 2", "add firing 3", "outputs"]);
  assert.equal(items[0].description, "inputs, outputs");
  assert.equal(items[0].detail, "first difference · a step 5 · b step 5");
  assert.equal(items[1].detail, "a — · b no step");
  assert.equal(items[2].difference, undefined);
});

test("each side's text: inputs and outputs by queue, keys sorted", () => {
  const a = firingText(diff.differences![0].a);
  assert.match(a, /"n.Out->double.In": \[\n\s+2\n\s+\]/);
  assert.ok(a.indexOf('"a": 2') < a.indexOf('"b": 1')); // state keys sorted
  assert.equal(firingText(null), "(no such firing in this run)\n");
  assert.equal(firingText({ actor: "g", fireCount: 1, inputs: [{ queue: "q", digest: "abc" }] }).includes('"q": "digest abc"'), true);
  assert.equal(outputsText({ b: 1, a: [2] }), '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n');
});

test("the summary line", () => {
  assert.equal(diffSummary(diff), "2 differing firings, and the outputs differ");
  assert.equal(diffSummary({ ...diff, same: true, actor: "double" }), "no difference (actor double): every firing of run ra matches run rb's");
});
