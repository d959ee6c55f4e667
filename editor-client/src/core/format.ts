/** Labels and descriptions shown in the UI. No vscode import. */
import type { ErrorDetail, FiringDetail, ModelCall, OutputPreview, QueueTokens, RunFinishedParams, RunInfo, StepInfo, Usage } from "./protocol";

/** `12 · review · fire 3` */
export function stepLabel(s: Pick<StepInfo, "step" | "actor" | "fireCount">): string {
  return `${s.step} · ${s.actor} · fire ${s.fireCount}`;
}

/** The status bar text: `step 12/40 · review` (or `no step` / `step –/40`). */
export function statusText(index: number, total: number, actor?: string): string {
  if (total === 0) return "no steps";
  if (index === 0) return `step –/${total}`;
  return actor ? `step ${index}/${total} · ${actor}` : `step ${index}/${total}`;
}

const STAMPED = /^\d{8}-(\d{6})-\d{6}-([0-9a-f]+)$/;

/** A run id short enough for a title: a default id (`20261202-015650-424926-9d64`) by its time and
 * random tail (`015650-9d64`), which tell runs of one day apart; a long id of the user's by its ends. */
export function shortRunId(runId: string): string {
  const stamped = STAMPED.exec(runId);
  if (stamped) return `${stamped[1]}-${stamped[2]}`;
  return runId.length > 20 ? `${runId.slice(0, 8)}…${runId.slice(-8)}` : runId;
}

