// The model endpoint as a Pi provider: one provider (`subzero`) with one model, for the api the
// snapshot's run names, in a ModelRuntime that reads and writes no file (in-memory credential
// and model stores, no models.json, no network catalog). The key is set in memory only
// (`setRuntimeApiKey`): never a file, an environment variable or an argument.

import { InMemoryCredentialStore, InMemoryModelsStore } from "@earendil-works/pi-ai";
import { ModelRuntime } from "@earendil-works/pi-coding-agent";
import * as net from "./net.js";
import { log } from "./wire.js";

/** The model APIs this worker speaks, each through Pi's provider for it. */
export const PROTOCOLS = ["openai-completions", "openai-responses", "anthropic-messages"];

export const PROVIDER = "subzero";

/** The window Pi is told when the broker knows none: the contract's largest, so Pi never clamps by it. */
const UNKNOWN_WINDOW = 16777216;

/**
 * The base URL Pi's SDKs append their paths to, from `model.url` as the Rust worker reads it:
 * Chat Completions and Responses take the API base (a URL already ending in the endpoint's
 * path is used as it is); Messages appends `/v1/messages` to the base.
 */
export function baseUrlFor(api, url) {
  const trimmed = url.replace(/\/+$/, "");
  const strip = (suffix) => (trimmed.endsWith(suffix) ? trimmed.slice(0, -suffix.length) : trimmed);
  switch (api) {
    case "openai-completions":
      return strip("/chat/completions");
    case "openai-responses":
      return strip("/responses");
    case "anthropic-messages": {
      const base = strip("/messages");
      return base.endsWith("/v1") ? base.slice(0, -3) : base;
    }
    default:
      return trimmed;
  }
}

/**
 * Endpoints (url, model) that refused `max_tokens` with OpenAI's typed 400: this worker sends
 * them `max_completion_tokens` until it exits (Rust: `model::Learned`).
 */
const learnedCompletionTokens = new Set();

function endpointOf(workerModel) {
  return `${workerModel.url}\n${workerModel.model}`;
}

/** The Chat Completions cap field: the one named, else the one learned, else `max_tokens`. */
function maxTokensField(workerModel) {
  if (workerModel.outputTokensParam) return workerModel.outputTokensParam;
  return learnedCompletionTokens.has(endpointOf(workerModel)) ? "max_completion_tokens" : "max_tokens";
}

/** OpenAI's typed refusal of `max_tokens` (its reasoning models). */
function refusesMaxTokens(failure) {
  const error = failure?.body?.error;
  return failure?.details?.status === 400 && error?.param === "max_tokens" && error?.code === "unsupported_parameter";
}

/**
 * On Chat Completions without a named cap field, a request refused with OpenAI's typed 400
 * about `max_tokens` is sent once more with `max_completion_tokens`, which the endpoint then
 * gets until this worker exits — the one exception to "no retries", as in the Rust worker
 * (docs/protocol.md): the endpoint refused the request's shape and generated nothing. An
 * HTTP error comes before any other event of Pi's stream, so nothing of the refused request
 * reached the run.
 */
export function learnCapField(agent, workerModel) {
  if (workerModel.api !== "openai-completions" || workerModel.outputTokensParam) return;
  const inner = agent.streamFunction;
  agent.streamFunction = async (model, context, options) => {
    const first = await inner(model, context, options);
    if (model.compat?.maxTokensField === "max_completion_tokens") return first;
    const events = first[Symbol.asyncIterator]();
    const head = await events.next();
    if (!head.done && head.value.type === "error" && refusesMaxTokens(net.peekFailure())) {
      net.takeFailure();
      learnedCompletionTokens.add(endpointOf(workerModel));
      log("info", "the endpoint refused max_tokens; sending max_completion_tokens from now on");
      model.compat = { ...(model.compat ?? {}), maxTokensField: "max_completion_tokens" };
      return inner(model, context, options);
    }
    return {
      async *[Symbol.asyncIterator]() {
        if (head.done) return;
        yield head.value;
        for (;;) {
          const next = await events.next();
          if (next.done) return;
          yield next.value;
        }
      },
      result: () => first.result(),
    };
  };
}

/** A ModelRuntime with the run's endpoint registered and its key set; returns it and the model. */
export async function connect(workerModel, maxOutputTokens) {
  const runtime = await ModelRuntime.create({
    credentials: new InMemoryCredentialStore(),
    modelsPath: null,
    modelsStore: new InMemoryModelsStore(),
    allowModelNetwork: false,
    refreshOnCreate: false,
  });
  const api = workerModel.api;
  runtime.registerProvider(PROVIDER, {
    name: "Subzero model endpoint",
    baseUrl: baseUrlFor(api, workerModel.url),
    api,
    models: [
      {
        id: workerModel.model,
        name: workerModel.model,
        api,
        reasoning: false,
        input: ["text"],
        cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
        contextWindow: workerModel.contextWindow ?? UNKNOWN_WINDOW,
        maxTokens: maxOutputTokens,
        ...(api === "openai-completions"
          ? { compat: { maxTokensField: maxTokensField(workerModel) } }
          : {}),
      },
    ],
  });
  await runtime.setRuntimeApiKey(PROVIDER, workerModel.key);
  const model = runtime.getModel(PROVIDER, workerModel.model);
  if (!model) throw new Error(`the model ${workerModel.model} could not be registered with Pi`);
  return { runtime, model };
}
