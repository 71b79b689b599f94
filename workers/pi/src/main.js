// The Pi worker: one process per child, started by `subzero-worker worker --engine pi` (the init of
// the child's PID namespace, which confined this process before exec) and speaking the
// worker control protocol on stdin/stdout (schema-src/v1/control-*.schema.json); logs on
// stderr only.

import * as net from "./net.js";

// Before Pi is loaded: nothing it does may reach the network but the run's model origin.
net.install();

const { readFileSync, mkdirSync } = await import("node:fs");
const path = await import("node:path");
const { emit, event, log, readLines } = await import("./wire.js");
const { addSecrets, redact } = await import("./redact.js");
const { PROTOCOLS } = await import("./provider.js");
const { RunError, execute } = await import("./run.js");
const { Steers } = await import("./steers.js");
const { TRANSCRIPT_VERSION } = await import("./transcript.js");
const { available } = await import("./tools.js");
const tree = await import("./tree.js");

const here = path.dirname(new URL(import.meta.url).pathname);
const VERSION = JSON.parse(readFileSync(path.join(here, "..", "package.json"), "utf8")).version;
const PI_VERSION = JSON.parse(
  readFileSync(path.join(here, "..", "node_modules/@earendil-works/pi-coding-agent/package.json"), "utf8"),
).version;

const scratch = process.env.SUBZERO_PI_SCRATCH || process.env.TMPDIR || "/tmp";
const agentDir = path.join(scratch, "pi-agent");
mkdirSync(path.join(agentDir, "sessions"), { recursive: true, mode: 0o700 });

function hello() {
  let containment;
  try {
    containment = process.env.SUBZERO_PI_CONTAINMENT ? JSON.parse(process.env.SUBZERO_PI_CONTAINMENT) : undefined;
  } catch {
    containment = undefined;
  }
  emit({
    type: "hello",
    name: "pi",
    version: `${VERSION}+pi.${PI_VERSION}`,
    transcriptVersion: TRANSCRIPT_VERSION,
    controlVersion: 1,
    protocols: PROTOCOLS,
    steering: true,
    capabilities: { tools: available(), mcpServers: false, compaction: false },
    ...(containment ? { containment } : {}),
  });
}

let active;

const ZERO_USAGE = { inputTokens: 0, outputTokens: 0, turns: 0, source: "reported" };

function start(message) {
  addSecrets([message.model?.key, ...(message.secrets ?? []), ...Object.values(message.mcpEnv ?? {})]);
  if (active) {
    emit({
      type: "run_settled",
      runId: message.runId,
      status: "failed",
      result: null,
      error: { code: "busy", message: `busy: run ${active.runId} is still active in this worker` },
      usage: ZERO_USAGE,
    });
    return;
  }
  const control = { steers: new Steers(), cancel: new AbortController().signal, agentDir, scratch };
  const abort = new AbortController();
  control.cancel = abort.signal;
  const run = { runId: message.runId, control, abort, cancelled: false };
  active = run;
  log("info", "run started", { child_id: message.childId, run_id: message.runId });
  run.done = execute(message, control).then(
    (outcome) => outcome,
    (err) => (run.cancelled ? { status: "stopped" } : { status: "failed", error: errorOf(err) }),
  );
  run.done.then((outcome) => settle(run, run.cancelled ? { ...outcome, status: outcome.status === "failed" ? "stopped" : outcome.status } : outcome));
}

function errorOf(err) {
  if (err instanceof RunError) return err.body();
  log("error", "the run failed inside the worker", { err: err?.stack ?? String(err) });
  return { code: "internal", message: redact(`internal: ${err?.message ?? String(err)}`) };
}

function discardReason(outcome) {
  if (outcome.status === "completed") return "not_active";
  if (outcome.status === "failed") return outcome.error?.code === "limit_exceeded" ? "limit" : "failed";
  return "stopped";
}

async function settle(run, outcome) {
  const reaped = await tree.killAll();
  for (const steer of run.control.steers.leftovers()) {
    event(run.runId, {
      kind: "steer_discarded",
      steerId: steer.steerId,
      ...(steer.requestId ? { requestId: steer.requestId } : {}),
      reason: discardReason(outcome),
    });
  }
  const progress = run.control.progress?.() ?? { usage: ZERO_USAGE, text: "" };
  if (outcome.status === "completed" || outcome.status === "budget_exhausted") {
    emit({ type: "leaf_committed", runId: run.runId, leafId: outcome.leaf, digest: outcome.digest });
  }
  const partial = progress.text ? redact(progress.text) : null;
  emit({
    type: "run_settled",
    runId: run.runId,
    status: outcome.status,
    result: outcome.status === "completed" || outcome.status === "budget_exhausted" ? outcome.result : partial,
    error: outcome.error ?? null,
    ...(outcome.budget ? { budget: outcome.budget } : {}),
    ...(outcome.cut ? { cut: { limit: "maxOutputTokens", value: outcome.cut } } : {}),
    usage: { ...progress.usage },
  });
  log("info", "run settled", { run_id: run.runId, status: outcome.status, reaped });
  if (outcome.status === "stopped") emit({ type: "cancel_confirmed", runId: run.runId, reaped });
  if (active === run) active = undefined;
  run.settled = true;
}

async function cancel(message) {
  if (active && active.runId === message.runId) {
    active.cancelled = true;
    active.abort.abort();
    return;
  }
  const reaped = active ? 0 : await tree.killAll();
  emit({ type: "cancel_confirmed", runId: message.runId, reaped });
}

function steer(message) {
  if (active && active.runId === message.runId && active.control.steers.offer(message)) return;
  event(message.runId, {
    kind: "steer_discarded",
    steerId: message.steerId,
    ...(message.requestId ? { requestId: message.requestId } : {}),
    reason: "not_active",
  });
}

function onLine(line) {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    log("warn", "ignoring a control line that is not JSON");
    return;
  }
  switch (message?.type) {
    case "start_run":
      start(message);
      break;
    case "steer":
      steer(message);
      break;
    case "cancel":
      cancel(message).catch((err) => log("error", "cancel failed", { err: err.message }));
      break;
    default:
      log("warn", "ignoring an unknown control message", { type: String(message?.type) });
  }
}

/** stdin closed: cancel what runs, end the tool tree, exit (within 1 s). */
async function teardown() {
  log("info", "control channel closed; tearing down");
  if (active) {
    const run = active;
    run.cancelled = true;
    run.abort.abort();
    await Promise.race([run.done, new Promise((r) => setTimeout(r, 300))]);
    if (!run.settled) await settle(run, { status: "stopped" });
  } else {
    await tree.killAll();
  }
  process.exit(0);
}

/** Told to terminate: nobody asked to stop the run, so it is not reported stopped. */
async function abandon(signalName) {
  log("warn", `terminating on ${signalName}; tearing the tool tree down`);
  if (active) {
    active.abort.abort();
  }
  await tree.killAll();
  process.exit(0);
}

for (const name of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(name, () => abandon(name));

hello();
readLines(process.stdin, onLine, () => {
  teardown().catch(() => process.exit(1));
});