function toDate(t: string | number | null | undefined): Date | undefined {
  if (t === undefined || t === null || t === "") return undefined;
  const d = typeof t === "number" ? new Date(t < 1e12 ? t * 1000 : t) : new Date(t);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

function pad(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/** `14:03:27`, or `Mar 3 14:03` when not today. */
export function formatTime(t: string | number | null | undefined, now: Date = new Date()): string {
  const d = toDate(t);
  if (!d) return "";
  const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === now.toDateString()) return hms;
  const month = d.toLocaleString("en", { month: "short" });
  return `${month} ${d.getDate()} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** `340 µs`, `12 ms`, `1.5 s`; "" for nothing measured (a step that took no time shows none). */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms <= 0) return "";
  if (ms < 1) return `${Math.max(1, Math.round(ms * 1000))} µs`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60_000);
  const s = Math.round((ms % 60_000) / 1000);
  return `${m} min ${s} s`;
}

/** Tree label of a run: `review · 14:03:27`. */
export function runLabel(run: RunInfo, now?: Date): string {
  const time = formatTime(run.startedAt, now);
  return time ? `${run.workflow} · ${time}` : run.workflow;
}

/** Tree description of a run: `12 steps · resumed from ab12 @ step 5` (`forked from ab12 @ step 5 (2 edits)`). */
export function runDescription(run: RunInfo, loaded?: number): string {
  const steps = Math.max(run.steps ?? 0, loaded ?? 0);
  const parts = [`${steps} step${steps === 1 ? "" : "s"}`];
  if (run.status === "running") parts.unshift("running");
  if (run.resumedFrom) {
    const at = run.resumedAtStep !== undefined && run.resumedAtStep !== null ? ` @ step ${run.resumedAtStep}` : "";
    const edits = run.edits ? ` (${run.edits} edit${run.edits === 1 ? "" : "s"})` : "";
    parts.push(`${run.edits ? "forked" : "resumed"} from ${shortRunId(run.resumedFrom)}${at}${edits}`);
  }
  const usage = usageShort(run.usage);
  if (usage) parts.push(usage);
  return parts.join(" · ");
}

const count = (n: number): string => n.toLocaleString("en-US");
const plural = (n: number, one: string): string => `${count(n)} ${one}${n === 1 ? "" : "s"}`;

/** A run row's word on its model calls: what a resume saved, else what the run called. */
export function usageShort(u: Usage | null | undefined): string {
  if (!u) return "";
  if (u.replayedCalls) return `saved ${plural(u.savedInputTokens + u.savedOutputTokens, "token")}`;
  if (u.calls) return `${plural(u.calls, "model call")}, ${plural(u.inputTokens + u.outputTokens, "token")}`;
  return "";
}

/** A run's model calls as its tooltip says them (as the CLI does). */
export function usageLines(u: Usage | null | undefined): string[] {
  if (!u) return [];
  const lines: string[] = [];
  const money = (c: number | null | undefined) => (c === undefined || c === null ? "" : ` (cost ${c.toFixed(4)})`);
  if (u.calls) lines.push(`called models ${plural(u.calls, "time")}: ${count(u.inputTokens)} input and ${count(u.outputTokens)} output tokens${money(u.cost)}`);
  if (u.replayedCalls) lines.push(`replayed ${plural(u.replayedCalls, "model call")}, saved ${plural(u.savedInputTokens + u.savedOutputTokens, "token")}${money(u.savedCost)}`);
  return lines;
}

/** `gpt-4o · 161 in / 14 out tokens · 41 ms` */
export function callText(c: ModelCall): string {
  return `${c.model} · ${count(c.inputTokens ?? 0)} in / ${count(c.outputTokens ?? 0)} out tokens · ${formatDuration(c.ms ?? 0)}`;
}

export function stepDescription(s: StepInfo): string {
  const parts: string[] = [];
  if (s.diverged) parts.push("diverged");
  if (s.replayed) parts.push("replayed");
  const d = formatDuration(s.durationMs);
  if (d && !s.replayed) parts.push(d);
  return parts.join(" · ");
}

export type StepIconKind = "diverged" | "replayed" | "live";

export function stepIconKind(s: StepInfo): StepIconKind {
  if (s.diverged) return "diverged";
  if (s.replayed) return "replayed";
  return "live";
}

export type RunIconKind = "succeeded" | "failed" | "stopped" | "running" | "unknown";

export function runIconKind(status: string): RunIconKind {
  return status === "succeeded" || status === "failed" || status === "stopped" || status === "running"
    ? status
    : "unknown";
}

/** `Result (300): [2, 4, 6, …]` */
export function outputLabel(o: OutputPreview): { label: string; description: string } {
  return { label: o.port, description: `${o.count} token${o.count === 1 ? "" : "s"} · ${o.preview}` };
}

/** `review: 3 × `x`` — a queue's tokens in one line. */
export function tokensText(rows: QueueTokens[] | null | undefined): string {
  if (!rows?.length) return "nothing";
  return rows.map((r) => `${r.queue}: ${r.tokens.join(", ")}`).join("; ");
}

/** The failure row of a failed run: `✘ picky · fire 2 failed`, with what it took and the error. */
export function failureLabel(e: ErrorDetail): { label: string; description: string } {
  const who = e.actor ? `${e.actor}${e.fireCount ? ` · fire ${e.fireCount}` : ""} failed` : "failed";
  const took = e.taken?.length ? `took ${e.taken.map((t) => t.tokens.join(", ")).join("; ")} · ` : "";
  return { label: who, description: `${took}${shortError(e)}` };
}

/** The error without the actor, firing and site the message repeats (the row says them). */
export function shortError(e: ErrorDetail): string {
  let text = e.message;
  if (e.actor) {
    const said = `${e.actor} failed on firing ${e.fireCount}`;
    if (text.startsWith(said)) {
      text = text.slice(said.length);
      const cut = text.startsWith(" (") ? text.indexOf("): ") : -1; // (created at file:line): …
      text = cut >= 0 ? text.slice(cut + 3) : text.replace(/^: /, "");
    }
  }
  return text;
}

/** An inner firing's row: `wrap/mid/leaf · fire 2`. */
export function firingLabel(f: Pick<FiringDetail, "actor" | "fireCount">): string {
  return `${f.actor} · fire ${f.fireCount}`;
}

export function firingDescription(f: FiringDetail): string {
  const parts = [f.replayed ? "replayed" : "live"];
  if (f.taken.length) parts.push(`took ${f.taken.map((t) => t.tokens.join(", ")).join("; ")}`);
  if (f.put.length) parts.push(`put ${f.put.map((t) => t.tokens.join(", ")).join("; ")}`);
  return parts.join(" · ");
}

/** What the notification of a finished run says: its status, steps, and its outputs previewed. */
export function finishMessage(p: RunFinishedParams, shortId: string): string {
  const steps = p.steps !== undefined ? ` · ${p.steps} step${p.steps === 1 ? "" : "s"}` : "";
  const head = `run ${shortId} ${p.status}${steps}`;
  if (p.status === "failed") return `${head}: ${p.errorDetail ? `${failureLabel(p.errorDetail).label}: ${shortError(p.errorDetail)}` : p.error ?? "it failed"}`;
  const outputs = p.outputs && typeof p.outputs === "object" ? Object.entries(p.outputs as Record<string, unknown>) : [];
  if (!outputs.length) return `${head} · no outputs`;
  return `${head} · ${outputs.map(([port, tokens]) => `${port} = ${previewValue(tokens, 60)}`).join(" · ")}`;
}

/** A JSON value in one line, cut at `limit` characters. */
export function previewValue(value: unknown, limit = 80): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}
