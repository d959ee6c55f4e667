/**
 * Read-only documents the extension opens (a diff's two sides, a queue's tokens whole): served by
 * uri from what was put, so closing one never asks whether to save it, as an untitled one would.
 */
import * as vscode from "vscode";

export class ReadOnlyDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private n = 0;
  private readonly registration: vscode.Disposable;

  /** `gone`: what a document says once its text was let go (the latest 200 are kept). */
  constructor(private readonly scheme: string, private readonly gone: string) {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(scheme, this);
  }

  put(name: string, text: string, ext = "json"): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: this.scheme, path: `/${++this.n}/${name}.${ext}` });
    this.texts.set(uri.toString(), text);
    if (this.texts.size > 200) this.texts.delete(this.texts.keys().next().value as string);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? this.gone;
  }

  dispose(): void {
    this.registration.dispose();
  }
}
