// Budgets and the handoff texts, worded as the Rust worker words them (`handoff.rs`), so a
// parent reads the same thing whichever worker ran its child.

/** Output tokens of the handoff request (or fewer, when the run's maxOutputTokens is). */
export const HANDOFF_MAX_OUTPUT_TOKENS = 1024;
/** Wall clock of the handoff request. */
export const HANDOFF_TIMEOUT_MS = 60000;
/** Bytes of handoff summary kept; the stream is not read past them. */
export const HANDOFF_MAX_BYTES = 16 * 1024;

export function cutMarker() {
  return `\n[… handoff summary cut at ${HANDOFF_MAX_BYTES} bytes]`;
}

/** `summary` within HANDOFF_MAX_BYTES, cut at a character boundary and marked when it was not. */
export function cutSummary(summary, streamStopped) {
  const bytes = Buffer.from(summary, "utf8");
  if (bytes.length <= HANDOFF_MAX_BYTES && !streamStopped) return summary;
  let cut = Math.min(HANDOFF_MAX_BYTES, bytes.length);
  while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) cut--;
  return bytes.subarray(0, cut).toString("utf8") + cutMarker();
}

function what(reached) {
  switch (reached.budget) {
    case "maxTurns":
      return `its ${reached.limit} model turns (maxTurns)`;
    case "deadlineMs":
      return `its deadline of ${reached.limit} ms (deadlineMs) after ${reached.reached} ms`;
    case "tokenBudget":
      return `its token budget: ${reached.reached} of ${reached.limit} tokens used (tokenBudget)`;
    default:
      return `its ${reached.budget} of ${reached.limit}`;
  }
}

/** The user-side message asking for the summary; it stays in the transcript. */
export function notice(reached) {
  return `[subzero] This run has used ${what(reached)}. Do not call any tool. Reply now with a short handoff summary for the agent that delegated this task: what you did, what you found, what remains to be done, and how to continue.`;
}

/** The result when no summary came. */
export function fallback(reached, why, lastText) {
  let text = `[subzero] The run used ${what(reached)} and ended before its work was done; no handoff summary could be produced (${why}).`;
  if (lastText.trim()) text += `\n\nThe child's last text:\n${lastText}`;
  return text;
}

/** The tool result of a call the budget left unrun. */
export function unrunCall(reached) {
  return `not run: the run has used ${what(reached)}; no more tools run in it`;
}
