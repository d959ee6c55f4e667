/** The step detail panel: a webview rendering `flowtape/stepDetail`. */
import * as vscode from "vscode";
import { callText } from "./core/format";
import type { StepDetail } from "./core/protocol";

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

export function renderDetail(d: StepDetail): string {
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
          return `<h3><code>${esc(m.actor)}</code></h3><pre class="chat">${esc(m.chat)}</pre>${usage}`;
        })
        .join("")}`
    : "";
  return `<!DOCTYPE html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline';">
<style>
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 1em 1em; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.4em; border-bottom: 1px solid var(--vscode-panel-border); }
table { border-collapse: collapse; width: 100%; } td, th { text-align: left; vertical-align: top; padding: 3px 8px; border-bottom: 1px solid var(--vscode-panel-border); }
code, pre { font-family: var(--vscode-editor-font-family); } pre { margin: 0; white-space: pre-wrap; }
.muted { color: var(--vscode-descriptionForeground); } ol.tokens { margin: 0; padding-left: 1.4em; }
p.actions a.action { margin-right: 1.2em; } a { color: var(--vscode-textLink-foreground); text-decoration: none; }
</style></head><body>
<h1 id="title">Step ${d.step} · ${esc(d.actor)} · fire ${d.fireCount}</h1>
<p class="muted">${esc(d.actorKind)} · run <code>${esc(d.runId)}</code></p>
<p class="actions">${commandLink("flowtape.forkFromHere", { runId: d.runId, step: d.step }, "✎ Fork from here…", "edit a value at this step, then a new run goes on from it")}
${commandLink("flowtape.debugFiring", { runId: d.runId, step: d.step }, "⏵ Debug this firing", "run this step's firing live under the debugger, at its recorded inputs")}
${commandLink("flowtape.compareWith", { runId: d.runId }, "⇄ Compare with…", "the firings that differ from another run")}</p>
${queueTable("Taken", d.taken)}
${queueTable("Put", d.put)}
${queueTable("Queues after this step", d.queues, { runId: d.runId, step: d.step })}
<h2>Actor states</h2>${states}
${chat}
</body></html>`;
}

export class DetailPanel {
  private panel: vscode.WebviewPanel | undefined;

  get isOpen(): boolean {
    return this.panel !== undefined;
  }

  show(detail: StepDetail, reveal = true): void {
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(
        "flowtape.stepDetail",
        "Flowtape step",
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        { enableScripts: false, enableCommandUris: ["flowtape.forkFromHere", "flowtape.debugFiring", "flowtape.compareWith"], retainContextWhenHidden: false },
      );
      this.panel.onDidDispose(() => (this.panel = undefined));
    } else if (reveal) {
      this.panel.reveal(undefined, true);
    }
    this.panel.title = `Step ${detail.step} · ${detail.actor}`;
    this.panel.webview.html = renderDetail(detail);
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
