/** What the "Compare with…" list shows of a run diff, and the text each side of a differing firing
 *  opens with in VS Code's diff editor. No vscode import. */
import type { Difference, FiringView, RunDiff } from "./protocol";

/** Keys sorted at every depth: two values that differ only in a dict's order read the same. */
function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value as object).sort().map((k) => [k, sorted((value as Record<string, unknown>)[k])]));
  }
  return value;
}

/** One side of a differing firing: what it took, put, the state after it and the chat it added. */
export function firingText(view: FiringView | null | undefined): string {
  if (!view) return "(no such firing in this run)\n";
  const byQueue = (rows: { queue: string; tokens?: unknown[]; digest?: string }[] | undefined) =>
    Object.fromEntries((rows ?? []).map((r) => [r.queue, r.tokens ?? `digest ${r.digest ?? "?"}`]));
  const shown: Record<string, unknown> = {
    firing: `${view.actor} #${view.fireCount}${view.step ? ` (step ${view.step})` : ""}`,
    inputs: byQueue(view.inputs),
    outputs: byQueue(view.outputs),
  };
  if (view.state !== undefined && view.state !== null) shown.state = view.state;
  if (view.chat !== undefined && view.chat !== null) shown.chat = view.chat;
  return JSON.stringify(sorted(shown), null, 2) + "\n";
}

export interface DiffItem {
  label: string;
  description: string;
  detail: string;
  difference?: Difference; // none: the outputs row
}

function where(view: FiringView | null | undefined): string {
  return view ? (view.step ? `step ${view.step}` : "no step") : "—";
}

/** The rows of the list: each differing firing, the first first, then the outputs when they differ. */
export function diffItems(diff: RunDiff): DiffItem[] {
  const items: DiffItem[] = (diff.differences ?? []).map((d, i) => ({
    label: `${i === 0 ? "$(debug-breakpoint-unverified) " : ""}${d.actor} firing ${d.fireCount}`,
    description: d.aspects.join(", "),
    detail: `${i === 0 ? "first difference · " : ""}a ${where(d.a)} · b ${where(d.b)}`,
    difference: d,
  }));
  if (!diff.outputs.same) items.push({ label: "outputs", description: "the runs' outputs differ", detail: "the outputs of both runs" });
  return items;
}

/** The outputs of both runs, as the diff editor shows them. */
export function outputsText(outputs: unknown): string {
  return JSON.stringify(sorted(outputs), null, 2) + "\n";
}

/** One line for a diff with no difference, or its counts. */
export function diffSummary(diff: RunDiff): string {
  const narrowed = diff.actor ? ` (actor ${diff.actor})` : "";
  if (diff.same) return `no difference${narrowed}: every firing of run ${diff.a} matches run ${diff.b}'s`;
  const n = diff.differences?.length ?? 0;
  return `${n} differing firing${n === 1 ? "" : "s"}${narrowed}${diff.outputs.same ? "" : ", and the outputs differ"}`;
}
