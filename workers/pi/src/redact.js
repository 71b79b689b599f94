// Redaction of the model key and the configured secrets from everything the worker writes:
// every control line, every transcript line (through the session file's writer) and every log
// line. Streams use StreamRedactor, which holds back a tail so a secret split across deltas is
// still caught before any of it is released.

export const PLACEHOLDER = "[REDACTED]";

/** Every form of every secret, longest first. */
const forms = [];

/** Adds secrets (empty ones ignored), with their JSON-escaped forms. */
export function addSecrets(values) {
  for (const value of values) {
    if (typeof value !== "string" || value.length === 0) continue;
    const escaped = JSON.stringify(value).slice(1, -1);
    for (const form of new Set([value, escaped])) {
      if (!forms.includes(form)) forms.push(form);
    }
  }
  forms.sort((a, b) => b.length - a.length);
}

/** Replaces every known secret in `text`. */
export function redact(text) {
  let out = text;
  for (const form of forms) {
    if (out.includes(form)) out = out.split(form).join(PLACEHOLDER);
  }
  return out;
}

/** Redacts every string inside a JSON value (a copy). */
export function redactValue(value) {
  if (typeof value === "string") return redact(value);
  if (Array.isArray(value)) return value.map(redactValue);
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[redact(k)] = redactValue(v);
    return out;
  }
  return value;
}

function longest() {
  return forms.length > 0 ? forms[0].length : 0;
}

/** A stream of text chunks, released only once no secret can still straddle the cut. */
export class StreamRedactor {
  #pending = "";

  /** Feeds a chunk; returns the text that is now safe to release. */
  push(chunk) {
    this.#pending = redact(this.#pending + chunk);
    const hold = Math.max(0, longest() - 1);
    if (this.#pending.length <= hold) return "";
    let cut = this.#pending.length - hold;
    // Never cut a surrogate pair.
    const code = this.#pending.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut -= 1;
    const out = this.#pending.slice(0, cut);
    this.#pending = this.#pending.slice(cut);
    return out;
  }

  /** Releases whatever is held back. */
  finish() {
    const out = redact(this.#pending);
    this.#pending = "";
    return out;
  }
}
