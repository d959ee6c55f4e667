/**
 * The inlay hints of files at steps of runs, as the server placed them (`flowtape/stepHints`) in
 * one version of each file's text: what lets VS Code's request for the hints of the stepper's step
 * be answered at once. An answer is kept for the file's version it names and is given only for
 * that version, step and run; a file's newer version, its save (the saved text maps the run's
 * lines) or its closing drops what was known of it, and an answer to a request sent before that
 * is not kept. No vscode import.
 */
import type { StepHintsResult } from "./protocol";

export class HintCache<H> {
  /** By file: the text version its entries were placed in, and them ("run|step" → hints). */
  private readonly files = new Map<string, { version: number; hints: Map<string, H[]>; shows: Map<string, boolean> }>();
  /** Bumped at each drop; by file, when it was dropped last, and when all was (answers asked before are not kept). */
  private clock = 0;
  private readonly dropped = new Map<string, number>();
  private cleared = 0;

  /** At most `steps` steps kept of one file, and `files` files (the oldest dropped first). */
  constructor(private readonly steps = 1000, private readonly maxFiles = 32) {}

  /** The hints of `uri` (text `version`) at `step` of `runId`: the server's hints, `null` when the
   *  run has nothing to show in that file, `undefined` when not known. */
  get(uri: string, version: number, runId: string, step: number): H[] | null | undefined {
    const file = this.files.get(uri);
    if (!file || file.version !== version) return undefined;
    if (file.shows.get(runId) === false) return null;
    return file.hints.get(`${runId}|${step}`);
  }

  /** Of `steps`, those whose hints in `uri` (text `version`) are not known. */
  missing(uri: string, version: number, runId: string, steps: readonly number[]): number[] {
    return steps.filter((s) => this.get(uri, version, runId, s) === undefined);
  }

  /** To pass to `put` with the answer of a request sent now. */
  generation(): number {
    return this.clock;
  }

  /** Keep the server's answer (asked at `generation`) for the text version it names. An answer
   *  for an older version than the one known, or asked before the file was dropped, is not kept. */
  put(result: StepHintsResult<H>, generation: number): void {
    const { uri, version, runId } = result;
    if (version === null || generation < this.cleared || generation < (this.dropped.get(uri) ?? 0)) return;
    let file = this.files.get(uri);
    if (file && file.version > version) return;
    if (!file || file.version !== version) file = { version, hints: new Map(), shows: new Map() };
    this.files.delete(uri); // (re-inserted last: the file used longest ago is dropped first)
    this.files.set(uri, file);
    file.shows.set(runId, result.shows);
    for (const { step, hints } of result.steps) {
      const key = `${runId}|${step}`;
      file.hints.delete(key);
      file.hints.set(key, hints);
    }
    for (const key of file.hints.keys()) {
      if (file.hints.size <= this.steps) break;
      file.hints.delete(key);
    }
    for (const old of this.files.keys()) {
      if (this.files.size <= this.maxFiles) break;
      this.forget(old);
    }
  }

  /** Drop what is known of `uri` (saved, closed), and what requests under way will answer. */
  forget(uri: string): void {
    this.files.delete(uri);
    this.dropped.set(uri, ++this.clock);
  }

  /** A new server: nothing known before holds. */
  clear(): void {
    this.files.clear();
    this.dropped.clear();
    this.cleared = ++this.clock;
  }
}

/** The steps next to `step` whose hints to have ready, nearest first, within 1..total. */
export function around(step: number, total: number, radius: number): number[] {
  const steps: number[] = [];
  for (let d = 1; d <= radius; d++) {
    if (step + d <= total) steps.push(step + d);
    if (step - d >= 1) steps.push(step - d);
  }
  return steps;
}
