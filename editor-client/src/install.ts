/**
 * Installing Flowtape for an interpreter that lacks it. The .vsix carries the `flowtape` wheel it
 * was built with (`wheels/`, see `npm run wheel`): that wheel is what is installed, never a name
 * looked up on the package registry (`flowtape` there is not ours). Into the chosen interpreter,
 * or into a new `.venv` of the workspace (a Debian-style `python3` refuses pip: "externally
 * managed environment"). What pip says goes to the output channel; a failure is said as one.
 */
import * as vscode from "vscode";
import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import * as path from "node:path";
import { checkFlowtape } from "./python";
import { pipReason } from "./core/pip";

export interface Installer {
  extensionPath: string;
  log(line: string): void;
  output: vscode.OutputChannel;
  restart(): Promise<void>;
}

const PIP_TIMEOUT_MS = 10 * 60_000;

/** The wheel this extension was built with, if it carries one. */
export function bundledWheel(extensionPath: string): string | undefined {
  const dir = path.join(extensionPath, "wheels");
  if (!existsSync(dir)) return undefined;
  const wheels = readdirSync(dir).filter((f) => /^flowtape-.*\.whl$/.test(f)).sort();
  return wheels.length ? path.join(dir, wheels[wheels.length - 1]) : undefined;
}

interface Ran {
  ok: boolean;
  output: string;
}

function run(command: string, args: string[], cwd: string | undefined, into: vscode.OutputChannel): Promise<Ran> {
  into.appendLine(`[flowtape] $ ${[command, ...args].join(" ")}`);
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: PIP_TIMEOUT_MS, maxBuffer: 32 << 20, windowsHide: true }, (err, stdout, stderr) => {
      const output = `${stdout}${stderr}`;
      into.append(output);
      if (err) {
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        const why = e.code === "ENOENT" ? `${command} was not found` : e.killed ? "it timed out" : `it exited with code ${e.code ?? "?"}`;
        into.appendLine(`[flowtape] failed: ${why}`);
        resolve({ ok: false, output: output || why });
      } else {
        resolve({ ok: true, output });
      }
    });
  });
}

function workspaceRoot(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

function venvPython(venv: string): string {
  return process.platform === "win32" ? path.join(venv, "Scripts", "python.exe") : path.join(venv, "bin", "python");
}

/** Install the bundled wheel with `python -m pip`; true when flowtape imports afterwards. */
async function pipInstall(ctx: Installer, python: string, wheel: string): Promise<boolean> {
  const cwd = workspaceRoot();
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Flowtape: installing ${path.basename(wheel)} into ${python}…` },
    () => run(python, ["-m", "pip", "install", "--disable-pip-version-check", wheel], cwd, ctx.output),
  );
  if (!result.ok) {
    void vscode.window.showErrorMessage(`Flowtape: pip could not install Flowtape into ${python}: ${pipReason(result.output)}`, "Show Output", "Create .venv")
      .then((pick) => {
        if (pick === "Show Output") ctx.output.show(true);
        else if (pick === "Create .venv") void createVenv(ctx, python, wheel);
      });
    return false;
  }
  const problem = await checkFlowtape(python, cwd);
  if (problem) {
    void vscode.window.showErrorMessage(`Flowtape: pip finished, but ${python} still cannot import flowtape: ${problem}`, "Show Output")
      .then((pick) => pick && ctx.output.show(true));
    return false;
  }
  return true;
}

async function createVenv(ctx: Installer, base: string, wheel: string): Promise<void> {
  const root = workspaceRoot();
  if (!root) {
    void vscode.window.showErrorMessage("Flowtape: open a folder first: the .venv is made in the workspace.");
    return;
  }
  const venv = path.join(root, ".venv");
  if (!existsSync(venvPython(venv))) {
    const made = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Flowtape: creating ${venv}…` },
      () => run(base, ["-m", "venv", venv], root, ctx.output),
    );
    if (!made.ok) {
      void vscode.window.showErrorMessage(`Flowtape: ${base} -m venv ${venv} failed: ${pipReason(made.output)}`, "Show Output")
        .then((pick) => pick && ctx.output.show(true));
      return;
    }
  }
  const python = venvPython(venv);
  if (!(await pipInstall(ctx, python, wheel))) return;
  // the server runs from the new environment from now on (a change of the setting restarts it)
  await vscode.workspace.getConfiguration("flowtape").update("python", python.replace(root, "${workspaceFolder}"), vscode.ConfigurationTarget.Workspace);
  void vscode.window.showInformationMessage(`Flowtape: installed into the new ${venv}; the language server runs from it.`);
}

/** `python` cannot import flowtape: offer to install the bundled wheel (there, or in a new .venv). */
export async function offerInstall(ctx: Installer, python: string, problem: string): Promise<void> {
  const wheel = bundledWheel(ctx.extensionPath);
  const install = "Install Flowtape";
  const venv = "Create .venv";
  const choose = "Choose Interpreter";
  const picks = wheel ? [install, venv, choose] : [choose];
  const noWheel = wheel ? "" : " This build of the extension carries no Flowtape wheel: install Flowtape into it from the Flowtape sources (pip install <repo>).";
  const pick = await vscode.window.showErrorMessage(`Flowtape: ${python} cannot import flowtape (${problem}).${noWheel}`, ...picks);
  if (pick === install && wheel) {
    if (await pipInstall(ctx, python, wheel)) {
      void vscode.window.showInformationMessage(`Flowtape: installed ${path.basename(wheel)} into ${python}.`);
      await ctx.restart();
    }
  } else if (pick === venv && wheel) {
    await createVenv(ctx, python, wheel);
  } else if (pick === choose) {
    await vscode.commands.executeCommand("workbench.action.openSettings", "flowtape.python");
  }
}
