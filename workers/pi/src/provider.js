// The model endpoint as a Pi provider: one provider (`subzero`) with one model, for the api the
// snapshot's run names, in a ModelRuntime that reads and writes no file (in-memory credential
// and model stores, no models.json, no network catalog). The key is set in memory only
// (`setRuntimeApiKey`): never a file, an environment variable or an argument.

import { InMemoryCredentialStore, InMemoryModelsStore } from "@earendil-works/pi-ai";
import { ModelRuntime } from "@earendil-works/pi-coding-agent";

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
          ? { compat: { maxTokensField: workerModel.outputTokensParam ?? "max_tokens" } }
          : {}),
      },
    ],
  });
  await runtime.setRuntimeApiKey(PROVIDER, workerModel.key);
  const model = runtime.getModel(PROVIDER, workerModel.model);
  if (!model) throw new Error(`the model ${workerModel.model} could not be registered with Pi`);
  return { runtime, model };
}
