/**
 * The inlay hints of the stepper's step, drawn with its key's other marks. The server's standard
 * hints show the step selected last (`flowtape/selectStep`), for every client; VS Code would hear
 * of a new one from the server's refresh, then wait before it asks (redraw()), then ask the server.
 * This client asks the server for the hints of the stepper's step and of the steps next to it
 * (`flowtape/stepHints`), keeps them by file version (core/hintCache.ts), answers VS Code's asks
 * from them (the provideInlayHints middleware: never another step's, or another text's), and has
 * VS Code ask as soon as they are in. It tells the server it needs no refresh at each selectStep
 * (`initializationOptions.stepHints`).
 */
import * as vscode from "vscode";
import { type InlayHint, InlayHintRequest, type LanguageClient, type Middleware } from "vscode-languageclient/node";
import { HintCache, around } from "./core/hintCache";
import { Methods, type StepHintsParams, type StepHintsResult } from "./core/protocol";

/** Steps each side of the stepper's whose hints are had ready (a held key is one step at a time). */
const AHEAD = 2;
/** A document selector no document matches. */
const NO_FILE: vscode.DocumentSelector = { scheme: "flowtape-none", language: "flowtape-none" };

export interface StepAt {
  runId: string;
  step: number;
  total: number;
  /** Following a run as it streams: its next steps are not there yet. */
  following: boolean;
}

export class StepHints implements vscode.Disposable {
  private readonly cache = new HintCache<InlayHint>();
  private client: LanguageClient | undefined;
  /** Requests under way, by "uri|generation|version|run|step": VS Code's ask waits for the one asking its step. */
  private readonly asking = new Map<string, Promise<void>>();
  private readonly disposables: vscode.Disposable[];

  constructor(private readonly now: () => StepAt | undefined, private readonly log: (line: string) => void) {
    this.disposables = [
      // a save maps the run's lines anew (its text is what they are mapped from), a close ends the versions
      vscode.workspace.onDidSaveTextDocument((d) => this.cache.forget(d.uri.toString())),
      vscode.workspace.onDidCloseTextDocument((d) => this.cache.forget(d.uri.toString())),
    ];
  }

  /** The language client's middleware: VS Code's ask, answered for the stepper's step. */
  readonly provideInlayHints: NonNullable<Middleware["provideInlayHints"]> = async (document, range, token, next) => {
    const client = this.client;
    let at = this.now();
    if (!client || !at) return next(document, range, token); // no step: the server's own choice
    let known = this.known(document, at);
    if (known === undefined) {
      await this.ask(document, at, [at.step]);
      at = this.now(); // (the stepper may have moved on meanwhile: its step is the one shown)
      if (!at) return next(document, range, token);
      known = this.known(document, at);
    }
    if (!known) return next(document, range, token); // the run shows nothing there, or the server could not say
    const lines = known.filter((h) => h.position.line >= range.start.line && h.position.line <= range.end.line);
    return client.protocol2CodeConverter.asInlayHints(lines, token);
  };

  /** A new language client: nothing the old server said holds. */
  attach(client: LanguageClient): void {
    this.client = client;
    this.cache.clear();
    this.asking.clear();
  }

  /** The stepper moved: the visible files' hints show its step as soon as they are known, and
   *  those of the steps next to it are asked for. */
  stepped(): void {
    const at = this.now();
    if (!this.client || !at) return;
    const documents = this.documents();
    if (at.following) {
      // Its next step is not there to ask for ahead, and it moves on at each batch: VS Code asks
      // for the one it is on in its own time (Flowtape's hints alone: redraw() redraws all).
      const feature = this.client.getFeature(InlayHintRequest.method);
      for (const d of documents) feature.getProvider(d)?.onDidChangeInlayHints.fire();
      return;
    }
    const unknown = documents.filter((d) => this.known(d, at) === undefined);
    if (unknown.length < documents.length) this.redraw();
    if (unknown.length) {
      void Promise.all(unknown.map((d) => this.ask(d, at, [at.step]))).then(() => {
        const now = this.now();
        if (now && now.runId === at.runId && now.step === at.step) this.redraw(); // (a step moved to since redraws for itself)
      });
    }
    for (const d of documents) void this.ask(d, at, around(at.step, at.total, AHEAD));
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }

  private known(document: vscode.TextDocument, at: StepAt): InlayHint[] | null | undefined {
    return this.cache.get(document.uri.toString(), document.version, at.runId, at.step);
  }

  /** Ask the server for the hints of `steps` not known or asked yet; resolves when they are in. */
  private ask(document: vscode.TextDocument, at: StepAt, steps: number[]): Promise<void> {
    const client = this.client;
    const uri = document.uri.toString();
    const generation = this.cache.generation();
    const key = (step: number): string => `${uri}|${generation}|${document.version}|${at.runId}|${step}`;
    const wanted = this.cache.missing(uri, document.version, at.runId, steps);
    const fresh = wanted.filter((s) => !this.asking.has(key(s)));
    const waits = wanted.filter((s) => this.asking.has(key(s))).map((s) => this.asking.get(key(s)));
    if (client && fresh.length) {
      const params: StepHintsParams = { runId: at.runId, uri, steps: fresh };
      const asked = client.sendRequest<StepHintsResult<InlayHint>>(Methods.stepHints, params).then(
        (result) => {
          if (this.client === client) this.cache.put(result, generation);
        },
        (e: unknown) => this.log(`${Methods.stepHints} (steps ${fresh.join(", ")}): ${e instanceof Error ? e.message : String(e)}`),
      ).finally(() => {
        for (const s of fresh) this.asking.delete(key(s));
      });
      for (const s of fresh) this.asking.set(key(s), asked);
      waits.push(asked);
    }
    return Promise.all(waits).then(() => undefined);
  }

  /** Have VS Code ask for the hints of every editor now. Told that a provider's hints changed
   *  (onDidChangeInlayHints), VS Code asks only after as long as its last six asks took on average
   *  (at least 25 ms, at most 625): asks made while a big run streamed, in a busy window, kept the
   *  first keys after it waiting for half a second. A change in the set of providers has it ask
   *  at once (its InlayHintsController redraws every editor, from what it showed until the
   *  answer): a provider for no file, registered and let go, is that change. */
  private redraw(): void {
    vscode.languages.registerInlayHintsProvider(NO_FILE, { provideInlayHints: () => [] }).dispose();
  }

  /** The Python files on screen, each once. */
  private documents(): vscode.TextDocument[] {
    const seen = new Map<string, vscode.TextDocument>();
    for (const editor of vscode.window.visibleTextEditors) {
      const d = editor.document;
      if (d.languageId === "python" && d.uri.scheme === "file") seen.set(d.uri.toString(), d);
    }
    return [...seen.values()];
  }
}
