/**
 * The Flowtape "Runs" view: runs of the open flow file, each expanding into its steps.
 * Fed by the StepStore's change events (like the tree-view sample's providers).
 */
import * as vscode from "vscode";
import { StepStore } from "./core/stepStore";
import type { RunInfo, StepInfo } from "./core/protocol";
import { runDescription, runIconKind, runLabel, stepDescription, stepIconKind, stepLabel, usageLines } from "./core/format";

export type Node = RunNode | StepNode | NoteNode;

/** A run's rows stop here: VS Code asks for every row again at each change of a streaming run. */
export const MAX_STEP_ROWS = 1000;

export class RunNode {
  readonly kind = "run" as const;
  constructor(readonly runId: string) {}
}

export class StepNode {
  readonly kind = "step" as const;
  constructor(readonly runId: string, readonly step: number) {}
}

/** A line under a run that is no step: why its steps cannot be shown, or how many are left out. */
export class NoteNode {
  readonly kind = "note" as const;
  constructor(readonly runId: string, readonly text: string, readonly error: boolean) {}
}

export class RunsTreeProvider implements vscode.TreeDataProvider<Node> {
  private readonly changed = new vscode.EventEmitter<Node | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly runNodes = new Map<string, RunNode>();
  private readonly stepNodes = new Map<string, StepNode[]>();
  /** Filled by the controller: loads steps of a run that is not in the store yet. */
  loadSteps: (runId: string) => Promise<void> = async () => undefined;
  /** Runs shown: only those whose uri matches (set by the controller). */
  currentUri: string | undefined;
  /** The run and step the stepper is on (drawn with a marker). */
  cursor: { runId?: string; step: number } = { step: 0 };
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly store: StepStore) {
    this.disposables.push(
      store.onChange((change) => {
        if (change.runs) {
          this.changed.fire();
          return;
        }
        for (const runId of change.steps) {
          const node = this.runNodes.get(runId);
          if (node) this.changed.fire(node);
        }
      }),
    );
  }

  dispose(): void {
    this.changed.dispose();
    for (const d of this.disposables) d.dispose();
  }

  refresh(node?: Node): void {
    this.changed.fire(node);
  }

  visibleRuns(): RunInfo[] {
    return this.store.runs.filter((r) => !this.currentUri || sameUri(r.uri, this.currentUri));
  }

  runNode(runId: string): RunNode {
    let n = this.runNodes.get(runId);
    if (!n) {
      n = new RunNode(runId);
      this.runNodes.set(runId, n);
    }
    return n;
  }

  stepNode(runId: string, step: number): StepNode {
    let list = this.stepNodes.get(runId);
    if (!list) {
      list = [];
      this.stepNodes.set(runId, list);
    }
    let n = list[step - 1];
    if (!n) {
      n = new StepNode(runId, step);
      list[step - 1] = n;
    }
    return n;
  }

  getParent(node: Node): Node | undefined {
    return node.kind === "run" ? undefined : this.runNode(node.runId);
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (!node) return this.visibleRuns().map((r) => this.runNode(r.runId));
    if (node.kind !== "run") return [];
    if (!this.store.isLive(node.runId) && !this.store.complete(node.runId) && !this.store.error(node.runId)) {
      await this.loadSteps(node.runId);
    }
    const error = this.store.error(node.runId);
    if (error) return [new NoteNode(node.runId, error, true)];
    const total = this.store.loadedCount(node.runId);
    const first = Math.max(1, total - MAX_STEP_ROWS + 1); // the latest steps; the stepper reaches the rest
    const rows: Node[] = [];
    if (first > 1) rows.push(new NoteNode(node.runId, `… ${first - 1} earlier steps (Go to Step… reaches them)`, false));
    for (let n = first; n <= total; n++) rows.push(this.stepNode(node.runId, n));
    return rows;
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node.kind === "note") {
      const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
      item.iconPath = new vscode.ThemeIcon(node.error ? "error" : "ellipsis");
      item.tooltip = node.text;
      if (!node.error) item.command = { command: "flowtape.stepper.goTo", title: "Go to Step…", arguments: [node.runId] };
      return item;
    }
    if (node.kind === "run") {
      const run = this.store.run(node.runId);
      if (!run) return new vscode.TreeItem(node.runId);
      // The stepper's run opens expanded the first time it is drawn (a new run streams into view).
      const state = this.cursor.runId === run.runId ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed;
      const item = new vscode.TreeItem(runLabel(run), state);
      item.id = `run:${run.runId}`;
      item.description = runDescription(run, this.store.loadedCount(run.runId));
      item.iconPath = runIcon(run.status);
      item.contextValue = run.status === "running" ? "run.running" : "run";
      item.tooltip = runTooltip(run);
      if (this.cursor.runId === run.runId) item.description += " · ◀ stepper";
      return item;
    }
    const s = this.store.step(node.runId, node.step);
    const item = new vscode.TreeItem(s ? stepLabel(s) : String(node.step), vscode.TreeItemCollapsibleState.None);
    item.id = `step:${node.runId}:${node.step}`;
    if (!s) return item;
    item.description = stepDescription(s);
    item.iconPath = stepIcon(s);
    item.contextValue = s.replayed ? "step.replayed" : s.diverged ? "step.diverged" : "step";
    item.tooltip = stepTooltip(s);
    item.command = { command: "flowtape.view.select", title: "Select Step", arguments: [node] };
    return item;
  }
}

