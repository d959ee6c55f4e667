/**
 * The Flowtape "Runs" view: runs of the open flow file, each expanding into its outputs, its steps
 * (a big run's in groups, the replayed region of a resumed run as a group of its own), a composite
 * step into its inner firings, and a failed run's failed firing with its traceback.
 * Fed by the StepStore's change events (like the tree-view sample's providers).
 */
import * as vscode from "vscode";
import { StepStore } from "./core/stepStore";
import type { ErrorDetail, FiringDetail, Frame, RunInfo, StepInfo } from "./core/protocol";
import { GROUP_SIZE, groupKey, groupLabel, groupPath, runLayout, subGroups, type StepGroup } from "./core/groups";
import { replayedRegionEnd, settleReplay } from "./core/replayRegion";
import { Redraws } from "./core/redraws";
import {
  failureLabel,
  firingDescription,
  firingLabel,
  outputLabel,
  runDescription,
  runIconKind,
  runLabel,
  stepDescription,
  stepIconKind,
  stepLabel,
  tokensText,
  usageLines,
} from "./core/format";

export type Node = RunNode | GroupNode | StepNode | FiringNode | OutputsNode | OutputNode | FailureNode | FrameNode | NoteNode;

const COMPOSITE = new Set(["workflow", "loop", "if"]);

export class RunNode {
  readonly kind = "run" as const;
  constructor(readonly runId: string) {}
}

/** Steps `from`..`to` of a run (`steps 7,001–8,000`), loaded when it is expanded. One node per
 *  group of a run (`groupKey`): the last group of a growing run is the same node as its `to` grows. */
export class GroupNode {
  readonly kind = "group" as const;
  constructor(readonly runId: string, readonly group: StepGroup) {}
}

export class StepNode {
  readonly kind = "step" as const;
  constructor(readonly runId: string, readonly step: number) {}
}

/** An inner firing of a composite step (`index`: 1-based, among the step's inner firings). */
export class FiringNode {
  readonly kind = "firing" as const;
  constructor(readonly runId: string, readonly step: number, readonly index: number, readonly firing: FiringDetail) {}
}

export class OutputsNode {
  readonly kind = "outputs" as const;
  constructor(readonly runId: string) {}
}

export class OutputNode {
  readonly kind = "output" as const;
  constructor(readonly runId: string, readonly port: string) {}
}

/** A failed run's failed firing: actor, fire count, what it took, the error; its traceback below. */
export class FailureNode {
  readonly kind = "failure" as const;
  constructor(readonly runId: string) {}
}

export class FrameNode {
  readonly kind = "frame" as const;
  constructor(readonly runId: string, readonly frame: Frame) {}
}

/** A line under a run that is no step: why its steps cannot be shown, a filter, a message. */
export class NoteNode {
  readonly kind = "note" as const;
  constructor(readonly runId: string, readonly text: string, readonly error: boolean, readonly command?: vscode.Command) {}
}

/** Steps shown instead of all of them: those `flowtape/findSteps` found. */
export interface StepFilter {
  what: string; // `actor review`, `value "x"`
  steps: number[];
  total: number;
}

/** The inner firings of a step: those other than its own. */
export function innerFirings(step: Pick<StepInfo, "actor" | "fireCount">, firings: FiringDetail[]): FiringDetail[] {
  return firings.filter((f) => f.actor !== step.actor || f.fireCount !== step.fireCount);
}

export function isComposite(s: Pick<StepInfo, "actorKind">): boolean {
  return COMPOSITE.has(s.actorKind);
}

/** Least time between two redraws the tree asks of VS Code (more than VS Code's 200 ms debounce). */
const FIRE_GAP_MS = 300;

export interface RevealOptions {
  select: boolean;
  focus: boolean;
  expand?: boolean;
}

