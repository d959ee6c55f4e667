/**
 * Flowtape for VS Code: starts `<python> -m flowtape lsp`, shows runs and steps in the Flowtape
 * view, and drives the stepper (status bar, keybindings, line highlight, resume, rerun actor).
 */
import * as vscode from "vscode";
import * as path from "node:path";
import { type LanguageClient, State } from "vscode-languageclient/node";
import { StepStore } from "./core/stepStore";
import { Stepper } from "./core/stepper";
import { shortRunId } from "./core/format";
import {
  Methods,
  ServerCommands,
  type GetStepsResult,
  type FiringDetail,
  type RunFinishedParams,
  type RunStartResult,
  type RunStartedParams,
  type RunsResult,
  type StepDetail,
  type StepInfo,
  type StepsParams,
} from "./core/protocol";
import { FiringNode, RunsTreeProvider, StepNode, RunNode, sameUri, type Node } from "./runsTree";
import { settleReplay } from "./core/replayRegion";
import { DetailPanel } from "./detail";
import { askRunInputs } from "./runInputs";
import { StepFinder } from "./stepFinder";
import { Connection, commandFailed, errorText, withPlacement } from "./connection";
import { StepPages } from "./stepPages";
import { openOutputs, outputsDocuments, tellFinished } from "./outputsView";
import { StepMarks, type Now } from "./stepMarks";
import { askGoTo, askResumeStep } from "./stepPrompts";
import { GraphPanel } from "./graphPanel";
import { choosePython } from "./python";
import { WhatIf, type WhatIfHost } from "./whatif";
import { FiringDebugger } from "./debug";
import { StepHints, type StepAt } from "./stepHints";

const SELECT_MS = 250; // while following a streaming run: how often the server hears of the step

class Flowtape implements vscode.Disposable {
  readonly store = new StepStore({ batchMs: 50 });
  readonly stepper = new Stepper();
  readonly tree: RunsTreeProvider;
  readonly view: vscode.TreeView<Node>;
  readonly output = vscode.window.createOutputChannel("Flowtape");
  private readonly conn: Connection;
  private readonly marks = new StepMarks();
  private readonly detail = new DetailPanel();
  readonly graphView: GraphPanel;
  private readonly disposables: vscode.Disposable[] = [];
  private flowUri: string | undefined;
  /** The file the stepper is opening to show a step (its opening is no choice of another flow). */
  private navigatingTo: string | undefined;
  /** The Python file the user last went to (not one the stepper opened). */
  private chosen: string | undefined;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  /** A run we asked for (resume/rerun) whose runStarted the stepper should follow. */
  private readonly follow = new Set<string>();
  /** Runs started from this window: their finish is told in a notification. */
  private readonly mine = new Set<string>();
  private readonly pages: StepPages;
  private selecting: { runId: string; step: number } | undefined;
  private selectTimer: ReturnType<typeof setTimeout> | undefined;
  private detailAsked = 0;
  private readonly finder: StepFinder;
  /** Server errors already shown, so that a damaged run says so once, not at every keypress. */
  private readonly told = new Set<string>();
  private readonly hints = new StepHints(() => this.hintStep(), (l) => this.log(l));

