/**
 * What-if in VS Code: "Compare with…" two runs (a list of the firings that differ, each opening
 * VS Code's own diff editor on the two sides), "Fork from Here…" (edit values at a step, then a
 * new run goes on from them), and the "Compare with the recorded run" code action on a divergence.
 */
import * as vscode from "vscode";
import { ReadOnlyDocuments } from "./readOnlyDocs";
import { diffItems, diffSummary, firingText, outputsText, type DiffItem } from "./core/diffView";
import {
  Methods,
  ServerCommands,
  type Difference,
  type Editable,
  type EditablesResult,
  type RunDiff,
  type RunInfo,
  type RunStartResult,
  type RunsResult,
} from "./core/protocol";
import { shortRunId } from "./core/format";

/** What the extension's controller lends the what-if commands. */
export interface WhatIfHost {
  request<R>(method: string, params: unknown): Promise<R | undefined>;
  serverCommand<R>(command: string, params: unknown): Promise<R | undefined>;
  /** The stepper's run and step, if any. */
  current(): { runId: string; step: number } | undefined;
  run(runId: string): RunInfo | undefined;
  followRun(runId: string): void;
  tell(message: string): void;
}

function errorText(e: unknown): string {
  return e && typeof e === "object" && "message" in e ? String((e as { message: unknown }).message) : String(e);
}

function runIdOf(arg: unknown): string | undefined {
  if (typeof arg === "string") return arg;
  if (arg && typeof arg === "object" && typeof (arg as { runId?: unknown }).runId === "string") return (arg as { runId: string }).runId;
  return undefined;
}

