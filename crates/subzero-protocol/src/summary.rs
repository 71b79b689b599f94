//! The compact [`ChildSummary`] a `subzero_list` page carries: what a parent recognises a
//! child by (id, label, template) and whether it needs attention (state, what it is doing,
//! how its last run ended, when it last moved). Everything else is one `subzero_get` away,
//! and `subzero ls --json` keeps the whole document.

use crate::{ChildSummary, Phase};

impl ChildSummary {
    /// This summary as a `subzero_list` entry: without its workspace (the page names it),
    /// times of creation and change, last run's usage and context figures; the phase only
    /// when not idle, the active run only when there is one, the queue only when not empty.
    pub fn compact(&mut self) {
        self.workspace_root = None;
        self.created_at = None;
        self.updated_at = None;
        self.last_run_usage = None;
        self.context_tokens = None;
        self.context_window = None;
        if self.phase == Some(Phase::Idle) {
            self.phase = None;
        }
        if self.queued_run_count == Some(0) {
            self.queued_run_count = None;
        }
    }
}
