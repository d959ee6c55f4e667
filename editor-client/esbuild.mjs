// Bundles the extension (dist/extension.js) or, with --tests, the unit tests (out/test/unit/*.test.js).
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
  if (args.has("--watch")) {
    const ctx = await esbuild.context(options);
    await ctx.watch();
  } else {
    await esbuild.build(options);
  }
}
