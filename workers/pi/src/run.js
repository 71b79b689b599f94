// One run on Pi's SDK: the session opened on the child's transcript, the granted tools, the
// prompt; Pi's events turned into control events; the budgets watched between turns; the
// handoff when one is reached. Returns the outcome the worker settles.

import { realpathSync, statSync } from "node:fs";
import path from "node:path";
import {
  convertToLlm,
  createAgentSession,
  createExtensionRuntime,
  SettingsManager,
} from "@earendil-works/pi-coding-agent";
import { isContextOverflow } from "@earendil-works/pi-ai";
import * as budgets from "./budget.js";
import { guardCalls } from "./calls.js";
import { conform } from "./payload.js";
import * as net from "./net.js";
import { connect, learnCapField, PROTOCOLS } from "./provider.js";
import { redact } from "./redact.js";
import { runSetup } from "./setup.js";
import { TextEvents } from "./text.js";
import { BUILTIN, WRITING, available, definitions } from "./tools.js";
import * as transcript from "./transcript.js";
import { event, log } from "./wire.js";

/** A run that cannot go on: its typed error. */
export class RunError extends Error {
  constructor(code, message, details) {
    super(message);
    this.code = code;
    this.details = details;
  }
  body() {
    return { code: this.code, message: redact(this.message), ...(this.details ? { details: this.details } : {}) };
  }
}

/** Refuses what this worker cannot enforce, before anything else happens (Rust: `check_grant`). */
export function checkGrant(start) {
  if (process.env.SUBZERO_PI_REFUSE) {
    // The init could not build this child's jail; Node never runs a tool less confined.
    throw new RunError("unsupported_grant", process.env.SUBZERO_PI_REFUSE);
  }
  const api = start.model.api;
  if (!PROTOCOLS.includes(api)) {
    throw new RunError("worker_incompatible", `worker_incompatible: this worker speaks ${JSON.stringify(PROTOCOLS)}, not ${JSON.stringify(api)}; pick a supported api`);
  }
  const snapshot = start.snapshot;
  for (const tool of snapshot.tools) {
    if (!BUILTIN.includes(tool)) {
      throw new RunError("unsupported_grant", `unsupported_grant: this worker has no tool named ${JSON.stringify(tool)}`);
    }
    if (!available().includes(tool)) {
      throw new RunError("unsupported_grant", `unsupported_grant: the Pi worker cannot run ${JSON.stringify(tool)} here: it was started without its sandbox command`);
    }
  }
  if ((snapshot.mcpServers ?? []).length > 0) {
    throw new RunError("unsupported_grant", "unsupported_grant: the Pi worker does not run MCP servers; use worker = \"rust\" for a template with mcp_servers");
  }
  const readOnlyBash = snapshot.filesystem?.access === "read-only";
  if (!snapshot.writeCapable) {
    const writer = snapshot.tools.find((t) => WRITING.includes(t) && !(readOnlyBash && t === "bash"));
    if (writer) throw new RunError("unsupported_grant", `unsupported_grant: tool ${JSON.stringify(writer)} needs a write-capable grant`);
  }
  if (start.compact) {
    throw new RunError("unsupported_grant", "unsupported_grant: the Pi worker does not compact a transcript; leave `compact` out or use worker = \"rust\"");
  }
}

function workspaceRoot(start) {
  try {
    const root = realpathSync(start.workspaceRoot);
    if (statSync(root).isDirectory()) return root;
  } catch {
    // refused below
  }
  throw new RunError("invalid_request", `invalid_request: workspace root ${start.workspaceRoot} is not a directory`);
}

function systemPrompt(snapshot) {
  let system = snapshot.instructions ?? "";
  for (const skill of snapshot.skills ?? []) {
    if (system) system += "\n\n";
    system += `## Skill: ${skill.name}\n\n${skill.content}`;
  }
  // Pi puts its own default prompt (about itself) in place of an empty one.
  return system || " ";
}

