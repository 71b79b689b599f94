// The worker's only way out: every HTTP request Node makes (Pi's providers, and anything Pi
// would fetch by itself — catalogs, version checks, tool downloads) goes through this fetch.
//
// - Only the run's model origin is reached; any other origin is refused before a byte is sent.
// - Redirects are followed by hand and only within that origin.
// - A response body is counted as it streams: past `maxResponseBytes` the request fails
//   (`limit_exceeded`, limit `model_response_bytes`), so a hostile endpoint cannot grow the
//   worker's memory without bound.
// - The endpoint may be silent at most `idleTimeoutMs` before the headers and between chunks.
// - An HTTP error keeps its status and a redacted excerpt of its body (at most 16 KiB read).
//
// What went wrong is kept as a typed failure the run reads when Pi reports the request failed.

import { redact } from "./redact.js";

const originalFetch = globalThis.fetch;

/** Bytes of an error body read for its excerpt. */
const ERROR_BODY_BYTES = 16 * 1024;
/** Bytes of an error body shown in the failure's excerpt. */
const EXCERPT_CHARS = 512;
/** Redirect hops followed within the origin. */
const MAX_HOPS = 5;

export const DEFAULT_LIMITS = {
  maxResponseBytes: 8 * 1024 * 1024,
  maxToolArgumentBytes: 1024 * 1024,
  idleTimeoutMs: 180000,
};

let policy = null;
let failure = null;
let last = null;

/** Allows requests to `url`'s origin under `limits` (the run's `streamLimits`). */
export function allow(url, limits) {
  policy = { origin: new URL(url).origin, ...DEFAULT_LIMITS, ...(limits ?? {}) };
  failure = null;
  last = null;
}

/** The failure of the last request that failed in the guard (and forgets it). */
export function takeFailure() {
  const f = failure;
  failure = null;
  return f;
}

/** The failure of the last request that failed in the guard, kept for the run. */
export function peekFailure() {
  return failure;
}

/** `{requestBytes, responseBytes}` of the most recent request. */
export function lastRequest() {
  return last;
}

/** Replaces the global fetch. Call once, before anything makes a request. */
export function install() {
  globalThis.fetch = guardedFetch;
}

class GuardError extends Error {
  constructor(body) {
    super(body.message);
    this.name = "SubzeroNetworkGuard";
    failure = body;
  }
}

function urlOf(input) {
  if (typeof input === "string") return input;
  if (input instanceof URL) return input.href;
  return input.url;
}

async function guardedFetch(input, init = {}) {
  if (!policy) {
    throw new GuardError({
      code: "model_request_failed",
      message: "model_request_failed: the Pi worker makes no request outside a run",
      details: { status: null },
    });
  }
  let url = new URL(urlOf(input));
  if (url.origin !== policy.origin) {
    throw new GuardError({
      code: "model_request_failed",
      message: `model_request_failed: a request to ${url.origin} was refused: the worker reaches only the model's origin ${policy.origin}`,
      details: { status: null },
    });
  }
  const request = { requestBytes: bodyBytes(init.body), responseBytes: 0 };
  last = request;
  let options = { ...init, redirect: "manual" };
  for (let hop = 0; ; hop++) {
    const response = await withIdleTimeout(url, options);
    if (isRedirect(response.status) && response.headers.get("location")) {
      const target = new URL(response.headers.get("location"), url);
      await response.body?.cancel().catch(() => {});
      if (target.origin !== policy.origin) {
        throw new GuardError({
          code: "model_request_failed",
          message: `model_request_failed: the model endpoint redirected to another origin, ${target.origin}; the key and the prompt are only sent to ${policy.origin}, so nothing was sent there: set model.url to the endpoint that answers`,
          details: { status: response.status, redirect: target.origin },
        });
      }
      if (hop >= MAX_HOPS) {
        throw new GuardError({
          code: "model_request_failed",
          message: `model_request_failed: the model endpoint redirected more than ${MAX_HOPS} times`,
          details: { status: response.status },
        });
      }
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && options.method === "POST")) {
        options = { ...options, method: "GET", body: undefined };
      }
      url = target;
      continue;
    }
    if (response.status >= 400) return await errorResponse(response);
    return bounded(response, request);
  }
}

