// The control channel: JSON lines on stdin (broker → worker) and stdout (worker → broker).
// Every outbound line is redacted whole before it is written; logs go to stderr only.

import { writeSync } from "node:fs";
import { redact, redactValue } from "./redact.js";

/** Writes one control line to stdout (synchronously, so lines never interleave). */
export function emit(message) {
  const line = `${redact(JSON.stringify(message))}\n`;
  writeAll(1, line);
}

/** An `event` line of `runId`. */
export function event(runId, body) {
  emit({ type: "event", runId, event: body });
}

/** One log line on stderr, redacted. */
export function log(level, message, fields = {}) {
  const extra = Object.entries(redactValue(fields))
    .map(([k, v]) => ` ${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join("");
  writeAll(2, `${new Date().toISOString()} ${level.toUpperCase()} subzero_worker_pi: ${redact(String(message))}${extra}\n`);
}

function writeAll(fd, text) {
  const bytes = Buffer.from(text, "utf8");
  let off = 0;
  while (off < bytes.length) {
    try {
      off += writeSync(fd, bytes, off);
    } catch (err) {
      if (err.code === "EAGAIN") continue;
      if (err.code === "EPIPE") return;
      throw err;
    }
  }
}

/** The longest control line read (a `start_run` with 64 skills of 64 KiB fits well). */
export const MAX_LINE = 16 * 1024 * 1024;

/**
 * Reads stdin line by line, bounded: a line over MAX_LINE is skipped without being held.
 * Calls `onLine(text)` per line and `onEnd()` at end of file.
 */
export function readLines(stream, onLine, onEnd) {
  let parts = [];
  let size = 0;
  let skipping = false;
  stream.on("data", (chunk) => {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      const piece = nl === -1 ? chunk.subarray(start) : chunk.subarray(start, nl);
      if (!skipping) {
        size += piece.length;
        if (size > MAX_LINE) {
          skipping = true;
          parts = [];
          log("warn", "ignoring a control line over the cap", { cap: MAX_LINE });
        } else {
          parts.push(piece);
        }
      }
      if (nl === -1) break;
      if (!skipping) {
        const text = Buffer.concat(parts).toString("utf8").replace(/\r$/, "");
        if (text.trim().length > 0) onLine(text);
      }
      parts = [];
      size = 0;
      skipping = false;
      start = nl + 1;
    }
  });
  stream.on("end", onEnd);
  stream.on("error", onEnd);
}
