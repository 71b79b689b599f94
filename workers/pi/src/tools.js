// The granted tools, as Pi's own tool definitions with operations of ours:
// - read, ls, grep, find, write, edit: Pi's tools; every path is checked beneath the workspace
//   (and writes are confined by the kernel besides); grep and find walk in Node (search.js);
// - bash: Pi's tool, each command started through `subzero-worker tool-exec` (a nested Landlock
//   domain that cannot ptrace this process, every descriptor above 2 closed, its own process
//   group) with a minimal environment that never holds the key.
// Every call is bounded by the run's toolTimeoutMs.

import { spawn } from "node:child_process";
import { access, mkdir, readdir, readFile, stat, unlink, writeFile } from "node:fs/promises";
import { constants, existsSync } from "node:fs";
import { constants as osConstants } from "node:os";
import {
  createBashToolDefinition,
  createEditToolDefinition,
  createFindToolDefinition,
  createGrepToolDefinition,
  createLsToolDefinition,
  createReadToolDefinition,
  createWriteToolDefinition,
} from "@earendil-works/pi-coding-agent";
import { REFUSED } from "./calls.js";
import { beneath } from "./paths.js";
import { findOperations, grepExecute } from "./search.js";
import * as tree from "./tree.js";

/** The tool names this worker maps onto Pi's (the same names). */
export const BUILTIN = ["read", "grep", "find", "ls", "write", "edit", "bash"];
/** Tools that write (they need a write-capable grant). */
export const WRITING = ["write", "edit", "bash"];

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The tools this worker can run here: bash only with the sandbox command from the init. */
export function available() {
  return BUILTIN.filter((name) => name !== "bash" || toolExecPrefix() !== undefined);
}

/** `subzero-worker tool-exec …` as the init passed it (JSON array), or undefined. */
export function toolExecPrefix() {
  const raw = process.env.SUBZERO_PI_TOOL_EXEC;
  if (!raw) return undefined;
  try {
    const prefix = JSON.parse(raw);
    return Array.isArray(prefix) && prefix.every((p) => typeof p === "string") ? prefix : undefined;
  } catch {
    return undefined;
  }
}

/** Pi tool definitions for `names`, rooted at `root`. */
export function definitions(names, { root, scratch, toolTimeoutMs }) {
  const check = (abs) => beneath(root, abs);
  const make = {
    read: () =>
      createReadToolDefinition(root, {
        autoResizeImages: false,
        operations: {
          readFile: async (abs) => readFile(await check(abs)),
          access: async (abs) => access(await check(abs), constants.R_OK),
        },
      }),
    ls: () =>
      createLsToolDefinition(root, {
        operations: {
          exists: async (abs) => existsSync(await check(abs)),
          stat: async (abs) => stat(await check(abs)),
          readdir: async (abs) => readdir(await check(abs)),
        },
      }),
    find: () => createFindToolDefinition(root, { operations: findOperations(check) }),
    grep: () => ({ ...createGrepToolDefinition(root), execute: grepExecute(root, check) }),
    write: () =>
      createWriteToolDefinition(root, {
        operations: {
          writeFile: async (abs, content) => writeFile(await check(abs), content),
          mkdir: async (dir) => {
            await mkdir(await check(dir), { recursive: true });
          },
        },
      }),
    edit: () =>
      createEditToolDefinition(root, {
        operations: {
          readFile: async (abs) => readFile(await check(abs)),
          writeFile: async (abs, content) => writeFile(await check(abs), content),
          access: async (abs) => access(await check(abs), constants.R_OK | constants.W_OK),
        },
      }),
    bash: () =>
      withoutOutputFiles(
        createBashToolDefinition(root, {
          exposeSessionEnvironment: false,
          operations: bashOperations(root, scratch),
        }),
      ),
  };
  return names.map((name) => bounded(make[name](), toolTimeoutMs));
}

const FULL_OUTPUT = /Full output: ([^\]\n]+)\]/g;

/** Removes the output files `text` names; returns `text` saying they were not kept. */
async function forgetFiles(text) {
  const paths = [...text.matchAll(FULL_OUTPUT)].map((m) => m[1]);
  await Promise.all(paths.map((p) => unlink(p).catch(() => {})));
  return text.replace(FULL_OUTPUT, "the full output was not kept]");
}

/**
 * Pi's bash keeps a long output whole in a file of its own in the scratch directory and names
 * it to the model, which cannot read it there (outside the workspace). That file holds the raw
 * output, before redaction: it is removed when the call ends, as the Rust worker removes its
 * capture file, and the result says the full output was not kept.
 */
