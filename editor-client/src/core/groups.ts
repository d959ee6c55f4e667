/**
 * How a run's steps are laid out in the tree: a big run in groups of `size` steps (as a debugger
 * shows a big array: `[0 … 99]`), the replayed region of a resumed run as a group of its own, so
 * that every step is reachable without drawing them all. No vscode import.
 */

export interface StepGroup {
  from: number;
  to: number;
  replayed: boolean;
  /** The span the groups of its level are aligned on (0: the replayed region itself). With `from`
   *  and `replayed`, what the group is: the last group of a growing run keeps it as `to` grows. */
  span: number;
}

/** What names a group whatever its `to`: the tree's node and row of a growing group stay the same. */
export function groupKey(g: StepGroup): string {
  return `${g.from}:${g.span}:${g.replayed}`;
}

export const GROUP_SIZE = 1000;

export interface RunLayout {
  /** Groups right under the run, first. */
  groups: StepGroup[];
  /** Then these steps, right under it (none when `from > to`). */
  from: number;
  to: number;
}

/** What goes right under a run: the replayed region as a group, and the live steps themselves
 *  when they are few, else in groups too. */
export function runLayout(total: number, replayedUpTo: number, size = GROUP_SIZE): RunLayout {
  const replayed = Math.min(Math.max(replayedUpTo, 0), total);
  const groups: StepGroup[] = replayed > 0 ? [{ from: 1, to: replayed, replayed: true, span: 0 }] : [];
  if (total - replayed <= size) return { groups, from: replayed + 1, to: total };
  return { groups: groups.concat(chunks(replayed + 1, total, spanFor(total - replayed, size), false)), from: 1, to: 0 };
}

/** What a group holds: smaller groups when it has more than `size` steps, else `[]` (its steps). */
export function subGroups(group: StepGroup, size = GROUP_SIZE): StepGroup[] {
  if (group.to - group.from + 1 <= size) return [];
  const span = spanFor(group.to - group.from + 1, size);
  return chunks(group.from, group.to, span, group.replayed);
}

/** A span that splits `n` steps into at most `size` rows of groups (1,000; 1,000,000; …). */
function spanFor(n: number, size: number): number {
  let span = size;
  while (n / span > size) span *= size;
  return span;
}

function chunks(from: number, to: number, span: number, replayed: boolean): StepGroup[] {
  const out: StepGroup[] = [];
  // aligned on multiples of the span (steps 1–1,000, 1,001–2,000, …): the same step is always in the same group
  let start = from;
  while (start <= to) {
    const end = Math.min(to, Math.ceil(start / span) * span || span);
    out.push({ from: start, to: end, replayed, span });
    start = end + 1;
  }
  return out;
}

/** The path of groups from the top down to the one holding `step` directly. */
export function groupPath(step: number, total: number, replayedUpTo: number, size = GROUP_SIZE): StepGroup[] {
  const path: StepGroup[] = [];
  let level = runLayout(total, replayedUpTo, size).groups;
  while (level.length) {
    const g = level.find((x) => x.from <= step && step <= x.to);
    if (!g) break;
    path.push(g);
    level = subGroups(g, size);
  }
  return path;
}

export function groupLabel(g: Pick<StepGroup, "from" | "to" | "replayed">): string {
  const n = (x: number) => x.toLocaleString("en");
  return `steps ${n(g.from)}–${n(g.to)}${g.replayed ? " replayed" : ""}`;
}

/** The page (1-based `from`, `limit`) of `size` steps holding step `n`. */
export function pageOf(n: number, size = GROUP_SIZE): { from: number; limit: number } {
  const from = Math.floor((n - 1) / size) * size + 1;
  return { from, limit: size };
}

/** Where the replayed region of a resumed run ends: its steps up to `resumedAtStep` came from the
 *  tape, unless the replay stopped earlier (a step that ran live, or diverged); 0 for a run that
 *  was not resumed. `step(n)` gives the loaded steps (undefined: not loaded yet). */
export function replayedUpTo(
  run: { resumedFrom?: string | null; resumedAtStep?: number | null },
  loaded: number,
  step: (n: number) => { replayed: boolean; diverged?: boolean } | undefined,
): number {
  const at = run.resumedAtStep ?? 0;
  if (!run.resumedFrom || at <= 0) return 0;
  for (let n = 1; n <= Math.min(at, loaded); n++) {
    const s = step(n);
    if (s && (!s.replayed || s.diverged)) return n - 1; // replay stopped here
  }
  return at;
}
