/**
 * Loading a run's steps from the server a page (1,000 steps) at a time, the pages the tree or the
 * stepper needs (`flowtape/getSteps`), and a step's firings (`flowtape/stepDetail`) for its inner
 * firings; each asked once however many ask for it at the same time.
 */
import { pageOf } from "./core/groups";
import { shortRunId } from "./core/format";
import { Methods, type FiringDetail, type GetStepsResult, type StepDetail, type StepInfo } from "./core/protocol";
import type { StepStore } from "./core/stepStore";
import { innerFirings, isComposite, type RunsTreeProvider } from "./runsTree";

export interface PagesHost {
  request<R>(method: string, params: unknown): Promise<R | undefined>;
  tell(message: string): void;
}

export class StepPages {
  private readonly loading = new Map<string, Promise<void>>();
  private readonly firingsOf = new Map<string, Promise<FiringDetail[]>>();
  /** The inner firings of composite steps, once known (`runId:step`). */
  private readonly inner = new Map<string, FiringDetail[]>();

  constructor(private readonly store: StepStore, private readonly tree: RunsTreeProvider, private readonly host: PagesHost) {}

  /** Load the pages of a run's steps `from`..`to` not loaded yet; a run's first page also tells
   *  how many steps it has. */
  async loadRange(runId: string, from: number, to: number): Promise<void> {
    const jobs: Promise<void>[] = [];
    for (let n = pageOf(Math.max(1, from)).from; n <= Math.max(from, to); n += pageOf(n).limit) {
      const page = pageOf(n);
      const last = Math.min(page.from + page.limit - 1, Math.max(this.store.total(runId), page.from));
      if (this.store.step(runId, page.from) && this.store.step(runId, last)) continue;
      jobs.push(this.loadPage(runId, page.from, page.limit));
    }
    await Promise.all(jobs);
  }

  private loadPage(runId: string, from: number, limit: number): Promise<void> {
    const key = `${runId}:${from}`;
    const existing = this.loading.get(key);
    if (existing) return existing;
    const job = (async () => {
      let page: GetStepsResult | undefined;
      try {
        page = await this.host.request<GetStepsResult>(Methods.getSteps, { runId, from, limit });
      } catch (e) {
        this.store.setError(runId, errorText(e)); // shown under the run, instead of no steps
        this.host.tell(`run ${shortRunId(runId)}: ${errorText(e)}`);
        return;
      }
      if (!page) return;
      this.store.clearError(runId); // an earlier failure (a restart mid-load, say) is over
      this.store.putSteps(runId, page.steps ?? [], page.total);
    })().finally(() => this.loading.delete(key));
    this.loading.set(key, job);
    return job;
  }

  /** A finished run's step count (its first page) and the page holding step `around` (else its last). */
  async ensureSteps(runId: string, around?: number): Promise<void> {
    if (this.store.isLive(runId)) return;
    if (!this.store.step(runId, 1)) await this.loadRange(runId, 1, 1);
    const n = around ?? this.store.total(runId);
    if (n > 0 && !this.store.step(runId, n)) await this.loadRange(runId, n, n);
  }

  /** A step's firings (its own and, for a composite step, the inner ones), asked once. */
  firings(runId: string, step: number): Promise<FiringDetail[]> {
    const key = `${runId}:${step}`;
    let known = this.firingsOf.get(key);
    if (!known) {
      known = (async () => (await this.host.request<StepDetail>(Methods.stepDetail, { runId, step }))?.firings ?? [])();
      known.catch(() => this.firingsOf.delete(key)); // asked again next time
      if (this.firingsOf.size > 2000) this.firingsOf.clear();
      this.firingsOf.set(key, known);
    }
    return known;
  }

  /** The inner firings of a step (none for a simple one), known from then on (`knownInner`). */
  async innerOf(runId: string, step: StepInfo): Promise<FiringDetail[]> {
    if (!isComposite(step)) return [];
    const inner = innerFirings(step, await this.firings(runId, step.step));
    this.inner.set(`${runId}:${step.step}`, inner);
    this.tree.setFirings(runId, step.step, inner);
    return inner;
  }

  knownInner(runId: string, step: number): FiringDetail[] | undefined {
    return this.inner.get(`${runId}:${step}`);
  }
}

function errorText(e: unknown): string {
  if (e && typeof e === "object" && "message" in e) return String((e as { message: unknown }).message);
  return String(e);
}