export function sameUri(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return vscode.Uri.parse(a).toString() === vscode.Uri.parse(b).toString();
  } catch {
    return false;
  }
}

function runIcon(status: string): vscode.ThemeIcon {
  switch (runIconKind(status)) {
    case "succeeded":
      return new vscode.ThemeIcon("pass", new vscode.ThemeColor("testing.iconPassed"));
    case "failed":
      return new vscode.ThemeIcon("error", new vscode.ThemeColor("testing.iconFailed"));
    case "stopped":
      return new vscode.ThemeIcon("circle-slash", new vscode.ThemeColor("disabledForeground"));
    case "running":
      return new vscode.ThemeIcon("sync~spin", new vscode.ThemeColor("progressBar.background"));
    default:
      return new vscode.ThemeIcon("question");
  }
}

function stepIcon(s: StepInfo): vscode.ThemeIcon {
  switch (stepIconKind(s)) {
    case "diverged":
      return new vscode.ThemeIcon("warning", new vscode.ThemeColor("list.warningForeground"));
    case "replayed":
      return new vscode.ThemeIcon("history", new vscode.ThemeColor("descriptionForeground"));
    default:
      return new vscode.ThemeIcon("debug-stackframe-dot");
  }
}

function runTooltip(run: RunInfo): vscode.MarkdownString {
  const md = new vscode.MarkdownString(undefined, true);
  md.appendMarkdown(`**${run.workflow}** — ${run.status}\n\n`);
  md.appendMarkdown(`run \`${run.runId}\`, ${run.steps} steps\n\n`);
  if (run.resumedFrom) md.appendMarkdown(`resumed from \`${run.resumedFrom}\` at step ${run.resumedAtStep ?? "?"}\n\n`);
  for (const line of usageLines(run.usage)) md.appendMarkdown(`${line}\n\n`);
  md.appendMarkdown(`\`${run.runDir}\``);
  return md;
}

function stepTooltip(s: StepInfo): string {
  const lines = [`step ${s.step}: ${s.actor} (${s.actorKind}), firing ${s.fireCount}`, `journal seq ${s.journalSeq}`];
  if (s.replayed) lines.push("replayed from the recorded run");
  if (s.diverged) lines.push("replay diverged here: the recorded inputs differ");
  lines.push(`created on line ${s.range.start.line + 1}`);
  return lines.join("\n");
}
