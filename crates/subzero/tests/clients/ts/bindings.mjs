// TypeScript declarations from the bundled contract (generated/bundle/, written by
// `cargo xtask codegen`) with json-schema-to-typescript: one module per bundle, every type
// of schema-src/v1 exported (unreachable `$defs` included), plus an index that exports the
// normative module and the consumer module together (each bundle is first compiled by Ajv
// 2020 in strict mode). `tsc --strict` then type-checks them
// (crates/subzero/tests/testsuite/contract/bindings.rs runs both steps; docs/contract.md has the
// commands).
//
// Usage: node bindings.mjs BUNDLE_DIR OUT_DIR
// Prints one JSON report on the last line of stdout: {modules, types, names}.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import Ajv2020 from "ajv/dist/2020.js";
import { compile } from "json-schema-to-typescript";

/** Ajv 2020 in strict mode (with OpenAPI's `discriminator`, the bundle's one annotation
 * outside the 2020-12 vocabulary) compiles the bundle without a warning. */
function strictCompile(stem, schema) {
  const warnings = [];
  const say = (...args) => warnings.push(`${stem}: ${args.join(" ")}`);
  const ajv = new Ajv2020({ strict: true, discriminator: true, allErrors: true, logger: { log() {}, warn: say, error: say } });
  ajv.compile(schema);
  if (warnings.length > 0) throw new Error(warnings.join("\n"));
}

const BUNDLES = [
  ["subzero-v1", "Normative v1 types: what a v1 producer sends."],
  ["subzero-v1-consumer", "What a v1 consumer accepts (open to what a later v1 adds)."],
];

async function main() {
  const [bundleDir, outDir] = process.argv.slice(2);
  if (!bundleDir || !outDir) throw new Error("usage: node bindings.mjs BUNDLE_DIR OUT_DIR");
  mkdirSync(outDir, { recursive: true });
  const report = { modules: [], types: 0, names: [] };
  for (const [stem, what] of BUNDLES) {
    const schema = JSON.parse(readFileSync(join(bundleDir, `${stem}.schema.json`), "utf8"));
    strictCompile(stem, schema);
    const ts = await compile(schema, schema.title, {
      bannerComment: `// Generated from generated/bundle/${stem}.schema.json by json-schema-to-typescript; do not edit.\n// ${what}`,
      unreachableDefinitions: true,
      // A bounded array stays an array (bounds are validation, not types): without this,
      // 1..8 items become a union of eight tuple types.
      ignoreMinAndMaxItems: true,
      strictIndexSignatures: true,
      format: false,
    });
    writeFileSync(join(outDir, `${stem}.ts`), ts);
    const names = [...ts.matchAll(/^export (?:interface|type) (\w+)/gm)].map((m) => m[1]);
    report.modules.push(stem);
    report.types += names.length;
    if (stem === "subzero-v1") report.names = names;
  }
  writeFileSync(
    join(outDir, "index.ts"),
    'export * from "./subzero-v1";\nexport * as consumer from "./subzero-v1-consumer";\n',
  );
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exitCode = 1;
});
