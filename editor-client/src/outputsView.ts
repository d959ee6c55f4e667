/** A run's end as the editor tells it: the notification of a run started here (its outputs
 *  previewed, or why it failed) and its outputs opened whole in a JSON document. */
import * as vscode from "vscode";
import { finishMessage, shortRunId } from "./core/format";
import { ReadOnlyDocuments } from "./readOnlyDocs";
import { Methods, type RunFinishedParams, type RunOutputsResult } from "./core/protocol";

type Request = <R>(method: string, params: unknown) => Promise<R | undefined>;

let documents: ReadOnlyDocuments | undefined;

/** Serve the outputs documents (at activation): read-only, so closing one asks nothing (an
 *  untitled one asks to be saved, and keeps "Close All Editors" waiting on that dialog). */
export function outputsDocuments(): ReadOnlyDocuments {
  documents ??= new ReadOnlyDocuments("flowtape-outputs", "(these outputs are no longer held: open them again from the run)\n");
  return documents;
}

/** Every output token of a run, in a JSON document of its own (one port, or all). */
export async function openOutputs(request: Request, tell: (message: string) => void, runId: unknown, port?: unknown): Promise<void> {
  if (typeof runId !== "string") return;
  let result: RunOutputsResult | undefined;
  try {
    result = await request<RunOutputsResult>(Methods.runOutputs, { runId });
  } catch (e) {
    tell(`run ${shortRunId(runId)}'s outputs: ${e && typeof e === "object" && "message" in e ? String(e.message) : String(e)}`);
    return;
  }
  if (!result) return;
  const shown = typeof port === "string" ? { [port]: result.outputs?.[port] ?? [] } : result.outputs;
  const uri = outputsDocuments().put(`outputs-${shortRunId(runId)}${typeof port === "string" ? `-${port}` : ""}`, JSON.stringify(shown, null, 2));
  await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), { preview: true });
}

/** A diverged replay and a failure are told for any run; a success, for a run started here (`mine`). */
export function tellFinished(p: RunFinishedParams, mine: boolean, open: (runId: string) => void): void {
  if (p.replayStopped?.length) {
    const d = p.replayStopped[0];
    void vscode.window.showWarningMessage(
      `Flowtape: replay of run ${shortRunId(p.runId)} diverged at step ${d.step} (${d.actor}, fire ${d.fireCount}): ${d.reason}`,
    );
  } else if (p.status === "failed" && p.error) {
    void vscode.window.showErrorMessage(`Flowtape: ${finishMessage(p, shortRunId(p.runId))}`, "Show Failure").then((pick) => {
      const e = p.errorDetail;
      const at = e?.raisedUri ? { uri: e.raisedUri, line: e.raisedLine ?? 0 } : e?.uri ? { uri: e.uri, line: e.line ?? 0 } : undefined;
      if (pick && at) void vscode.window.showTextDocument(vscode.Uri.parse(at.uri), { selection: new vscode.Range(at.line, 0, at.line, 0) });
    });
  } else if (mine && p.status === "succeeded") {
    const outputs = !!p.outputs && typeof p.outputs === "object" && Object.keys(p.outputs).length > 0;
    void vscode.window.showInformationMessage(`Flowtape: ${finishMessage(p, shortRunId(p.runId))}`, ...(outputs ? ["Open Outputs"] : []))
      .then((pick) => {
        if (pick) open(p.runId);
      });
  }
}
