// The model's tool calls before Pi runs or records them, decided as the Rust worker decides
// (`crates/subzero-worker/src/calls.rs`, `model/partial.rs`):
//
// - a call whose arguments passed `tool_argument_bytes` is not run: its arguments are dropped
//   from the answer before Pi records it (the transcript never holds them) and it is answered
//   with the Rust worker's short tool error;
// - in an answer cut at `maxOutputTokens`, a call whose arguments are not a whole JSON object
//   was cut mid-way: it is not run and is answered with the Rust worker's tool error; the
//   other calls of that answer run, and the run goes on. (Pi itself would fail every call of
//   a cut answer with its own text: the answer is handed to Pi as one that stopped for its
//   tool calls — `stopReason: "toolUse"`; the provider's reason stays in `rawStopReason`, and
//   `cutAt` records the cap.)
//
// A call's arguments are read from the argument text the provider streamed (the deltas), as
// the Rust worker reads them, not from Pi's lenient parse of it. A refused call's arguments
// become an empty object tagged with its tool error ([`REFUSED`], which no copy keeps): the
// tool's `prepareArguments` (tools.js) throws it, before Pi validates the arguments, so the
// model reads exactly that error.

/** The tool error a refused call's arguments carry. */
export const REFUSED = Symbol("subzero.refused");

function refuse(call, error) {
  const args = {};
  Object.defineProperty(args, REFUSED, { value: error });
  call.arguments = args;
  // Pi's own error would quote the arguments the model sent.
  delete call.argumentsError;
}

/** The tool error of a call cut at the output-token cap (Rust: `calls::cut_arguments`). */
export function cutCallError(cap) {
  return `the call was cut at the output-token cap of ${cap} tokens before its arguments were complete; make a smaller call`;
}

/** The tool error of a call whose arguments passed the cap (Rust: `calls::oversized_arguments`). */
export function oversizedCallError(name, bytes, max) {
  return `the arguments of this ${name} call were ${bytes} bytes, over the ${max}-byte cap (tool_argument_bytes), and were dropped; send smaller arguments (e.g. write a large file in several edits)`;
}

function isWholeObject(text) {
  try {
    const value = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/**
 * Decides the calls of a finished answer `message`, changed in place before Pi sees it, and
 * drops its reasoning (thinking blocks): reasoning never reaches the transcript and is never
 * sent back (docs/protocol.md), as with the Rust worker.
 */
export function decide(message, rawArguments, limits) {
  decideCalls(message, rawArguments, limits);
  message.content = message.content.filter((block) => block.type !== "thinking");
}

function decideCalls(message, rawArguments, { maxArgumentBytes, maxOutputTokens }) {
  const calls = message.content.filter((block) => block.type === "toolCall");
  if (calls.length === 0) return;
  const cut = message.stopReason === "length";
  for (const call of calls) {
    const index = message.content.indexOf(call);
    const raw = rawArguments.get(index) ?? "";
    const bytes = Buffer.byteLength(raw || JSON.stringify(call.arguments ?? {}), "utf8");
    if (bytes > maxArgumentBytes) {
      refuse(call, oversizedCallError(call.name, bytes, maxArgumentBytes));
      continue;
    }
    const whole = call.argumentsError === undefined && (raw ? isWholeObject(raw) : Object.keys(call.arguments ?? {}).length > 0);
    if (cut && !whole) refuse(call, cutCallError(maxOutputTokens));
  }
  if (cut) {
    message.stopReason = "toolUse";
    message.cutAt = maxOutputTokens;
  }
}

/**
 * Wraps the agent's stream function so every answer's calls are decided by [`decide`] before
 * the agent loop (and so the session file) sees the answer.
 */
export function guardCalls(agent, limits) {
  const inner = agent.streamFunction;
  const decided = new WeakSet();
  agent.streamFunction = async (model, context, options) => {
    const stream = await inner(model, context, options);
    const raw = new Map();
    const settle = (message) => {
      if (!message || !Array.isArray(message.content) || decided.has(message)) return;
      decided.add(message);
      decide(message, raw, limits);
    };
    return {
      async *[Symbol.asyncIterator]() {
        for await (const event of stream) {
          if (event.type === "toolcall_delta" && typeof event.delta === "string") {
            raw.set(event.contentIndex, (raw.get(event.contentIndex) ?? "") + event.delta);
          } else if (event.type === "done") {
            settle(event.message);
          } else if (event.type === "error") {
            settle(event.error);
          }
          yield event;
        }
      },
      result: async () => {
        const message = await stream.result();
        settle(message);
        return message;
      },
    };
  };
}
