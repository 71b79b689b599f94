// Steers for the active run. Each goes into Pi's steering queue (delivered after the current
// assistant turn and its tool calls, before the next request); when Pi puts it into the
// conversation the worker reports `steer_applied`. One that Pi never applied is reported
// `steer_discarded` when the run ends — so every steer gets exactly one receipt.

import { event, log } from "./wire.js";

export class Steers {
  #accepting = true;
  #waiting = [];
  #unapplied = [];
  #session;
  #runId;

  /** The run's session exists: steers that came before it go to Pi now. */
  attach(session, runId) {
    this.#session = session;
    this.#runId = runId;
    for (const steer of this.#waiting.splice(0)) this.#deliver(steer);
  }

  /** Queues a steer; false when the run no longer takes one. */
  offer(steer) {
    if (!this.#accepting) return false;
    if (this.#session) this.#deliver(steer);
    else this.#waiting.push(steer);
    return true;
  }

  #deliver(steer) {
    this.#unapplied.push(steer);
    this.#session.steer(steer.message, undefined, { source: "rpc" }).catch((err) => {
      log("warn", "Pi refused a steer", { err: err.message });
    });
  }

  /** A user message entered the conversation: the oldest unapplied steer with that text was applied. */
  applied(text) {
    const index = this.#unapplied.findIndex((s) => s.message === text);
    if (index === -1) return;
    const [steer] = this.#unapplied.splice(index, 1);
    event(this.#runId, {
      kind: "steer_applied",
      steerId: steer.steerId,
      ...(steer.requestId ? { requestId: steer.requestId } : {}),
    });
  }

  /** Pi's run is over: no steer is taken any more. */
  close() {
    this.#accepting = false;
  }

  /** The steers that will never be applied (and Pi's queue emptied of them). */
  leftovers() {
    this.#accepting = false;
    this.#session?.clearQueue();
    return [...this.#waiting.splice(0), ...this.#unapplied.splice(0)];
  }
}