function isRedirect(status) {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

function bodyBytes(body) {
  if (typeof body === "string") return Buffer.byteLength(body, "utf8");
  if (body instanceof Uint8Array || body instanceof ArrayBuffer) return body.byteLength;
  return 0;
}

/** The response headers within `idleTimeoutMs`, or the idle failure. */
async function withIdleTimeout(url, options) {
  const idle = new AbortController();
  const timer = setTimeout(() => idle.abort(), policy.idleTimeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, idle.signal]) : idle.signal;
  try {
    return await originalFetch(url, { ...options, signal });
  } catch (err) {
    if (idle.signal.aborted && !options.signal?.aborted) throw idleFailure("waiting for the response headers");
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

function idleFailure(what) {
  return new GuardError({
    code: "model_request_failed",
    message: `model_request_failed: the model endpoint sent nothing for ${policy.idleTimeoutMs} ms ${what} (model_idle_timeout_ms in [limits])`,
    details: { status: null, idleTimeoutMs: policy.idleTimeoutMs },
  });
}

/** Reads at most ERROR_BODY_BYTES of an error body, records the failure, and hands the SDK the same status. */
async function errorResponse(response) {
  const chunks = [];
  let size = 0;
  const reader = response.body?.getReader();
  while (reader && size < ERROR_BODY_BYTES) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
  }
  await reader?.cancel().catch(() => {});
  const text = Buffer.concat(chunks).subarray(0, ERROR_BODY_BYTES).toString("utf8");
  failure = {
    code: "model_request_failed",
    message: `model_request_failed: the model endpoint answered HTTP ${response.status}: ${redact(excerptOf(text))}`,
    details: { status: response.status, excerpt: redact(excerptOf(text)) },
    // The parsed error body, for a typed refusal the worker acts on (provider.js); never shown.
    body: parseOrNull(text),
  };
  return new Response(text, { status: response.status, statusText: response.statusText, headers: response.headers });
}

function parseOrNull(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function excerptOf(text) {
  try {
    const parsed = JSON.parse(text);
    const err = parsed?.error;
    if (err && typeof err === "object" && typeof err.message === "string") {
      return (typeof err.type === "string" ? `${err.type}: ${err.message}` : err.message).slice(0, EXCERPT_CHARS);
    }
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, EXCERPT_CHARS);
}

/** The response with its body counted and timed as it streams. */
function bounded(response, request) {
  if (!response.body) return response;
  const reader = response.body.getReader();
  const { maxResponseBytes, idleTimeoutMs } = policy;
  let timer;
  const body = new ReadableStream({
    async pull(controller) {
      const idle = new Promise((_, reject) => {
        timer = setTimeout(() => reject(idleFailure("in the middle of the response stream")), idleTimeoutMs);
      });
      try {
        const { done, value } = await Promise.race([reader.read(), idle]);
        clearTimeout(timer);
        if (done) {
          controller.close();
          return;
        }
        request.responseBytes += value.byteLength;
        if (request.responseBytes > maxResponseBytes) {
          const err = new GuardError({
            code: "limit_exceeded",
            message: `limit_exceeded: the model's response passed ${maxResponseBytes} bytes (model_response_bytes); the rest was not read`,
            details: { limit: "model_response_bytes" },
          });
          reader.cancel().catch(() => {});
          controller.error(err);
          return;
        }
        controller.enqueue(value);
      } catch (err) {
        clearTimeout(timer);
        reader.cancel().catch(() => {});
        controller.error(err);
      }
    },
    cancel(reason) {
      clearTimeout(timer);
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
