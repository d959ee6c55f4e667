import { test } from "node:test";
import assert from "node:assert/strict";
import { GROUP_SIZE, groupKey, groupLabel, groupPath, runLayout } from "../../src/core/groups";
import { replayedRegionEnd, settleReplay, undecidedReplayStep } from "../../src/core/replayRegion";
import { StepStore } from "../../src/core/stepStore";
import type { RunInfo, StepInfo } from "../../src/core/protocol";

const range = { start: { line: 3, character: 0 }, end: { line: 3, character: 9 } };

function step(n: number, replayed: boolean, diverged = false): StepInfo {
  return { step: n, actor: n === 1 ? "words" : "collect", actorKind: n === 1 ? "loop" : "task", fireCount: n, journalSeq: n, replayed, diverged, uri: "u", range, durationMs: 0 };
}

/** A finished run resumed at `at` whose replay stopped before step `stop` (it ran live from there). */
function resumed(total: number, at: number, stop: (n: number) => Partial<Pick<StepInfo, "replayed" | "diverged">>) {
  const store = new StepStore({ batchMs: 0 });
  const info: RunInfo = { runId: "r", workflow: "main", uri: "u", status: "succeeded", steps: total, startedAt: "", runDir: "/d", resumedFrom: "p", resumedAtStep: at };
  store.setRuns([info]);
  const asked: number[] = [];
  /** The server's `flowtape/getSteps`, a page of 1,000 steps at a time (as StepPages asks). */
  const load = async (runId: string, from: number, to: number): Promise<void> => {
    await new Promise((res) => setImmediate(res));
    const first = Math.floor((from - 1) / GROUP_SIZE) * GROUP_SIZE + 1;
    for (let p = first; p <= to; p += GROUP_SIZE) {
      asked.push(p);
      const page: StepInfo[] = [];
      for (let n = p; n < p + GROUP_SIZE && n <= total; n++) {
        const s = step(n, n <= at);
        page.push({ ...s, ...stop(n) });
      }
      store.putSteps(runId, page, total);
    }
  };
  return { store, load, asked };
}

/** VS Code's reveal of a step the tree has not drawn: it asks `getParent` (the provider's:
 *  `groupPath` on where the replayed region ends as the store tells now), then the run's children
 *  (the provider's `runChildren`: the layout once the pages that decide it are in), and finds the
 *  step's group among them, or the step itself. False: "Cannot resolve tree item", nothing shown. */
async function revealFinds(store: StepStore, load: (r: string, f: number, t: number) => Promise<void>, n: number): Promise<boolean> {
  const parents = groupPath(n, store.total("r"), replayedRegionEnd(store, "r"));
  await settleReplay(store, "r", load); // what runChildren does before it lays the run out
  const layout = runLayout(store.total("r"), replayedRegionEnd(store, "r"));
  const top = parents[0];
  if (!top) return layout.from <= n && n <= layout.to;
  return layout.groups.some((g) => groupKey(g) === groupKey(top) && g.from <= n && n <= g.to);
}

test("a step inside a resumed run's replayed group, revealed before its steps are loaded", async () => {
  // Resumed at step 2; step 2's replay diverged (the world changed): the region is step 1 only.
  const race = resumed(11, 2, (n) => (n === 2 ? { diverged: true } : {}));
  assert.deepEqual(groupPath(2, 11, replayedRegionEnd(race.store, "r")).map(groupLabel), ["steps 1–2 replayed"]); // as resumed
  assert.equal(await revealFinds(race.store, race.load, 2), false, "asked before the pages are in, getParent puts step 2 in a group the tree does not draw it in");
  assert.deepEqual(runLayout(11, replayedRegionEnd(race.store, "r")).groups.map(groupLabel), ["steps 1–1 replayed"]);

  // What the stepper does now (Flowtape.revealCursor): the pages that place the step first.
  const fixed = resumed(11, 2, (n) => (n === 2 ? { diverged: true } : {}));
  assert.equal(await settleReplay(fixed.store, "r", fixed.load), true);
  assert.deepEqual(fixed.asked, [1]);
  for (let n = 1; n <= 11; n++) assert.equal(await revealFinds(fixed.store, fixed.load, n), true, `step ${n}`);
  assert.deepEqual(groupPath(1, 11, replayedRegionEnd(fixed.store, "r")).map(groupLabel), ["steps 1–1 replayed"]);
  assert.deepEqual(groupPath(2, 11, replayedRegionEnd(fixed.store, "r")), []); // right under the run
});

