// What Pi's providers send, brought to what docs/protocol.md says a worker sends where they
// differ, through Pi's own payload hook (`onPayload`, the one Pi's extensions use), just
// before each request is encoded:
//
// - openai-responses: no input item carries an `id` (with `store: false` there is nothing to
//   refer to, and OpenAI refuses an `fc_…` id without the reasoning item it came with; Pi
//   replays the ids it read), no reasoning item is sent back, every function tool is
//   `strict: false` (the Responses API makes a tool strict when `strict` is left out, and
//   strict mode makes every optional argument required), no prompt-cache fields;
// - anthropic-messages: consecutive messages of one role are one message (Pi sends a tool
//   result and the user text after it — a steer, the handoff notice — as two user messages),
//   `tool_result` blocks first.
//
// The answers' reasoning and thinking are dropped before Pi records them (calls.js), so none
// is in the transcript either.

/** `params` of a request to `model` as the protocol section says it is sent. */
export function conform(params, model) {
  switch (model?.api) {
    case "openai-responses":
      return responses(params);
    case "anthropic-messages":
      return messages(params);
    default:
      return params;
  }
}

function responses(params) {
  const out = { ...params };
  delete out.prompt_cache_key;
  delete out.prompt_cache_retention;
  delete out.prompt_cache_options;
  if (Array.isArray(out.input)) {
    out.input = out.input
      .filter((item) => item?.type !== "reasoning")
      .map((item) => {
        if (!item || typeof item !== "object" || !("id" in item)) return item;
        const { id: _id, ...rest } = item;
        return rest;
      });
  }
  if (Array.isArray(out.tools)) {
    out.tools = out.tools.map((tool) => (tool?.type === "function" ? { ...tool, strict: false } : tool));
  }
  return out;
}

function blocksOf(message) {
  if (Array.isArray(message.content)) return message.content;
  return typeof message.content === "string" && message.content ? [{ type: "text", text: message.content }] : [];
}

function messages(params) {
  if (!Array.isArray(params.messages)) return params;
  const merged = [];
  for (const message of params.messages) {
    const last = merged[merged.length - 1];
    if (last && last.role === message.role) {
      const blocks = [...blocksOf(last), ...blocksOf(message)];
      // A user message's tool results come first.
      const results = blocks.filter((b) => b?.type === "tool_result");
      const others = blocks.filter((b) => b?.type !== "tool_result");
      merged[merged.length - 1] = { ...last, content: [...results, ...others] };
    } else {
      merged.push(message);
    }
  }
  return { ...params, messages: merged };
}
