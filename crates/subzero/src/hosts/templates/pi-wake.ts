// Subzero wakes its Pi parent: when a run this session started ends (a subzero_spawn, a
// followup subzero_send, a subzero_resume with a message), its compact result comes back to
// the session as a follow-up turn, so the parent need not poll subzero_get. A run whose end
// the parent already read with subzero_get is not delivered again.
//
// Written by `subzero hosts install pi` beside the mcp.json entry (and rewritten by it); made
// for Pi 1.x and tested with the Pi that Subzero's tests pin. For each run it starts
// `subzero wait` (read-only; it ends with Pi). Interactive and RPC sessions get the result as
// a follow-up message that starts a turn; a headless run (`pi -p`, `--mode json`) waits for
// its children before it ends, and goes on with their results.
//
// Delete this file to turn the wake-ups off; the MCP tools keep working without it.

const SUBZERO: string = __SUBZERO_COMMAND__;
// What goes before `wait` to make SUBZERO a `subzero` (`-y subzero-mcp@…` when it is npx).
const SUBZERO_LEAD: string[] = __SUBZERO_LEAD__;
const PREFIX = "mcp__subzero__";
const MESSAGE_TYPE = "subzero-result";

interface Watch {
  child: string;
  run: string;
  /** The settled run as `subzero wait` printed it; undefined until then (or if it failed). */
  result?: string;
  /** Whether `subzero wait` has returned. */
  settled: boolean;
  delivered: boolean;
  ended: Promise<void>;
}

// Pi's extension API, as far as this file uses it.
interface Pi {
  on(event: string, handler: (event: any, ctx: any) => unknown): unknown;
  exec(
    command: string,
    args: string[],
    options?: { signal?: AbortSignal },
  ): Promise<{ code: number; stdout: string; stderr: string }>;
  sendMessage(
    message: { customType: string; content: string; display: boolean },
    options?: { deliverAs?: "steer" | "followUp" | "nextTurn"; triggerTurn?: boolean },
  ): void;
}

export default function subzeroWake(pi: Pi): void {
  const watches = new Map<string, Watch>();
  const quit = new AbortController();
  let interactive = false;

  pi.on("session_shutdown", () => quit.abort());

  pi.on("tool_result", (event, ctx) => {
    const tool = String(event.toolName ?? "");
    if (!tool.startsWith(PREFIX) || event.isError) return;
    const out = structured(event);
    if (out === undefined) return;
    const name = tool.slice(PREFIX.length);
    if (name === "subzero_get") {
      readByParent(out);
      return;
    }
    const run = startedRun(name, out);
    const child = out.childId ?? event.input?.childId;
    if (run === undefined || typeof child !== "string" || watches.has(run)) return;
    interactive = ctx.mode === "tui" || ctx.mode === "rpc";
    const watch: Watch = {
      child,
      run,
      settled: false,
      delivered: false,
      ended: Promise.resolve(),
    };
    watch.ended = waitFor(watch).then(() => {
      if (interactive) deliver(watch);
    });
    watches.set(run, watch);
  });

  // A headless session ends when its agent settles: first wait for its children.
  pi.on("agent_before_settle", async (event, ctx) => {
    if (ctx.mode === "tui" || ctx.mode === "rpc") return undefined;
    let pending = [...watches.values()].filter((w) => !w.delivered);
    while (pending.length > 0) {
      await Promise.race(pending.map((w) => w.ended));
      const ready = pending.filter((w) => w.result !== undefined);
      if (ready.length > 0) {
        for (const w of ready) w.delivered = true;
        return { entries: [...event.entries, ...ready.map(entry)], continue: true };
      }
      // Those whose wait failed have nothing to bring.
      for (const w of pending) if (w.settled) w.delivered = true;
      pending = pending.filter((w) => !w.delivered);
    }
    return undefined;
  });

  /** The parent read a run's end itself: no need to bring it again. */
  function readByParent(snapshot: any): void {
    const last = snapshot?.lastRun?.runId;
    if (typeof last !== "string" || snapshot.activeRunId === last) return;
    const watch = watches.get(last);
    if (watch !== undefined) watch.delivered = true;
  }

  async function waitFor(watch: Watch): Promise<void> {
    try {
      const done = await pi.exec(SUBZERO, [...SUBZERO_LEAD, "wait", watch.child, "--run", watch.run], {
        signal: quit.signal,
      });
      if (done.code === 0 && done.stdout.trim() !== "") watch.result = done.stdout.trim();
    } catch {
      // Pi is quitting, or `subzero` could not run: nothing to deliver.
    }
    watch.settled = true;
  }

  function deliver(watch: Watch): void {
    if (watch.delivered || watch.result === undefined || quit.signal.aborted) return;
    watch.delivered = true;
    pi.sendMessage(
      { customType: MESSAGE_TYPE, content: text(watch), display: true },
      { deliverAs: "followUp", triggerTurn: true },
    );
  }

  function entry(watch: Watch) {
    return { type: "custom_message", customType: MESSAGE_TYPE, content: text(watch), display: true };
  }
}

function text(watch: Watch): string {
  return `Subzero: a run of child ${watch.child} ended. ${watch.result}`;
}

/** The call's structured result: its structured content (Pi 1.6 passes an MCP tool's whole
 * result there, with the server's `structuredContent` inside), else its text as JSON. */
function structured(event: any): any {
  let value = event.structuredContent;
  if (value && typeof value === "object" && typeof value.structuredContent === "object") {
    value = value.structuredContent;
  }
  if (value && typeof value === "object" && !Array.isArray(value)) return value;
  const first = Array.isArray(event.content) ? event.content[0] : undefined;
  if (first?.type !== "text") return undefined;
  try {
    return JSON.parse(first.text);
  } catch {
    return undefined;
  }
}

/** The run a call started, if it started one. */
function startedRun(tool: string, out: any): string | undefined {
  const run = typeof out?.runId === "string" ? out.runId : undefined;
  switch (tool) {
    case "subzero_spawn":
      return run;
    case "subzero_send":
      return out.delivery === "steered" ? undefined : run;
    case "subzero_resume":
      return out.state === "running" ? run : undefined;
    default:
      return undefined;
  }
}
