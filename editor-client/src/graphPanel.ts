/**
 * The graph view (a webview panel, "Flowtape: Show Graph"): the run's flow as a picture that
 * follows the stepper, and a timeline of its firings. The page (src/webview/graph.ts) draws; this
 * side asks the server (flowtape/graph, stepDetail, queueTokens) and answers the page's clicks.
 */
import * as vscode from "vscode";
import { ReadOnlyDocuments } from "./readOnlyDocs";
import { addTimeline, divergedSteps, emptyTimeline, latestFiring, nextTimelineStep, pictureState, type RunMarks, type TimelineData } from "./core/picture";
import { Methods, type FlowGraph, type GraphResult, type QueueTokensResult, type RunFinishedParams, type StepDetail, type TimelineResult } from "./core/protocol";
import type { StepStore } from "./core/stepStore";
import type { StepperState } from "./core/stepper";
import type { ToHost, ToPage } from "./webview/messages";

export interface GraphHost {
  request<T>(method: string, params: unknown): Promise<T>;
  store: StepStore;
  stepper(): StepperState & { inner?: number };
  /** Select a step (with `inner`, that inner firing of it: as stepping into it does). */
  goTo(runId: string, step: number, inner?: number): Promise<void>;
  log(line: string): void;
}

const STATE_MS = 80; // at most a picture this often while a run streams
const STEPS_MS = 500; // a live run's timeline is asked for what follows at most this often

