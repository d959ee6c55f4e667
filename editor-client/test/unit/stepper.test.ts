import { test } from "node:test";
import assert from "node:assert/strict";
import { Stepper, parseGoTo } from "../../src/core/stepper";

test("a new stepper has no run and does not move", () => {
  const s = new Stepper();
  assert.equal(s.next(), false);
  assert.equal(s.index, 0);
  assert.equal(s.runId, undefined);
});

test("next/previous clamp to 1..total", () => {
  const s = new Stepper();
  s.setRun("r", 3);
  assert.equal(s.index, 0);
  assert.equal(s.next(), true);
  assert.equal(s.index, 1);
  s.next();
  s.next();
  assert.equal(s.index, 3);
  assert.equal(s.next(), false, "clamped at the last step");
  assert.equal(s.index, 3);
  s.previous();
  s.previous();
  assert.equal(s.index, 1);
  assert.equal(s.previous(), false, "clamped at the first step");
});

test("previous from no step goes to the last", () => {
  const s = new Stepper();
  s.setRun("r", 5);
  s.previous();
  assert.equal(s.index, 5);
});

test("first/last/goTo", () => {
  const s = new Stepper();
  s.setRun("r", 40);
  s.last();
  assert.equal(s.index, 40);
  s.first();
  assert.equal(s.index, 1);
  s.goTo(12);
  assert.equal(s.index, 12);
  s.goTo(99);
  assert.equal(s.index, 40);
  s.goTo(-3);
  assert.equal(s.index, 1);
  assert.deepEqual(s.state, { runId: "r", index: 1, total: 40 });
});

test("setRun clamps its starting index", () => {
  const s = new Stepper();
  s.setRun("r", 4, 10);
  assert.equal(s.index, 4);
  s.setRun("q", 0, 3);
  assert.equal(s.index, 0);
  assert.equal(s.first(), false);
});

test("a growing run: follow keeps the cursor on the last step", () => {
  const s = new Stepper();
  s.setRun("r", 3);
  s.last();
  s.follow = true;
  assert.equal(s.setTotal(5), true);
  assert.equal(s.index, 5);
  s.goTo(2);
  assert.equal(s.setTotal(8), false);
  assert.equal(s.index, 2);
  s.follow = false;
  s.last();
  s.setTotal(9);
  assert.equal(s.index, 8);
});

test("a run followed from its start moves onto its steps as they come", () => {
  const s = new Stepper();
  s.setRun("r", 0);
  s.follow = true;
  assert.equal(s.setTotal(2), true);
  assert.equal(s.index, 2);
  assert.equal(s.setTotal(5), true);
  assert.equal(s.index, 5);
  const t = new Stepper();
  t.setRun("q", 0);
  assert.equal(t.setTotal(3), false); // not followed: no step chosen for the user
  assert.equal(t.index, 0);
});

test("a shrinking total clamps the index", () => {
  const s = new Stepper();
  s.setRun("r", 10, 9);
  assert.equal(s.setTotal(4), true);
  assert.equal(s.index, 4);
});

test("parseGoTo", () => {
  assert.equal(parseGoTo("12", 1, 40), 12);
  assert.equal(parseGoTo(" 40 ", 1, 40), 40);
  assert.equal(parseGoTo("first", 7, 40), 1);
  assert.equal(parseGoTo("last", 7, 40), 40);
  assert.equal(parseGoTo("+5", 7, 40), 12);
  assert.equal(parseGoTo("-10", 7, 40), 1);
  assert.match(String(parseGoTo("41", 1, 40)), /out of range/);
  assert.match(String(parseGoTo("0", 1, 40)), /out of range/);
  assert.match(String(parseGoTo("abc", 1, 40)), /step number from 1 to 40/);
  assert.match(String(parseGoTo("3", 0, 0)), /no steps/);
});
