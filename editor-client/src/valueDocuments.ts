/**
 * Read-only documents of values the editor shows whole (a run's outputs, a queue's tokens, the two
 * sides of a diff): a document of its own scheme, so closing it never asks to save it, as an
 * untitled document would (and a dirty untitled one keeps "Close All Editors" waiting on a dialog).
 */
import * as vscode from "vscode";

const SCHEME = "flowtape-value";
const KEPT = 200;

class ValueDocuments implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private n = 0;

  /** A new document holding `text`; `name` ends with the extension that picks its language. */
  put(name: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: SCHEME, path: `/${++this.n}/${name}` });
    this.texts.set(uri.toString(), text);
    if (this.texts.size > KEPT) this.texts.delete(this.texts.keys().next().value as string);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "(this value is no longer kept: open it again from the Flowtape view)\n";
  }
}

const documents = new ValueDocuments();

/** Serve the value documents (once, at activation). */
export function registerValueDocuments(): vscode.Disposable {
  return vscode.workspace.registerTextDocumentContentProvider(SCHEME, documents);
}

/** The uri of a new read-only document holding `text` (e.g. a side of a diff). */
export function valueDocument(name: string, text: string): vscode.Uri {
  return documents.put(name, text);
}

/** Show `text` whole in a read-only editor named `name` (`outputs-1a2b.json`). */
export async function showValue(name: string, text: string, column?: vscode.ViewColumn): Promise<void> {
  const doc = await vscode.workspace.openTextDocument(valueDocument(name, text));
  await vscode.window.showTextDocument(doc, { preview: true, viewColumn: column });
}
