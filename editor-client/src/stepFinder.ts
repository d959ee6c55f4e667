/**
 * Finding steps in a run (`flowtape/findSteps`): the next / previous firing of the actor the
 * stepper is on (Alt+Shift+] / Alt+Shift+[), the Runs view filtered to one actor's steps, and the
 * steps whose firings put a value (or left a state) holding some text.
 */
import * as vscode from "vscode";
import { Methods, type FindStepsParams, type FindStepsResult, type FiringDetail, type StepInfo } from "./core/protocol";
import { shortRunId } from "./core/format";
import { RunNode, type RunsTreeProvider, StepNode } from "./runsTree";
import type { StepStore } from "./core/stepStore";

export interface FinderHost {
  store: StepStore;
  tree: RunsTreeProvider;
  runId(): string | undefined;
  currentStep(): StepInfo | undefined;
  currentFiring(): FiringDetail | undefined;
  request<R>(method: string, params: unknown): Promise<R | undefined>;
  goTo(runId: string, step: number): Promise<void>;
  tell(message: string): void;
}

const FILTER_LIMIT = 10000;

export class StepFinder {
  constructor(private readonly host: FinderHost) {}

  private async find(params: FindStepsParams): Promise<FindStepsResult | undefined> {
    try {
      return await this.host.request<FindStepsResult>(Methods.findSteps, params);
    } catch (e) {
      this.host.tell(`finding steps: ${e && typeof e === "object" && "message" in e ? String(e.message) : String(e)}`);
      return undefined;
    }
  }

  /** The next (or previous) step in which the actor of the stepper's step (or inner firing) fires. */
  async nextOfActor(direction: "next" | "previous"): Promise<void> {
    const runId = this.host.runId();
    const step = this.host.currentStep();
    if (!runId || !step) {
      void vscode.window.showInformationMessage("Flowtape: pick a step first: its actor's next firing is looked for from there.");
      return;
    }
    const actor = this.host.currentFiring()?.actor ?? step.actor;
    const found = await this.find({ runId, actor, from: step.step, direction, limit: 1 });
    if (!found) return;
    const at = found.steps[0];
    if (at === undefined) {
      void vscode.window.setStatusBarMessage(`Flowtape: ${actor} fires in no ${direction === "next" ? "later" : "earlier"} step`, 4000);
      return;
    }
    await this.host.goTo(runId, at);
  }

  private runOf(arg: unknown): string | undefined {
    if (arg instanceof RunNode || arg instanceof StepNode) return arg.runId;
    return this.host.runId();
  }

  /** Show only the steps an actor fires in (the stepper's actor offered first). */
  async filterActor(arg?: unknown): Promise<void> {
    const runId = this.runOf(arg);
    if (!runId) return;
    const seen = new Set<string>();
    const current = arg instanceof StepNode ? this.host.store.step(arg.runId, arg.step)?.actor : this.host.currentFiring()?.actor ?? this.host.currentStep()?.actor;
    if (current) seen.add(current);
    for (const s of this.host.store.steps(runId).slice(-5000)) seen.add(s.actor);
    const pick = await vscode.window.showQuickPick([...seen].map((a) => ({ label: a })), {
      title: `Show the steps of one actor (run ${shortRunId(runId)})`,
      placeHolder: "an actor path (an inner one, like loop/reviewer, finds its composite steps)",
    });
    if (!pick) return;
    await this.apply(runId, { runId, actor: pick.label, limit: FILTER_LIMIT }, `actor ${pick.label}`);
  }

  /** Show only the steps whose firings put (or left in a state) a value holding the text typed. */
  async findValue(arg?: unknown): Promise<void> {
    const runId = this.runOf(arg);
    if (!runId) return;
    const text = await vscode.window.showInputBox({
      title: `Find a value (run ${shortRunId(runId)})`,
      prompt: "Text to look for in what each firing put and the state it left (as JSON: a string's text, a number)",
      validateInput: (v) => (v.trim() ? undefined : "type something to look for"),
    });
    if (!text?.trim()) return;
    await this.apply(runId, { runId, text: text.trim(), limit: FILTER_LIMIT }, `value "${text.trim()}"`);
  }

  private async apply(runId: string, params: FindStepsParams, what: string): Promise<void> {
    const found = await this.find(params);
    if (!found) return;
    this.host.tree.filters.set(runId, { what, steps: found.steps, total: found.total });
    this.host.tree.refresh();
    if (found.steps[0] !== undefined) await this.host.goTo(runId, found.steps[0]);
    else void vscode.window.showInformationMessage(`Flowtape: no step of run ${shortRunId(runId)} matches ${what}.`);
  }

  clear(runId?: string): void {
    if (runId) this.host.tree.filters.delete(runId);
    else this.host.tree.filters.clear();
    this.host.tree.refresh();
  }
}
