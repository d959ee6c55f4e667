// Bundles the extension (dist/extension.js) and the graph view's page (dist/graph.js) or, with --tests, the unit tests (out/test/unit/*.test.js).
import * as esbuild from "esbuild";
import { readdirSync, rmSync } from "node:fs";

const args = new Set(process.argv.slice(2));

if (args.has("--tests")) {
  rmSync("out", { recursive: true, force: true });
  const entries = readdirSync("test/unit").filter((f) => f.endsWith(".test.ts")).map((f) => `test/unit/${f}`);
  await esbuild.build({
    entryPoints: entries,
    outdir: "out/test/unit",
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node18",
    sourcemap: "inline",
    // The unit tests cover the pure modules only: importing vscode there is a bug.
    plugins: [{
      name: "no-vscode",
      setup(b) {
        b.onResolve({ filter: /^vscode$/ }, (a) => ({ errors: [{ text: `unit-tested code must not import vscode (from ${a.importer})` }] }));
      },
    }],
    logLevel: "warning",
  });
} else {
  const options = {
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node18",
    external: ["vscode"],
    sourcemap: true,
    minify: args.has("--minify"),
    logLevel: "warning",
  };
  // The graph view's page: runs in the webview (a browser), with ELK bundled in (no CDN: offline).
  const page = {
    entryPoints: ["src/webview/graph.ts"],
    outfile: "dist/graph.js",
    bundle: true,
    platform: "browser",
    format: "iife",
    target: "es2020",
    sourcemap: true,
    minify: args.has("--minify"),
    logLevel: "warning",
  };
  if (args.has("--watch")) {
    for (const o of [options, page]) await (await esbuild.context(o)).watch();
  } else {
    await Promise.all([esbuild.build(options), esbuild.build(page)]);
  }
}