  constructor(private readonly context: vscode.ExtensionContext) {
    this.conn = new Connection(context, this.output, {
      executeCommand: (command, args, next) => this.executeCommand(command, args, next),
      provideInlayHints: (document, range, token, next) => this.hints.provideInlayHints(document, range, token, next),
      wire: (client) => this.wire(client),
      started: () => {
        this.onEditorChange(vscode.window.activeTextEditor);
        this.scheduleRefresh(0);
      },
      log: (l) => this.log(l),
    });
    this.tree = new RunsTreeProvider(this.store);
    this.graphView = new GraphPanel(context.extensionUri, {
      request: async <T>(method: string, params: unknown): Promise<T> => {
        const answer = await this.request<T>(method, params);
        if (answer === undefined) throw new Error("the language server is not running");
        return answer;
      },
      store: this.store,
      stepper: () => ({ ...this.stepper.state, inner: this.stepper.inner }),
      goTo: (runId, step, inner) => (inner ? this.goToFiring(runId, step, inner) : this.goToStep(runId, step)),
      log: (line) => this.log(line),
    });
    this.pages = new StepPages(this.store, this.tree, { request: (m, p) => this.request(m, p), tell: (m) => this.tell(m) });
    this.tree.loadRange = (runId, from, to) => this.pages.loadRange(runId, from, to);
    this.tree.loadFirings = (runId, step) => this.pages.firings(runId, step);
    this.finder = new StepFinder({
      store: this.store,
      tree: this.tree,
      runId: () => this.stepper.runId,
      currentStep: () => this.currentStep(),
      currentFiring: () => this.currentFiring(),
      request: (method, params) => this.request(method, params),
      goTo: (runId, step) => this.goToStep(runId, step),
      tell: (m) => this.tell(m),
    });
    this.view = vscode.window.createTreeView("flowtape.runs", { treeDataProvider: this.tree, showCollapseAll: true });
    this.tree.view = this.view;
    this.tree.log = (line) => this.log(line);
    this.disposables.push(
      this.view,
      this.output,
      this.marks,
      this.hints,
      this.detail,
      this.graphView,
      this.tree,
      this.store.onChange((c) => this.onStoreChange(c.steps)),
      vscode.window.onDidChangeActiveTextEditor((e) => this.onEditorChange(e)),
      vscode.window.onDidChangeVisibleTextEditors(() => this.decorate()),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration("flowtape.python") || e.affectsConfiguration("flowtape.server.extraArgs")) {
          void this.restart();
        }
      }),
      this.view.onDidChangeVisibility((e) => {
        if (e.visible) this.scheduleRefresh();
      }),
    );
    this.registerCommands();
    this.registerWhatIf();
    this.updateStatus();
  }

  /** Fork, compare and debug one firing (whatif.ts, debug.ts), with what of the controller they need. */
  private registerWhatIf(): void {
    const host: WhatIfHost = {
      request: (method, params) => this.request(method, params),
      serverCommand: (command, params) => this.conn.serverCommand(command, params),
      current: () => (this.stepper.runId ? { runId: this.stepper.runId, step: this.stepper.index } : undefined),
      run: (runId) => this.store.run(runId),
      followRun: (runId) => this.followRun(runId),
      tell: (message) => this.tell(message),
    };
    this.disposables.push(outputsDocuments(), new WhatIf(host), new FiringDebugger(host, async (resource) => (await choosePython(resource)).python, this.output));
  }

  // ---- server ----------------------------------------------------------------------------------

  start(): Promise<void> {
    return this.conn.start();
  }

  restart(): Promise<void> {
    return this.conn.restart();
  }

  /** Server commands as the language client runs them (a code lens's): the "⟲ Resume at step…"
   *  lens names the run only, so the step is asked for; "▶ Run" of a workflow with declared
   *  inputs asks for them; a run started here is followed. */
  private async executeCommand(command: string, args: unknown[], next: (command: string, args: unknown[]) => unknown): Promise<unknown> {
    if (command === ServerCommands.resumeAtStep && isRunOnly(args[0])) {
      const at = await this.askStep(args[0].runId);
      if (at === undefined) return undefined;
      if (at !== null) args = [{ ...args[0], step: at }]; // (null: no step, where the run stopped)
    }
    if (command === ServerCommands.run && isRunParams(args[0]) && args[0].inputs === undefined) {
      const inputs = await askRunInputs((m, p) => this.request(m, p), (l) => this.log(l), args[0]);
      if (inputs === undefined) return undefined;
      if (Object.keys(inputs).length) args = [{ ...args[0], inputs }];
    }
    args = withPlacement(command, args);
    if (command === ServerCommands.resumeAtStep || command === ServerCommands.run) {
      const result = (await this.tryCommand(command, args, next)) as RunStartResult | undefined;
      if (result?.runId) {
        this.mine.add(result.runId);
        this.followRun(result.runId);
      }
      return result;
    }
    return this.tryCommand(command, args, next);
  }

  /** Listen to a new client's notifications and state. */
  private wire(client: LanguageClient): void {
    this.hints.attach(client);
    client.onNotification(Methods.runStarted, (p: RunStartedParams) => this.onRunStarted(p));
    client.onNotification(Methods.steps, (p: StepsParams) => {
      if (!this.store.run(p.runId)) this.scheduleRefresh(); // its runStarted was lost or is late
      this.store.addSteps(p.runId, p.steps ?? []);
    });
    client.onNotification(Methods.runFinished, (p: RunFinishedParams) => this.onRunFinished(p));
    client.onDidChangeState((e) => {
      // A server that stopped (or crashed and came back) streams nothing it streamed before: no run
      // stays "running" on its word; the list is asked for again, and the stepper's step re-sent.
      if (e.newState === State.Stopped) this.log("language server stopped");
      this.store.resetLive();
      if (e.newState === State.Running && this.conn.current(client)) {
        this.scheduleRefresh(0);
        setTimeout(() => {
          this.applyCursor({ openEditor: false });
          const chosen = this.chosen; // a flow the user went to while the server was down
          if (chosen && chosen !== this.flowUri && vscode.window.activeTextEditor?.document.uri.toString() === chosen) {
            void this.considerFlow(chosen);
          }
        }, 300);
      }
    });
  }

  private ready(): LanguageClient | undefined {
    return this.conn.ready();
  }

  private request<R>(method: string, params: unknown): Promise<R | undefined> {
    return this.conn.request<R>(method, params);
  }


  // ---- runs and steps ---------------------------------------------------------------------------

  private onEditorChange(editor: vscode.TextEditor | undefined): void {
    if (editor && editor.document.languageId === "python" && editor.document.uri.scheme === "file") {
      const uri = editor.document.uri.toString();
      if (uri !== this.navigatingTo) this.chosen = uri;
      if (uri !== this.flowUri && uri !== this.navigatingTo) { // (the stepper opening a step's file keeps its run)
        if (!this.flowUri) {
          this.setFlow(uri);
          this.scheduleRefresh();
        } else if (this.ready()) {
          void this.considerFlow(uri); // (with the server down, when it is back)
        }
      }
    }
    this.decorate();
  }

  /** The flow whose runs the view shows. */
  private setFlow(uri: string): void {
    this.flowUri = uri;
    this.tree.currentUri = uri;
  }

  /** The view moves to a file the editor shows only if it is a flow with runs: a module its actors
   * come from (stepping opens it), a file outside the workspace or one never run keeps the view
   * on its flow (a run of it takes the view over). */
  private async considerFlow(uri: string): Promise<void> {
    let result: RunsResult | undefined;
    try {
      result = await this.request<RunsResult>(Methods.runs, { uri });
    } catch {
      return; // not a file of the workspace: no flow of it
    }
    if (vscode.window.activeTextEditor?.document.uri.toString() !== uri) return;
    if (!result?.runs?.length) {
      // A module the stepper's run has actors in keeps the view on its flow; any other file that
      // never ran shows no other flow's step.
      const runId = this.stepper.runId;
      const fromRun = runId && this.store.steps(runId).slice(-2000).some((s) => sameUri(s.uri, uri));
      if (!fromRun && result) {
        this.setFlow(uri); // (the tree shows the runs of the file: none)
        this.tree.refresh();
        await this.selectRun(undefined);
      }
      return;
    }
    this.setFlow(uri);
    await this.applyRuns(result);
  }

  private scheduleRefresh(ms = 150): void {
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = undefined;
      void this.refreshRuns();
    }, ms);
  }

  async refreshRuns(): Promise<void> {
    if (!this.ready()) return;
    const asked = this.flowUri;
    let result: RunsResult | undefined;
    try {
      result = await this.request<RunsResult>(Methods.runs, asked ? { uri: asked } : {});
    } catch (e) {
      this.tell(`the runs cannot be listed: ${errorText(e)}`);
      return;
    }
    if (this.flowUri !== asked) return; // the view moved to another flow meanwhile: that one's list counts
    if (result) await this.applyRuns(result);
  }

  private async applyRuns(result: RunsResult): Promise<void> {
    this.store.setRuns(result.runs ?? []);
    const visible = this.tree.visibleRuns();
    const current = this.stepper.runId;
    if (!current || !visible.some((r) => r.runId === current)) {
      await this.selectRun(visible[0]?.runId);
    } else {
      this.updateStatus();
    }
  }

  /** Point the stepper at a run: at step `index`, else at its last step (what the hints show of
   *  a run nobody stepped through). */
  private async selectRun(runId: string | undefined, index = 0): Promise<void> {
    this.stepper.setRun(runId, runId ? this.store.total(runId) : 0, index || (runId ? this.store.total(runId) : 0));
    this.tree.cursor = { runId, step: this.stepper.index };
    this.tree.refresh();
    this.updateStatus();
    this.decorate();
    if (runId && !this.store.isLive(runId)) {
      await this.pages.ensureSteps(runId, index || undefined);
      if (this.stepper.runId === runId) {
        this.stepper.setTotal(this.store.total(runId));
        this.stepper.goTo(index || this.store.total(runId));
        this.applyCursor({ openEditor: false });
      }
    }
  }

  private onRunStarted(p: RunStartedParams): void {
    this.store.runStarted(p);
    const mine = this.follow.delete(p.runId);
    if (mine || (this.flowUri && sameUri(p.uri, this.flowUri)) || !this.flowUri) {
      if (!this.flowUri || !sameUri(p.uri, this.flowUri)) {
        this.setFlow(p.uri); // a run of another flow, started here: the view goes with it, earlier runs too
        this.scheduleRefresh();
      }
      // A run started elsewhere (a terminal) is shown; it takes the stepper only from one at rest
      // (no step, or the last step of a finished run), and only a run started here is followed.
      if (!mine && this.stepper.runId && !this.atRest()) return;
      const selected = this.selectRun(p.runId);
      if (mine) this.stepper.follow = vscode.workspace.getConfiguration("flowtape").get("stepper.followLiveRun", true);
      void selected.then(() => this.revealRun(p.runId));
    }
  }

  /** The stepper is on no step, or on the last step of a run that no longer grows. */
  private atRest(): boolean {
    const runId = this.stepper.runId;
    return !runId || this.stepper.index === 0 || (!this.store.isLive(runId) && this.stepper.index === this.stepper.total && this.stepper.inner === 0);
  }

  /** Show a run expanded in the view, once the view has drawn it. (Not through the tree's reveals,
   *  which hold its redraws: a run row is never lost by a redraw, and while the run streams its
   *  row must count the steps as they come.) */
  private revealRun(runId: string, attempt = 0): void {
    if (!this.view.visible) return;
    setTimeout(() => {
      this.view.reveal(this.tree.runNode(runId), { expand: true, select: false, focus: false }).then(undefined, () => {
        if (attempt < 5) this.revealRun(runId, attempt + 1);
      });
    }, 100 + attempt * 200);
  }

  private onRunFinished(p: RunFinishedParams): void {
    this.store.runFinished(p.runId, p.status);
    this.graphView.onRunFinished(p);
    const mine = this.mine.delete(p.runId);
    // The server's hints go to a newer run's last step when it finishes; the stepper's step stays "now".
    const runId = this.stepper.runId;
    const step = this.currentStep();
    if (runId && runId !== p.runId && step) this.conn.notify(Methods.selectStep, { runId, step: step.step });
    if (p.replayStopped?.length) {
      this.store.markDiverged(p.runId, p.replayStopped.map((d) => d.step).filter((n) => Number.isInteger(n)));
    }
    tellFinished(p, mine, (runId) => void this.openOutputs(runId));
    this.scheduleRefresh(200);
  }

  private onStoreChange(changed: Set<string>): void {
    const runId = this.stepper.runId;
    if (runId && changed.has(runId)) {
      const moved = this.stepper.setTotal(this.store.total(runId));
      if (moved) this.applyCursor({ openEditor: false });
      else this.updateStatus();
    }
  }

  // ---- the stepper --------------------------------------------------------------------------------

  private currentStep(): StepInfo | undefined {
    const runId = this.stepper.runId;
    return runId && this.stepper.index > 0 ? this.store.step(runId, this.stepper.index) : undefined;
  }

  /** The stepper's step as the status bar and the line marker show it. */
  private now(): Now {
    const runId = this.stepper.runId;
    const step = this.currentStep();
    const detail = this.currentFiring();
    const of = runId && step ? this.pages.knownInner(runId, step.step)?.length ?? 0 : 0;
    return {
      runId, run: runId ? this.store.run(runId) : undefined, index: this.stepper.index, total: this.stepper.total, step,
      firing: detail ? { detail, at: this.stepper.inner, of } : undefined,
    };
  }

  private updateStatus(): void {
    this.graphView.onStepper();
    this.marks.showStatus(this.now());
  }

  private decorate(): void {
    this.marks.decorate(this.now());
  }

  private async move(fn: (s: Stepper) => boolean): Promise<void> {
    if (!this.stepper.runId && !this.conn.up()) return;
    if (!this.stepper.runId) {
      await this.refreshRuns();
      if (!this.stepper.runId) {
        void vscode.window.showInformationMessage("Flowtape: no run to step through. Run the flow first (▶ Run).");
        return;
      }
    }
    const runId = this.stepper.runId;
    if (runId && !this.store.isLive(runId) && !this.store.step(runId, 1)) {
      await this.pages.ensureSteps(runId);
      if (this.stepper.runId !== runId) return; // another run was chosen while its steps loaded
    }
    if (runId) this.stepper.setTotal(this.store.total(runId));
    this.stepper.follow = false;
    fn(this.stepper);
    if (runId && this.stepper.index > 0 && !this.store.step(runId, this.stepper.index)) {
      const at = this.stepper.index;
      this.updateStatus(); // (the step number moves at once; its row and line when its page is in)
      await this.pages.loadRange(runId, at, at);
      if (this.stepper.runId !== runId || this.stepper.index !== at) return; // moved on meanwhile
    }
    if (this.stepper.index === this.stepper.total && this.store.isLive(runId ?? "")) {
      this.stepper.follow = vscode.workspace.getConfiguration("flowtape").get("stepper.followLiveRun", true);
    }
    this.applyCursor({ openEditor: true });
  }

  /** One "now": the status bar, the tree selection, the line marker, the hints (selectStep) and
   *  the detail panel all show the stepper's step (or the inner firing it is on). */
  private applyCursor(opts: { openEditor: boolean }): void {
    const runId = this.stepper.runId;
    const step = this.currentStep();
    const firing = this.currentFiring();
    this.tree.cursor = { runId, step: this.stepper.index, inner: firing ? this.stepper.inner : 0 };
    this.updateStatus();
    if (!runId || !step) {
      this.decorate();
      return;
    }
    this.select(runId, step.step); // (first: the hints' redraw takes the longest way round)
    if (this.view.visible) {
      const node = (firing && this.tree.firingNode(runId, step.step, this.stepper.inner)) || this.tree.stepNode(runId, step.step);
      void this.revealCursor(runId, node, firing ? undefined : false);
    }
    void this.showLine(firing ?? step, opts.openEditor);
  }

  /** Select the stepper's row in the view. Its parent (a step in the replayed region of a resumed
   *  run is in a group of its own) is read off the pages that say where that region ends: they are
   *  loaded first, else the parent VS Code is given would not be the one the tree draws once they
   *  are in, and the reveal would find no row. */
  private async revealCursor(runId: string, node: Node, expand: boolean | undefined): Promise<void> {
    const at = { index: this.stepper.index, inner: this.stepper.inner };
    const still = () => this.stepper.runId === runId && this.stepper.index === at.index && this.stepper.inner === at.inner; // else its own reveal follows
    await settleReplay(this.store, runId, (r, from, to) => this.pages.loadRange(r, from, to));
    if (!still()) return;
    const what = node instanceof FiringNode ? `inner firing ${node.index} of step ${node.step}` : `step ${at.index}`;
    await this.tree.reveal(node, { select: true, focus: false, expand }, `${what} of run ${shortRunId(runId)}`, still);
  }

  /** Tell the server the stepper's step (for hovers and hints) and refresh the detail panel; while
   *  the stepper follows a streaming run, at most every SELECT_MS (each selection has the server
   *  rebuild the run at that step: at every batch of steps, it slowed the streaming down). */
  private select(runId: string, step: number): void {
    this.selecting = { runId, step };
    if (!(this.stepper.follow && this.store.isLive(runId))) {
      this.flushSelect();
    } else if (!this.selectTimer) {
      this.selectTimer = setTimeout(() => this.flushSelect(), SELECT_MS);
    }
  }

  private flushSelect(): void {
    if (this.selectTimer) clearTimeout(this.selectTimer);
    this.selectTimer = undefined;
    const at = this.selecting;
    this.selecting = undefined;
    if (!at) return;
    this.conn.notify(Methods.selectStep, at);
    this.hints.stepped();
    if (this.detail.isOpen) void this.showDetail(false);
  }

  /** The step whose hints the files show: the stepper's (none: the server's choice, for every client). */
  private hintStep(): StepAt | undefined {
    const runId = this.stepper.runId;
    if (!runId || this.stepper.index === 0) return undefined;
    return { runId, step: this.stepper.index, total: this.stepper.total, following: this.stepper.follow && this.store.isLive(runId) };
  }

  /** The inner firing of a composite step the stepper is on, once the step's firings are known. */
  private currentFiring(): FiringDetail | undefined {
    const runId = this.stepper.runId;
    const step = this.currentStep();
    if (!runId || !step || this.stepper.inner === 0) return undefined;
    return this.pages.knownInner(runId, step.step)?.[this.stepper.inner - 1];
  }

  /** Step into (F11): from a composite step to its first inner firing, then on through them. */
  private async stepInto(): Promise<void> {
    const runId = this.stepper.runId;
    const step = this.currentStep();
    let count = 0;
    if (runId && step && this.stepper.inner === 0) {
      try {
        count = (await this.pages.innerOf(runId, step)).length;
      } catch (e) {
        this.tell(`step ${step.step}'s inner firings: ${errorText(e)}`);
        return;
      }
      if (this.stepper.runId !== runId || this.stepper.index !== step.step) return; // moved meanwhile
    }
    await this.move((s) => s.stepInto(count));
  }

  private async showLine(site: Pick<StepInfo, "uri" | "range">, openEditor: boolean): Promise<void> {
    let uri: vscode.Uri;
    try {
      uri = vscode.Uri.parse(site.uri);
    } catch {
      return;
    }
    let editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString());
    if (!editor && openEditor) {
      try {
        this.navigatingTo = uri.toString();
        // in the group that has the file's tab, if one has: not over the graph or the detail panel
        // the user clicked in (the active group then)
        const group = vscode.window.tabGroups.all.find((g) => g.tabs.some((t) => t.input instanceof vscode.TabInputText && t.input.uri.toString() === uri.toString()));
        editor = await vscode.window.showTextDocument(uri, { preserveFocus: true, preview: true, viewColumn: group?.viewColumn });
      } catch (e) {
        this.log(`cannot open ${site.uri}: ${String(e)}`);
      } finally {
        this.navigatingTo = undefined;
      }
    }
    this.decorate();
    if (editor) {
      const line = Math.min(site.range.start.line, editor.document.lineCount - 1);
      editor.revealRange(new vscode.Range(line, 0, line, 0), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
  }

  /** Ask for a step of `of` (the "… earlier steps" row of a run), else of the stepper's run. */
  private async goToPrompt(of?: string): Promise<void> {
    if (!this.stepper.runId && !this.conn.up()) return;
    if (of && of !== this.stepper.runId && this.store.run(of)) await this.selectRun(of);
    if (!this.stepper.runId) await this.refreshRuns();
    const runId = this.stepper.runId;
    if (!runId) {
      void vscode.window.showInformationMessage("Flowtape: no run to step through.");
      return;
    }
    await this.pages.ensureSteps(runId);
    if (this.stepper.runId !== runId) return; // another run was chosen meanwhile
    this.stepper.setTotal(this.store.total(runId));
    const n = await askGoTo(runId, this.stepper.index, () => this.stepper.total);
    if (n === undefined || this.stepper.runId !== runId) return; // (the box named that run)
    await this.move((s) => s.goTo(n));
  }

  // ---- actions ----------------------------------------------------------------------------------------

  private async stepFromArg(arg: unknown): Promise<{ runId: string; step: number } | undefined> {
    if (arg instanceof StepNode) return { runId: arg.runId, step: arg.step };
    const step = this.currentStep();
    if (step && this.stepper.runId) return { runId: this.stepper.runId, step: step.step };
    void vscode.window.showInformationMessage("Flowtape: pick a step first (Alt+] or click a step in the Flowtape view).");
    return undefined;
  }

  private async resume(arg?: unknown): Promise<void> {
    const at = await this.stepFromArg(arg);
    if (!at) return;
    const result = await this.conn.serverCommand<RunStartResult>(ServerCommands.resumeAtStep, at);
    if (result?.runId) this.followRun(result.runId);
  }

  private async rerunActor(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== "python") {
      void vscode.window.showInformationMessage("Flowtape: put the cursor on the line that creates an actor.");
      return;
    }
    if (!this.stepper.runId && !this.conn.up()) return;
    if (!this.stepper.runId) await this.refreshRuns();
    const runId = this.stepper.runId;
    if (!runId) {
      void vscode.window.showInformationMessage("Flowtape: this flow has no run yet.");
      return;
    }
    // The server finds the actor the line creates, as it finds it for hovers: in the text as the
    // editor holds it, inside a loop's body or a nested workflow, even one that never completed a firing.
    const line = editor.selection.active.line;
    const result = await this.conn.serverCommand<RunStartResult>(ServerCommands.rerunActor, {
      runId, uri: editor.document.uri.toString(), line,
    });
    if (result?.runId) this.followRun(result.runId);
  }

  /** The graph view on a run (a run row, else the stepper's), else on the open flow file. */
  private async showGraph(arg?: unknown): Promise<void> {
    if (!this.conn.up()) return;
    const runId = arg instanceof RunNode ? arg.runId : this.stepper.runId;
    if (runId) return this.graphView.show({ runId });
    const editor = vscode.window.activeTextEditor;
    if (editor?.document.languageId === "python") return this.graphView.show({ uri: editor.document.uri.toString() });
    void vscode.window.showInformationMessage("Flowtape: open a flow file (or pick a run) to see its graph.");
  }

  private async goToStep(runId: string, step: number): Promise<void> {
    if (this.stepper.runId !== runId) await this.selectRun(runId, step);
    await this.move((s) => s.goTo(step));
  }

  /** The stepper on inner firing `index` (1-based) of a composite step, as stepping into it reaches it. */
  private async goToFiring(runId: string, step: number, index: number): Promise<void> {
    await this.goToStep(runId, step);
    const info = this.currentStep();
    if (!info || info.step !== step) return;
    const inner = await this.pages.innerOf(runId, info);
    if (this.stepper.index !== step) return;
    this.stepper.stepInto(inner.length);
    while (this.stepper.inner < index && this.stepper.index === step && this.stepper.stepOver());
    this.applyCursor({ openEditor: true });
  }

  private followRun(runId: string): void {
    const run = this.store.run(runId);
    if (run) {
      if (run.uri && (!this.flowUri || !sameUri(run.uri, this.flowUri))) this.setFlow(run.uri);
      void this.selectRun(runId);
    } else {
      this.follow.add(runId);
    }
  }

  private async showDetail(reveal = true, arg?: unknown): Promise<void> {
    const at = arg instanceof StepNode ? { runId: arg.runId, step: arg.step } : await this.stepFromArg(undefined);
    if (!at) return;
    const firing = arg instanceof StepNode ? undefined : this.currentFiring();
    const run = this.store.run(at.runId);
    // a finished run's last step: its outputs too
    const outputs = run && run.status !== "running" && at.step === this.store.total(at.runId) ? run.outputs ?? undefined : undefined;
    const asked = ++this.detailAsked; // answers may come back out of order: only the latest shows
    try {
      const detail = await this.request<StepDetail>(Methods.stepDetail, at);
      if (detail && asked === this.detailAsked) this.detail.show(detail, reveal, { firing, outputs });
    } catch (e) {
      if (asked === this.detailAsked) this.tell(`step detail: ${errorText(e)}`);
    }
  }

  private registerCommands(): void {
    const reg = (id: string, fn: (...args: unknown[]) => unknown) =>
      this.disposables.push(vscode.commands.registerCommand(id, fn));
    reg("flowtape.stepper.previous", () => this.move((s) => s.previous()));
    reg("flowtape.stepper.stepInto", () => this.stepInto());
    reg("flowtape.stepper.stepOver", () => this.move((s) => s.stepOver()));
    reg("flowtape.stepper.stepOut", () => this.move((s) => s.stepOut()));
    reg("flowtape.stepper.nextOfActor", () => this.finder.nextOfActor("next"));
    reg("flowtape.stepper.previousOfActor", () => this.finder.nextOfActor("previous"));
    reg("flowtape.view.filterActor", (arg) => this.finder.filterActor(arg));
    reg("flowtape.view.findValue", (arg) => this.finder.findValue(arg));
    reg("flowtape.view.clearFilter", (arg) => this.finder.clear(typeof arg === "string" ? arg : undefined));
    reg("flowtape.view.openOutputs", (runId, port) => this.openOutputs(runId, port));
    reg("flowtape.stepper.next", () => this.move((s) => s.next()));
    reg("flowtape.stepper.first", () => this.move((s) => s.first()));
    reg("flowtape.stepper.last", () => this.move((s) => s.last()));
    reg("flowtape.stepper.goTo", (runId) => this.goToPrompt(typeof runId === "string" ? runId : undefined));
    reg("flowtape.stepper.resume", (arg) => this.resume(arg));
    reg("flowtape.stepper.rerunActor", () => this.rerunActor());
    reg("flowtape.stepper.showDetail", (arg) => this.showDetail(true, arg));
    reg("flowtape.view.refresh", async (arg) => {
      if (!this.conn.up()) return;
      if (arg && typeof arg === "object" && "uri" in arg && typeof arg.uri === "string") { // the "Runs (n)" lens: that flow's runs
        this.setFlow(arg.uri);
        await vscode.commands.executeCommand("flowtape.runs.focus");
      }
      await this.refreshRuns();
    });
    reg("flowtape.view.restartServer", () => this.restart());
    reg("flowtape.showGraph", (arg) => this.showGraph(arg));
    reg("flowtape.view.select", async (arg) => {
      if (arg instanceof FiringNode) await this.goToFiring(arg.runId, arg.step, arg.index);
      else if (arg instanceof StepNode) await this.goToStep(arg.runId, arg.step);
    });
    reg("flowtape.view.stopRun", async (arg) => {
      const runId = arg instanceof RunNode ? arg.runId : this.stepper.runId;
      if (runId) await this.conn.serverCommand(ServerCommands.stop, { runId });
    });
    // Selecting a run row makes it the stepper's run.
    this.disposables.push(
      this.view.onDidChangeSelection((e) => {
        const node = e.selection[0];
        if (node instanceof RunNode && node.runId !== this.stepper.runId) void this.selectRun(node.runId);
      }),
    );
  }

  /** A server command run from a code lens: its error said with what the server said, once (not
   *  a second toast from the command's rejection). */
  private async tryCommand(command: string, args: unknown[], next: (command: string, args: unknown[]) => unknown): Promise<unknown> {
    try {
      return await next(command, args);
    } catch (e) {
      commandFailed(command, e);
      return undefined;
    }
  }

  /** A server error the user must see, once (the same error again stays in the output channel). */
  private tell(message: string): void {
    if (this.told.has(message)) return;
    this.told.add(message);
    void vscode.window.showErrorMessage(`Flowtape: ${message}`);
  }

  /** Ask for the step to resume a run at (the run's last step offered); undefined if cancelled. */
  /** The step to resume `runId` at; null: where it stopped (no step: after its last, and inside
   * the loop item, if branch or nested workflow it stopped in), the default for a run that failed
   * or was stopped. */
  private async askStep(runId: string): Promise<number | null | undefined> {
    const known = this.store.run(runId);
    let total = known?.steps;
    if (total === undefined) {
      try {
        total = (await this.request<GetStepsResult>(Methods.getSteps, { runId, from: 1, limit: 1 }))?.total;
      } catch (e) {
        this.tell(`run ${shortRunId(runId)}: ${errorText(e)}`);
        return undefined;
      }
    }
    return askResumeStep(runId, total ?? 0, known?.status === "failed" || known?.status === "stopped");
  }

  private openOutputs(runId: unknown, port?: unknown): Promise<void> {
    return openOutputs((m, p) => this.request(m, p), (m) => this.tell(m), runId, port);
  }

  log(line: string): void {
    this.output.appendLine(`[flowtape] ${line}`);
  }

  async dispose(): Promise<void> {
    for (const d of this.disposables) d.dispose();
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    if (this.selectTimer) clearTimeout(this.selectTimer);
    await this.conn.stop();
  }
}

function isRunParams(arg: unknown): arg is { uri: string; workflow?: string; inputs?: Record<string, unknown> } {
  return !!arg && typeof arg === "object" && typeof (arg as { uri?: unknown }).uri === "string";
}

function isRunOnly(arg: unknown): arg is { runId: string } {
  return !!arg && typeof arg === "object" && typeof (arg as { runId?: unknown }).runId === "string" && (arg as { step?: unknown }).step === undefined;
}



let instance: Flowtape | undefined;

export function activate(context: vscode.ExtensionContext): { flowtape: Flowtape } {
  instance = new Flowtape(context);
  context.subscriptions.push({ dispose: () => void instance?.dispose() });
  void instance.start();
  instance.log(`activated (${path.basename(context.extensionPath)})`);
  return { flowtape: instance };
}

export async function deactivate(): Promise<void> {
  const i = instance;
  instance = undefined;
  await i?.dispose();
}

