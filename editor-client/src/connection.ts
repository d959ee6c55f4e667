/**
 * The connection to the Flowtape language server (`<python> -m flowtape lsp`): starting it (or
 * offering to install Flowtape for an interpreter that lacks it), restarting it, and requests and
 * server commands that say once, clearly, when the server is not there or refuses.
 */
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type Middleware,
  type ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";
import { ServerCommands } from "./core/protocol";
import { checkFlowtape, choosePython } from "./python";
import { offerInstall } from "./install";

export interface ConnectionHooks {
  /** Intercepts server commands (asks for what a lens leaves out, follows the runs started). */
  executeCommand: NonNullable<Middleware["executeCommand"]>;
  /** Answers VS Code's asks for inlay hints with the stepper's step's (stepHints.ts). */
  provideInlayHints: NonNullable<Middleware["provideInlayHints"]>;
  /** A new client, before it starts: its notifications and state changes are listened to. */
  wire(client: LanguageClient): void;
  /** The server is up. */
  started(): void;
  log(line: string): void;
}

export class Connection {
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  private restrictedLenses: vscode.Disposable | undefined;

  constructor(private readonly context: vscode.ExtensionContext, private readonly output: vscode.OutputChannel, private readonly hooks: ConnectionHooks) {}

  /** Whether `client` is the one in use (a state change of an old one is no news). */
  current(client: LanguageClient): boolean {
    return this.client === client;
  }

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
        this.hooks.log(`stopping the server: ${String(e)}`);
      }
    }
    await this.start();
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    if (c) await c.stop(3000).catch(() => undefined);
  }

  private async startClient(): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      this.restricted(); // (the interpreter itself may be the folder's: not even it is started)
      return;
    }
    const resource = vscode.window.activeTextEditor?.document.uri;
    const { python, source } = await choosePython(resource);
    const cwd = (resource && vscode.workspace.getWorkspaceFolder(resource)?.uri.fsPath) ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    this.hooks.log(`python: ${python} (from ${source})`);
    const problem = await checkFlowtape(python, cwd);
    if (problem) {
      this.hooks.log(`cannot import flowtape with ${python}: ${problem}`);
      void offerInstall({ extensionPath: this.context.extensionPath, log: (l) => this.hooks.log(l), output: this.output, restart: () => this.restart() }, python, problem);
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
      // view, asking for the step of a "⟲ Resume at step…" lens (the executeCommand middleware),
      // and asking for its stepper's hints (the provideInlayHints middleware, stepHints.ts).
      // (trust: a trusted folder, whose files inside it the server runs and imports: docs/protocol.md, "Trust")
      initializationOptions: { clientCommands: ["flowtape.view.refresh"], asksForStep: true, stepHints: true, trust: "workspace" },
      middleware: { executeCommand: this.hooks.executeCommand, provideInlayHints: this.hooks.provideInlayHints },
    };
    const client = new LanguageClient("flowtape", "Flowtape", serverOptions, clientOptions);
    this.hooks.wire(client);
    this.client = client;
    try {
      await client.start();
      this.hooks.log("language server started");
      this.hooks.started();
    } catch (e) {
      this.hooks.log(`starting the server failed: ${String(e)}`);
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
    this.hooks.log("this folder is not trusted: Flowtape runs nothing in it (no server, no runs, no flow imported)");
    if (this.restrictedLenses) return;
    const lenses = vscode.languages.registerCodeLensProvider(
      { scheme: "file", language: "python" },
      { provideCodeLenses: (doc) => restrictedLenses(doc) },
    );
    this.restrictedLenses = lenses;
    const granted = vscode.workspace.onDidGrantWorkspaceTrust(() => {
      lenses.dispose();
      granted.dispose();
      this.restrictedLenses = undefined;
      void this.start();
    });
    this.context.subscriptions.push(lenses, granted);
  }

  ready(): LanguageClient | undefined {
    const c = this.client;
    if (!c || !c.isRunning()) return undefined;
    return c;
  }

  async request<R>(method: string, params: unknown): Promise<R | undefined> {
    const c = this.ready();
    if (!c) return undefined;
    try {
      return await c.sendRequest<R>(method, params);
    } catch (e) {
      this.hooks.log(`${method} failed: ${errorText(e)}`);
      throw e;
    }
  }

  notify(method: string, params: unknown): void {
    const c = this.ready();
    if (c) void c.sendNotification(method, params).then(undefined, () => undefined);
  }

  async serverCommand<R>(command: string, params: unknown): Promise<R | undefined> {
    const c = this.ready();
    if (!c) {
      void vscode.window.showWarningMessage("Flowtape: the language server is not running.");
      return undefined;
    }
    try {
      return (await c.sendRequest(ExecuteCommandRequest.type, { command, arguments: withPlacement(command, [params]) })) as R;
    } catch (e) {
      commandFailed(command, e);
      return undefined;
    }
  }

  /** Whether the server runs; if not, say so once a command needs it, with a way to restart it. */
  up(): boolean {
    if (this.ready()) return true;
    void vscode.window
      .showWarningMessage("Flowtape: the language server is not running.", "Restart Server", "Show Output")
      .then((pick) => {
        if (pick === "Restart Server") void this.restart();
        else if (pick === "Show Output") this.output.show(true);
      });
    return false;
  }
}

/** A server command's error, said with what the server said, once. */
export function commandFailed(command: string, e: unknown): void {
  void vscode.window.showErrorMessage(`Flowtape: ${command}: ${errorText(e)}`);
}

export function errorText(e: unknown): string {
  if (e && typeof e === "object" && "message" in e) return String((e as { message: unknown }).message);
  return String(e);
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

const STARTS_A_RUN: readonly string[] = [ServerCommands.run, ServerCommands.resumeAtStep, ServerCommands.rerunActor];

/** The settings flowtape.executor and flowtape.rayAddress, under what a run-starting command's own params say. */
export function withPlacement(command: string, args: unknown[]): unknown[] {
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
