//! What the parent model reads about each tool.
//!
//! A host sends these with every model turn, so they are short (all nine tools with their
//! input schemas stay under 8 KB: `cargo xtask bench`). They teach the parent to spawn with a
//! whole task, to wait with `waitMs` instead of spinning, and to read the full artifact only
//! when the preview is not enough.

/// `subzero_info`.
pub const INFO: &str = "Describe this broker: the template ids you can spawn with their tools, \
credential names, limits and defaults, and what is enforced. Call once before your first spawn \
if you do not know a template id or credential name.";

/// `subzero_spawn`.
pub const SPAWN: &str = "Start a child agent in the background; returns at once with {childId, \
runId}. The child does not see your conversation: give it the whole task. 'researcher' only \
reads (read, grep, find, ls); 'coder' also writes, edits and runs bash; with isolation \
'checkout' several coders work at once. model is {url, model, credentialRef}. Then wait with \
subzero_get waitMs=30000; do not poll with short waits.";

/// `subzero_get`.
pub const GET: &str = "Read a child's state, newest events and last result. With waitMs=30000 \
the call blocks until the run and its queue settle (waitFor 'settled') or the next tool or \
lifecycle event ('event'), so one call usually returns the result; repeat only while state is \
'running'. Check lastRun.runId against the run you wait for. When lastRun.previewTruncated and \
you need all of it, call subzero_output with lastRun.artifactId.";

/// `subzero_list`.
pub const LIST: &str = "List this workspace's children, newest first, with label, state and \
liveness; filter by label, templateId or state; page with limit and after. Use it to find \
children after a restart.";

/// `subzero_send`.
pub const SEND: &str = "Message a child. mode 'followup' is a new run with its own runId, \
started now if the child is idle, else queued. 'steer' redirects the active run between model \
turns (the steer_applied event confirms it); with nothing running it fails with not_running and \
never becomes a followup. The same requestId and arguments return the same receipt.";

/// `subzero_stop`.
pub const STOP: &str = "Stop a child's active run and clear its queued followups. \
expectedRunId must be the active run, else stale_run (not_running if it already ended) and \
nothing changes. confirmed is true once the worker and every process it started are gone; \
waitMs waits for that.";

/// `subzero_resume`.
pub const RESUME: &str = "Reopen an interrupted child (after a stop or a broker restart) at its \
last checkpoint, with a model (it may differ). Without message it becomes ready; with message \
a new run starts. Interrupted work is never replayed: say what to check or redo.";

/// `subzero_output`.
pub const OUTPUT: &str = "Read a run's full result by artifactId in chunks: offset 0, then \
nextOffset, until eof (length up to 65536). Needed only when the preview was truncated.";

/// `subzero_apply`.
pub const APPLY: &str = "Land a settled checkout child's change in its workspace: as uncommitted \
edits, or one commit with commitMessage. On change_conflict nothing changes and each path in \
the way is listed. Review it first in subzero_get's checkout.change.";
