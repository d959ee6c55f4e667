/** What pip's output says. No vscode import. */

/** The line of pip's output that says why it failed (an externally managed Python said plainly). */
export function pipReason(output: string): string {
  const lines = output.split("\n").map((l) => l.trim()).filter(Boolean);
  if (lines.some((l) => /externally-managed-environment/.test(l))) {
    return "the interpreter's environment is externally managed (a system Python): install into a virtual environment (Create .venv) instead";
  }
  const error = lines.filter((l) => /^(ERROR|error):/.test(l)).pop() ?? lines.pop() ?? "pip failed";
  return error.replace(/^(ERROR|error):\s*/, "");
}
