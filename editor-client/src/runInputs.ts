/** "▶ Run" on a workflow with declared inputs: ask for each (its type shown, the last run's value
 *  offered again) before the run starts. */
import * as vscode from "vscode";
import { initialText, parseInput } from "./core/inputs";
import { Methods, type WorkflowInputsResult } from "./core/protocol";

/** The inputs to run with: `{}` for a workflow that declares none, undefined if the user cancelled. */
export async function askInputs(asked: WorkflowInputsResult, given: Record<string, unknown> = {}): Promise<Record<string, unknown> | undefined> {
  const inputs: Record<string, unknown> = { ...given };
  const wanted = asked.inputs.filter((i) => !(i.name in inputs));
  for (const [n, input] of wanted.entries()) {
    const last = asked.last?.[input.name];
    const text = await vscode.window.showInputBox({
      title: `Run ${asked.workflow} — input ${n + 1} of ${wanted.length}: ${input.name}${input.type ? ` (${input.type})` : ""}`,
      prompt: `${input.name}${input.type ? `: ${input.type}` : ""}${last !== undefined ? " · the last run's value is offered" : ""} — JSON (3, "text", [1, 2])${/^str$/.test(input.type) ? " or plain text" : ""}`,
      value: initialText(last, input),
      ignoreFocusOut: true,
      validateInput: (value) => {
        const r = parseInput(value, input);
        return "error" in r ? r.error : undefined;
      },
    });
    if (text === undefined) return undefined;
    const r = parseInput(text, input);
    if ("error" in r) return undefined;
    inputs[input.name] = r.value;
  }
  return inputs;
}

/** The inputs for "▶ Run" of `params.workflow`: asked for when it declares some; `{}` when it
 *  declares none (or the server cannot tell: the run itself then says what is wrong); undefined if cancelled. */
export async function askRunInputs(
  request: <R>(method: string, params: unknown) => Promise<R | undefined>,
  log: (line: string) => void,
  params: { uri: string; workflow?: string },
): Promise<Record<string, unknown> | undefined> {
  let asked: WorkflowInputsResult | undefined;
  try {
    asked = await request<WorkflowInputsResult>(Methods.workflowInputs, { uri: params.uri, workflow: params.workflow });
  } catch (e) {
    log(`the workflow's inputs could not be read: ${e && typeof e === "object" && "message" in e ? String(e.message) : String(e)}`);
    return {};
  }
  if (!asked?.inputs?.length) return {};
  return askInputs(asked);
}
