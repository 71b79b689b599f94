// An outside check of Subzero's MCP Tasks extension: the reference TypeScript package
// (`@modelcontextprotocol/ext-tasks`, its Tasks V2 = 2026-07-28 wire schemas) judges every
// message the real `subzero mcp` answers a 2026-07-28 client with over stdio: the server's
// capabilities, the task a `subzero_spawn` answers with, every `tasks/get` until the task has
// ended, and `tasks/cancel` of a task whose child never answers.
//
// Usage: node tasks_v2.mjs
// Environment: SUBZERO_EXE, SUBZERO_WORKSPACE, SUBZERO_STATE_DIR, SUBZERO_CONFIG,
// SUBZERO_MODEL_URL, SUBZERO_TEST_KEY; SUBZERO_ANSWER, the first child's answer (the
// model answers it at once, then never again).
// Prints one JSON report on the last line of stdout; exits 1 when a message is not what the
// schemas accept or the task does not end as expected.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import {
  hasTaskServerCapabilityV2,
  isDetailedTaskV2,
  isToolCallTaskResultV2,
} from "@modelcontextprotocol/ext-tasks/core/v2";

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

const meta = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "subzero-tasks-v2-check", version: "1.0.0" },
  "io.modelcontextprotocol/clientCapabilities": {
    extensions: { "io.modelcontextprotocol/tasks": {} },
  },
};

const broker = spawn(
  need("SUBZERO_EXE"),
  [
    "mcp",
    "--workspace",
    need("SUBZERO_WORKSPACE"),
    "--state-dir",
    need("SUBZERO_STATE_DIR"),
    "--config",
    need("SUBZERO_CONFIG"),
  ],
  { stdio: ["pipe", "pipe", "inherit"] },
);
const pending = new Map();
let nextId = 1;
createInterface({ input: broker.stdout }).on("line", (line) => {
  const message = JSON.parse(line);
  const waiting = pending.get(message.id);
  if (waiting) {
    pending.delete(message.id);
    waiting(message);
  }
});

function request(method, params = {}) {
  const id = nextId++;
  const frame = { jsonrpc: "2.0", id, method, params: { ...params, _meta: meta } };
  return new Promise((resolve) => {
    pending.set(id, resolve);
    broker.stdin.write(`${JSON.stringify(frame)}\n`);
  });
}

const checks = [];
function check(what, ok, detail) {
  checks.push({ what, ok: Boolean(ok), ...(ok ? {} : { detail }) });
}

const model = {
  url: need("SUBZERO_MODEL_URL"),
  model: "scripted",
  credentialRef: "test",
};

async function spawnTask(prompt) {
  const answer = await request("tools/call", {
    name: "subzero_spawn",
    arguments: { prompt, templateId: "researcher", model },
  });
  check(`spawn "${prompt}" answers with a task`, isToolCallTaskResultV2("tools/call", answer.result), answer);
  return answer.result?.taskId;
}

async function untilEnded(taskId) {
  for (let i = 0; i < 300; i++) {
    const got = await request("tasks/get", { taskId });
    if (!isDetailedTaskV2(got.result)) {
      check("tasks/get answers a detailed task", false, got);
      return got.result;
    }
    if (got.result.status !== "working") return got.result;
    await new Promise((r) => setTimeout(r, Math.min(got.result.pollIntervalMs ?? 100, 100)));
  }
  return undefined;
}

try {
  const discovered = await request("server/discover");
  check(
    "server/discover declares the tasks extension",
    hasTaskServerCapabilityV2(discovered.result?.capabilities),
    discovered,
  );

  const first = await spawnTask("Answer at once.");
  const ended = await untilEnded(first);
  const structured = ended?.result?.structuredContent;
  check("the task completes", ended?.status === "completed", ended);
  check(
    "its result carries the settled run",
    structured?.run?.status === "completed" && structured.run.preview === need("SUBZERO_ANSWER"),
    ended,
  );

  const second = await spawnTask("Never answer.");
  const cancel = await request("tasks/cancel", { taskId: second });
  check("tasks/cancel is acknowledged", cancel.result && !cancel.error, cancel);
  const cancelled = await request("tasks/get", { taskId: second });
  check(
    "after the acknowledgement the task is cancelled",
    isDetailedTaskV2(cancelled.result) && cancelled.result.status === "cancelled",
    cancelled,
  );
  const unknown = await request("tasks/get", { taskId: `run_${"0".repeat(26)}` });
  check("an unknown task is invalid params", unknown.error?.code === -32602, unknown);
} finally {
  broker.stdin.end();
}

const report = { package: "@modelcontextprotocol/ext-tasks", checks };
console.log(JSON.stringify(report));
process.exit(checks.every((c) => c.ok) ? 0 : 1);
