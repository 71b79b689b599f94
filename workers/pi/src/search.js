// `grep` and `find` without binaries: Pi's own tools run ripgrep and fd and download them when
// they are missing. The Pi worker never downloads (its fetch reaches only the model's
// origin), so it gives Pi's find a glob operation of its own and Pi's grep an execute of its
// own, each a plain walk of the workspace in Node. Output follows Pi's tools: `path:line: text`
// for a match, `path-line- text` for context, Pi's limits and notices.

import { open, readdir, stat } from "node:fs/promises";
import path from "node:path";
import { minimatch } from "minimatch";

/** Directories never walked (Pi's find ignores the same). */
const SKIPPED = new Set([".git", "node_modules"]);
/** Bytes of one file searched by grep; a larger file is searched up to here. */
const GREP_FILE_BYTES = 4 * 1024 * 1024;
/** Grep's defaults, as Pi's grep has them. */
const GREP_DEFAULT_LIMIT = 100;
const GREP_MAX_LINE = 500;
const MAX_OUTPUT_BYTES = 50 * 1024;

/** Every file (and, with `dirs`, directory) beneath `root`, depth first, sorted per directory. */
async function* walk(root, { dirs = false, signal } = {}) {
  const stack = [""];
  while (stack.length > 0) {
    if (signal?.aborted) throw new Error("Operation aborted");
    const rel = stack.pop();
    let entries;
    try {
      entries = await readdir(path.join(root, rel), { withFileTypes: true });
    } catch {
      continue;
    }
    entries.sort((a, b) => (a.name < b.name ? 1 : -1));
    for (const entry of entries) {
      const child = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (SKIPPED.has(entry.name)) continue;
        stack.push(child);
        if (dirs) yield { rel: child, dir: true };
      } else if (entry.isFile()) {
        yield { rel: child, dir: false };
      }
    }
  }
}

/** Whether `rel` matches `pattern` as fd and ripgrep read a glob: without `/` it names the base name. */
function globMatches(pattern, rel) {
  const clean = pattern.replace(/^(?:\.\/)+/, "");
  const target = clean.includes("/") ? rel : path.posix.basename(rel);
  return minimatch(target, clean, { dot: true });
}

/** Pi's `FindOperations`: a glob over the workspace walk. */
export function findOperations(check) {
  return {
    exists: async (abs) => {
      try {
        await check(abs);
        await stat(abs);
        return true;
      } catch {
        return false;
      }
    },
    glob: async (pattern, cwd, { limit }) => {
      await check(cwd);
      const found = [];
      for await (const { rel } of walk(cwd)) {
        if (globMatches(pattern, rel)) {
          found.push(path.join(cwd, rel));
          if (found.length >= limit) break;
        }
      }
      return found;
    },
  };
}

function matcher({ pattern, ignoreCase, literal }) {
  const source = literal ? pattern.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : pattern;
  const regex = new RegExp(source, ignoreCase ? "i" : "");
  return (line) => regex.test(line);
}

function cutLine(text) {
  return text.length > GREP_MAX_LINE ? { text: `${text.slice(0, GREP_MAX_LINE)}...`, cut: true } : { text, cut: false };
}

async function readHead(file) {
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(Math.min(GREP_FILE_BYTES, (await handle.stat()).size));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** The lines of a grep result for one file, and how many matches they hold. */
function fileLines(shown, lines, test, context, room) {
  const out = [];
  let matches = 0;
  let more = false;
  let lastShown = -1;
  let cut = false;
  for (let i = 0; i < lines.length; i++) {
    if (!test(lines[i])) continue;
    if (matches >= room) {
      more = true;
      break;
    }
    matches++;
    const from = Math.max(lastShown + 1, i - context);
    const to = Math.min(lines.length - 1, i + context);
    for (let j = from; j <= to; j++) {
      const line = cutLine(lines[j].replace(/\r$/, ""));
      cut ||= line.cut;
      out.push(j === i || test(lines[j]) ? `${shown}:${j + 1}: ${line.text}` : `${shown}-${j + 1}- ${line.text}`);
    }
    lastShown = to;
  }
  return { out, matches, more, cut };
}

/** Pi's grep tool with an execute of our own (same parameters, same output shape). */
export function grepExecute(cwd, check) {
  return async (_toolCallId, params, signal) => {
    const { path: where, glob, context, limit } = params;
    const test = matcher(params);
    const target = path.resolve(cwd, where || ".");
    await check(target);
    const info = await stat(target).catch(() => {
      throw new Error(`Path not found: ${target}`);
    });
    const effectiveLimit = Math.max(1, Math.floor(limit ?? GREP_DEFAULT_LIMIT));
    const contextLines = context && context > 0 ? Math.floor(context) : 0;
    const files = info.isDirectory() ? walk(target, { signal }) : [{ rel: path.basename(target) }];
    const output = [];
    let bytes = 0;
    let matches = 0;
    let limitReached = false;
    let linesCut = false;
    for await (const { rel } of files) {
      if (glob && !globMatches(glob, rel)) continue;
      const file = info.isDirectory() ? path.join(target, rel) : target;
      const content = await readHead(file).catch(() => null);
      if (!content || content.includes(0)) continue;
      const found = fileLines(rel, content.toString("utf8").split("\n"), test, contextLines, effectiveLimit - matches);
      matches += found.matches;
      linesCut ||= found.cut;
      for (const line of found.out) {
        bytes += Buffer.byteLength(line) + 1;
        if (bytes <= MAX_OUTPUT_BYTES) output.push(line);
      }
      // Only a match past the limit proves the limit cut results off.
      if (found.more) {
        limitReached = true;
        break;
      }
    }
    if (matches === 0) return { content: [{ type: "text", text: "No matches found" }], details: undefined };
    let text = output.join("\n");
    const notices = [];
    if (limitReached) {
      notices.push(`${effectiveLimit} matches limit reached. Use limit=${effectiveLimit * 2} for more, or refine pattern`);
    }
    if (bytes > MAX_OUTPUT_BYTES) notices.push(`${MAX_OUTPUT_BYTES / 1024}KB limit reached`);
    if (linesCut) notices.push(`Some lines truncated to ${GREP_MAX_LINE} chars. Use read tool to see full lines`);
    if (notices.length > 0) text += `\n\n[${notices.join(". ")}]`;
    return { content: [{ type: "text", text }], details: undefined };
  };
}