export class RunsTreeProvider implements vscode.TreeDataProvider<Node> {
  private readonly changed = new vscode.EventEmitter<Node | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly runNodes = new Map<string, RunNode>();
  private readonly stepNodes = new Map<string, StepNode[]>();
  private readonly groupNodes = new Map<string, GroupNode>();
  private readonly firingNodes = new Map<string, FiringNode[]>();
  /** Filled by the controller: loads the steps `from`..`to` of a run that the store lacks. */
  loadRange: (runId: string, from: number, to: number) => Promise<void> = async () => undefined;
  /** Filled by the controller: a step's firings (`flowtape/stepDetail`). */
  loadFirings: (runId: string, step: number) => Promise<FiringDetail[]> = async () => [];
  /** Filled by the controller: the output channel (a reveal that failed is told there). */
  log: (line: string) => void = () => undefined;
  /** Set by the controller: the view this provider feeds, what `reveal` reveals in. */
  view: vscode.TreeView<Node> | undefined;
  /** Runs shown: only those whose uri matches (set by the controller). */
  currentUri: string | undefined;
  /** The run, step and inner firing the stepper is on (drawn with a marker). */
  cursor: { runId?: string; step: number; inner?: number } = { step: 0 };
  readonly filters = new Map<string, StepFilter>();
  private readonly disposables: vscode.Disposable[] = [];

  private readonly redraws = new Redraws<Node>({
    fire: (nodes) => {
      if (!nodes) this.changed.fire();
      else for (const n of nodes) this.changed.fire(n);
    },
    gapMs: FIRE_GAP_MS,
    log: (line) => this.log(line),
  });

  constructor(private readonly store: StepStore) {
    this.disposables.push(
      store.onChange((change) => {
        if (change.runs) return this.refresh();
        for (const runId of change.steps) {
          const node = this.runNodes.get(runId);
          if (node) this.refresh(node);
        }
      }),
    );
  }

  dispose(): void {
    this.redraws.dispose();
    this.changed.dispose();
    for (const d of this.disposables) d.dispose();
  }

  /** Redraw a node (or the whole tree): at once when the tree was quiet, while a run streams at
   *  most every FIRE_GAP_MS, never while a reveal is under way (see Redraws). */
  refresh(node?: Node): void {
    this.redraws.refresh(node);
  }

