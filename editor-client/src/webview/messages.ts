/** The messages between the graph view's page and the extension (defined once, for both). */
import type { PictureState } from "../core/picture";
import type { FlowGraph, QueueTokensResult, TimelineResult } from "../core/protocol";

export type ToPage =
  | { type: "graph"; graph: FlowGraph; title: string }
  | { type: "state"; state: PictureState }
  | { type: "timeline"; reset: boolean; result: TimelineResult } // (reset: a run anew, else what follows)
  | { type: "queue"; result: QueueTokensResult }
  | { type: "error"; message: string };

export type ToHost =
  | { type: "ready" }
  | { type: "actor"; path: string }
  | { type: "edge"; queue: number }
  | { type: "step"; step: number; inner: number } // inner: an inner firing of the step (0: the step)
  | { type: "openQueue"; queue: number; step: number };
