import { test } from "node:test";
import assert from "node:assert/strict";
import { callText, runDescription, runIconKind, runLabel, shortRunId, statusText, stepDescription, stepIconKind, stepLabel, formatDuration, formatTime, usageLines, usageShort } from "../../src/core/format";
import type { RunInfo, StepInfo } from "../../src/core/protocol";

const base: StepInfo = {
  step: 12, actor: "review", actorKind: "task", fireCount: 3, journalSeq: 20, replayed: false,
  uri: "file:///f.py", range: { start: { line: 1, character: 0 }, end: { line: 1, character: 5 } }, durationMs: 3,
};

test("step label", () => {
  assert.equal(stepLabel(base), "12 · review · fire 3");
});

test("status bar text", () => {
  assert.equal(statusText(12, 40, "review"), "step 12/40 · review");
  assert.equal(statusText(0, 40), "step –/40");
  assert.equal(statusText(0, 0), "no steps");
});

test("step description and icon: replayed, diverged, live", () => {
  assert.equal(stepDescription({ ...base, replayed: true }), "replayed");
  assert.equal(stepIconKind({ ...base, replayed: true }), "replayed");
  assert.equal(stepDescription({ ...base, diverged: true }), "diverged · 3 ms");
  assert.equal(stepIconKind({ ...base, diverged: true, replayed: true }), "diverged");
  assert.equal(stepIconKind(base), "live");
});

test("run description shows resumed-from", () => {
  const run: RunInfo = { runId: "20240101-abcdef123456789", workflow: "review", uri: "u", status: "succeeded", steps: 7, startedAt: "2024-01-01T10:00:00Z", resumedFrom: "20240101-100000-123456-aa01", resumedAtStep: 4, runDir: "/d" };
  assert.equal(runDescription(run), "7 steps · resumed from 100000-aa01 @ step 4");
  assert.equal(runDescription({ ...run, status: "running", resumedFrom: null, steps: 1 }), "running · 1 step");
  assert.match(runLabel(run), /^review · /);
  assert.equal(runIconKind("failed"), "failed");
  assert.equal(runIconKind("weird"), "unknown");
});

test("time and duration formatting", () => {
  const now = new Date(2024, 0, 1, 12, 0, 0);
  assert.equal(formatTime(new Date(2024, 0, 1, 9, 5, 7).toISOString(), now), "09:05:07");
  assert.match(formatTime(new Date(2023, 2, 3, 14, 3).getTime(), now), /^Mar 3 14:03$/);
  assert.equal(formatTime(undefined), "");
  assert.equal(formatDuration(12.4), "12 ms");
  assert.equal(formatDuration(1500), "1.5 s");
  assert.equal(formatDuration(125_000), "2 min 5 s");
});

test("short run ids tell runs started minutes apart from each other", () => {
  const ids = ["20261202-015650-424926-9d64", "20261202-015812-000001-03af", "20261202-015650-424999-77aa"];
  assert.deepEqual(ids.map(shortRunId), ["015650-9d64", "015812-03af", "015650-77aa"]);
  assert.equal(shortRunId("nightly"), "nightly");
  assert.equal(shortRunId("a-very-long-run-id-given-by-hand-01"), "a-very-l…-hand-01");
});

test("run description shows a fork and its edits", () => {
  const run: RunInfo = { runId: "r", workflow: "w", uri: "u", status: "succeeded", steps: 7, startedAt: "2024-01-01T10:00:00Z", resumedFrom: "20240101-100000-123456-aa01", resumedAtStep: 4, edits: 2, runDir: "/d" };
  assert.equal(runDescription(run), "7 steps · forked from 100000-aa01 @ step 4 (2 edits)");
  assert.equal(runDescription({ ...run, edits: 1 }), "7 steps · forked from 100000-aa01 @ step 4 (1 edit)");
});

test("a run's model usage: on its row, in its tooltip, per call", () => {
  const run: RunInfo = { runId: "r", workflow: "review", uri: "u", status: "succeeded", steps: 3, startedAt: "2024-01-01T10:00:00Z", runDir: "/d",
    usage: { calls: 3, inputTokens: 1200, outputTokens: 34, replayedCalls: 0, savedInputTokens: 0, savedOutputTokens: 0 } };
  assert.equal(runDescription(run), "3 steps · 3 model calls, 1,234 tokens");
  assert.deepEqual(usageLines(run.usage), ["called models 3 times: 1,200 input and 34 output tokens"]);
  const resumed = { ...run, usage: { calls: 0, inputTokens: 0, outputTokens: 0, replayedCalls: 37, savedInputTokens: 41000, savedOutputTokens: 203, savedCost: 0.5 } };
  assert.equal(usageShort(resumed.usage), "saved 41,203 tokens");
  assert.deepEqual(usageLines(resumed.usage), ["replayed 37 model calls, saved 41,203 tokens (cost 0.5000)"]);
  assert.equal(usageShort(null), "");
  assert.equal(callText({ model: "gpt-4o", inputTokens: 161, outputTokens: 14, ms: 41 }), "gpt-4o · 161 in / 14 out tokens · 41 ms");
});