/** A resource loader that finds nothing: no extensions, skills, prompt templates, themes or context files. */
function resources(prompt) {
  return {
    getExtensions: () => ({ extensions: [], errors: [], runtime: createExtensionRuntime() }),
    getSkills: () => ({ skills: [], diagnostics: [] }),
    getPrompts: () => ({ prompts: [], diagnostics: [] }),
    getThemes: () => ({ themes: [], diagnostics: [] }),
    getAgentsFiles: () => ({ agentsFiles: [] }),
    getSystemPrompt: () => prompt,
    getSystemPromptSource: () => undefined,
    getAppendSystemPrompt: () => [],
    getAppendSystemPromptSources: () => [],
    extendResources: () => {},
    reload: async () => {},
  };
}

function settings() {
  return SettingsManager.inMemory({
    compaction: { enabled: false },
    retry: { enabled: false, maxRetries: 0, provider: { maxRetries: 0 } },
    cacheWarming: "off",
    steeringMode: "all",
    followUpMode: "all",
    enableInstallTelemetry: false,
    enableAnalytics: false,
    // No timeout of Pi's own (0): the worker's fetch (net.js) bounds the silence before the
    // headers and between chunks by `streamLimits.idleTimeoutMs`, and says so.
    httpIdleTimeoutMs: 0,
    defaultThinkingLevel: "off",
  });
}

function userMessage(text) {
  return { role: "user", content: [{ type: "text", text }], timestamp: Date.now() };
}

function textOf(message) {
  if (!message || !Array.isArray(message.content)) return typeof message?.content === "string" ? message.content : "";
  return message.content
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("");
}

/** Tokens of one request: as reported, else estimated from its bytes. */
function usageOf(message, counters) {
  const reported = message.usage;
  if (reported && (reported.input > 0 || reported.output > 0)) {
    counters.input += reported.input + (reported.cacheRead ?? 0) + (reported.cacheWrite ?? 0);
    counters.output += reported.output;
    return;
  }
  const bytes = net.lastRequest();
  counters.input += Math.ceil((bytes?.requestBytes ?? 0) / 4);
  counters.output += Math.ceil((bytes?.responseBytes ?? 0) / 4);
  counters.source = "estimated";
}

/**
 * Runs `start` to its outcome: `{status, result, error, budget, cut, usage, leaf, digest}`.
 * `control` carries the run's steer queue, its cancel signal and the worker's private dirs.
 */
export async function execute(start, control) {
  const usage = { inputTokens: 0, outputTokens: 0, turns: 0, source: "reported" };
  const counters = { input: 0, output: 0, source: "reported" };
  const text = new TextEvents(start.runId);
  const state = {
    budget: undefined,
    lastAssistant: undefined,
    cancelled: false,
    text,
    steers: control.steers,
    // Calls a budget left unrun: no tool event, as the Rust worker sends none.
    unrun: new Set(),
  };
  const sync = () => {
    usage.inputTokens = counters.input;
    usage.outputTokens = counters.output;
    usage.source = counters.source;
  };
  control.progress = () => {
    sync();
    return { usage, text: text.text };
  };
  checkGrant(start);
  const root = workspaceRoot(start);
  net.allow(start.model.url, start.streamLimits);
  const where = transcript.location(start.transcriptPath);
  let manager;
  try {
    manager = transcript.open(start, where, root, path.join(control.agentDir, "sessions"));
  } catch (err) {
    if (err instanceof transcript.TranscriptError) throw new RunError(err.code, err.message);
    throw err;
  }
  if (start.recoveryNotice) manager.appendMessage(userMessage(start.recoveryNotice));
  const setupNote = await runSetup(start, root, control.scratch);
  if (setupNote) manager.appendMessage(userMessage(setupNote));
  const limits = start.snapshot.limits;
  const { runtime, model } = await connect(start.model, limits.maxOutputTokens);
  const { session } = await createAgentSession({
    cwd: root,
    agentDir: control.agentDir,
    modelRuntime: runtime,
    model,
    thinkingLevel: "off",
    noTools: "all",
    tools: [...start.snapshot.tools],
    customTools: definitions([...start.snapshot.tools], {
      root,
      scratch: control.scratch,
      toolTimeoutMs: limits.toolTimeoutMs,
    }),
    resourceLoader: resources(systemPrompt(start.snapshot)),
    sessionManager: manager,
    settingsManager: settings(),
  });
  session.agent.onPayload = conform;
  learnCapField(session.agent, start.model);
  guardCalls(
    session.agent,
    {
      maxArgumentBytes: start.streamLimits?.maxToolArgumentBytes ?? net.DEFAULT_LIMITS.maxToolArgumentBytes,
      maxOutputTokens: limits.maxOutputTokens,
    },
  );
  const started = Date.now();
  const deadline = setTimeout(() => {
    state.budget ??= { budget: "deadlineMs", limit: limits.deadlineMs, reached: Date.now() - started };
    session.abort().catch(() => {});
  }, limits.deadlineMs);
  const onCancel = () => {
    state.cancelled = true;
    session.abort().catch(() => {});
  };
  control.cancel.addEventListener("abort", onCancel, { once: true });
  control.steers.attach(session, start.runId);
  try {
    watch(session, start, state, counters, usage);
    guard(session, start, state);
    await session.prompt(start.prompt, { expandPromptTemplates: false });
    text.finish();
    control.steers.close();
    return await conclude(session, runtime, model, start, state, counters, usage, where, control);
  } finally {
    clearTimeout(deadline);
    control.cancel.removeEventListener("abort", onCancel);
    sync();
    session.dispose();
  }
}

