// Builds the `flowtape` wheel the .vsix carries (wheels/), from this repository: the extension
// installs that wheel, never a `flowtape` looked up on the package registry (that name is not ours).
// Python: FLOWTAPE_PYTHON, else <repo>/.venv/bin/python, else python3 (pip fetches the build backend, setuptools, from the package registry).
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const CLIENT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const ROOT = resolve(CLIENT, "..");
const OUT = join(CLIENT, "wheels");
const venv = join(ROOT, ".venv/bin/python");
const python = process.env.FLOWTAPE_PYTHON ?? (existsSync(venv) ? venv : "python3");

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
// Built from a clean copy of the sources: an in-tree build reuses build/ and *.egg-info, whose
// leftovers can put in (or leave out) what the current pyproject.toml does not say.
const src = mkdtempSync(join(tmpdir(), "flowtape-wheel-"));
for (const part of ["pyproject.toml", "README.md", "engine", "server"]) {
  cpSync(join(ROOT, part), join(src, part), { recursive: true, filter: (p) => !/__pycache__|\.egg-info/.test(p) });
}
const built = spawnSync(python, ["-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", OUT, src], {
  stdio: "inherit",
});
rmSync(src, { recursive: true, force: true });
const wheels = existsSync(OUT) ? readdirSync(OUT).filter((f) => /^flowtape-.*\.whl$/.test(f)) : [];
if (built.status !== 0 || wheels.length !== 1) {
  console.error(`wheel: building the flowtape wheel with ${python} failed (exit ${built.status}; found ${JSON.stringify(wheels)})`);
  process.exit(1);
}
// Every package of the sources is in it (a package the build config misses makes an extension
// whose install "succeeds" into an interpreter that then cannot import flowtape).
const listed = spawnSync(python, ["-c", "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))", join(OUT, wheels[0])], { encoding: "utf8" });
const inWheel = new Set((listed.stdout ?? "").split("\n"));
const packages = (root, name) => (existsSync(join(root, "__init__.py")) ? [name] : []).concat(
  readdirSync(root, { withFileTypes: true }).filter((d) => d.isDirectory() && d.name !== "__pycache__").flatMap((d) => packages(join(root, d.name), `${name}/${d.name}`)),
);
const missing = [...packages(join(ROOT, "engine/flowtape"), "flowtape"), ...packages(join(ROOT, "server/flowtape_lsp"), "flowtape_lsp")]
  .filter((p) => !inWheel.has(`${p}/__init__.py`));
if (listed.status !== 0 || missing.length) {
  console.error(`wheel: wheels/${wheels[0]} lacks the packages ${JSON.stringify(missing)} (pyproject.toml's [tool.setuptools] finds them?)`);
  process.exit(1);
}
console.log(`wheel: wheels/${wheels[0]}`);
