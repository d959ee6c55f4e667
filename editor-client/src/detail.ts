/** The step detail panel: a webview rendering `flowtape/stepDetail`. */
import * as vscode from "vscode";
import { callText } from "./core/format";
import type { FiringDetail, OutputPreview, StepDetail } from "./core/protocol";

/** What the panel shows besides the step: the inner firing the stepper is on, the run's outputs. */
export interface DetailExtra {
  firing?: Pick<FiringDetail, "actor" | "fireCount">;
  outputs?: OutputPreview[];
}

function esc(s: unknown): string {
  const text = typeof s === "string" ? s : JSON.stringify(s, null, 2) ?? "";
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function tokenList(tokens: string[]): string {
  if (!tokens || tokens.length === 0) return `<span class="muted">(empty)</span>`;
  return `<ol class="tokens">${tokens.map((t) => `<li><code>${esc(t)}</code></li>`).join("")}</ol>`;
}

/** A link that runs a command with one argument (the webview allows command links, not scripts). */
function commandLink(command: string, arg: unknown, text: string, title: string): string {
  const href = `command:${command}?${encodeURIComponent(JSON.stringify([arg]))}`;
  return `<a class="action" href="${esc(href)}" title="${esc(title)}">${esc(text)}</a>`;
}

function queueTable(title: string, rows: { queue: string; tokens: string[]; size?: number }[], fork?: { runId: string; step: number }): string {
  if (!rows || rows.length === 0) return `<h2>${esc(title)}</h2><p class="muted">none</p>`;
  const edit = (r: { queue: string; tokens: string[] }) =>
    fork && r.queue.includes("->") && r.tokens?.length
      ? ` ${commandLink("flowtape.forkFromHere", { ...fork, where: `${r.queue}[0]` }, "✎", `fork from here with another token at the head of ${r.queue}`)}`
      : "";
  const body = rows
    .map((r) => `<tr><td><code>${esc(r.queue)}</code>${r.size !== undefined ? ` <span class="muted">(${r.size})</span>` : ""}${edit(r)}</td><td>${tokenList(r.tokens)}</td></tr>`)
    .join("");
  return `<h2>${esc(title)}</h2><table><thead><tr><th>queue</th><th>tokens</th></tr></thead><tbody>${body}</tbody></table>`;
}

/** A composite step's firings, each with what it took and put (not merged into the step's). */
function firingsSection(d: StepDetail, extra: DetailExtra): string {
  const inner = (d.firings ?? []).filter((f) => f.actor !== d.actor || f.fireCount !== d.fireCount);
  if (!inner.length) return "";
  const rows = inner.map((f, i) => {
    const on = extra.firing && extra.firing.actor === f.actor && extra.firing.fireCount === f.fireCount;
    const io = (rows: { queue: string; tokens: string[] }[]) =>
      rows.length ? rows.map((r) => `<code>${esc(r.queue)}</code> ${tokenList(r.tokens)}`).join("") : `<span class="muted">nothing</span>`;
    return `<tr class="${on ? "current" : ""}"><td>${i + 1}</td><td><code>${esc(f.actor)}</code> · fire ${f.fireCount}${on ? " ◀" : ""}<br><span class="muted">${esc(f.actorKind)} · ${f.replayed ? "replayed" : "live"}</span></td><td>${io(f.taken)}</td><td>${io(f.put)}</td></tr>`;
  }).join("");
  return `<h2 id="inner">Inner firings (${inner.length})</h2><table><thead><tr><th>#</th><th>firing</th><th>took</th><th>put</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function outputsSection(extra: DetailExtra): string {
  if (!extra.outputs?.length) return "";
  const rows = extra.outputs.map((o) => `<tr><td><code>${esc(o.port)}</code> <span class="muted">(${o.count})</span></td><td><code>${esc(o.preview)}</code></td></tr>`).join("");
  return `<h2 id="outputs">Run outputs</h2><table><thead><tr><th>port</th><th>tokens</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** The panel's page; with a `nonce`, its script takes later details as messages (the page is
 *  not loaded again at every step: that cost more than the step). */
export function renderDetail(d: StepDetail, extra: DetailExtra = {}, nonce?: string): string {
  const script = nonce
    ? `<script nonce="${nonce}">window.addEventListener("message", (e) => { if (e.data && typeof e.data.body === "string") document.body.innerHTML = e.data.body; });</script>`
    : "";
  return `<!DOCTYPE html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline';${nonce ? ` script-src 'nonce-${nonce}';` : ""}">
<style>
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 1em 1em; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.4em; border-bottom: 1px solid var(--vscode-panel-border); }
table { border-collapse: collapse; width: 100%; } td, th { text-align: left; vertical-align: top; padding: 3px 8px; border-bottom: 1px solid var(--vscode-panel-border); }
code, pre { font-family: var(--vscode-editor-font-family); } pre { margin: 0; white-space: pre-wrap; }
.muted { color: var(--vscode-descriptionForeground); } ol.tokens { margin: 0; padding-left: 1.4em; }
tr.current { background: var(--vscode-list-activeSelectionBackground); color: var(--vscode-list-activeSelectionForeground); }
p.actions a.action { margin-right: 1.2em; } a { color: var(--vscode-textLink-foreground); text-decoration: none; }
</style>${script}</head><body>
${detailBody(d, extra)}
</body></html>`;
}

/** What the panel shows of a step (its page's body). */
export function detailBody(d: StepDetail, extra: DetailExtra = {}): string {
  const own = (d.firings ?? []).find((f) => f.actor === d.actor && f.fireCount === d.fireCount);
  const inner = firingsSection(d, extra);
  const states = d.states?.length
    ? `<table><thead><tr><th>actor</th><th>fired</th><th>state</th></tr></thead><tbody>${d.states
        .map((s) => `<tr><td><code>${esc(s.actor)}</code></td><td>${s.fireCount}</td><td>${
          s.state === null ? `<span class="muted">none kept</span>` : `<pre>${esc(s.state)}</pre>`
        }</td></tr>`)
        .join("")}</tbody></table>`
    : `<p class="muted">no actors</p>`;
  const chat = d.chat?.length
    ? `<h2>Chat</h2>${d.chat
        .map((m) => {
          const calls = (m.calls ?? []).map((c) => `<li class="call">${esc(callText(c))}</li>`).join("");
          const usage = calls ? `<p class="muted">model calls:</p><ul>${calls}</ul>` : "";
          const said = m.answer != null
            ? `<p class="muted">asked:</p><pre class="chat">${esc(m.asked ?? "")}</pre><p class="muted">answered:</p><pre class="chat">${esc(m.answer)}</pre>`
            : `<pre class="chat">${esc(m.chat)}</pre>`;
          return `<h3><code>${esc(m.actor)}</code></h3>${said}${usage}`;
        })
        .join("")}`
    : "";
  return `<h1 id="title">Step ${d.step} · ${esc(d.actor)} · fire ${d.fireCount}</h1>
<p class="muted">${esc(d.actorKind)} · run <code>${esc(d.runId)}</code></p>
<p class="actions">${commandLink("flowtape.forkFromHere", { runId: d.runId, step: d.step }, "✎ Fork from here…", "edit a value at this step, then a new run goes on from it")}
${commandLink("flowtape.debugFiring", { runId: d.runId, step: d.step }, "⏵ Debug this firing", "run this step's firing live under the debugger, at its recorded inputs")}
${commandLink("flowtape.compareWith", { runId: d.runId }, "⇄ Compare with…", "the firings that differ from another run")}</p>
${inner && own ? queueTable("Taken (by the step)", own.taken) : queueTable("Taken", d.taken)}
${inner && own ? queueTable("Put (by the step)", own.put) : queueTable("Put", d.put)}
${inner}
${outputsSection(extra)}
${queueTable("Queues after this step", d.queues, { runId: d.runId, step: d.step })}
<h2>Actor states</h2>${states}
${chat}`;
}

export class DetailPanel {
  private panel: vscode.WebviewPanel | undefined;
  private latest: { detail: StepDetail; extra: DetailExtra } | undefined;

  get isOpen(): boolean {
    return this.panel !== undefined;
  }

  show(detail: StepDetail, reveal = true, extra: DetailExtra = {}): void {
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(
        "flowtape.stepDetail",
        "Flowtape step",
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        { enableScripts: true, enableCommandUris: ["flowtape.forkFromHere", "flowtape.debugFiring", "flowtape.compareWith"], retainContextWhenHidden: false },
      );
      const panel = this.panel;
      panel.onDidDispose(() => (this.panel = undefined));
      panel.onDidChangeViewState(() => {
        if (panel.visible && this.latest) this.load(panel); // (a hidden webview's page is gone)
      });
      this.latest = { detail, extra };
      this.panel.title = `Step ${detail.step} · ${detail.actor}`;
      this.load(this.panel);
      return;
    } else if (reveal) {
      this.panel.reveal(undefined, true);
    }
    this.latest = { detail, extra };
    this.panel.title = `Step ${detail.step} · ${detail.actor}`;
    if (this.panel.visible) void this.panel.webview.postMessage({ body: detailBody(detail, extra) });
  }

  private load(panel: vscode.WebviewPanel): void {
    if (!this.latest) return;
    const nonce = Array.from({ length: 16 }, () => Math.floor(Math.random() * 36).toString(36)).join("");
    panel.webview.html = renderDetail(this.latest.detail, this.latest.extra, nonce);
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
