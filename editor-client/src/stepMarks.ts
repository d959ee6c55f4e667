/**
 * Where the stepper's "now" shows outside the tree: the status bar (`step 12/40 · review`, the
 * Resume button) and the line marker on the line that creates the current step's actor (or the
 * inner firing's), in every editor showing that file.
 */
import * as vscode from "vscode";
import { firingLabel, statusText, stepLabel } from "./core/format";
import type { FiringDetail, RunInfo, StepInfo } from "./core/protocol";
import { sameUri } from "./runsTree";

export interface Now {
  runId: string | undefined;
  run: RunInfo | undefined;
  index: number;
  total: number;
  step: StepInfo | undefined;
  /** The inner firing the stepper is on, with its place among the step's (`at` of `of`). */
  firing?: { detail: FiringDetail; at: number; of: number };
}

export class StepMarks implements vscode.Disposable {
  private readonly status: vscode.StatusBarItem;
  private readonly resumeItem: vscode.StatusBarItem;
  private readonly line: vscode.TextEditorDecorationType;

  constructor() {
    this.status = vscode.window.createStatusBarItem("flowtape.stepper", vscode.StatusBarAlignment.Left, 50);
    this.status.name = "Flowtape Stepper";
    this.status.command = "flowtape.stepper.goTo";
    this.resumeItem = vscode.window.createStatusBarItem("flowtape.resume", vscode.StatusBarAlignment.Left, 49);
    this.resumeItem.name = "Flowtape Resume";
    this.resumeItem.text = "$(history) Resume";
    this.resumeItem.tooltip = "⟲ Resume from here: a new run that replays up to this step, then runs live";
    this.resumeItem.command = "flowtape.stepper.resume";
    this.line = vscode.window.createTextEditorDecorationType({
      isWholeLine: true,
      backgroundColor: new vscode.ThemeColor("flowtape.stepLineBackground"),
      overviewRulerColor: new vscode.ThemeColor("editorOverviewRuler.findMatchForeground"),
      overviewRulerLane: vscode.OverviewRulerLane.Center,
    });
  }

  dispose(): void {
    this.status.dispose();
    this.resumeItem.dispose();
    this.line.dispose();
  }

  showStatus(now: Now): void {
    void vscode.commands.executeCommand("setContext", "flowtape.hasRun", !!now.runId);
    void vscode.commands.executeCommand("setContext", "flowtape.hasStep", !!now.step);
    if (!now.runId) {
      this.status.hide();
      this.resumeItem.hide();
      return;
    }
    const { step, firing, run } = now;
    const inner = firing ? ` › ${firingLabel(firing.detail)} (${firing.at}/${firing.of})` : "";
    this.status.text = `$(debug-step-over) ${statusText(now.index, now.total, step?.actor)}${inner}`;
    this.status.tooltip = new vscode.MarkdownString(
      `Flowtape stepper — run \`${now.runId}\`${run ? ` (${run.status})` : ""}\n\n` +
        (step ? `${stepLabel(step)}${step.replayed ? " · replayed" : ""}${step.diverged ? " · diverged" : ""}${inner}\n\n` : "") +
        "Alt+[ / Alt+] step, Alt+Home / Alt+End first/last, Alt+G go to step; F11 / Shift+F11 step into / out of a composite step, " +
        "Alt+Shift+[ / Alt+Shift+] previous / next firing of this actor",
    );
    this.status.show();
    if (step) this.resumeItem.show();
    else this.resumeItem.hide();
  }

  /** Highlight the creation line of the current step's actor (or inner firing's) in every editor showing its file. */
  decorate(now: Pick<Now, "step" | "firing">): void {
    const { step } = now;
    const firing = now.firing?.detail;
    const site = firing ?? step;
    for (const editor of vscode.window.visibleTextEditors) {
      if (!step || !site || !sameUri(editor.document.uri.toString(), site.uri)) {
        editor.setDecorations(this.line, []);
        continue;
      }
      const line = Math.min(site.range.start.line, editor.document.lineCount - 1);
      const what = firing
        ? `step ${step.step} › ${firingLabel(firing)}${firing.replayed ? " · replayed" : ""}`
        : `step ${step.step} · fire ${step.fireCount}${step.replayed ? " · replayed" : ""}`;
      editor.setDecorations(this.line, [{
        range: new vscode.Range(line, 0, line, 0),
        hoverMessage: `Flowtape ${firing ? what : `step ${stepLabel(step)}${step.replayed ? " (replayed)" : ""}`}`,
        renderOptions: { after: { contentText: `  ◀ ${what}`, color: new vscode.ThemeColor("editorCodeLens.foreground") } },
      }]);
    }
  }
}
