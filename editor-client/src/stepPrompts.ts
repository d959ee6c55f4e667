/** The stepper's two questions: which step to go to (Alt+G), and which step to resume a run at
 *  (the "⟲ Resume at step…" lens, which names the run only). */
import * as vscode from "vscode";
import { shortRunId } from "./core/format";
import { parseGoTo } from "./core/stepper";

/** A step of a run of `total` steps to go to, from `index`; undefined if cancelled. */
export async function askGoTo(runId: string, index: number, total: () => number): Promise<number | undefined> {
  const value = await vscode.window.showInputBox({
    title: `Go to step (run ${shortRunId(runId)})`,
    prompt: `A step from 1 to ${total()}, "first", "last", or +N / -N`,
    value: index ? String(index) : "",
    validateInput: (text) => {
      const r = parseGoTo(text, index, total());
      return typeof r === "string" ? r : undefined;
    },
  });
  if (value === undefined) return undefined;
  const n = parseGoTo(value, index, total());
  return typeof n === "number" ? n : undefined;
}

/** The step (0 to `last`) to resume run `runId` at; null: where it stopped (the default for a run
 *  that failed or was stopped, `broken`); undefined if cancelled. */
export async function askResumeStep(runId: string, last: number, broken: boolean): Promise<number | null | undefined> {
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