export class GraphPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private graph: FlowGraph | undefined;
  private files: Record<string, string> = {};
  private title = "";
  private shown: { runId?: string; uri?: string } = {};
  private ready = false;
  private asked = 0;
  private stateTimer: ReturnType<typeof setTimeout> | undefined;
  private stepsTimer: ReturnType<typeof setTimeout> | undefined;
  private timeline: TimelineData = emptyTimeline(); // the shown run's, as far as it was asked
  private asking: TimelineData | undefined; // the timeline an answer is awaited for
  private readonly failed = new Map<string, string>(); // run -> the actor it failed in
  private readonly docs = new ReadOnlyDocuments("flowtape-queue", "(these tokens are no longer held: open the queue again from the graph)\n");
  private readonly disposables: vscode.Disposable[] = [this.docs];

  constructor(private readonly extensionUri: vscode.Uri, private readonly host: GraphHost) {}

  get isOpen(): boolean {
    return this.panel !== undefined;
  }

  /** Open the view on a run (its tape's graph), or on a flow file that never ran (its built graph). */
  async show(target: { runId?: string; uri?: string }): Promise<void> {
    if (!this.panel) this.create();
    this.panel?.reveal(undefined, true);
    await this.load(target);
  }

  onRunFinished(p: RunFinishedParams): void {
    if (p.errorDetail?.actor) this.failed.set(p.runId, p.errorDetail.actor);
    if (p.runId === this.shown.runId) {
      this.scheduleState();
      this.scheduleSteps(0); // the steps written last
    }
  }

  /** The stepper moved or its run grew: the picture follows, throttled. */
  onStepper(): void {
    if (!this.panel) return;
    const s = this.host.stepper();
    if (s.runId && s.runId !== this.shown.runId) {
      void this.load({ runId: s.runId });
      return;
    }
    this.scheduleState();
    this.scheduleSteps();
  }

  private create(): void {
    const dist = vscode.Uri.joinPath(this.extensionUri, "dist");
    const panel = vscode.window.createWebviewPanel("flowtape.graph", "Flowtape Graph", { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, {
      enableScripts: true, retainContextWhenHidden: true, localResourceRoots: [dist],
    });
    panel.iconPath = vscode.Uri.joinPath(this.extensionUri, "media", "flowtape.svg");
    panel.webview.html = page(panel.webview, vscode.Uri.joinPath(dist, "graph.js"));
    this.panel = panel;
    this.ready = false;
    this.disposables.push(
      panel.onDidDispose(() => {
        this.panel = undefined;
        this.shown = {};
      }),
      panel.webview.onDidReceiveMessage((m: ToHost) => void this.onMessage(m)),
    );
  }

  private post(m: ToPage): void {
    if (this.panel && this.ready) void this.panel.webview.postMessage(m);
  }

  private async load(target: { runId?: string; uri?: string }): Promise<void> {
    const asked = ++this.asked; // the latest ask wins, whatever order the answers come in
    this.shown = target;
    try {
      const result = await this.host.request<GraphResult>(Methods.graph, target.runId ? { runId: target.runId } : { uri: target.uri });
      if (asked !== this.asked) return;
      this.graph = result.graph;
      this.files = result.files;
      this.timeline = emptyTimeline();
      this.title = target.runId ? `${result.graph.workflow} · run ${target.runId}` : `${result.graph.workflow} · not run yet`;
      if (this.panel) this.panel.title = `Flowtape Graph: ${result.graph.workflow}`;
      this.post({ type: "graph", graph: result.graph, title: this.title });
      this.scheduleState(0);
      this.scheduleSteps(0);
    } catch (e) {
      if (asked !== this.asked) return;
      this.graph = undefined;
      this.post({ type: "error", message: `Flowtape: ${errorText(e)}` });
    }
  }

  private scheduleState(ms = STATE_MS): void {
    if (this.stateTimer) return;
    this.stateTimer = setTimeout(() => {
      this.stateTimer = undefined;
      void this.sendState();
    }, ms);
  }

  private scheduleSteps(ms = STEPS_MS): void {
    if (this.stepsTimer) return;
    this.stepsTimer = setTimeout(() => {
      this.stepsTimer = undefined;
      void this.askTimeline();
    }, ms);
  }

  /** The steps the timeline lacks (a live run's: those written since it last asked), sent on to the page. */
  private async askTimeline(): Promise<void> {
    const runId = this.shown.runId;
    const data = this.timeline;
    if (!runId || data.complete || this.asking === data) return;
    const from = nextTimelineStep(data);
    this.asking = data;
    try {
      const result = await this.host.request<TimelineResult>(Methods.timeline, { runId, from });
      if (runId !== this.shown.runId || data !== this.timeline || !addTimeline(data, result)) return;
      this.post({ type: "timeline", reset: from === 1, result });
      // a live run's next steps, or the rest of a tape being read: asked again, throttled
      if (!data.complete && (result.steps.length || this.host.store.isLive(runId))) this.scheduleSteps();
    } catch (e) {
      this.host.log(`graph view: timeline of ${runId}: ${errorText(e)}`);
    } finally {
      if (this.asking === data) this.asking = undefined;
    }
  }

  private marks(runId: string): RunMarks {
    const run = this.host.store.run(runId);
    return {
      divergedSteps: divergedSteps(this.timeline), failedActor: run?.status === "failed" ? this.failed.get(runId) : undefined,
      resumedAtStep: run?.resumedAtStep ?? undefined, live: this.host.store.isLive(runId),
    };
  }

  private async sendState(): Promise<void> {
    const graph = this.graph;
    const runId = this.shown.runId;
    if (!graph || !runId) return;
    const s = this.host.stepper();
    const step = s.runId === runId ? s.index : this.host.store.total(runId);
    const total = s.runId === runId ? s.total : this.host.store.total(runId);
    const asked = this.asked;
    let detail: StepDetail | undefined;
    if (step > 0) {
      try {
        detail = await this.host.request<StepDetail>(Methods.stepDetail, { runId, step });
      } catch (e) {
        this.host.log(`graph view: step ${step}: ${errorText(e)}`);
      }
    }
    if (asked !== this.asked || runId !== this.shown.runId) return;
    const inner = s.runId === runId && s.index === step ? s.inner ?? 0 : 0;
    this.post({ type: "state", state: pictureState(graph, runId, step, total, detail, this.marks(runId), inner) });
  }

  private async onMessage(m: ToHost): Promise<void> {
    const runId = this.shown.runId;
    switch (m.type) {
      case "ready":
        this.ready = true;
        if (this.graph) {
          this.post({ type: "graph", graph: this.graph, title: this.title });
          this.timeline = emptyTimeline(); // (the page starts with none)
          this.scheduleState(0);
          this.scheduleSteps(0);
        } else if (this.shown.runId || this.shown.uri) await this.load(this.shown);
        break;
      case "actor":
        await this.revealActor(m.path);
        break;
      case "edge":
        if (!runId) {
          this.post({ type: "error", message: "This flow has not run: its queues hold nothing yet." });
          return;
        }
        await this.showQueue(runId, m.queue);
        break;
      case "step":
        if (runId) await this.host.goTo(runId, m.step, m.inner);
        break;
      case "openQueue":
        if (runId) await this.openQueue(runId, m.queue, m.step);
        break;
    }
  }

  /** Its creation line in the editor, and the stepper on its latest firing at or before the step. */
  private async revealActor(path: string): Promise<void> {
    const actor = this.graph?.actors.find((a) => a.path === path);
    if (!actor) return;
    const runId = this.shown.runId;
    if (runId && this.graph) {
      const s = this.host.stepper();
      const at = s.runId === runId && s.index > 0 ? s.index : this.host.store.total(runId);
      const found = latestFiring(this.graph, this.timeline, path, at);
      if (found) await this.host.goTo(runId, found.step, found.inner);
    }
    // the editor is focused last: the stepper's move (a round trip to the server) must not leave
    // the focus on the graph the user clicked in, whose own focus event can come late
    const uri = this.files[actor.file];
    if (uri) {
      const line = Math.max(0, actor.line - 1);
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
      const editor = await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.One, preserveFocus: false });
      const range = new vscode.Range(line, 0, line, 0);
      editor.selection = new vscode.Selection(range.start, range.start);
      editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
  }

  private stepNow(runId: string): number {
    const s = this.host.stepper();
    return s.runId === runId && s.index > 0 ? s.index : this.host.store.total(runId);
  }

  private async showQueue(runId: string, queue: number): Promise<void> {
    const step = this.stepNow(runId);
    if (step < 1) {
      this.post({ type: "error", message: "Step 0 is before anything fired: every queue is empty." });
      return;
    }
    try {
      const result = await this.host.request<QueueTokensResult>(Methods.queueTokens, { runId, step, queue, limit: 50 });
      this.post({ type: "queue", result });
    } catch (e) {
      this.post({ type: "error", message: `Flowtape: ${errorText(e)}` });
    }
  }

  private async openQueue(runId: string, queue: number, step: number): Promise<void> {
    try {
      const r = await this.host.request<QueueTokensResult>(Methods.queueTokens, { runId, step, queue, limit: 10000 });
      const more = r.size > r.tokens.length ? `\n// … and ${r.size - r.tokens.length} more tokens` : "";
      const uri = this.docs.put(`${r.id} after step ${r.step}`, `// ${r.id} after step ${r.step} of run ${r.runId}: ${r.size} token(s)\n${JSON.stringify(r.tokens, null, 2)}${more}\n`, "jsonc");
      const doc = await vscode.workspace.openTextDocument(uri);
      await vscode.window.showTextDocument(doc, { preview: true, viewColumn: vscode.ViewColumn.One }); // (beside the graph, not over it)
    } catch (e) {
      void vscode.window.showErrorMessage(`Flowtape: ${errorText(e)}`);
    }
  }

  dispose(): void {
    this.panel?.dispose();
    for (const d of this.disposables) d.dispose();
    if (this.stateTimer) clearTimeout(this.stateTimer);
    if (this.stepsTimer) clearTimeout(this.stepsTimer);
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : typeof e === "object" && e && "message" in e ? String(e.message) : String(e);
}

