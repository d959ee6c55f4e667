/**
 * The Runs tree's redraws and reveals, in one order. VS Code reveals a node by walking up
 * `getParent` and then down the children it has cached; a redraw sent meanwhile (a change event)
 * drops that cache, and the reveal then finds no row, expands a group it no longer knows (its
 * children come back empty) and selects nothing: it says so in the extension host's log at
 * most. So a reveal is sent only after the redraws pending when it comes up, no redraw is sent
 * while one is under way (they wait for it, up to `holdMs` after it began: VS Code answers a
 * reveal only once the extension host is free, and while a run streams thousands of steps into
 * it a reveal can take as long as the stream, which would leave the run's row unredrawn until it
 * ends; a reveal a late redraw breaks is told and tried again), and of the reveals asked for
 * meanwhile the latest wins. Redraws are sent at once when the tree was quiet, else at most every `gapMs`: VS Code
 * redraws a view only once its change events pause for 200 ms, so a change every 50 ms (each
 * batch of a streaming run's steps) would leave the view unredrawn until the run ends.
 * No vscode import.
 */
import type { Scheduler } from "./stepStore";

export type Revealed = "shown" | "superseded" | "failed";

export interface RedrawsOptions<N> {
  /** Tell VS Code: these nodes changed (undefined: the whole tree). */
  fire: (nodes: N[] | undefined) => void;
  gapMs: number;
  /** How long after a reveal began redraws wait for it, at most (default: one gap). */
  holdMs?: number;
  scheduler?: Scheduler;
  now?: () => number;
  /** Where a reveal that failed is told (the extension's output channel). */
  log: (line: string) => void;
}

interface Wanted {
  what: string;
  run: () => Promise<void>;
  done: (r: Revealed) => void;
}

const timers: Scheduler = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export class Redraws<N> {
  /** The nodes to redraw at the next fire (undefined: the whole tree). */
  private dirty: Set<N> | undefined = new Set();
  private dirtyAny = false;
  private revealStarted = 0;
  private lastFire = Number.NEGATIVE_INFINITY;
  private timer: unknown = undefined;
  private wanted: Wanted | undefined;
  private revealing = false;
  private disposed = false;
  private readonly scheduler: Scheduler;
  private readonly now: () => number;

  constructor(private readonly options: RedrawsOptions<N>) {
    this.scheduler = options.scheduler ?? timers;
    this.now = options.now ?? Date.now;
  }

  /** Redraw a node (or, without one, the whole tree). */
  refresh(node?: N): void {
    if (node === undefined) this.dirty = undefined;
    else this.dirty?.add(node);
    this.dirtyAny = true;
    this.pump();
  }

  /** Is a reveal under way (redraws wait for it)? */
  get busy(): boolean {
    return this.revealing;
  }

  /** Reveal (`run` calls VS Code's reveal, and throws when the node did not show): after the
   *  redraws pending, with none sent until it is done. "superseded": a later reveal was asked
   *  for before this one came up; "failed": it threw, and why is logged. */
  reveal(what: string, run: () => Promise<void>): Promise<Revealed> {
    return new Promise((done) => {
      this.wanted?.done("superseded");
      this.wanted = { what, run, done };
      this.pump();
    });
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer !== undefined) this.scheduler.clear(this.timer);
    this.timer = undefined;
    this.wanted?.done("superseded");
    this.wanted = undefined;
  }

  private pumpIn(ms: number): void {
    this.timer = this.scheduler.set(() => {
      this.timer = undefined;
      this.pump();
    }, ms);
  }

  private pump(): void {
    if (this.disposed || this.timer !== undefined) return;
    if (this.revealing) {
      if (!this.dirtyAny) return;
      const held = this.revealStarted + (this.options.holdMs ?? this.options.gapMs) - this.now();
      if (held > 0) {
        this.pumpIn(held);
        return;
      }
    }
    if (this.dirtyAny) {
      const wait = this.lastFire + this.options.gapMs - this.now();
      if (wait > 0) {
        this.pumpIn(wait);
        return;
      }
      this.fireDirty();
    }
    if (this.revealing) return;
    const job = this.wanted;
    if (!job) return;
    this.wanted = undefined;
    this.revealing = true;
    this.revealStarted = this.now();
    void (async () => {
      let result: Revealed = "shown";
      try {
        await job.run();
      } catch (e) {
        result = "failed";
        this.options.log(`the Runs view did not show ${job.what}: ${e instanceof Error ? e.message : String(e)}`);
      } finally {
        this.revealing = false;
      }
      if (this.timer !== undefined) { // (a redraw held for it: sent now, at its pace)
        this.scheduler.clear(this.timer);
        this.timer = undefined;
      }
      job.done(result);
      this.pump();
    })();
  }

  private fireDirty(): void {
    const nodes = this.dirty;
    this.dirty = new Set();
    this.dirtyAny = false;
    this.lastFire = this.now();
    this.options.fire(nodes ? [...nodes] : undefined);
  }
}
