// The child's transcript is Pi's own session file (JSONL: a `session` header, then entries
// with `id`/`parentId`), at the path the broker names — opened by the init before the tools'
// view hid the state directory and handed to this process as a descriptor.
//
// The digest of a leaf is the SHA-256 of the header line followed by the lines on the path
// from the root entry to that leaf, in that order, each with its newline: what `leaf_committed`
// reports and what the broker recomputes (`crates/subzero-runtime/src/broker/checkpoint/pi.rs`).
// A line that is not JSON (the half-written end a crash leaves, which Pi later terminates) is
// in no path. Every line goes through redaction before it reaches the file.

import { createHash } from "node:crypto";
import { fstatSync, fsyncSync, openSync, closeSync, readFileSync } from "node:fs";
import { SessionManager } from "@earendil-works/pi-coding-agent";
import { redactValue } from "./redact.js";

/** The session format version this worker reads and writes (Pi's `CURRENT_SESSION_VERSION`). */
export const TRANSCRIPT_VERSION = 3;

export class TranscriptError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** Where to read and write the transcript: the inherited descriptor, else the named path. */
export function location(transcriptPath) {
  const fd = Number.parseInt(process.env.SUBZERO_PI_TRANSCRIPT_FD ?? "", 10);
  if (Number.isInteger(fd) && fd > 2) return { path: `/proc/self/fd/${fd}`, fd };
  return { path: transcriptPath, fd: undefined };
}

/** The parsed lines of the file: the header's raw line and each entry's parent and raw line. */
export function parseTree(text) {
  let header;
  const entries = new Map();
  let start = 0;
  while (start < text.length) {
    const nl = text.indexOf("\n", start);
    if (nl === -1) break; // a half-written last line is not part of the tree
    const raw = text.slice(start, nl + 1);
    start = nl + 1;
    if (!raw.trim()) continue;
    let line;
    try {
      line = JSON.parse(raw);
    } catch {
      continue;
    }
    if (!line || typeof line !== "object") continue;
    if (line.type === "session" && header === undefined) {
      header = { raw, version: line.version };
    } else if (typeof line.id === "string") {
      entries.set(line.id, { parentId: line.parentId ?? null, raw });
    }
  }
  return { header, entries };
}

/** `sha256:<hex>` of the header and the root→`leaf` path, or undefined when `leaf` is not in the tree. */
export function digestOf(tree, leaf) {
  if (!tree.header) return undefined;
  const path = [];
  let cursor = leaf;
  while (cursor !== null) {
    const entry = tree.entries.get(cursor);
    if (!entry || path.length > tree.entries.size) return undefined;
    path.push(entry.raw);
    cursor = entry.parentId;
  }
  const hash = createHash("sha256");
  hash.update(tree.header.raw);
  for (const raw of path.reverse()) hash.update(raw);
  return `sha256:${hash.digest("hex")}`;
}

function readText(where) {
  try {
    return readFileSync(where.path, "utf8");
  } catch (err) {
    if (err.code === "ENOENT") return "";
    throw new TranscriptError("internal", `internal: the transcript cannot be read (${err.message})`);
  }
}

/**
 * Opens the session for a run: checks the format version (an unknown one is refused, never
 * migrated), verifies the digest of `fromLeaf`, and returns Pi's SessionManager on the file,
 * branched at `fromLeaf` when given, writing redacted lines.
 */
export function open(start, where, cwd, sessionDir) {
  const text = readText(where);
  const tree = parseTree(text);
  if (text.trim().length > 0 && !tree.header) {
    throw new TranscriptError("checkpoint_incompatible", "checkpoint_incompatible: the transcript is not a Pi session file (no session header)");
  }
  if (tree.header && tree.header.version !== TRANSCRIPT_VERSION) {
    throw new TranscriptError(
      "worker_incompatible",
      `worker_incompatible: the transcript is Pi session version ${JSON.stringify(tree.header.version ?? 1)} but this worker reads version ${TRANSCRIPT_VERSION}; it is never migrated`,
    );
  }
  if (start.fromLeaf) {
    const digest = digestOf(tree, start.fromLeaf);
    if (digest === undefined) {
      throw new TranscriptError("checkpoint_incompatible", `checkpoint_incompatible: leaf ${start.fromLeaf} is not in the transcript`);
    }
    if (start.expectedDigest && digest !== start.expectedDigest) {
      throw new TranscriptError(
        "checkpoint_incompatible",
        `checkpoint_incompatible: leaf ${start.fromLeaf} has digest ${digest}, not the recorded ${start.expectedDigest}`,
      );
    }
  }
  const manager = SessionManager.open(where.path, sessionDir, cwd);
  redactWrites(manager);
  if (start.fromLeaf) manager.branch(start.fromLeaf);
  return manager;
}

/** Every line Pi writes from now on goes through redaction (memory keeps the exact text). */
function redactWrites(manager) {
  const persist = manager._persist.bind(manager);
  manager._persist = (entry) => persist(redactValue(entry));
  const rewrite = manager._rewriteFile.bind(manager);
  manager._rewriteFile = () => {
    const exact = manager.fileEntries;
    manager.fileEntries = exact.map(redactValue);
    try {
      rewrite();
    } finally {
      manager.fileEntries = exact;
    }
  };
}

/** Flushes the file to disk and returns the digest of `leaf` as the file now holds it. */
export function commit(where, leaf) {
  const fd = where.fd ?? openSync(where.path, "r");
  try {
    fsyncSync(fd);
  } finally {
    if (where.fd === undefined) closeSync(fd);
  }
  const digest = digestOf(parseTree(readText(where)), leaf);
  if (digest === undefined) {
    throw new TranscriptError("internal", `internal: the committed leaf ${leaf} is not on a path to the root`);
  }
  return digest;
}

/** The transcript's size in bytes (for logs). */
export function size(where) {
  try {
    return where.fd !== undefined ? fstatSync(where.fd).size : 0;
  } catch {
    return 0;
  }
}
