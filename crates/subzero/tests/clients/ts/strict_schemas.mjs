// Ajv 2020 in strict mode (every strict option on, standard formats known through
// ajv-formats) compiles every published schema: the files of generated/schemas/, the input
// and output schema of every tool the real `subzero mcp` advertises in `tools/list`, and
// the normative schema-src/v1/ (all files registered together, so `urn:` references
// resolve, as docs/contract.md tells implementers to).
//
// Usage: node strict_schemas.mjs GENERATED_SCHEMAS_DIR SCHEMA_SRC_DIR
// Environment: SUBZERO_EXE, SUBZERO_WORKSPACE, SUBZERO_STATE_DIR, SUBZERO_CONFIG.
// Prints one JSON report on the last line of stdout; exits 1 when a schema does not compile
// or Ajv printed a warning.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** A strict Ajv 2020 whose warnings are collected under `name`. */
function strictAjv(name, warnings) {
  const logger = {
    log: () => {},
    warn: (...args) => warnings.push(`${name}: ${args.join(" ")}`),
    error: (...args) => warnings.push(`${name}: ${args.join(" ")}`),
  };
  const ajv = new Ajv2020({ strict: true, allErrors: true, logger });
  addFormats(ajv);
  return ajv;
}

function attempt(name, work) {
  try {
    work();
    return { name, ok: true };
  } catch (error) {
    return { name, ok: false, error: String(error?.message ?? error) };
  }
}

/** Compile `schema` in a fresh strict Ajv (each published schema is self-contained). */
function compile(name, schema, warnings) {
  return attempt(name, () => strictAjv(name, warnings).compile(schema));
}

/** Compile every file of `dir` with all of them registered under their `$id`s. */
function compileTogether(dir, files, warnings) {
  const ajv = strictAjv(dir, warnings);
  const docs = files.map((file) => [file, JSON.parse(readFileSync(join(dir, file), "utf8"))]);
  const added = attempt(`${dir} (registering)`, () => {
    for (const [, doc] of docs) ajv.addSchema(doc);
  });
  if (!added.ok) return [added];
  return docs.map(([file, doc]) =>
    attempt(`${dir}/${file}`, () => {
      if (!ajv.getSchema(doc.$id)) throw new Error(`${doc.$id} did not compile`);
    }),
  );
}

/** The schema files of `dir`, sorted. */
function schemaFiles(dir) {
  return readdirSync(dir).filter((n) => n.endsWith(".schema.json")).sort();
}

async function advertised() {
  const transport = new StdioClientTransport({
    command: need("SUBZERO_EXE"),
    args: [
      "mcp",
      "--workspace", need("SUBZERO_WORKSPACE"),
      "--state-dir", need("SUBZERO_STATE_DIR"),
      "--config", need("SUBZERO_CONFIG"),
    ],
    env: { PATH: process.env.PATH ?? "" },
    stderr: "ignore",
  });
  const client = new Client({ name: "subzero-strict-schemas", version: "0" }, { capabilities: {} });
  // The SDK's own (non-strict) Ajv would log its warnings here too: count them as failures.
  const sdkWarnings = [];
  const original = console.warn;
  console.warn = (...args) => sdkWarnings.push(args.map(String).join(" "));
  try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    await client.close();
    return { tools, sdkWarnings };
  } finally {
    console.warn = original;
  }
}

async function main() {
  const [dir, sourceDir] = process.argv.slice(2);
  if (!dir || !sourceDir) {
    throw new Error("usage: node strict_schemas.mjs GENERATED_SCHEMAS_DIR SCHEMA_SRC_DIR");
  }
  const warnings = [];
  const results = [];
  const files = schemaFiles(dir);
  for (const file of files) {
    results.push(compile(file, JSON.parse(readFileSync(join(dir, file), "utf8")), warnings));
  }
  const sources = schemaFiles(sourceDir);
  results.push(...compileTogether(sourceDir, sources, warnings));
  const { tools, sdkWarnings } = await advertised();
  for (const tool of tools) {
    results.push(compile(`${tool.name} inputSchema`, tool.inputSchema, warnings));
    if (tool.outputSchema) {
      results.push(compile(`${tool.name} outputSchema`, tool.outputSchema, warnings));
    }
  }
  warnings.push(...sdkWarnings);
  const failures = results.filter((r) => !r.ok);
  process.stdout.write(
    `${JSON.stringify({ files: files.length, sources: sources.length, tools: tools.length, compiled: results.length - failures.length, failures, warnings })}\n`,
  );
  process.exitCode = failures.length > 0 || warnings.length > 0 ? 1 : 0;
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exitCode = 2;
});
