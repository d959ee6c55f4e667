/**
 * Runs and their steps, fed by server events. Incoming steps are batched: `addSteps` only queues
 * them; one flush (after `batchMs`, or at once when `maxPending` steps wait) merges them and tells
 * the listeners once. No vscode import: unit-tested under node.
 */
import type { RunInfo, RunStartedParams, StepInfo } from "./protocol";

export interface StoreChange {
  /** The run list itself changed (added/removed/status). */
  runs: boolean;
  /** Runs whose steps changed. */
  steps: Set<string>;
}

export type Listener = (change: StoreChange) => void;

export interface Scheduler {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const timers: Scheduler = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export interface StoreOptions {
  batchMs?: number;
  maxPending?: number;
  scheduler?: Scheduler;
}

export class StepStore {
  private runList: RunInfo[] = [];
  private readonly stepsByRun = new Map<string, StepInfo[]>();
  /** Per run, how many steps from step 1 are loaded without a hole (kept, not counted each time). */
  private readonly contiguous = new Map<string, number>();
  /** Per run, why its steps cannot be had (a damaged tape, a run gone): shown instead of steps. */
  private readonly errors = new Map<string, string>();
  private readonly live = new Set<string>();
  private readonly pending = new Map<string, StepInfo[]>();
  private pendingCount = 0;
  private pendingRuns = false;
  private timer: unknown = undefined;
  private readonly listeners: Listener[] = [];
  private readonly batchMs: number;
  private readonly maxPending: number;
  private readonly scheduler: Scheduler;

  constructor(options: StoreOptions = {}) {
    this.batchMs = options.batchMs ?? 50;
    this.maxPending = options.maxPending ?? 2000;
    this.scheduler = options.scheduler ?? timers;
  }

  onChange(listener: Listener): { dispose(): void } {
    this.listeners.push(listener);
    return {
      dispose: () => {
        const i = this.listeners.indexOf(listener);
        if (i >= 0) this.listeners.splice(i, 1);
      },
    };
  }

  get runs(): readonly RunInfo[] {
    return this.runList;
  }

  run(runId: string): RunInfo | undefined {
    return this.runList.find((r) => r.runId === runId);
  }

  isLive(runId: string): boolean {
    return this.live.has(runId);
  }

  /** Replace the run list (newest first, as `flowtape/runs` returns it). Live runs keep status. */
  setRuns(runs: RunInfo[]): void {
    // A run announced by runStarted since the list was asked for is newer than it: it stays.
    const listed = new Set(runs.map((r) => r.runId));
    const newer = this.runList.filter((r) => this.live.has(r.runId) && !listed.has(r.runId));
    this.runList = newer.concat(runs).map((r) => {
      if (this.live.has(r.runId)) {
        return { ...r, status: "running", steps: Math.max(r.steps, this.loadedCount(r.runId)) };
      }
      return { ...r };
    });
    this.emit({ runs: true, steps: new Set() });
  }

  /** The server went away (or came back): no run streams to this client any more. */
  resetLive(): void {
    this.flush();
    this.live.clear();
    this.errors.clear(); // (a connection lost mid-load is no fault of the run)
    this.emit({ runs: true, steps: new Set() });
  }

  /** Why the steps of a run cannot be had, said by the server; cleared by `clearError`. */
  setError(runId: string, message: string): void {
    this.errors.set(runId, message);
    this.emit({ runs: false, steps: new Set([runId]) });
  }

  clearError(runId: string): void {
    if (this.errors.delete(runId)) this.emit({ runs: false, steps: new Set([runId]) });
  }

  error(runId: string): string | undefined {
    return this.errors.get(runId);
  }

  /** `flowtape/runStarted`: the run exists and is live. */
  runStarted(p: RunStartedParams, now: () => string = () => new Date().toISOString()): void {
    this.live.add(p.runId);
    const existing = this.run(p.runId);
    const info: RunInfo = {
      runId: p.runId,
      workflow: p.workflow,
      uri: p.uri,
      status: "running",
      steps: existing?.steps ?? this.loadedCount(p.runId),
      startedAt: existing?.startedAt ?? now(),
      resumedFrom: p.resumedFrom ?? null,
      resumedAtStep: p.resumedAtStep ?? null,
      edits: p.edits ?? 0,
      runDir: p.runDir,
    };
    if (existing) {
      Object.assign(existing, info);
    } else {
      this.runList.unshift(info);
    }
    this.emit({ runs: true, steps: new Set() });
  }

