/**
 * The stepper: a cursor over the steps of one run. Index 0 means "no step"; valid steps are
 * 1..total. Moves clamp; `follow` keeps the cursor on the last step while a live run grows.
 * No vscode import.
 */

export interface StepperState {
  runId: string | undefined;
  index: number;
  total: number;
}

export class Stepper {
  private run: string | undefined;
  private idx = 0;
  private count = 0;
  private innerIdx = 0;
  private innerCount = 0;
  /** When the cursor sits on the last step of a growing run, it moves along. */
  follow = false;

  /** The inner firing of a composite step the cursor is on (1-based), 0 on the step itself. */
  get inner(): number {
    return this.innerIdx;
  }

  /** Step into: from a composite step (`firings` inner firings) to its first inner firing; on an
   *  inner firing, to the next one (past the last: the next step); a step with none: the next step. */
  stepInto(firings: number): boolean {
    if (this.innerIdx === 0 && firings > 0) {
      this.innerIdx = 1;
      this.innerCount = firings;
      return true;
    }
    return this.stepOver();
  }

  /** Step over: the next inner firing of the step the cursor is inside, else the next step. */
  stepOver(): boolean {
    if (this.innerIdx > 0 && this.innerIdx < this.innerCount) {
      this.innerIdx++;
      return true;
    }
    return this.next();
  }

  /** Step out: from an inner firing back to its composite step. */
  stepOut(): boolean {
    if (this.innerIdx === 0) return false;
    this.innerIdx = 0;
    return true;
  }

  get runId(): string | undefined {
    return this.run;
  }

  get index(): number {
    return this.idx;
  }

  get total(): number {
    return this.count;
  }

  get state(): StepperState {
    return { runId: this.run, index: this.idx, total: this.count };
  }

  /** Point the stepper at a run. Keeps nothing from the previous run. */
  setRun(runId: string | undefined, total: number, index = 0): void {
    this.run = runId;
    this.count = Math.max(0, total);
    this.idx = runId === undefined ? 0 : this.clamp(index, index === 0 ? 0 : 1);
    this.innerIdx = 0;
    this.follow = false;
  }

  /** The run grew (live steps) or shrank (reload). Returns true when the index moved. */
  setTotal(total: number): boolean {
    const wasLast = this.idx === this.count || this.idx === 0; // (0: a run just started, no step yet)
    this.count = Math.max(0, total);
    const before = this.idx;
    if (this.follow && wasLast) this.idx = this.count;
    if (this.idx > this.count) this.idx = this.count;
    if (this.idx !== before) this.innerIdx = 0;
    return this.idx !== before;
  }

  first(): boolean {
    return this.moveTo(this.count > 0 ? 1 : 0);
  }

  last(): boolean {
    return this.moveTo(this.count);
  }

  next(): boolean {
    if (this.idx === 0) return this.first();
    return this.moveTo(this.idx + 1);
  }

  previous(): boolean {
    if (this.idx === 0) return this.last();
    return this.moveTo(this.idx - 1);
  }

  /** Go to step n, clamped to 1..total. */
  goTo(n: number): boolean {
    return this.moveTo(n);
  }

  private moveTo(n: number): boolean {
    if (this.run === undefined || this.count === 0) return false;
    const target = this.clamp(Math.trunc(n), 1);
    const changed = target !== this.idx || this.innerIdx !== 0;
    this.idx = target;
    this.innerIdx = 0;
    return changed;
  }

  private clamp(n: number, min: number): number {
    if (this.count === 0) return 0;
    return Math.min(Math.max(n, min), this.count);
  }
}

/** Parse the "Go to step…" input: a step number, `first`/`last`, or `+k`/`-k` relative moves. */
export function parseGoTo(input: string, current: number, total: number): number | string {
  const text = input.trim().toLowerCase();
  if (total === 0) return "this run has no steps yet";
  if (text === "first") return 1;
  if (text === "last" || text === "$") return total;
  const rel = /^([+-])\s*(\d+)$/.exec(text);
  if (rel) {
    const d = Number(rel[2]);
    return Math.min(Math.max(rel[1] === "+" ? current + d : current - d, 1), total);
  }
  if (!/^\d+$/.test(text)) return `enter a step number from 1 to ${total}`;
  const n = Number(text);
  if (n < 1 || n > total) return `step ${n} is out of range: this run has steps 1 to ${total}`;
  return n;
}