function page(webview: vscode.Webview, script: vscode.Uri): string {
  const nonce = Array.from({ length: 24 }, () => Math.floor(Math.random() * 36).toString(36)).join("");
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource} 'unsafe-inline'; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<style>${STYLE}</style></head>
<body>
<div id="bar">
  <button data-tab="graph" class="on">Graph</button><button data-tab="timeline">Timeline</button>
  <span id="title"></span><span id="where"></span>
  <span class="spacer"></span>
  <button id="fit" title="Fit the graph to the view">Fit</button>
  <label>Lanes <select id="lanes"><option value="worker">per worker</option><option value="actor">per actor</option></select></label>
</div>
<div id="banner" hidden></div>
<div id="graph"><svg id="svg"><defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs><g id="viewport"></g></svg><div id="empty"></div>
  <div id="legend"><span class="k active">firing</span><span class="k ready">ready</span><span class="k replayed">replayed</span><span class="k diverged">diverged</span><span class="k failed">failed</span></div></div>
<div id="timeline" hidden><svg id="tsvg" width="100%"></svg><div id="tinfo"></div></div>
<div id="side" hidden></div>
<script nonce="${nonce}" src="${webview.asWebviewUri(script)}"></script>
</body></html>`;
}

const STYLE = `
[hidden] { display: none !important; }
body { padding: 0; margin: 0; color: var(--vscode-foreground); font: 12px var(--vscode-font-family); overflow: hidden;
  display: flex; flex-direction: column; height: 100vh; }