test("once settled, every step has the same parent whatever pages were loaded before", async () => {
  // Resumed at 2,000 of 2,500; the replay stopped at 1,500 (it ran live from there).
  const states: Record<string, number[]> = { none: [], "page 1": [1], "page 2": [1001], "page 3": [2001], all: [1, 1001, 2001] };
  const parents: Record<string, string[]> = {};
  for (const [name, pages] of Object.entries(states)) {
    const { store, load, asked } = resumed(2500, 2000, (n) => (n >= 1500 ? { replayed: false } : {}));
    for (const p of pages) await load("r", p, p);
    asked.length = 0;
    assert.equal(await settleReplay(store, "r", load), true);
    assert.deepEqual(asked, [1, 1001].filter((p) => !pages.includes(p)), `${name}: only the pages that decide it`);
    assert.equal(undecidedReplayStep(store, "r"), 0);
    assert.equal(replayedRegionEnd(store, "r"), 1499, name);
    parents[name] = [1, 999, 1499, 1500, 2000, 2001, 2500].map((n) => groupPath(n, 2500, replayedRegionEnd(store, "r")).map(groupLabel).join(" > "));
    for (const n of [1, 1499, 1500, 2500]) assert.equal(await revealFinds(store, load, n), true, `${name}: step ${n}`);
  }
  for (const name of Object.keys(states)) assert.deepEqual(parents[name], parents.none, name);
  assert.deepEqual(parents.none, [
    "steps 1–1,499 replayed > steps 1–1,000 replayed", "steps 1–1,499 replayed > steps 1–1,000 replayed",
    "steps 1–1,499 replayed > steps 1,001–1,499 replayed", "steps 1,500–2,000", "steps 1,500–2,000", "steps 2,001–2,500", "steps 2,001–2,500",
  ]);
});

test("a replay that went to the end is read to its end; a page that does not come ends the loading", async () => {
  const whole = resumed(2500, 2000, () => ({}));
  assert.equal(await settleReplay(whole.store, "r", whole.load), true);
  assert.deepEqual(whole.asked, [1, 1001]);
  assert.equal(replayedRegionEnd(whole.store, "r"), 2000);

  const down = resumed(11, 2, () => ({}));
  let asked = 0;
  assert.equal(await settleReplay(down.store, "r", async () => void asked++), false);
  assert.equal(asked, 1);
  assert.equal(undecidedReplayStep(down.store, "r"), 1);

  const plain = new StepStore({ batchMs: 0 });
  plain.setRuns([{ runId: "r", workflow: "main", uri: "u", status: "succeeded", steps: 5, startedAt: "", runDir: "/d" }]);
  assert.equal(undecidedReplayStep(plain, "r"), 0); // not resumed: nothing to decide
});

test("a growing run's last group stays the same group (same key) as its steps come in", () => {
  const early = runLayout(2456, 0).groups;
  const later = runLayout(3000, 0).groups;
  assert.equal(groupLabel(early[2]), "steps 2,001–2,456");
  assert.equal(groupLabel(later[2]), "steps 2,001–3,000");
  assert.equal(groupKey(early[2]), groupKey(later[2]));
  assert.notEqual(groupKey(later[1]), groupKey(later[2]));
  // the replayed region and its first sub-group both start at step 1: not the same group
  const [region] = runLayout(9000, 7000).groups;
  assert.notEqual(groupKey(region), groupKey(groupPath(1, 9000, 7000)[1]));
});