  /** Show a node in the view, after the redraws pending and with none sent until VS Code is done
   *  (a redraw meanwhile drops what its reveal walks down). One that did not show is told to the
   *  output channel and tried once more: VS Code rejects a node it cannot place, and only logs a
   *  parent it cannot, so a reveal that selects is checked against the view's selection (unless
   *  `wanted` says the node is no longer the one to show: the stepper moved on). */
  async reveal(node: Node, options: RevealOptions, what: string, wanted: () => boolean = () => true): Promise<boolean> {
    const view = this.view;
    if (!view || !this.listed(node)) return false;
    const once = async (): Promise<void> => {
      if (!wanted()) return;
      await view.reveal(node, options);
      if (options.select && view.visible && wanted() && !view.selection.includes(node)) {
        throw new Error("VS Code selected no row for it (its extension host log may say why)");
      }
    };
    let result = await this.redraws.reveal(what, once);
    if (result === "failed") result = await this.redraws.reveal(`${what} (tried again)`, once);
    return result === "shown";
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

  /** Does the tree list this node's step (a filter lists only the steps it found)? */
  private listed(node: Node): boolean {
    const filter = this.filters.get(node.runId);
    if (!filter || (node.kind !== "step" && node.kind !== "firing")) return true;
    return filter.steps.slice(0, GROUP_SIZE).includes(node.step);
  }

  private groupNode(runId: string, g: StepGroup): GroupNode {
    const key = `${runId}:${groupKey(g)}`;
    let n = this.groupNodes.get(key);
    if (!n) {
      n = new GroupNode(runId, { ...g });
      this.groupNodes.set(key, n);
    }
    n.group.to = g.to; // (a growing run's last group)
    return n;
  }

  /** The node of inner firing `index` of a step, once its firings are known (see `setFirings`). */
  firingNode(runId: string, step: number, index: number): FiringNode | undefined {
    return this.firingNodes.get(`${runId}:${step}`)?.[index - 1];
  }

  setFirings(runId: string, step: number, inner: FiringDetail[]): FiringNode[] {
    const key = `${runId}:${step}`;
    let nodes = this.firingNodes.get(key);
    if (!nodes || nodes.length !== inner.length) {
      nodes = inner.map((f, i) => new FiringNode(runId, step, i + 1, f));
      this.firingNodes.set(key, nodes);
    }
    return nodes;
  }

  getParent(node: Node): Node | undefined {
    switch (node.kind) {
      case "run":
        return undefined;
      case "group":
      case "step": {
        if (node.kind === "step" && this.filters.has(node.runId)) return this.runNode(node.runId);
        const run = this.store.run(node.runId);
        if (!run) return this.runNode(node.runId);
        const at = node.kind === "step" ? node.step : node.group.from;
        const path = groupPath(at, this.store.total(node.runId), replayedRegionEnd(this.store, node.runId));
        const parents = node.kind === "group" ? path.slice(0, Math.max(0, path.findIndex((g) => groupKey(g) === groupKey(node.group)))) : path;
        const parent = parents[parents.length - 1];
        return parent ? this.groupNode(node.runId, parent) : this.runNode(node.runId);
      }
      case "firing":
        return this.stepNode(node.runId, node.step);
      case "output":
        return new OutputsNode(node.runId);
      case "frame":
        return new FailureNode(node.runId);
      default:
        return this.runNode(node.runId);
    }
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (!node) return this.visibleRuns().map((r) => this.runNode(r.runId));
    switch (node.kind) {
      case "run":
        return this.runChildren(node.runId);
      case "group":
        return this.groupChildren(node);
      case "step": {
        const s = this.store.step(node.runId, node.step);
        if (!s || !isComposite(s)) return [];
        try {
          const inner = innerFirings(s, await this.loadFirings(node.runId, node.step));
          if (!inner.length) return [new NoteNode(node.runId, "no inner firings on this tape", false)];
          return this.setFirings(node.runId, node.step, inner);
        } catch (e) {
          return [new NoteNode(node.runId, errorText(e), true)];
        }
      }
      case "outputs":
        return (this.store.run(node.runId)?.outputs ?? []).map((o) => new OutputNode(node.runId, o.port));
      case "failure": {
        const frames = this.store.run(node.runId)?.error?.traceback ?? [];
        return frames.filter((f) => f.own).reverse().map((f) => new FrameNode(node.runId, f)); // innermost first, as a call stack
      }
      default:
        return [];
    }
  }

  private async runChildren(runId: string): Promise<Node[]> {
    const run = this.store.run(runId);
    if (!run) return [];
    const rows: Node[] = [];
    if (run.outputs?.length) rows.push(new OutputsNode(runId));
    const filter = this.filters.get(runId);
    if (filter) return rows.concat(await this.filteredChildren(runId, filter));
    const live = this.store.isLive(runId);
    if (!live && !this.store.error(runId) && this.store.total(runId) > 0) {
      // where the replayed region ends first: the layout (and every step's parent) depends on it
      await settleReplay(this.store, runId, (r, from, to) => this.loadRange(r, from, to));
      const layout = runLayout(this.store.total(runId), replayedRegionEnd(this.store, runId));
      if (layout.from <= layout.to) await this.loadRange(runId, layout.from, layout.to);
    }
    const error = this.store.error(runId);
    if (error) return rows.concat(new NoteNode(runId, error, true));
    const layout = runLayout(this.store.total(runId), replayedRegionEnd(this.store, runId));
    for (const g of layout.groups) rows.push(this.groupNode(runId, g));
    for (let n = layout.from; n <= layout.to; n++) if (this.store.step(runId, n)) rows.push(this.stepNode(runId, n));
    if (run.status === "failed" && run.error && !live) rows.push(new FailureNode(runId));
    return rows;
  }

  private async groupChildren(node: GroupNode): Promise<Node[]> {
    const subs = subGroups(node.group);
    if (subs.length) return subs.map((g) => this.groupNode(node.runId, g));
    const { from, to } = node.group;
    if (!this.store.isLive(node.runId)) await this.loadRange(node.runId, from, to);
    const rows: Node[] = [];
    for (let n = from; n <= to; n++) if (this.store.step(node.runId, n)) rows.push(this.stepNode(node.runId, n));
    return rows;
  }

  private async filteredChildren(runId: string, filter: StepFilter): Promise<Node[]> {
    const shown = filter.steps.slice(0, GROUP_SIZE);
    const clear: vscode.Command = { command: "flowtape.view.clearFilter", title: "Clear Filter", arguments: [runId] };
    const head = new NoteNode(runId, `${filter.what}: ${filter.total} step${filter.total === 1 ? "" : "s"}${filter.total > shown.length ? ` (first ${shown.length})` : ""} · click to show all`, false, clear);
    for (const n of shown) {
      if (!this.store.step(runId, n)) await this.loadRange(runId, n, n);
    }
    return [head, ...shown.filter((n) => this.store.step(runId, n)).map((n) => this.stepNode(runId, n))];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    switch (node.kind) {
      case "note": {
        const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon(node.error ? "error" : node.command ? "filter" : "info");
        item.tooltip = node.text;
        item.command = node.command;
        return item;
      }
      case "run":
        return this.runItem(node);
      case "group": {
        const within = this.cursor.runId === node.runId && node.group.from <= this.cursor.step && this.cursor.step <= node.group.to;
        const item = new vscode.TreeItem(groupLabel(node.group), within ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `group:${node.runId}:${groupKey(node.group)}`;
        item.iconPath = new vscode.ThemeIcon(node.group.replayed ? "history" : "list-flat");
        item.description = within ? "◀ stepper" : undefined;
        item.contextValue = "group";
        return item;
      }
      case "step":
        return this.stepItem(node);
      case "firing": {
        const f = node.firing;
        const item = new vscode.TreeItem(firingLabel(f), vscode.TreeItemCollapsibleState.None);
        item.id = `firing:${node.runId}:${node.step}:${node.index}`;
        item.description = firingDescription(f);
        item.iconPath = new vscode.ThemeIcon(f.replayed ? "history" : "debug-stackframe-dot");
        item.tooltip = `${f.actor} (${f.actorKind}), firing ${f.fireCount}, inside step ${node.step}\ntook: ${tokensText(f.taken)}\nput: ${tokensText(f.put)}\n${f.replayed ? "replayed from the recorded run" : "ran live"}`;
        item.contextValue = "firing";
        item.command = { command: "flowtape.view.select", title: "Select Firing", arguments: [node] };
        return item;
      }
      case "outputs": {
        const run = this.store.run(node.runId);
        const item = new vscode.TreeItem("Outputs", vscode.TreeItemCollapsibleState.Expanded);
        item.id = `outputs:${node.runId}`;
        item.iconPath = new vscode.ThemeIcon("output");
        item.description = (run?.outputs ?? []).map((o) => `${o.port} (${o.count})`).join(" · ");
        item.contextValue = "outputs";
        item.command = { command: "flowtape.view.openOutputs", title: "Open Outputs", arguments: [node.runId] };
        return item;
      }
      case "output": {
        const o = this.store.run(node.runId)?.outputs?.find((x) => x.port === node.port);
        const shown = o ? outputLabel(o) : { label: node.port, description: "" };
        const item = new vscode.TreeItem(shown.label, vscode.TreeItemCollapsibleState.None);
        item.id = `output:${node.runId}:${node.port}`;
        item.description = shown.description;
        item.tooltip = `${shown.description}\n\nClick to open every token of ${node.port}`;
        item.iconPath = new vscode.ThemeIcon("symbol-variable");
        item.contextValue = "output";
        item.command = { command: "flowtape.view.openOutputs", title: "Open Outputs", arguments: [node.runId, node.port] };
        return item;
      }
      case "failure":
        return failureItem(node, this.store.run(node.runId)?.error);
      case "frame": {
        const f = node.frame;
        const item = new vscode.TreeItem(`${f.function} · ${baseName(f.file)}:${f.line + 1}`, vscode.TreeItemCollapsibleState.None);
        item.id = `frame:${node.runId}:${f.file}:${f.line}:${f.function}`;
        item.description = f.code ?? "";
        item.tooltip = `${f.file}:${f.line + 1}`;
        item.iconPath = new vscode.ThemeIcon("debug-stackframe");
        if (f.uri) {
          item.command = {
            command: "vscode.open", title: "Open",
            arguments: [vscode.Uri.parse(f.uri), { selection: new vscode.Range(f.line, 0, f.line, 0) } satisfies vscode.TextDocumentShowOptions],
          };
        }
        return item;
      }
    }
  }

  private runItem(node: RunNode): vscode.TreeItem {
    const run = this.store.run(node.runId);
    if (!run) return new vscode.TreeItem(node.runId);
    // The stepper's run opens expanded the first time it is drawn (a new run streams into view).
    const state = this.cursor.runId === run.runId ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed;
    const item = new vscode.TreeItem(runLabel(run), state);
    item.id = `run:${run.runId}`;
    item.description = runDescription(run, this.store.total(run.runId));
    item.iconPath = runIcon(run.status);
    item.contextValue = run.status === "running" ? "run.running" : "run";
    item.tooltip = runTooltip(run);
    if (this.cursor.runId === run.runId) item.description += " · ◀ stepper";
    return item;
  }

  private stepItem(node: StepNode): vscode.TreeItem {
    const s = this.store.step(node.runId, node.step);
    const composite = !!s && isComposite(s);
    const inside = composite && this.cursor.runId === node.runId && this.cursor.step === node.step && (this.cursor.inner ?? 0) > 0;
    const item = new vscode.TreeItem(
      s ? stepLabel(s) : String(node.step),
      !composite ? vscode.TreeItemCollapsibleState.None : inside ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed,
    );
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

function failureItem(node: FailureNode, e: ErrorDetail | null | undefined): vscode.TreeItem {
  const shown = e ? failureLabel(e) : { label: "failed", description: "" };
  const own = (e?.traceback ?? []).some((f) => f.own);
  const item = new vscode.TreeItem(shown.label, own ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
  item.id = `failure:${node.runId}`;
  item.description = shown.description;
  item.iconPath = new vscode.ThemeIcon("error", new vscode.ThemeColor("testing.iconFailed"));
  item.contextValue = "failure";
  const md = new vscode.MarkdownString(undefined, true);
  md.appendMarkdown(`**${shown.label}**\n\n`);
  if (e?.taken?.length) md.appendMarkdown(`took: \`${tokensText(e.taken)}\`\n\n`);
  md.appendCodeblock(e?.message ?? "", "text");
  item.tooltip = md;
  const at = e?.raisedUri ? { uri: e.raisedUri, line: e.raisedLine ?? 0 } : e?.uri ? { uri: e.uri, line: e.line ?? 0 } : undefined;
  if (at) {
    item.command = {
      command: "vscode.open", title: "Go to the Line That Raised",
      arguments: [vscode.Uri.parse(at.uri), { selection: new vscode.Range(at.line, 0, at.line, 0) } satisfies vscode.TextDocumentShowOptions],
    };
  }
  return item;
}

function baseName(file: string): string {
  return file.split(/[\\/]/).pop() ?? file;
}

function errorText(e: unknown): string {
  if (e && typeof e === "object" && "message" in e) return String((e as { message: unknown }).message);
  return String(e);
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
      return new vscode.ThemeIcon(isComposite(s) ? "symbol-namespace" : "debug-stackframe-dot");
  }
}

function runTooltip(run: RunInfo): vscode.MarkdownString {
  const md = new vscode.MarkdownString(undefined, true);
  md.appendMarkdown(`**${run.workflow}** — ${run.status}\n\n`);
  md.appendMarkdown(`run \`${run.runId}\`, ${run.steps} steps\n\n`);
  if (run.status === "failed" && run.error) {
    const e = run.error;
    md.appendMarkdown(`**why it failed:** ${e.actor ? `\`${e.actor}\` firing ${e.fireCount}: ` : ""}`);
    md.appendCodeblock(e.message, "text");
  }
  if (run.resumedFrom) md.appendMarkdown(`resumed from \`${run.resumedFrom}\` at step ${run.resumedAtStep ?? "?"}\n\n`);
  for (const line of usageLines(run.usage)) md.appendMarkdown(`${line}\n\n`);
  md.appendMarkdown(`\`${run.runDir}\``);
  return md;
}

function stepTooltip(s: StepInfo): string {
  const lines = [`step ${s.step}: ${s.actor} (${s.actorKind}), firing ${s.fireCount}`, `journal seq ${s.journalSeq}`];
  if (s.replayed) lines.push("replayed from the recorded run");
  if (s.diverged) lines.push("replay diverged here: the recorded inputs differ");
  if (isComposite(s)) lines.push("a composite step: expand it (or Step Into, F11) for its inner firings");
  lines.push(`created on line ${s.range.start.line + 1}`);
  return lines.join("\n");
}
