// A turn's text as `text` events: coalesced (at most one per 2 s within a turn, plus the
// turn's end), redacted as a stream, cut into pieces of at most 4096 bytes.

import { StreamRedactor } from "./redact.js";
import { event } from "./wire.js";

const INTERVAL_MS = 2000;
const EVENT_MAX = 4096;
const PENDING_MAX = 16 * EVENT_MAX;

export class TextEvents {
  #runId;
  #redactor = new StreamRedactor();
  #pending = "";
  #last = Date.now();
  /** The run's whole text so far (raw; redacted when reported). */
  text = "";

  constructor(runId) {
    this.#runId = runId;
  }

  push(delta) {
    this.text += delta;
    this.#pending += this.#redactor.push(delta);
    if (Date.now() - this.#last >= INTERVAL_MS || Buffer.byteLength(this.#pending) >= PENDING_MAX) this.#flush();
  }

  /** The end of a turn: everything held is released. */
  finish() {
    this.#pending += this.#redactor.finish();
    this.#flush();
  }

  #flush() {
    this.#last = Date.now();
    let rest = Buffer.from(this.#pending, "utf8");
    this.#pending = "";
    while (rest.length > 0) {
      let cut = Math.min(EVENT_MAX, rest.length);
      while (cut < rest.length && (rest[cut] & 0xc0) === 0x80) cut--;
      event(this.#runId, { kind: "text", text: rest.subarray(0, cut).toString("utf8") });
      rest = rest.subarray(cut);
    }
  }
}
