/**
 * Flowtape for VS Code: starts `<python> -m flowtape lsp`, shows runs and steps in the Flowtape
 * view, and drives the stepper (status bar, keybindings, line highlight, resume, rerun actor).
 */
import * as vscode from "vscode";
import * as path from "node:path";
import {
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";
import { StepStore } from "./core/stepStore";
import { Stepper, parseGoTo } from "./core/stepper";
import { statusText, stepLabel, shortRunId } from "./core/format";
import {
  Methods,
  ServerCommands,
  type GetStepsResult,
  type RunFinishedParams,
  type RunStartResult,
  type RunStartedParams,
  type RunsResult,
  type StepDetail,
  type StepInfo,
  type StepsParams,
} from "./core/protocol";
import { RunsTreeProvider, StepNode, RunNode, sameUri, type Node } from "./runsTree";
import { DetailPanel } from "./detail";
import { GraphPanel } from "./graphPanel";
import { checkFlowtape, choosePython } from "./python";
import { WhatIf, type WhatIfHost } from "./whatif";
import { FiringDebugger } from "./debug";

const PAGE = 5000; // steps a getSteps page asks for (the server gives up to 10,000)

class Flowtape implements vscode.Disposable {
  readonly store = new StepStore({ batchMs: 50 });
  readonly stepper = new Stepper();
  readonly tree: RunsTreeProvider;
  readonly view: vscode.TreeView<Node>;
  readonly output = vscode.window.createOutputChannel("Flowtape");
  private client: LanguageClient | undefined;
  private restrictedLenses: vscode.Disposable | undefined;
  private starting: Promise<void> | undefined;
  private readonly status: vscode.StatusBarItem;
  private readonly resumeItem: vscode.StatusBarItem;
  private readonly lineDecoration: vscode.TextEditorDecorationType;
  private readonly detail = new DetailPanel();
  readonly graphView: GraphPanel;
  private readonly loading = new Map<string, Promise<void>>();
  private readonly disposables: vscode.Disposable[] = [];
  private flowUri: string | undefined;
  /** The file the stepper is opening to show a step (its opening is no choice of another flow). */
  private navigatingTo: string | undefined;
  /** The Python file the user last went to (not one the stepper opened). */
  private chosen: string | undefined;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  /** A run we asked for (resume/rerun) whose runStarted the stepper should follow. */
  private readonly follow = new Set<string>();
  private detailAsked = 0;
  /** Server errors already shown, so that a damaged run says so once, not at every keypress. */
  private readonly told = new Set<string>();

  constructor(private readonly context: vscode.ExtensionContext) {
    this.tree = new RunsTreeProvider(this.store);
    this.graphView = new GraphPanel(context.extensionUri, {
      request: async <T>(method: string, params: unknown): Promise<T> => {
        const answer = await this.request<T>(method, params);
        if (answer === undefined) throw new Error("the language server is not running");
        return answer;
      },
      store: this.store,
      stepper: () => this.stepper.state,
      goTo: (runId, step) => this.goToStep(runId, step),
      log: (line) => this.log(line),
    });
    this.tree.loadSteps = (runId) => this.loadSteps(runId);
    this.view = vscode.window.createTreeView("flowtape.runs", { treeDataProvider: this.tree, showCollapseAll: true });
    this.status = vscode.window.createStatusBarItem("flowtape.stepper", vscode.StatusBarAlignment.Left, 50);
    this.status.name = "Flowtape Stepper";
    this.status.command = "flowtape.stepper.goTo";
    this.resumeItem = vscode.window.createStatusBarItem("flowtape.resume", vscode.StatusBarAlignment.Left, 49);
    this.resumeItem.name = "Flowtape Resume";
    this.resumeItem.text = "$(history) Resume";
    this.resumeItem.tooltip = "⟲ Resume from here: a new run that replays up to this step, then runs live";
    this.resumeItem.command = "flowtape.stepper.resume";
    this.lineDecoration = vscode.window.createTextEditorDecorationType({
      isWholeLine: true,
      backgroundColor: new vscode.ThemeColor("flowtape.stepLineBackground"),
      overviewRulerColor: new vscode.ThemeColor("editorOverviewRuler.findMatchForeground"),
      overviewRulerLane: vscode.OverviewRulerLane.Center,
    });
    this.disposables.push(
      this.view,
      this.output,
      this.status,
      this.resumeItem,
      this.lineDecoration,
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
      serverCommand: (command, params) => this.serverCommand(command, params),
      current: () => (this.stepper.runId ? { runId: this.stepper.runId, step: this.stepper.index } : undefined),
      run: (runId) => this.store.run(runId),
      followRun: (runId) => this.followRun(runId),
      tell: (message) => this.tell(message),
    };
    this.disposables.push(new WhatIf(host), new FiringDebugger(host, async (resource) => (await choosePython(resource)).python, this.output));
  }

  // ---- server ----------------------------------------------------------------------------------

  start(): Promise<void> {
    if (!this.starting) {
      this.starting = this.startClient().finally(() => (this.starting = undefined));
    }
    return this.starting;
  }

  async restart(): Promise<void> {
    await this.starting?.catch(() => undefined); // a start under way finishes first: then it is redone
    const old = this.client;
    this.client = undefined;
    if (old) {
      try {
        await old.stop(5000);
      } catch (e) {
        this.log(`stopping the server: ${String(e)}`);
      }
    }
    await this.start();
  }

  private async startClient(): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      this.restricted(); // (the interpreter itself may be the folder's: not even it is started)
      return;
    }
    const resource = vscode.window.activeTextEditor?.document.uri;
    const { python, source } = await choosePython(resource);
    const cwd = (resource && vscode.workspace.getWorkspaceFolder(resource)?.uri.fsPath) ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    this.log(`python: ${python} (from ${source})`);
    const problem = await checkFlowtape(python, cwd);
    if (problem) {
      this.log(`cannot import flowtape with ${python}: ${problem}`);
      void this.offerFix(python, problem);
      return;
    }
    const extra = vscode.workspace.getConfiguration("flowtape").get<string[]>("server.extraArgs", []);
    const serverOptions: ServerOptions = {
      command: python,
      args: ["-m", "flowtape", "lsp", ...extra],
      transport: TransportKind.stdio,
      options: { cwd },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file", language: "python" }],
      outputChannel: this.output,
      traceOutputChannel: this.output,
      // What this client implements itself (docs/protocol.md, "Initialization options"): its runs
      // view, and asking for the step of a "⟲ Resume at step…" lens (the middleware below).
      // (trust: a trusted folder, whose files inside it the server runs and imports: docs/protocol.md, "Trust")
      initializationOptions: { clientCommands: ["flowtape.view.refresh"], asksForStep: true, trust: "workspace" },
      middleware: {
        // The "⟲ Resume at step…" lens names the run only: ask for the step, as its title says.
        executeCommand: async (command, args, next) => {
          if (command === ServerCommands.resumeAtStep && isRunOnly(args[0])) {
            const at = await this.askStep(args[0].runId);
            if (at === undefined) return undefined;
            if (at !== null) args = [{ ...args[0], step: at }]; // (null: no step, where the run stopped)
          }
          args = withPlacement(command, args);
          if (command === ServerCommands.resumeAtStep || command === ServerCommands.run) {
            const result = (await this.tryCommand(command, args, next)) as RunStartResult | undefined;
            if (result?.runId) this.followRun(result.runId);
            return result;
          }
          return this.tryCommand(command, args, next);
        },
      },
    };
    const client = new LanguageClient("flowtape", "Flowtape", serverOptions, clientOptions);
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
      if (e.newState === State.Running && this.client === client) {
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
    this.client = client;
    try {
      await client.start();
      this.log("language server started");
      this.onEditorChange(vscode.window.activeTextEditor);
      this.scheduleRefresh(0);
    } catch (e) {
      this.log(`starting the server failed: ${String(e)}`);
      void vscode.window
        .showErrorMessage(`Flowtape: the language server (${python} -m flowtape lsp) did not start: ${errorText(e)}`, "Show Output", "Choose Interpreter")
        .then((pick) => {
          if (pick === "Show Output") this.output.show(true);
          else if (pick === "Choose Interpreter") void vscode.commands.executeCommand("workbench.action.openSettings", "flowtape.python");
        });
    }
  }

  /** An untrusted folder (VS Code's Workspace Trust): Flowtape runs nothing, and its lenses say why. */
  private restricted(): void {
    this.log("this folder is not trusted: Flowtape runs nothing in it (no server, no runs, no flow imported)");
    if (this.restrictedLenses) return;
    this.restrictedLenses = vscode.languages.registerCodeLensProvider(
      { scheme: "file", language: "python" },
      { provideCodeLenses: (doc) => restrictedLenses(doc) },
    );
    this.disposables.push(
      this.restrictedLenses,
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        this.restrictedLenses?.dispose();
        this.restrictedLenses = undefined;
        void this.start();
      }),
    );
  }

  private async offerFix(python: string, problem: string): Promise<void> {
    const install = "Install Flowtape";
    const choose = "Choose Interpreter";
    const pick = await vscode.window.showErrorMessage(
      `Flowtape: ${python} cannot import flowtape (${problem}).`,
      install,
      choose,
    );
    if (pick === install) {
      const term = vscode.window.createTerminal("Flowtape install");
      term.show();
      term.sendText(`${shellQuote(python)} -m pip install flowtape`);
      const again = await vscode.window.showInformationMessage("When pip is done, restart the Flowtape server.", "Restart Server");
      if (again) await this.restart();
    } else if (pick === choose) {
      await vscode.commands.executeCommand("workbench.action.openSettings", "flowtape.python");
    }
  }

  private ready(): LanguageClient | undefined {
    const c = this.client;
    if (!c || !c.isRunning()) return undefined;
    return c;
  }

  private async request<R>(method: string, params: unknown): Promise<R | undefined> {
    const c = this.ready();
    if (!c) return undefined;
    try {
      return await c.sendRequest<R>(method, params);
    } catch (e) {
      this.log(`${method} failed: ${errorText(e)}`);
      throw e;
    }
  }

  private async serverCommand<R>(command: string, params: unknown): Promise<R | undefined> {
    const c = this.ready();
    if (!c) {
      void vscode.window.showWarningMessage("Flowtape: the language server is not running.");
      return undefined;
    }
    try {
      return (await c.sendRequest(ExecuteCommandRequest.type, { command, arguments: withPlacement(command, [params]) })) as R;
    } catch (e) {
      this.commandFailed(command, e);
      return undefined;
    }
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
    if (!result?.runs?.length || vscode.window.activeTextEditor?.document.uri.toString() !== uri) return;
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

  /** Load all steps of a run that is not streaming, page by page. */
  loadSteps(runId: string): Promise<void> {
    const existing = this.loading.get(runId);
    if (existing) return existing;
    const job = (async () => {
      for (let guard = 0; guard < 10000; guard++) {
        const from = this.store.loadedCount(runId) + 1;
        let page: GetStepsResult | undefined;
        try {
          page = await this.request<GetStepsResult>(Methods.getSteps, { runId, from, limit: PAGE });
        } catch (e) {
          this.store.setError(runId, errorText(e)); // shown under the run, instead of no steps
          this.tell(`run ${shortRunId(runId)}: ${errorText(e)}`);
          return;
        }
        if (!page) return;
        this.store.clearError(runId); // an earlier failure (a restart mid-load, say) is over
        this.store.putSteps(runId, page.steps ?? [], page.total);
        if (!page.steps?.length || this.store.loadedCount(runId) >= page.total) return;
      }
    })().finally(() => this.loading.delete(runId));
    this.loading.set(runId, job);
    return job;
  }

  private async selectRun(runId: string | undefined, index = 0): Promise<void> {
    this.stepper.setRun(runId, runId ? this.store.loadedCount(runId) : 0, index);
    this.tree.cursor = { runId, step: this.stepper.index };
    this.tree.refresh();
    this.updateStatus();
    this.decorate();
    if (runId && !this.store.isLive(runId) && !this.store.complete(runId)) {
      await this.loadSteps(runId);
      if (this.stepper.runId === runId) {
        this.stepper.setTotal(this.store.loadedCount(runId));
        if (index) this.stepper.goTo(index);
        this.updateStatus();
        this.decorate();
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
      // A run started elsewhere (a terminal) is shown; it takes the stepper only from no step, and
      // only a run started here is followed.
      if (!mine && this.stepper.runId && this.stepper.index > 0) return;
      void this.selectRun(p.runId).then(() => {
        if (mine) this.stepper.follow = vscode.workspace.getConfiguration("flowtape").get("stepper.followLiveRun", true);
        this.revealRun(p.runId);
      });
    }
  }

  /** Show a run expanded in the view (after the view has drawn it). */
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
    if (p.replayStopped?.length) {
      this.store.markDiverged(p.runId, p.replayStopped.map((d) => d.step).filter((n) => Number.isInteger(n)));
      const d = p.replayStopped[0];
      void vscode.window.showWarningMessage(
        `Flowtape: replay of run ${shortRunId(p.runId)} diverged at step ${d.step} (${d.actor}, fire ${d.fireCount}): ${d.reason}`,
      );
    } else if (p.status === "failed" && p.error) {
      void vscode.window.showErrorMessage(`Flowtape: run ${shortRunId(p.runId)} failed: ${p.error}`);
    }
    this.scheduleRefresh(200);
  }

  private onStoreChange(changed: Set<string>): void {
    const runId = this.stepper.runId;
    if (runId && changed.has(runId)) {
      const moved = this.stepper.setTotal(this.store.loadedCount(runId));
      if (moved) this.applyCursor({ openEditor: false });
      else this.updateStatus();
    }
  }

  // ---- the stepper --------------------------------------------------------------------------------

  private currentStep(): StepInfo | undefined {
    const runId = this.stepper.runId;
    return runId && this.stepper.index > 0 ? this.store.step(runId, this.stepper.index) : undefined;
  }

  private updateStatus(): void {
    this.graphView.onStepper();
    const runId = this.stepper.runId;
    void vscode.commands.executeCommand("setContext", "flowtape.hasRun", !!runId);
    void vscode.commands.executeCommand("setContext", "flowtape.hasStep", !!this.currentStep());
    if (!runId) {
      this.status.hide();
      this.resumeItem.hide();
      return;
    }
    const step = this.currentStep();
    this.status.text = `$(debug-step-over) ${statusText(this.stepper.index, this.stepper.total, step?.actor)}`;
    const run = this.store.run(runId);
    this.status.tooltip = new vscode.MarkdownString(
      `Flowtape stepper — run \`${runId}\`${run ? ` (${run.status})` : ""}\n\n` +
        (step ? `${stepLabel(step)}${step.replayed ? " · replayed" : ""}${step.diverged ? " · diverged" : ""}\n\n` : "") +
        "Alt+[ / Alt+] step, Alt+Home / Alt+End first/last, Alt+G go to step",
    );
    this.status.show();
    if (step) this.resumeItem.show();
    else this.resumeItem.hide();
  }

  private async move(fn: (s: Stepper) => boolean): Promise<void> {
    if (!this.stepper.runId && !this.serverUp()) return;
    if (!this.stepper.runId) {
      await this.refreshRuns();
      if (!this.stepper.runId) {
        void vscode.window.showInformationMessage("Flowtape: no run to step through. Run the flow first (▶ Run).");
        return;
      }
    }
    const runId = this.stepper.runId;
    if (runId && !this.store.isLive(runId) && !this.store.complete(runId)) {
      await this.loadSteps(runId);
      if (this.stepper.runId !== runId) return; // another run was chosen while its steps loaded
      this.stepper.setTotal(this.store.loadedCount(runId));
    }
    this.stepper.follow = false;
    fn(this.stepper);
    if (this.stepper.index === this.stepper.total && this.store.isLive(runId ?? "")) {
      this.stepper.follow = vscode.workspace.getConfiguration("flowtape").get("stepper.followLiveRun", true);
    }
    this.applyCursor({ openEditor: true });
  }

  private applyCursor(opts: { openEditor: boolean }): void {
    const runId = this.stepper.runId;
    const step = this.currentStep();
    this.tree.cursor = { runId, step: this.stepper.index };
    this.updateStatus();
    if (!runId || !step) {
      this.decorate();
      return;
    }
    if (this.view.visible) {
      void this.view.reveal(this.tree.stepNode(runId, step.step), { select: true, focus: false }).then(undefined, () => undefined);
    }
    void this.showLine(step, opts.openEditor);
    const c = this.ready();
    if (c) void c.sendNotification(Methods.selectStep, { runId, step: step.step }).then(undefined, () => undefined);
    if (this.detail.isOpen) void this.showDetail(false);
  }

  private async showLine(step: StepInfo, openEditor: boolean): Promise<void> {
    let uri: vscode.Uri;
    try {
      uri = vscode.Uri.parse(step.uri);
    } catch {
      return;
    }
    let editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString());
    if (!editor && openEditor) {
      try {
        this.navigatingTo = uri.toString();
        editor = await vscode.window.showTextDocument(uri, { preserveFocus: true, preview: true });
      } catch (e) {
        this.log(`cannot open ${step.uri}: ${String(e)}`);
      } finally {
        this.navigatingTo = undefined;
      }
    }
    this.decorate();
    if (editor) {
      const line = Math.min(step.range.start.line, editor.document.lineCount - 1);
      editor.revealRange(new vscode.Range(line, 0, line, 0), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
  }

  /** Highlight the creation line of the current step's actor in every editor showing its file. */
  private decorate(): void {
    const step = this.currentStep();
    for (const editor of vscode.window.visibleTextEditors) {
      if (step && sameUri(editor.document.uri.toString(), step.uri)) {
        const line = Math.min(step.range.start.line, editor.document.lineCount - 1);
        const range = new vscode.Range(line, 0, line, 0);
        editor.setDecorations(this.lineDecoration, [
          {
            range,
            hoverMessage: `Flowtape step ${stepLabel(step)}${step.replayed ? " (replayed)" : ""}`,
            renderOptions: {
              after: {
                contentText: `  ◀ step ${step.step} · fire ${step.fireCount}${step.replayed ? " · replayed" : ""}`,
                color: new vscode.ThemeColor("editorCodeLens.foreground"),
              },
            },
          },
        ]);
      } else {
        editor.setDecorations(this.lineDecoration, []);
      }
    }
  }

  /** Ask for a step of `of` (the "… earlier steps" row of a run), else of the stepper's run. */
  private async goToPrompt(of?: string): Promise<void> {
    if (!this.stepper.runId && !this.serverUp()) return;
    if (of && of !== this.stepper.runId && this.store.run(of)) await this.selectRun(of);
    if (!this.stepper.runId) await this.refreshRuns();
    const runId = this.stepper.runId;
    if (!runId) {
      void vscode.window.showInformationMessage("Flowtape: no run to step through.");
      return;
    }
    if (!this.store.isLive(runId)) await this.loadSteps(runId);
    if (this.stepper.runId !== runId) return; // another run was chosen meanwhile
    this.stepper.setTotal(this.store.loadedCount(runId));
    const total = this.stepper.total;
    const value = await vscode.window.showInputBox({
      title: `Go to step (run ${shortRunId(runId)})`,
      prompt: `A step from 1 to ${total}, "first", "last", or +N / -N`,
      value: this.stepper.index ? String(this.stepper.index) : "",
      validateInput: (text) => {
        const r = parseGoTo(text, this.stepper.index, this.stepper.total);
        return typeof r === "string" ? r : undefined;
      },
    });
    if (value === undefined || this.stepper.runId !== runId) return; // (the box named that run)
    const n = parseGoTo(value, this.stepper.index, this.stepper.total);
    if (typeof n === "number") await this.move((s) => s.goTo(n));
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
    const result = await this.serverCommand<RunStartResult>(ServerCommands.resumeAtStep, at);
    if (result?.runId) this.followRun(result.runId);
  }

  private async rerunActor(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== "python") {
      void vscode.window.showInformationMessage("Flowtape: put the cursor on the line that creates an actor.");
      return;
    }
    if (!this.stepper.runId && !this.serverUp()) return;
    if (!this.stepper.runId) await this.refreshRuns();
    const runId = this.stepper.runId;
    if (!runId) {
      void vscode.window.showInformationMessage("Flowtape: this flow has no run yet.");
      return;
    }
    // The server finds the actor the line creates, as it finds it for hovers: in the text as the
    // editor holds it, inside a loop's body or a nested workflow, even one that never completed a firing.
    const line = editor.selection.active.line;
    const result = await this.serverCommand<RunStartResult>(ServerCommands.rerunActor, {
      runId, uri: editor.document.uri.toString(), line,
    });
    if (result?.runId) this.followRun(result.runId);
  }

  /** The graph view on a run (a run row, else the stepper's), else on the open flow file. */
  private async showGraph(arg?: unknown): Promise<void> {
    if (!this.serverUp()) return;
    const runId = arg instanceof RunNode ? arg.runId : this.stepper.runId;
    if (runId) return this.graphView.show({ runId });
    const editor = vscode.window.activeTextEditor;
    if (editor?.document.languageId === "python") return this.graphView.show({ uri: editor.document.uri.toString() });
    void vscode.window.showInformationMessage("Flowtape: open a flow file (or pick a run) to see its graph.");
  }

  private async goToStep(runId: string, step: number): Promise<void> {
    if (this.stepper.runId !== runId) await this.selectRun(runId);
    await this.move((s) => s.goTo(step));
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
    const asked = ++this.detailAsked; // answers may come back out of order: only the latest shows
    try {
      const detail = await this.request<StepDetail>(Methods.stepDetail, at);
      if (detail && asked === this.detailAsked) this.detail.show(detail, reveal);
    } catch (e) {
      if (asked === this.detailAsked) this.tell(`step detail: ${errorText(e)}`);
    }
  }

  private registerCommands(): void {
    const reg = (id: string, fn: (...args: unknown[]) => unknown) =>
      this.disposables.push(vscode.commands.registerCommand(id, fn));
    reg("flowtape.stepper.previous", () => this.move((s) => s.previous()));
    reg("flowtape.stepper.next", () => this.move((s) => s.next()));
    reg("flowtape.stepper.first", () => this.move((s) => s.first()));
    reg("flowtape.stepper.last", () => this.move((s) => s.last()));
    reg("flowtape.stepper.goTo", (runId) => this.goToPrompt(typeof runId === "string" ? runId : undefined));
    reg("flowtape.stepper.resume", (arg) => this.resume(arg));
    reg("flowtape.stepper.rerunActor", () => this.rerunActor());
    reg("flowtape.stepper.showDetail", (arg) => this.showDetail(true, arg));
    reg("flowtape.view.refresh", async (arg) => {
      if (!this.serverUp()) return;
      if (arg && typeof arg === "object" && "uri" in arg && typeof arg.uri === "string") { // the "Runs (n)" lens: that flow's runs
        this.setFlow(arg.uri);
        await vscode.commands.executeCommand("flowtape.runs.focus");
      }
      await this.refreshRuns();
    });
    reg("flowtape.view.restartServer", () => this.restart());
    reg("flowtape.showGraph", (arg) => this.showGraph(arg));
    reg("flowtape.view.select", async (arg) => {
      if (!(arg instanceof StepNode)) return;
      if (this.stepper.runId !== arg.runId) await this.selectRun(arg.runId);
      await this.move((s) => s.goTo(arg.step));
    });
    reg("flowtape.view.stopRun", async (arg) => {
      const runId = arg instanceof RunNode ? arg.runId : this.stepper.runId;
      if (runId) await this.serverCommand(ServerCommands.stop, { runId });
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
      this.commandFailed(command, e);
      return undefined;
    }
  }

  private commandFailed(command: string, e: unknown): void {
    void vscode.window.showErrorMessage(`Flowtape: ${command}: ${errorText(e)}`);
  }

  /** Whether the server runs; if not, say so once a command needs it, with a way to restart it. */
  private serverUp(): boolean {
    if (this.ready()) return true;
    void vscode.window
      .showWarningMessage("Flowtape: the language server is not running.", "Restart Server", "Show Output")
      .then((pick) => {
        if (pick === "Restart Server") void this.restart();
        else if (pick === "Show Output") this.output.show(true);
      });
    return false;
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
    const last = total ?? 0;
    const broken = known?.status === "failed" || known?.status === "stopped";
    const value = await vscode.window.showInputBox({
      title: `Resume run ${shortRunId(runId)} at step`,
      prompt:
        `A step from 0 to ${last}: the steps up to it are replayed from the tape, the rest runs live. ` +
        `Empty: where the run stopped, inside the loop item, if branch or nested workflow it stopped in too`,
      placeHolder: `empty: where it stopped (after step ${last})`,
      value: broken ? "" : String(last),
      validateInput: (text) => {
        const n = Number(text.trim());
        return text.trim() === "" || (/^\d+$/.test(text.trim()) && n <= last) ? undefined : `a whole number from 0 to ${last}, or empty`;
      },
    });
    if (value === undefined) return undefined;
    return value.trim() === "" ? null : Number(value.trim());
  }

  log(line: string): void {
    this.output.appendLine(`[flowtape] ${line}`);
  }

  async dispose(): Promise<void> {
    for (const d of this.disposables) d.dispose();
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    const c = this.client;
    this.client = undefined;
    if (c) await c.stop(3000).catch(() => undefined);
  }
}

function isRunOnly(arg: unknown): arg is { runId: string } {
  return !!arg && typeof arg === "object" && typeof (arg as { runId?: unknown }).runId === "string" && (arg as { step?: unknown }).step === undefined;
}

/** On each `@workflow` line of an untrusted folder's file: why there is no "▶ Run". */
function restrictedLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
  const lenses: vscode.CodeLens[] = [];
  for (let line = 0; line < doc.lineCount; line++) {
    if (/^\s*@\s*(?:[A-Za-z_][\w.]*\.)?workflow\b/.test(doc.lineAt(line).text)) {
      lenses.push(new vscode.CodeLens(new vscode.Range(line, 0, line, 0), {
        title: "🔒 Flowtape runs nothing in a folder you have not trusted",
        command: "workbench.trust.manage",
        tooltip: "Flows are Python code: trust this folder to run, resume and check them",
      }));
    }
  }
  return lenses;
}

function errorText(e: unknown): string {
  if (e && typeof e === "object" && "message" in e) return String((e as { message: unknown }).message);
  return String(e);
}

function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
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

const STARTS_A_RUN: readonly string[] = [ServerCommands.run, ServerCommands.resumeAtStep, ServerCommands.rerunActor];

/** The settings flowtape.executor and flowtape.rayAddress, under what a run-starting command's own params say. */
function withPlacement(command: string, args: unknown[]): unknown[] {
  const first = args[0];
  if (!STARTS_A_RUN.includes(command) || typeof first !== "object" || first === null) return args;
  const config = vscode.workspace.getConfiguration("flowtape");
  const executor = config.get<string>("executor", "threads");
  const rayAddress = config.get<string>("rayAddress", "").trim();
  const placement: Record<string, string> = {};
  if (executor === "ray") {
    placement.executor = "ray";
    if (rayAddress) placement.rayAddress = rayAddress;
  }
  return [{ ...placement, ...first }, ...args.slice(1)];
}