  /** `flowtape/runFinished`: flushes its pending steps first. */
  runFinished(runId: string, status: string, now: () => string = () => new Date().toISOString()): void {
    this.flush();
    this.live.delete(runId);
    const run = this.run(runId);
    if (run) {
      run.status = status;
      run.finishedAt = run.finishedAt ?? now();
      run.steps = Math.max(run.steps, this.loadedCount(runId));
    }
    this.emit({ runs: true, steps: new Set([runId]) });
  }

  /** Mark steps where a replay diverged (from `runFinished.replayStopped[].step`). */
  markDiverged(runId: string, steps: number[]): void {
    this.flush();
    let changed = false;
    for (const n of steps) {
      const s = this.step(runId, n);
      if (s && !s.diverged) {
        this.stepsByRun.get(runId)![n - 1] = { ...s, diverged: true };
        changed = true;
      }
    }
    if (changed) this.emit({ runs: false, steps: new Set([runId]) });
  }

  /** Queue steps (from `flowtape/steps`); they are merged at the next flush. */
  addSteps(runId: string, steps: StepInfo[]): void {
    if (steps.length === 0) return;
    let list = this.pending.get(runId);
    if (!list) {
      list = [];
      this.pending.set(runId, list);
    }
    list.push(...steps);
    this.pendingCount += steps.length;
    if (this.pendingCount >= this.maxPending) {
      this.flush();
    } else if (this.timer === undefined) {
      this.timer = this.scheduler.set(() => {
        this.timer = undefined;
        this.flush();
      }, this.batchMs);
    }
  }

  /** Put steps in place at once (from a `flowtape/getSteps` page), without batching. */
  putSteps(runId: string, steps: StepInfo[], total?: number): void {
    this.merge(runId, steps);
    const run = this.run(runId);
    if (run && total !== undefined) run.steps = Math.max(run.steps, total);
    this.emit({ runs: false, steps: new Set([runId]) });
  }

  /** Merge everything pending now; true when something changed. */
  flush(): boolean {
    if (this.timer !== undefined) {
      this.scheduler.clear(this.timer);
      this.timer = undefined;
    }
    if (this.pending.size === 0) return false;
    const changed = new Set<string>();
    for (const [runId, steps] of this.pending) {
      this.merge(runId, steps);
      const run = this.run(runId);
      if (run) run.steps = Math.max(run.steps, this.loadedCount(runId));
      changed.add(runId);
    }
    this.pending.clear();
    this.pendingCount = 0;
    this.emit({ runs: false, steps: changed });
    return true;
  }

  private merge(runId: string, steps: StepInfo[]): void {
    let list = this.stepsByRun.get(runId);
    if (!list) {
      list = [];
      this.stepsByRun.set(runId, list);
    }
    for (const s of steps) {
      if (!Number.isInteger(s.step) || s.step < 1) continue;
      list[s.step - 1] = s;
    }
    let n = this.contiguous.get(runId) ?? 0;
    while (n < list.length && list[n] !== undefined) n++;
    this.contiguous.set(runId, n);
  }

  /** Steps known for a run, in order (holes, if any page is missing, are skipped). */
  steps(runId: string): StepInfo[] {
    const list = this.stepsByRun.get(runId);
    return list ? list.filter((s) => s !== undefined) : [];
  }

  step(runId: string, n: number): StepInfo | undefined {
    return this.stepsByRun.get(runId)?.[n - 1];
  }

  /** Number of contiguous steps loaded from step 1. */
  loadedCount(runId: string): number {
    return this.contiguous.get(runId) ?? 0;
  }

  /** The steps the stepper moves over: every step the run has (its pages need not all be loaded). */
  total(runId: string): number {
    return Math.max(this.run(runId)?.steps ?? 0, this.loadedCount(runId), this.stepsByRun.get(runId)?.length ?? 0);
  }

  /** Is every step of a finished run loaded? */
  complete(runId: string): boolean {
    const run = this.run(runId);
    if (!run) return false;
    return this.loadedCount(runId) >= run.steps;
  }

  hasSteps(runId: string): boolean {
    return this.stepsByRun.has(runId);
  }

  forget(runId: string): void {
    this.stepsByRun.delete(runId);
    this.contiguous.delete(runId);
    this.errors.delete(runId);
    this.pending.delete(runId);
    this.live.delete(runId);
  }

  private emit(change: StoreChange): void {
    for (const l of [...this.listeners]) l(change);
  }
}
