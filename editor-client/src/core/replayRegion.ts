/**
 * Where the replayed region of a resumed run ends is read off its steps (`replayedUpTo`): until
 * the pages that decide it are loaded, it is only "as resumed", and the tree's groups (a step's
 * parent) would move when they come in. So the tree loads them before it lays a run out, and the
 * stepper before it reveals a step: the layout is then the same whenever it is asked for.
 * No vscode import.
 */
import { replayedUpTo } from "./groups";
import type { RunInfo, StepInfo } from "./protocol";

/** What of the StepStore this reads. */
export interface ReplaySource {
  run(runId: string): Pick<RunInfo, "resumedFrom" | "resumedAtStep"> | undefined;
  total(runId: string): number;
  step(runId: string, n: number): Pick<StepInfo, "replayed" | "diverged"> | undefined;
  loadedCount(runId: string): number;
  isLive(runId: string): boolean;
}

/** Where the replayed region of a run ends as the steps loaded tell (0: none), what the tree lays
 *  the run out by (`runLayout`, `groupPath`). */
export function replayedRegionEnd(source: ReplaySource, runId: string): number {
  const run = source.run(runId);
  return run ? replayedUpTo(run, source.loadedCount(runId), (n) => source.step(runId, n)) : 0;
}

/** The first step whose page must be loaded to know where the replayed region ends; 0 when it is
 *  known (a run not resumed, a step of the region that ran live or diverged is loaded, or every
 *  step up to the one it was resumed at is). */
export function undecidedReplayStep(source: ReplaySource, runId: string): number {
  const run = source.run(runId);
  if (!run?.resumedFrom) return 0;
  const at = Math.min(run.resumedAtStep ?? 0, source.total(runId));
  for (let n = 1; n <= at; n++) {
    const s = source.step(runId, n);
    if (!s) return n;
    if (!s.replayed || s.diverged) return 0; // the replay stopped here
  }
  return 0;
}

/** Load the pages that decide where a finished run's replayed region ends (one page for a run
 *  resumed within its first 1,000 steps). A live run's steps come in order: nothing to load.
 *  False when a page did not come (the server is down, the tape is damaged). */
export async function settleReplay(
  source: ReplaySource,
  runId: string,
  load: (runId: string, from: number, to: number) => Promise<void>,
): Promise<boolean> {
  if (source.isLive(runId)) return true;
  for (let n = undecidedReplayStep(source, runId); n > 0; n = undecidedReplayStep(source, runId)) {
    await load(runId, n, n);
    if (!source.step(runId, n)) return false;
  }
  return true;
}
