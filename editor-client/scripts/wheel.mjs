// Builds the `flowtape` wheel the .vsix carries (wheels/), from this repository: the extension
// installs that wheel, never a `flowtape` looked up on the package registry (that name is not ours).
// Python: FLOWTAPE_PYTHON, else <repo>/.venv/bin/python, else python3 (pip fetches the build backend, setuptools, from the package registry).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const CLIENT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const ROOT = resolve(CLIENT, "..");
const OUT = join(CLIENT, "wheels");
const venv = join(ROOT, ".venv/bin/python");
const python = process.env.FLOWTAPE_PYTHON ?? (existsSync(venv) ? venv : "python3");

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
const built = spawnSync(python, ["-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", OUT, ROOT], {
  stdio: "inherit",
});
const wheels = existsSync(OUT) ? readdirSync(OUT).filter((f) => /^flowtape-.*\.whl$/.test(f)) : [];
if (built.status !== 0 || wheels.length !== 1) {
  console.error(`wheel: building the flowtape wheel with ${python} failed (exit ${built.status}; found ${JSON.stringify(wheels)})`);
  process.exit(1);
}
console.log(`wheel: wheels/${wheels[0]}`);
