//! What `subzero gc` would collect: every checkout of the ledger sorted into collected
//! (with what is left of it on disk and in git) and kept (and why), read-only.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use subzero_core::{CheckoutState, ChildId, Described};
use subzero_runtime::checkout;
use subzero_runtime::paths::StatePaths;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{CheckoutFilter, CheckoutRow, Store, Timestamp};

use crate::inspect::InspectError;
use crate::inspect::state::ReadOnlyState;

/// What collecting a checkout does to its ledger row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Unchanged or prepared: it becomes `removed` (the core's decision).
    Remove,
    /// Applied, discarded or removed already: it keeps its state; only leftovers go.
    Clean,
}

/// A checkout to collect and what is left of it.
#[derive(Debug)]
pub struct Candidate {
    pub child: ChildId,
    /// Its state when the plan was made.
    pub state: CheckoutState,
    pub action: Action,
    /// Its child's workspace (whose repository holds the refs).
    pub scope: WorkspaceScope,
    /// Its directory (`<state>-checkouts/<child>`), when it is there.
    pub dir: Option<PathBuf>,
    /// The broker's `.own` notes on it, when they are there.
    pub notes: Option<PathBuf>,
    /// Its refs that exist in the workspace's repository.
    pub refs: Vec<String>,
    /// Bytes its directory takes on disk.
    pub bytes: u64,
}

/// Checkouts left alone, by why.
#[derive(Debug, Default)]
pub struct Kept {
    /// Settled with a change nobody applied or discarded.
    pub changed: usize,
    /// A run works in it.
    pub in_use: usize,
    /// Prepared for a child whose run is active.
    pub running: usize,
    /// Collectable, but changed within the last `days` days.
    pub newer: usize,
}

/// The dry run's findings.
#[derive(Debug)]
pub struct Plan {
    pub days: u32,
    pub candidates: Vec<Candidate>,
    pub kept: Kept,
    /// Checkouts that could not be looked at, and why.
    pub problems: Vec<(ChildId, String)>,
}

impl Plan {
    /// Bytes the candidates' directories take.
    pub fn bytes(&self) -> u64 {
        self.candidates.iter().map(|c| c.bytes).sum()
    }
}

/// Sort every checkout of the ledger: collected when its state last changed before
/// `bound` and no unapplied change or run needs it.
pub async fn plan(
    state: &ReadOnlyState,
    store: &Store,
    bound: &Timestamp,
    days: u32,
) -> Result<Plan, InspectError> {
    let rows = store.list_checkouts(CheckoutFilter::default()).await?;
    let mut plan = Plan {
        days,
        candidates: Vec::new(),
        kept: Kept::default(),
        problems: Vec::new(),
    };
    let mut refs = RefCache::default();
    let look = Look {
        state,
        store,
        bound,
    };
    for row in rows {
        match look.consider(&row, &mut refs, &mut plan.kept).await {
            Ok(Some(candidate)) => plan.candidates.push(candidate),
            Ok(None) => {}
            Err(why) => plan.problems.push((row.child_id, why)),
        }
    }
    Ok(plan)
}

/// What one look at a checkout reads.
struct Look<'a> {
    state: &'a ReadOnlyState,
    store: &'a Store,
    bound: &'a Timestamp,
}

impl Look<'_> {
    /// The candidate `row` is, if any (counting it in `kept` when it is kept).
    async fn consider(
        &self,
        row: &CheckoutRow,
        refs: &mut RefCache,
        kept: &mut Kept,
    ) -> Result<Option<Candidate>, String> {
        let action = match row.state {
            CheckoutState::SettledChanged => {
                kept.changed += 1;
                return Ok(None);
            }
            CheckoutState::InUse => {
                kept.in_use += 1;
                return Ok(None);
            }
            CheckoutState::Prepared | CheckoutState::SettledUnchanged => Action::Remove,
            CheckoutState::Applied | CheckoutState::Discarded | CheckoutState::Removed => {
                Action::Clean
            }
        };
        let child = row.child_id;
        let scope = self.state.child_scope(child).map_err(|e| e.to_string())?;
        let candidate = leftovers(self.state.paths(), row, action, scope, refs)?;
        let empty =
            candidate.dir.is_none() && candidate.notes.is_none() && candidate.refs.is_empty();
        if action == Action::Clean && empty {
            return Ok(None);
        }
        // Timestamps of one fixed format order as their text does (as the ledger's filter).
        if row.updated_at.as_str() >= self.bound.as_str() {
            kept.newer += 1;
            return Ok(None);
        }
        if row.state == CheckoutState::Prepared {
            let child_row = self
                .store
                .child(&candidate.scope, child)
                .await
                .map_err(|e| e.message())?;
            if child_row.active_run_id.is_some() {
                kept.running += 1;
                return Ok(None);
            }
        }
        Ok(Some(candidate))
    }
}

/// The `refs/subzero/` refs of each workspace's repository, listed once per workspace.
#[derive(Default)]
struct RefCache {
    by_workspace: HashMap<PathBuf, HashSet<String>>,
}

impl RefCache {
    /// `names` that exist in `workspace`'s repository (none when the workspace is gone).
    fn existing(&mut self, workspace: &Path, names: &[String]) -> Result<Vec<String>, String> {
        if !self.by_workspace.contains_key(workspace) {
            let refs = if workspace.is_dir() {
                checkout::refs_under(workspace, "refs/subzero/").map_err(|e| e.to_string())?
            } else {
                Vec::new()
            };
            let refs = refs.into_iter().collect();
            self.by_workspace.insert(workspace.to_path_buf(), refs);
        }
        let refs = &self.by_workspace[workspace];
        Ok(names
            .iter()
            .filter(|n| refs.contains(*n))
            .cloned()
            .collect())
    }
}

/// What is left of `row`'s checkout: its directory and notes, its refs in the workspace's
/// repository, the bytes the directory takes.
fn leftovers(
    paths: &StatePaths,
    row: &CheckoutRow,
    action: Action,
    scope: WorkspaceScope,
    refs: &mut RefCache,
) -> Result<Candidate, String> {
    let child = row.child_id;
    let dir = checkout_dir(paths, child);
    let notes = notes_file(paths, child);
    let refs = refs.existing(scope.root(), &ref_names(child))?;
    let bytes = checkout::disk_usage(&dir).map_err(|e| e.to_string())?;
    Ok(Candidate {
        child,
        state: row.state,
        action,
        scope,
        dir: exists(&dir).then_some(dir),
        notes: exists(&notes).then_some(notes),
        refs,
        bytes,
    })
}

/// `child`'s checkout directory, where the broker makes it (`<state>-checkouts/<child>`).
/// The ledger's `path` names the same place; gc never removes anything outside it.
pub fn checkout_dir(paths: &StatePaths, child: ChildId) -> PathBuf {
    paths.checkouts_dir().join(child.to_string())
}

/// The broker's notes on `child`'s checkout (`<state>/checkouts/<child>.own`).
fn notes_file(paths: &StatePaths, child: ChildId) -> PathBuf {
    paths.root().join("checkouts").join(format!("{child}.own"))
}

/// The refs a checkout keeps in its workspace's repository.
fn ref_names(child: ChildId) -> [String; 2] {
    [
        format!("refs/subzero/base/{child}"),
        format!("refs/subzero/children/{child}"),
    ]
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}