function withoutOutputFiles(definition) {
  const execute = definition.execute;
  return {
    ...definition,
    execute: async (...args) => {
      let result;
      try {
        result = await execute.apply(definition, args);
      } catch (err) {
        if (err instanceof Error) err.message = await forgetFiles(err.message);
        throw err;
      }
      const kept = result?.details?.fullOutputPath;
      if (kept) await unlink(kept).catch(() => {});
      const content = await Promise.all(
        (result?.content ?? []).map(async (block) =>
          block?.type === "text" ? { ...block, text: await forgetFiles(block.text) } : block,
        ),
      );
      const details = result?.details ? { ...result.details, fullOutputPath: undefined } : result?.details;
      const structured = result?.structuredContent
        ? { ...result.structuredContent, full_output_path: undefined }
        : result?.structuredContent;
      return { ...result, content, details, ...(structured ? { structuredContent: structured } : {}) };
    },
  };
}

/** How long a call may take to end after its timeout aborted it (Rust: `TIMEOUT_BACKSTOP`). */
const TIMEOUT_BACKSTOP_MS = 3000;

/**
 * `definition` whose calls end at `ms` with the Rust worker's tool error (`tools::timed_out`):
 * the call is aborted (bash's process group is killed), and what bash printed before is kept.
 */
function bounded(definition, ms) {
  const execute = definition.execute;
  const prepare = definition.prepareArguments;
  return {
    ...definition,
    // A call refused before it runs (calls.js) is answered with its error, before Pi
    // validates its (dropped or cut) arguments.
    prepareArguments: (args) => {
      if (args && args[REFUSED]) throw new Error(args[REFUSED]);
      return prepare ? prepare(args) : args;
    },
    execute: async (id, params, signal, onUpdate, ctx) => {
      const timeout = new AbortController();
      const both = signal ? AbortSignal.any([signal, timeout.signal]) : timeout.signal;
      const running = execute.call(definition, id, params, both, onUpdate, ctx);
      let timer;
      const expired = new Promise((resolve) => {
        timer = setTimeout(() => resolve(true), ms);
      });
      try {
        const first = await Promise.race([running.then(() => false, () => false), expired]);
        if (!first) return await running;
        timeout.abort();
        throw new Error(await timedOut(definition.name, ms, running));
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** The timeout's tool error, once the aborted call ended (or the backstop passed). */
async function timedOut(name, ms, running) {
  let output = "";
  if (name === "bash") {
    const ended = await Promise.race([
      running.then(
        () => "",
        (err) => String(err?.message ?? ""),
      ),
      new Promise((resolve) => setTimeout(() => resolve(""), TIMEOUT_BACKSTOP_MS)),
    ]);
    // Pi's bash ends an aborted command with its output and the line "Command aborted".
    output = ended.replace(/\n*Command aborted$/, "");
  }
  const what = name === "bash" ? "its processes were killed" : "its result was dropped";
  let text = `${name} timed out after ${ms} ms (toolTimeoutMs); ${what}`;
  if (output) text += `\noutput so far:\n${output}`;
  return text;
}

function shell() {
  return existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh";
}

/** Pi's `BashOperations`: each command through the sandbox command, in its own process group. */
export function bashOperations(root, scratch) {
  return {
    exec: (command, cwd, { onData, signal }) =>
      new Promise((resolve, reject) => {
        const prefix = toolExecPrefix();
        if (!prefix) {
          reject(new Error("bash is not available: the worker was started without its sandbox"));
          return;
        }
        if (signal?.aborted) {
          reject(new Error("aborted"));
          return;
        }
        const env = { PATH: DEFAULT_PATH, LANG: "C.UTF-8", TERM: "dumb", TMPDIR: scratch, HOME: root };
        const child = spawn(prefix[0], [...prefix.slice(1), "--", shell(), "-c", command], {
          cwd,
          env,
          detached: true,
          stdio: ["ignore", "pipe", "pipe"],
        });
        if (child.pid) tree.register(child.pid);
        const kill = () => {
          if (child.pid) tree.killGroup(child.pid);
        };
        signal?.addEventListener("abort", kill, { once: true });
        child.stdout.on("data", onData);
        child.stderr.on("data", onData);
        child.on("error", (err) => {
          signal?.removeEventListener("abort", kill);
          reject(err);
        });
        // The shell's exit ends the call; background processes holding the pipes do not.
        child.on("exit", (code, signalName) => {
          signal?.removeEventListener("abort", kill);
          setTimeout(() => {
            child.stdout.destroy();
            child.stderr.destroy();
            if (signal?.aborted) {
              reject(new Error("aborted"));
              return;
            }
            resolve({ exitCode: code ?? (signalName ? 128 + (osConstants.signals[signalName] ?? 9) : 1) });
          }, 50);
        });
      }),
  };
}