/** Pi's events as control events, and the budgets checked after each answer. */
function watch(session, start, state, counters, usage) {
  const limits = start.snapshot.limits;
  session.subscribe((ev) => {
    switch (ev.type) {
      case "turn_start":
        usage.turns += 1;
        event(start.runId, { kind: "turn_started", turn: usage.turns });
        break;
      case "message_update":
        if (ev.assistantMessageEvent?.type === "text_delta") state.text.push(ev.assistantMessageEvent.delta);
        break;
      case "message_end":
        if (ev.message.role === "assistant") {
          state.text.finish();
          state.lastAssistant = ev.message;
          usageOf(ev.message, counters);
          // An answer that would go on: past the token budget its calls are not run (the
          // run hands off now); at maxTurns they run and the run hands off after them.
          const goesOn = ev.message.stopReason === "toolUse";
          if (goesOn && !state.budget) {
            state.budget = tokensReached(limits, counters);
            state.afterTurn = turnsReached(limits, usage.turns);
          }
        } else if (ev.message.role === "user") {
          state.steers?.applied(textOf(ev.message));
        }
        break;
      case "tool_execution_start":
        if (state.budget) state.unrun.add(ev.toolCallId);
        else event(start.runId, { kind: "tool", name: ev.toolName, state: "started" });
        break;
      case "tool_execution_end":
        if (!state.unrun.has(ev.toolCallId)) {
          event(start.runId, { kind: "tool", name: ev.toolName, state: ev.isError ? "failed" : "finished" });
        }
        break;
      default:
        break;
    }
  });
}

/** `maxTurns`, when `turns` turns have been taken (checked before the next one, Rust: `turns_reached`). */
function turnsReached(limits, turns) {
  return turns >= limits.maxTurns ? { budget: "maxTurns", limit: limits.maxTurns, reached: turns } : undefined;
}

/** `tokenBudget`, when the run's tokens reached it (checked when the run would go on, Rust: `tokens_reached`). */
function tokensReached(limits, counters) {
  const used = counters.input + counters.output;
  if (limits.tokenBudget && used >= limits.tokenBudget) {
    return { budget: "tokenBudget", limit: limits.tokenBudget, reached: used };
  }
  return undefined;
}

/**
 * Calls left unrun once a budget is reached (a call the deadline cut short is answered `not
 * run` too); the run ends after the turn. Oversized and cut calls are refused before this, by
 * their tool's `prepareArguments` (calls.js).
 */
function guard(session, start, state) {
  const agent = session.agent;
  const before = agent.beforeToolCall;
  agent.beforeToolCall = async (context, signal) => {
    if (state.budget) return { block: true, reason: budgets.unrunCall(state.budget), terminate: true };
    return before ? before(context, signal) : undefined;
  };
  const after = agent.afterToolCall;
  agent.afterToolCall = async (context, signal) => {
    if (state.budget?.budget === "deadlineMs") {
      return { content: [{ type: "text", text: budgets.unrunCall(state.budget) }], isError: true };
    }
    return after ? after(context, signal) : undefined;
  };
  const finish = agent.finishTurn;
  agent.finishTurn = async (turn, signal) => {
    state.budget ??= state.afterTurn;
    if (state.budget) return { action: "end" };
    return finish ? finish(turn, signal) : undefined;
  };
}

