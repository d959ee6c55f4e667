/**
 * "Debug this firing": a debug configuration type (`flowtape`) whose adapter is debugpy, started by
 * `python -m flowtape debug RUN --step N --port 0`: the run replays up to that firing, which runs
 * live under the debugger; VS Code's own debugger UI attaches to it (no Python extension needed).
 */
import * as vscode from "vscode";
import { spawn, type ChildProcess } from "node:child_process";
import { Methods, type FiringAtResult } from "./core/protocol";
import { shortRunId } from "./core/format";
import type { WhatIfHost } from "./whatif";

export const DEBUG_TYPE = "flowtape";
const LISTENING = /debugger listening on ([\d.]+):(\d+)/;
const STARTUP_MS = 120_000; // a long replay before the firing: the adapter is up only then

export interface FiringDebugConfiguration extends vscode.DebugConfiguration {
  run: string; // a run id or directory
  step: number;
  actor?: string;
  then?: "stop" | "live";
  justMyCode?: boolean;
}

function errorText(e: unknown): string {
  return e && typeof e === "object" && "message" in e ? String((e as { message: unknown }).message) : String(e);
}

export class FiringDebugger implements vscode.Disposable, vscode.DebugAdapterDescriptorFactory, vscode.DebugConfigurationProvider {
  private readonly disposables: vscode.Disposable[] = [];
  private readonly processes = new Map<string, ChildProcess>();

  constructor(
    private readonly host: WhatIfHost,
    private readonly python: (resource?: vscode.Uri) => Promise<string>,
    private readonly output: vscode.OutputChannel,
  ) {
    this.disposables.push(
      vscode.debug.registerDebugAdapterDescriptorFactory(DEBUG_TYPE, this),
      vscode.debug.registerDebugConfigurationProvider(DEBUG_TYPE, this),
      vscode.debug.onDidTerminateDebugSession((s) => this.ended(s.id)),
      vscode.commands.registerCommand("flowtape.debugFiring", (arg) => this.debugFiring(arg)),
    );
  }

  /** "Debug this firing" on a step (a tree row, the detail panel), or on the actor the cursor's
   *  line creates (its last firing at or before the stepper's step). */
  async debugFiring(arg: unknown): Promise<void> {
    const given = arg && typeof arg === "object" ? (arg as { runId?: string; step?: number }) : {};
    const at = given.runId && given.step ? { runId: given.runId, step: given.step } : this.host.current();
    if (!at?.step) return void vscode.window.showInformationMessage("Flowtape: go to a step first: the firing to debug is that step's, or the actor's on the cursor's line.");
    const editor = vscode.window.activeTextEditor;
    const onLine = !given.runId && editor?.document.languageId === "python" ? { uri: editor.document.uri.toString(), line: editor.selection.active.line } : {};
    let firing: FiringAtResult | undefined;
    try {
      firing = await this.host.request<FiringAtResult>(Methods.firingAt, { ...at, ...onLine });
    } catch (e) {
      if (!("uri" in onLine)) return this.host.tell(`debug: ${errorText(e)}`);
      firing = await this.host.request<FiringAtResult>(Methods.firingAt, at).catch((e2) => void this.host.tell(`debug: ${errorText(e2)}`));
    }
    if (!firing) return;
    const then = await vscode.window.showQuickPick(
      [
        { label: "$(debug-stop) Stop after it", description: "the run ends once this firing is done", then: "stop" as const },
        { label: "$(debug-continue) Go on live", description: "the rest of the run runs live, on the new tape", then: "live" as const },
      ],
      { title: `Debug ${firing.actor}'s firing ${firing.fireCount} (step ${firing.step} of run ${shortRunId(firing.runId)}): then…` },
    );
    if (!then) return;
    const run = this.host.run(firing.runId);
    const folder = run?.uri ? vscode.workspace.getWorkspaceFolder(vscode.Uri.parse(run.uri)) : vscode.workspace.workspaceFolders?.[0];
    const config: FiringDebugConfiguration = {
      type: DEBUG_TYPE, request: "attach", name: `Flowtape: ${firing.actor} firing ${firing.fireCount}`,
      run: run?.runDir ?? firing.runId, step: firing.step, actor: firing.actor, then: then.then, justMyCode: true,
    };
    await vscode.debug.startDebugging(folder, config);
  }

  resolveDebugConfiguration(_folder: vscode.WorkspaceFolder | undefined, config: vscode.DebugConfiguration): vscode.DebugConfiguration | undefined {
    if (!config.type && !config.request) {
      void vscode.commands.executeCommand("flowtape.debugFiring");
      return undefined; // F5 with no launch.json: ask for the firing instead
    }
    if (!config.run || !Number.isInteger(config.step) || config.step < 1) {
      void vscode.window.showErrorMessage("Flowtape: a flowtape debug configuration needs `run` (a run id or directory) and `step` (1 or more).");
      return undefined;
    }
    return { ...config, request: "attach", justMyCode: config.justMyCode ?? true };
  }

  /** Start `flowtape debug` and hand VS Code the debugpy server it opens. */
  async createDebugAdapterDescriptor(session: vscode.DebugSession): Promise<vscode.DebugAdapterDescriptor> {
    const c = session.configuration as FiringDebugConfiguration;
    const folder = session.workspaceFolder?.uri.fsPath ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd();
    const python = await this.python(session.workspaceFolder?.uri);
    const args = ["-m", "flowtape", "debug", String(c.run), "--step", String(c.step), "--port", "0", "--then", c.then ?? "stop",
      "--runs-dir", `${folder}/.flowtape/runs`];
    if (c.actor) args.push(`--actor=${c.actor}`);
    this.output.appendLine(`[flowtape] debug: ${python} ${args.join(" ")}`);
    const child = spawn(python, args, { cwd: folder, env: { ...process.env, PYTHONUNBUFFERED: "1" } });
    this.processes.set(session.id, child);
    const port = await new Promise<{ host: string; port: number }>((resolve, reject) => {
      let said = "";
      const timer = setTimeout(() => reject(new Error(`flowtape debug did not open a debugger within ${STARTUP_MS / 1000} s: ${said.trim().split("\n").pop() ?? ""}`)), STARTUP_MS);
      child.stderr?.on("data", (buf: Buffer) => {
        const text = String(buf);
        said += text;
        this.output.append(text);
        const m = LISTENING.exec(said);
        if (m) {
          clearTimeout(timer);
          resolve({ host: m[1], port: Number(m[2]) });
        }
      });
      child.stdout?.on("data", (buf: Buffer) => this.output.append(String(buf)));
      child.on("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`flowtape debug exited with code ${code}: ${said.trim().split("\n").pop() ?? ""}`));
      });
      child.on("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
    }).catch((e) => {
      this.ended(session.id);
      void vscode.window.showErrorMessage(`Flowtape: ${errorText(e)}`);
      throw e;
    });
    return new vscode.DebugAdapterServer(port.port, port.host);
  }

  /** The session ended: a `flowtape debug` still running is stopped (as Ctrl-C stops a run). */
  private ended(id: string): void {
    const child = this.processes.get(id);
    this.processes.delete(id);
    if (child && child.exitCode === null) child.kill("SIGTERM");
  }

  dispose(): void {
    for (const id of [...this.processes.keys()]) this.ended(id);
    for (const d of this.disposables) d.dispose();
  }
}
