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
import { checkFlowtape, choosePython } from "./python";
import { offerInstall } from "./install";

export interface ConnectionHooks {
  /** Intercepts server commands (asks for what a lens leaves out, follows the runs started). */
  executeCommand: NonNullable<Middleware["executeCommand"]>;
  /** A new client, before it starts: its notifications and state changes are listened to. */
  wire(client: LanguageClient): void;
  /** The server is up. */
  started(): void;
  log(line: string): void;
}

export class Connection {
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;

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
      // view, and asking for the step of a "⟲ Resume at step…" lens (the executeCommand middleware).
      initializationOptions: { clientCommands: ["flowtape.view.refresh"], asksForStep: true },
      middleware: { executeCommand: this.hooks.executeCommand },
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
      return (await c.sendRequest(ExecuteCommandRequest.type, { command, arguments: [params] })) as R;
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
