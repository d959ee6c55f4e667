/** Which Python runs the language server, and whether it can import flowtape. */
import * as vscode from "vscode";
import { execFile } from "node:child_process";

export interface PythonChoice {
  python: string;
  source: "setting" | "python-extension" | "default";
}

function expand(value: string, folder: vscode.WorkspaceFolder | undefined): string {
  const root = folder?.uri.fsPath ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? "";
  return value
    .replace(/\$\{workspaceFolder\}/g, root)
    .replace(/\$\{userHome\}/g, process.env.HOME ?? "")
    .replace(/^~(?=\/|$)/, process.env.HOME ?? "~");
}

function withTimeout<T>(p: Thenable<T>, ms: number): Promise<T | undefined> {
  return Promise.race([
    Promise.resolve(p),
    new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms)),
  ]);
}

interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string } | undefined;
    resolveEnvironment?(env: { path: string } | string): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
  };
}

/** The Python extension's active environment, when it is installed; never throws. */
async function fromPythonExtension(resource: vscode.Uri | undefined): Promise<string | undefined> {
  try {
    const ext = vscode.extensions.getExtension<PythonExtensionApi>("ms-python.python");
    if (!ext) return undefined;
    const api = ext.isActive ? ext.exports : await withTimeout(ext.activate(), 15000);
    const envs = api?.environments;
    if (!envs || typeof envs.getActiveEnvironmentPath !== "function") return undefined;
    const active = envs.getActiveEnvironmentPath(resource);
    if (!active?.path) return undefined;
    if (typeof envs.resolveEnvironment === "function") {
      const resolved = await withTimeout(envs.resolveEnvironment(active), 10000);
      const exe = resolved?.executable?.uri?.fsPath;
      if (exe) return exe;
    }
    return active.path;
  } catch {
    return undefined;
  }
}

export async function choosePython(resource?: vscode.Uri): Promise<PythonChoice> {
  const folder = resource ? vscode.workspace.getWorkspaceFolder(resource) : vscode.workspace.workspaceFolders?.[0];
  const setting = vscode.workspace.getConfiguration("flowtape", folder?.uri).get<string>("python", "").trim();
  if (setting) return { python: expand(setting, folder), source: "setting" };
  const fromExt = await fromPythonExtension(resource ?? folder?.uri);
  if (fromExt) return { python: fromExt, source: "python-extension" };
  return { python: "python3", source: "default" };
}

/** `python -c "import flowtape"`: undefined when it works, else what went wrong. */
export function checkFlowtape(python: string, cwd?: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(
      python,
      ["-c", "import flowtape"],
      { cwd, timeout: 30000, windowsHide: true },
      (err, _stdout, stderr) => {
        if (!err) return resolve(undefined);
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        if (e.code === "ENOENT") return resolve(`the interpreter ${python} was not found`);
        if (e.killed) return resolve(`${python} -c "import flowtape" timed out`);
        const last = String(stderr).trim().split("\n").filter(Boolean).pop();
        resolve(last ?? e.message);
      },
    );
  });
}