#bar { flex: none; display: flex; flex-wrap: wrap; gap: 8px; align-items: center; padding: 4px 8px; border-bottom: 1px solid var(--vscode-panel-border); }
#bar button { background: var(--vscode-button-secondaryBackground); color: var(--vscode-button-secondaryForeground); border: 0; padding: 2px 8px; cursor: pointer; }
#bar button.on { background: var(--vscode-button-background); color: var(--vscode-button-foreground); }
#title { font-weight: bold; } #where { opacity: .8; } .spacer { flex: 1; }
#banner { padding: 6px 10px; background: var(--vscode-inputValidation-errorBackground); border-bottom: 1px solid var(--vscode-inputValidation-errorBorder); }
#banner { flex: none; }
#graph, #timeline { position: relative; flex: 1; min-height: 0; }
#timeline { overflow: auto; }
#svg { width: 100%; height: 100%; cursor: grab; }
#empty { position: absolute; top: 40%; width: 100%; text-align: center; opacity: .7; }
#legend { position: absolute; bottom: 6px; left: 8px; display: flex; gap: 10px; opacity: .85; }
#legend .k::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 4px; border: 2px solid var(--vscode-editorWidget-border); vertical-align: -2px; }
#legend .active::before { border-color: var(--vscode-focusBorder); background: var(--vscode-editor-selectionBackground); }
#legend .ready::before { border-color: var(--vscode-charts-green); }
#legend .replayed::before { border-color: var(--vscode-charts-blue); border-style: dashed; }
#legend .diverged::before { border-color: var(--vscode-editorWarning-foreground); }
#legend .failed::before { border-color: var(--vscode-editorError-foreground); }
.actor rect { fill: var(--vscode-editorWidget-background); stroke: var(--vscode-editorWidget-border); stroke-width: 1.5; cursor: pointer; }
.actor.group > rect { fill: var(--vscode-sideBar-background); fill-opacity: .55; stroke-dasharray: 4 3; }
.actor.kind-agent > rect { stroke: var(--vscode-charts-purple); }
.actor.kind-tool > rect { stroke: var(--vscode-charts-orange); }
.branch rect { fill: none; stroke: var(--vscode-editorWidget-border); stroke-dasharray: 2 3; }
.actor .name { font-weight: bold; fill: var(--vscode-foreground); pointer-events: none; }
.actor .cls, .group-label, .port-label { fill: var(--vscode-descriptionForeground); pointer-events: none; }
.actor .ready-dot { fill: none; }
.actor.ready > rect { stroke: var(--vscode-charts-green); stroke-width: 2.5; }
.actor.ready .ready-dot { fill: var(--vscode-charts-green); }
.actor.active > rect { stroke: var(--vscode-focusBorder); stroke-width: 3; fill: var(--vscode-editor-selectionBackground); }
.actor.group.active > rect { fill: var(--vscode-editor-selectionBackground); fill-opacity: .25; }
.actor.focus > rect { stroke-width: 4.5; }
.actor.replayed > rect { stroke: var(--vscode-charts-blue); stroke-dasharray: 5 3; }
.actor.diverged > rect { stroke: var(--vscode-editorWarning-foreground); stroke-width: 3; }
.actor.failed > rect { stroke: var(--vscode-editorError-foreground); stroke-width: 3; }
.port circle { fill: var(--vscode-editorWidget-background); stroke: var(--vscode-descriptionForeground); }
.edge .line { fill: none; stroke: var(--vscode-descriptionForeground); stroke-width: 1.4; }
.edge .line.holding { stroke: var(--vscode-charts-green); stroke-width: 2.2; }
.edge .hit { fill: none; stroke: transparent; stroke-width: 10; cursor: pointer; }
marker path { fill: var(--vscode-descriptionForeground); }
.size { font-weight: bold; fill: var(--vscode-charts-green); cursor: pointer; }
#side { position: absolute; top: 40px; right: 8px; width: 340px; max-height: 70%; overflow: auto; padding: 8px; background: var(--vscode-editorHoverWidget-background); border: 1px solid var(--vscode-editorHoverWidget-border); }
#side h3 { margin: 0 0 6px; font-size: 12px; } #side li { font-family: var(--vscode-editor-font-family); white-space: pre-wrap; word-break: break-all; }
#tsvg .bar { fill: var(--vscode-charts-green); cursor: pointer; } #tsvg .bar.replayed { fill: var(--vscode-charts-blue); opacity: .6; }
#tsvg .bar.diverged { fill: var(--vscode-editorWarning-foreground); } #tsvg .bar.merged { opacity: .75; }
#tsvg .lane, #tsvg .tick { fill: var(--vscode-descriptionForeground); } #tsvg .lane-line { stroke: var(--vscode-panel-border); }
#tsvg .cursor { stroke: var(--vscode-focusBorder); stroke-width: 2; } #tsvg .replay-end { stroke: var(--vscode-charts-blue); stroke-dasharray: 4 3; }
#tsvg .bar.inner { fill: var(--vscode-charts-purple); } #tsvg .bar.inner.replayed { fill: var(--vscode-charts-blue); opacity: .45; }
#tsvg .bar.inner.composite { fill-opacity: .4; stroke: var(--vscode-charts-purple); stroke-width: 1; }
#tsvg .bar.current { stroke: var(--vscode-focusBorder); stroke-width: 2; opacity: 1; } #tsvg .bar.current-step { stroke: var(--vscode-focusBorder); stroke-width: 1; stroke-dasharray: 2 2; }
#tsvg .lane.sub { font-size: 10px; }
#tinfo { padding: 4px 8px; opacity: .7; }
`;
