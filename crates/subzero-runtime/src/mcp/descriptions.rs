//! What the parent model reads about each tool.
//!
//! These texts are the main lever on how many tokens a parent spends per delegated task:
//! they teach it to spawn, then wait with `waitMs` instead of spinning, and to read the
//! full artifact only when the preview is not enough.

/// `subzero_info`.
pub const INFO: &str = "Describe this Subzero broker: protocol and worker versions, the templates \
you can spawn (with their exact tools), configured credential references (names only), limits, \
and what is and is not enforced. Call once before your first spawn if you do not know the \
template ids or credential names.";

/// `subzero_spawn`.
pub const SPAWN: &str = "Start a child agent on a task and return at once with {childId, runId}; \
the child works in the background in this workspace. Give a complete, self-contained prompt: \
the child does not see your conversation. templateId 'researcher' can only read (read, grep, \
find, ls); 'coder' can also write, edit and run bash. isolation 'checkout' gives a child its own \
git checkout, so several coders can work at once; land its change with subzero_apply. model \
names the endpoint: {url, model, credentialRef} where credentialRef is a name from subzero_info. Then call subzero_get with \
waitMs=30000 to wait for the result; do not poll in a loop with small waits.";

/// `subzero_get`.
pub const GET: &str = "Read a child's state, its newest events and its last result. With \
waitMs (up to 30000) the call blocks until the active run and its queue settle (waitFor \
'settled', the default) or until the next tool/lifecycle event (waitFor 'event'), so one call \
usually returns the finished result: prefer waitMs=30000 and repeat only while state is \
'running'. Pass back nextCursor as cursor to see only new events. lastRun names the run it \
belongs to: check lastRun.runId against the runId you are waiting for. lastRun.preview is \
bounded; when previewTruncated is true and you need all of it, call subzero_output with \
lastRun.artifactId.";

/// `subzero_list`.
pub const LIST: &str = "List the child agents of this workspace (or of workspaceRoot), newest \
first, with state and liveness. Page with limit and after=nextAfter. Use it to find children \
after a restart; use subzero_get for details.";

/// `subzero_send`.
pub const SEND: &str = "Send a message to a child. mode 'followup' adds a new run with its own \
runId: it starts now if the child is idle, or queues behind the active run. mode 'steer' \
redirects the active run between its model turns (the steer_applied event confirms delivery); \
it fails with not_running when nothing is running and is never turned into a followup. A \
requestId makes a retry safe: the same requestId and arguments return the same receipt.";

/// `subzero_stop`.
pub const STOP: &str = "Stop a child's active run. expectedRunId must be the active run \
(activeRunId from subzero_get), otherwise stale_run and nothing changes; if that run already \
ended it is not_running (read its result with subzero_get). Stopping also clears the child's \
queued followups. confirmed is true only once the worker has cancelled and every \
process it started is gone; pass waitMs (up to 30000) to wait for that confirmation.";

/// `subzero_resume`.
pub const RESUME: &str = "Reopen a child after an interruption or a broker restart, at its last \
completed checkpoint. Pass model with a credentialRef (it may be a different model or \
endpoint). Without message the child becomes ready and nothing runs; with message a new run \
starts from the checkpoint. Interrupted work is never replayed automatically: say in the \
message what to check or redo.";

/// `subzero_output`.
pub const OUTPUT: &str = "Read a run's full result text by artifactId, in chunks: pass offset \
(start at 0, then nextOffset) and length (up to 65536 bytes) until eof is true. Needed only \
when subzero_get's preview was truncated.";

/// `subzero_apply`.
pub const APPLY: &str = "Land a settled isolated child's change (spawned with isolation \
'checkout') in its workspace: all of it as uncommitted edits, or one commit with \
commitMessage, or nothing (change_conflict lists each path in the way; the workspace is left \
as it was). discard: true throws the change away instead. Read the change first in \
subzero_get's checkout.change (its diff with subzero_output).";