export class WhatIf implements vscode.Disposable {
  private readonly docs = new ReadOnlyDocuments("flowtape-diff", "(this diff is no longer open: compare the runs again)\n");
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly host: WhatIfHost) {
    const reg = (id: string, fn: (...args: unknown[]) => unknown) => this.disposables.push(vscode.commands.registerCommand(id, fn));
    this.disposables.push(this.docs);
    reg("flowtape.compareWith", (arg) => this.compareWith(runIdOf(arg) ?? host.current()?.runId));
    reg("flowtape.compareRuns", (arg) => this.compareRuns(arg));
    reg("flowtape.compareWithRecorded", (arg) => this.compareWithRecorded(runIdOf(arg) ?? host.current()?.runId));
    reg("flowtape.forkFromHere", (arg) => this.forkFromHere(arg));
    this.disposables.push(
      vscode.languages.registerCodeActionsProvider({ language: "python" }, { provideCodeActions: (_d, _r, ctx) => this.codeActions(ctx) }, {
        providedCodeActionKinds: [vscode.CodeActionKind.QuickFix],
      }),
    );
  }

  // ---- diff ------------------------------------------------------------------------------------

  /** "Compare with…": pick the other run (the runs of the same flow, the recorded one first). */
  async compareWith(runId: string | undefined): Promise<void> {
    if (!runId) return void vscode.window.showInformationMessage("Flowtape: select a run to compare first.");
    const run = this.host.run(runId);
    let runs: RunInfo[] = [];
    try {
      runs = (await this.host.request<RunsResult>(Methods.runs, run?.uri ? { uri: run.uri } : {}))?.runs ?? [];
    } catch (e) {
      return this.host.tell(`runs: ${errorText(e)}`);
    }
    const others = runs.filter((r) => r.runId !== runId);
    if (!others.length) return void vscode.window.showInformationMessage(`Flowtape: run ${shortRunId(runId)} has no other run of its flow to compare with.`);
    others.sort((x, y) => Number(y.runId === run?.resumedFrom) - Number(x.runId === run?.resumedFrom));
    const pick = await vscode.window.showQuickPick(
      others.map((r) => ({
        label: shortRunId(r.runId),
        description: `${r.workflow} · ${r.status} · ${r.steps} steps${r.runId === run?.resumedFrom ? " · the run it resumed" : ""}`,
        detail: r.resumedFrom ? `${r.edits ? "forked" : "resumed"} from ${shortRunId(r.resumedFrom)} @ step ${r.resumedAtStep ?? "?"}` : undefined,
        runId: r.runId,
      })),
      { title: `Compare run ${shortRunId(runId)} with…`, matchOnDescription: true },
    );
    if (pick) await this.compareRuns({ runA: pick.runId, runB: runId });
  }

  async compareWithRecorded(runId: string | undefined): Promise<void> {
    const run = runId ? this.host.run(runId) : undefined;
    if (!run?.resumedFrom) return void vscode.window.showInformationMessage("Flowtape: this run resumed no run: use Compare with… instead.");
    await this.compareRuns({ runA: run.resumedFrom, runB: run.runId });
  }

  /** The list of differing firings of two runs; each opens VS Code's diff editor on its two sides. */
  async compareRuns(arg: unknown): Promise<void> {
    const p = (Array.isArray(arg) ? arg[0] : arg) as { runA?: string; runB?: string; actor?: string } | undefined;
    if (!p?.runA || !p.runB) return;
    let diff: RunDiff | undefined;
    try {
      diff = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Flowtape: comparing runs ${shortRunId(p.runA)} and ${shortRunId(p.runB)}…` },
        () => this.host.request<RunDiff>(Methods.diff, { runA: p.runA, runB: p.runB }),
      );
    } catch (e) {
      return this.host.tell(`compare: ${errorText(e)}`);
    }
    if (!diff) return;
    if (diff.same) return void vscode.window.showInformationMessage(`Flowtape: ${diffSummary(diff)}.`);
    const items = diffItems(diff);
    const quick = vscode.window.createQuickPick<DiffItem & vscode.QuickPickItem>();
    quick.title = `Run ${shortRunId(diff.a)} (a) ↔ ${shortRunId(diff.b)} (b): ${diffSummary(diff)}`;
    quick.placeholder = "A differing firing opens both sides in the diff editor";
    quick.items = items;
    quick.matchOnDescription = true;
    quick.ignoreFocusOut = true; // the list stays while diffs open beside it
    const preferred = p.actor ? items.find((i) => i.difference?.actor === p.actor) : undefined;
    if (preferred) quick.activeItems = [preferred];
    quick.onDidAccept(() => {
      const item = quick.selectedItems[0] ?? quick.activeItems[0];
      if (item && diff) void this.openDiff(diff, item.difference);
    });
    quick.onDidHide(() => quick.dispose());
    quick.show();
  }

  private async openDiff(diff: RunDiff, d: Difference | undefined): Promise<void> {
    const a = shortRunId(diff.a);
    const b = shortRunId(diff.b);
    if (!d) {
      const left = this.docs.put(`outputs-${a}`, outputsText(diff.outputs.a));
      const right = this.docs.put(`outputs-${b}`, outputsText(diff.outputs.b));
      await vscode.commands.executeCommand("vscode.diff", left, right, `outputs: ${a} ↔ ${b}`, { preview: true });
      return;
    }
    const name = `${d.actor.replace(/[^\w.-]+/g, "_")}-${d.fireCount}`;
    const left = this.docs.put(`${name}-${a}`, firingText(d.a));
    const right = this.docs.put(`${name}-${b}`, firingText(d.b));
    await vscode.commands.executeCommand("vscode.diff", left, right, `${d.actor} firing ${d.fireCount}: ${a} ↔ ${b}`, { preview: true });
  }

  private codeActions(ctx: vscode.CodeActionContext): vscode.CodeAction[] {
    const actions: vscode.CodeAction[] = [];
    for (const d of ctx.diagnostics) {
      const code = typeof d.code === "object" ? d.code.value : d.code;
      if (d.source !== "flowtape" || code !== "replay-diverged") continue;
      const href = typeof d.code === "object" ? d.code.target : undefined;
      const args = href ? parseCommandArgs(href) : undefined;
      if (!args) continue;
      const action = new vscode.CodeAction("Flowtape: Compare with the recorded run", vscode.CodeActionKind.QuickFix);
      action.command = { command: "flowtape.compareRuns", title: action.title, arguments: [args] };
      action.diagnostics = [d];
      actions.push(action);
    }
    return actions;
  }

  // ---- fork ------------------------------------------------------------------------------------

  /** "Fork from Here…": edit one value or more at the step, then a new run goes on from them. */
  async forkFromHere(arg: unknown): Promise<void> {
    const given = arg && typeof arg === "object" ? (arg as { runId?: string; step?: number; where?: string }) : {};
    const at = given.runId && given.step ? { runId: given.runId, step: given.step } : this.host.current();
    if (!at || !at.step) return void vscode.window.showInformationMessage("Flowtape: go to a step first: a fork goes on from a step.");
    let found: EditablesResult | undefined;
    try {
      found = await this.host.request<EditablesResult>(Methods.editables, at);
    } catch (e) {
      return this.host.tell(`fork: ${errorText(e)}`);
    }
    if (!found) return;
    const edits: Record<string, unknown> = {};
    let where = given.where;
    for (;;) {
      const editable = where ? found.editables.find((e) => e.where === where) : await this.pickEditable(found, edits);
      where = undefined;
      if (!editable) break;
      const value = await this.askValue(editable, edits[editable.where]);
      if (value !== undefined) edits[editable.where] = value.parsed;
      const n = Object.keys(edits).length;
      if (!n) return;
      const next = await vscode.window.showQuickPick(
        [{ label: `$(repo-forked) Fork from here (${n} edit${n === 1 ? "" : "s"})`, go: true }, { label: "$(edit) Edit another value…", go: false }],
        { title: `Fork run ${shortRunId(at.runId)} at step ${at.step}`, placeHolder: Object.keys(edits).join(", ") },
      );
      if (!next) return;
      if (next.go) break;
    }
    if (!Object.keys(edits).length) return;
    const started = await this.host.serverCommand<RunStartResult>(ServerCommands.fork, { runId: at.runId, step: at.step, edits });
    if (started?.runId) this.host.followRun(started.runId);
  }

  private async pickEditable(found: EditablesResult, edits: Record<string, unknown>): Promise<Editable | undefined> {
    if (!found.editables.length) {
      void vscode.window.showInformationMessage(`Flowtape: nothing waits in a queue or is kept in a state at step ${found.step}.`);
      return undefined;
    }
    const kinds = { token: "a waiting token", field: "a field of its state", answer: "its next answer (an agent)" };
    const pick = await vscode.window.showQuickPick(
      found.editables.map((e) => ({
        label: `${e.where in edits ? "$(pencil) " : ""}${e.where}`,
        description: e.kind === "answer" ? kinds.answer : JSON.stringify(e.where in edits ? edits[e.where] : e.value)?.slice(0, 80),
        detail: `${e.actor}: ${kinds[e.kind] ?? e.kind}`,
        editable: e,
      })),
      { title: `Fork run ${shortRunId(found.runId)} at step ${found.step}: the value to edit`, matchOnDescription: true, matchOnDetail: true },
    );
    return pick?.editable;
  }

  private async askValue(e: Editable, edited: unknown): Promise<{ parsed: unknown } | undefined> {
    const current = edited !== undefined ? edited : e.kind === "answer" ? {} : e.value;
    const text = await vscode.window.showInputBox({
      title: `${e.where}: the new value (JSON)`,
      prompt: e.kind === "answer" ? "The agent's next answer, by output port: {\"Port\": value}" : `It holds ${JSON.stringify(e.value)?.slice(0, 200)}`,
      value: JSON.stringify(current),
      validateInput: (t) => {
        try {
          JSON.parse(t);
          return undefined;
        } catch (err) {
          return `not JSON: ${errorText(err)} (a string is written "in quotes")`;
        }
      },
    });
    return text === undefined ? undefined : { parsed: JSON.parse(text) };
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}

/** The arguments of a `command:flowtape.compareRuns?[…]` link (a divergence's code description). */
export function parseCommandArgs(href: vscode.Uri | string): { runA: string; runB: string; actor?: string } | undefined {
  try {
    const uri = typeof href === "string" ? vscode.Uri.parse(href) : href;
    if (uri.scheme !== "command" || uri.path !== "flowtape.compareRuns") return undefined;
    const args = JSON.parse(decodeURIComponent(uri.query));
    const first = Array.isArray(args) ? args[0] : args;
    return first && typeof first.runA === "string" && typeof first.runB === "string" ? first : undefined;
  } catch {
    return undefined;
  }
}
