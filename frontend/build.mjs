// Builds ../tb_trainhealth/plugin/static/index.js: one self-contained ES module
// (TypeScript + uPlot + all CSS as text). Deterministic: no timestamps, no source
// maps, no absolute paths; the same inputs give a byte-identical file.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outFile = join(here, "..", "tb_trainhealth", "plugin", "static", "index.js");
const uplotVersion = JSON.parse(readFileSync(join(here, "node_modules", "uplot", "package.json"), "utf8")).version;

const result = await build({
  absWorkingDir: here,
  entryPoints: ["src/index.ts"],
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2020",
  minify: true,
  charset: "ascii",
  legalComments: "none",
  sourcemap: false,
  write: false,
  loader: { ".css": "text" },
  logLevel: "warning",
  banner: {
    js:
      "/* tb-trainhealth Health tab (built from frontend/ by `npm run build`; do not edit). " +
      `Includes uPlot ${uplotVersion} (c) Leon Sorokin, MIT license, https://github.com/leeoniya/uPlot */`,
  },
});

const [file] = result.outputFiles;
if (!file || result.outputFiles.length !== 1) throw new Error("expected exactly one output file");
if (file.text.includes(here)) throw new Error("bundle contains an absolute path");
writeFileSync(outFile, file.contents);
const sha = createHash("sha256").update(file.contents).digest("hex");
console.log(`wrote tb_trainhealth/plugin/static/index.js (${file.contents.length} bytes, sha256 ${sha})`);
