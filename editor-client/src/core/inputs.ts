/** A workflow's declared inputs as the "▶ Run" prompt asks for them. No vscode import. */
import type { InputInfo } from "./protocol";

function isText(type: string): boolean {
  return /^(str|string|typing\.Text)$/.test(type.trim());
}

/** The value a user typed for an input: JSON (`3`, `"a"`, `[1, 2]`), or, for a `str` input, the
 *  text as typed. `{ error }` says what to type instead. */
export function parseInput(text: string, input: Pick<InputInfo, "name" | "type">): { value: unknown } | { error: string } {
  const trimmed = text.trim();
  if (isText(input.type)) {
    if (trimmed.startsWith('"')) {
      try {
        const v: unknown = JSON.parse(trimmed);
        if (typeof v === "string") return { value: v };
      } catch {
        // not a JSON string: the text as typed
      }
    }
    return { value: text };
  }
  if (!trimmed) return { error: `${input.name} needs a value${input.type ? ` (${input.type})` : ""}` };
  try {
    return { value: JSON.parse(trimmed) };
  } catch {
    return { error: `enter ${input.name} as JSON${input.type ? ` (a ${input.type})` : ""}: 3, 2.5, "text", [1, 2], {"k": 1}` };
  }
}

/** The text offered in the prompt for an input's last value. */
export function initialText(last: unknown, input: Pick<InputInfo, "type">): string {
  if (last === undefined) return "";
  if (typeof last === "string" && isText(input.type)) return last;
  return JSON.stringify(last) ?? "";
}
