// An outside MCP client: the MCP TypeScript SDK drives the real `subzero mcp` over stdio
// through ../error_cases.json and reads the error code of every failing call.
//
// Usage: node error_cases.mjs sdk1|sdk2
//   sdk1: @modelcontextprotocol/sdk (1.x), sdk2: @modelcontextprotocol/client (2.x).
// Environment: SUBZERO_EXE, SUBZERO_WORKSPACE, SUBZERO_STATE_DIR, SUBZERO_CONFIG,
// SUBZERO_MODEL_URL, SUBZERO_TEST_KEY.
// Prints one JSON report on the last line of stdout; exits 1 when an outcome differs from
// the case file, a call throws, or the SDK printed a schema warning.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

async function sdk(which) {
  if (which === "sdk1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
    return { Client, StdioClientTransport, pkg: "@modelcontextprotocol/sdk" };
  }
  if (which === "sdk2") {
    const { Client } = await import("@modelcontextprotocol/client");
    const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
    return { Client, StdioClientTransport, pkg: "@modelcontextprotocol/client" };
  }
  throw new Error(`usage: node error_cases.mjs sdk1|sdk2 (got ${which})`);
}

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** Replace "$name" strings by their binding, recursively. */
function substitute(value, bindings) {
  if (typeof value === "string" && value.startsWith("$")) {
    const bound = bindings[value.slice(1)];
    if (bound === undefined) throw new Error(`no binding for ${value}`);
    return bound;
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, bindings));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, bindings)]));
  }
  return value;
}

/** The error code of a tool error: its text block is the error body as compact JSON. */
function errorCode(result) {
  const text = result.content?.find((block) => block.type === "text")?.text;
  try {
    return JSON.parse(text).code ?? null;
  } catch {
    return null;
  }
}

async function main() {
  const which = process.argv[2];
  const { Client, StdioClientTransport, pkg } = await sdk(which);
  const version = JSON.parse(readFileSync(join(here, "node_modules", pkg, "package.json"), "utf8")).version;
  // Schema warnings (`unknown format "uint64" ignored …`) are what hosts print on every start.
  const warnings = [];
  for (const level of ["warn", "error", "log"]) {
    const original = console[level];
    console[level] = (...args) => {
      warnings.push(args.map(String).join(" "));
      original.apply(console, args);
    };
  }

  const cases = JSON.parse(readFileSync(join(here, "..", "error_cases.json"), "utf8"));
  const bindings = {
    modelUrl: need("SUBZERO_MODEL_URL"),
    oversizePrompt: "é".repeat(33 * 1024),
  };
  const transport = new StdioClientTransport({
    command: need("SUBZERO_EXE"),
    args: [
      "mcp",
      "--workspace", need("SUBZERO_WORKSPACE"),
      "--state-dir", need("SUBZERO_STATE_DIR"),
      "--config", need("SUBZERO_CONFIG"),
    ],
    env: { PATH: process.env.PATH ?? "", SUBZERO_TEST_KEY: need("SUBZERO_TEST_KEY") },
    stderr: "ignore",
  });
  const client = new Client({ name: `subzero-tests-${which}`, version: "0" }, { capabilities: {} });
  await client.connect(transport);
  // Listing compiles the output validators, as a host does before its first call.
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();

  const results = [];
  let failed = false;
  for (const step of cases.steps) {
    const args = substitute(step.arguments, bindings);
    const row = { tool: step.tool, expect: step.expect };
    try {
      const result = await client.callTool({ name: step.tool, arguments: args });
      row.isError = result.isError === true;
      row.structured = result.structuredContent !== undefined;
      row.got = row.isError ? errorCode(result) : "ok";
      if (!row.isError) {
        for (const [key, value] of Object.entries(result.structuredContent ?? {})) {
          if (typeof value === "string") bindings[key] = value;
        }
      }
    } catch (error) {
      row.got = null;
      row.thrown = String(error?.message ?? error);
    }
    if (row.got !== step.expect) failed = true;
    results.push(row);
  }
  await client.close();

  const schemaWarnings = warnings.filter((w) => /unknown format|strict mode|schema/i.test(w));
  if (schemaWarnings.length > 0) failed = true;
  process.stdout.write(
    `${JSON.stringify({ sdk: pkg, version, tools, results, schemaWarnings })}\n`,
  );
  process.exitCode = failed ? 1 : 0;
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exitCode = 2;
});
