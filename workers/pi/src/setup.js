// The template's setup command (`npm ci`, `uv sync`, …): run once in an isolated child's
// checkout before its first run, as a `bash` call runs — through the sandbox command, with
// `toolTimeoutMs` — and reported as `tool` events named `setup`, as the Rust worker does.
// A setup that fails does not fail the run: the model is told, with the end of its output.

import { redact } from "./redact.js";
import { bashOperations, toolExecPrefix } from "./tools.js";
import { event } from "./wire.js";

/** The most of the command's output the model is told (its end: where errors are). */
const NOTE_OUTPUT_BYTES = 4 * 1024;
/** The most of the output kept while the command runs. */
const KEPT_BYTES = 64 * 1024;

/** Runs the start's setup command, if this run has one; the note for the model when it failed. */
export async function runSetup(start, root, scratch) {
  const command = start.setup === true ? start.snapshot.setup : undefined;
  if (!command) return undefined;
  event(start.runId, { kind: "tool", name: "setup", state: "started" });
  const ms = start.snapshot.limits.toolTimeoutMs;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), ms);
  let kept = Buffer.alloc(0);
  let failure;
  try {
    if (!toolExecPrefix()) throw new Error("the worker was started without its sandbox");
    const { exitCode } = await bashOperations(root, scratch).exec(command, root, {
      onData: (chunk) => {
        kept = Buffer.concat([kept, chunk]);
        if (kept.length > KEPT_BYTES) kept = kept.subarray(kept.length - KEPT_BYTES);
      },
      signal: abort.signal,
    });
    if (exitCode !== 0) failure = `exit code: ${exitCode}`;
  } catch (err) {
    failure = abort.signal.aborted
      ? `setup timed out after ${ms} ms (toolTimeoutMs); its processes were killed`
      : `error: cannot run the setup command: ${err.message}`;
  } finally {
    clearTimeout(timer);
  }
  event(start.runId, { kind: "tool", name: "setup", state: failure ? "failed" : "finished" });
  if (!failure) return undefined;
  return note(command, `${failure}\n${kept.toString("utf8")}`);
}

/** What the model is told of a failed setup: the command and the end of its report. */
function note(command, report) {
  const bytes = Buffer.from(report, "utf8");
  const end = bytes.length > NOTE_OUTPUT_BYTES ? bytes.subarray(bytes.length - NOTE_OUTPUT_BYTES) : bytes;
  return (
    "Before this task, the template's setup command ran in your checkout and failed, so the " +
    "checkout may not be ready to build or test. The command was:\n" +
    `${redact(command)}\nThe end of what it reported:\n${redact(end.toString("utf8").replace(/^\uFFFD+/, ""))}`
  );
}