/** The outcome once Pi's run is over: stopped, failed, handed off or completed, then committed. */
async function conclude(session, runtime, model, start, state, counters, usage, where, control) {
  if (state.cancelled) return { status: "stopped" };
  const last = state.lastAssistant;
  let result;
  let budget;
  let cut;
  if (state.budget) {
    budget = state.budget;
    result = await handoff(session, runtime, model, start, budget, counters, state, control);
  } else if (!last || last.stopReason === "error" || last.stopReason === "aborted") {
    throw failureOf(last, start, counters);
  } else {
    result = textOf(last);
    if (last.stopReason === "length") cut = start.snapshot.limits.maxOutputTokens;
  }
  const leaf = session.sessionManager.getLeafId();
  const digest = transcript.commit(where, leaf);
  return { status: budget ? "budget_exhausted" : "completed", result: redact(result), budget, cut, leaf, digest };
}

function failureOf(last, start, counters) {
  const guarded = net.takeFailure();
  const window = start.model.contextWindow ?? null;
  if (last?.stopReason === "error" && isContextOverflow(last, window ?? undefined)) {
    // Pi's compaction is off and this worker does not compact: the run ends, as a Rust child
    // with `compaction: "off"` does.
    return new RunError(
      "context_exhausted",
      `context_exhausted: the endpoint refused the prompt as too long for the model's context window, and the Pi worker does not compact; start a new child or use worker = "rust"`,
      {
        contextTokens: counters.input,
        contextWindow: window,
        ...(guarded?.details?.status ? { status: guarded.details.status, excerpt: guarded.details.excerpt } : {}),
      },
    );
  }
  if (guarded) return new RunError(guarded.code, guarded.message, guarded.details);
  const why = last?.errorMessage ?? "the model's answer ended without a result";
  return new RunError("model_request_failed", `model_request_failed: ${redact(why)}`, { status: null });
}

/** One request without tools for a short handoff summary, appended to the transcript. */
async function handoff(session, runtime, model, start, reached, counters, state, control) {
  const manager = session.sessionManager;
  manager.appendMessage(userMessage(budgets.notice(reached)));
  const lastText = textOf(state.lastAssistant);
  const stop = new AbortController();
  const signal = AbortSignal.any([stop.signal, control.cancel, AbortSignal.timeout(budgets.HANDOFF_TIMEOUT_MS)]);
  const context = { messages: convertToLlm(manager.buildSessionContext().messages) };
  const maxTokens = Math.min(budgets.HANDOFF_MAX_OUTPUT_TOKENS, start.snapshot.limits.maxOutputTokens);
  const text = new TextEvents(start.runId);
  let summary = "";
  let stopped = false;
  let final;
  try {
    const stream = runtime.streamSimple(model, context, {
      maxTokens,
      signal,
      toolChoice: "none",
      maxRetries: 0,
      onPayload: conform,
    });
    for await (const ev of stream) {
      if (ev.type === "text_delta") {
        summary += ev.delta;
        text.push(ev.delta);
        if (Buffer.byteLength(summary, "utf8") >= budgets.HANDOFF_MAX_BYTES) {
          stopped = true;
          stop.abort();
          break;
        }
      }
    }
    if (!stopped) final = await stream.result();
  } catch (err) {
    log("warn", "the handoff request failed", { err: err.message });
  }
  text.finish();
  if (control.cancel.aborted) {
    state.cancelled = true;
    return "";
  }
  if (final) usageOf(final, counters);
  else counters.source = counters.source === "reported" && !stopped ? "reported" : "estimated";
  if (!stopped && (!final || final.stopReason === "error" || final.stopReason === "aborted")) {
    const failed = net.takeFailure();
    const why = failed?.message ?? final?.errorMessage ?? "the request did not complete";
    return budgets.fallback(reached, redact(why), lastText);
  }
  const result = budgets.cutSummary(summary, stopped);
  manager.appendMessage({
    role: "assistant",
    content: [{ type: "text", text: result }],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: final?.usage ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
    stopReason: "stop",
    timestamp: Date.now(),
  });
  return result;
}
