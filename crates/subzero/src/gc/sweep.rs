//! Collecting one planned checkout, safe against a broker running beside: under its
//! child's lock (as a worker of the child holds it, so no run starts meanwhile), the
//! `removed` decision written over the row it was made from before anything is deleted,
//! and a checkout that is busy or changed since the plan skipped, not forced.

use std::io::ErrorKind;

use subzero_core::{CheckoutState, Described, ErrorCode};
use subzero_runtime::RuntimeError;
use subzero_runtime::checkout;
use subzero_runtime::locks::ChildLock;
use subzero_runtime::paths::StatePaths;
use subzero_runtime::store::Store;

use super::plan::{Action, Candidate, checkout_dir};

/// How collecting one checkout ended.
#[derive(Debug)]
pub enum Swept {
    /// Its leftovers are gone (and it is `removed`, when that was the plan).
    Done,
    /// Left alone: busy, or changed since the plan; a later run may collect it.
    Skipped(String),
    /// Something went wrong; what is left stays for a later run.
    Failed(String),
}

impl Swept {
    /// Whether it failed outright.
    pub fn failed(&self) -> bool {
        matches!(self, Swept::Failed(_))
    }

    fn of(e: &RuntimeError) -> Swept {
        if e.code() == ErrorCode::Busy {
            Swept::Skipped(e.message())
        } else {
            Swept::Failed(e.message())
        }
    }
}

/// Collect `candidate`: decide and write `removed` when planned, then delete its
/// directory, refs and notes, and record that it holds no bytes.
pub async fn sweep(store: &Store, paths: &StatePaths, candidate: &Candidate) -> Swept {
    let child = candidate.child;
    let _lock = match ChildLock::try_acquire(paths, child) {
        Ok(lock) => lock,
        Err(e) => return Swept::of(&e),
    };
    if candidate.action == Action::Remove
        && let Err(swept) = decide_removed(store, candidate).await
    {
        return swept;
    }
    let workspace = candidate.scope.root();
    let refs: Vec<&str> = candidate.refs.iter().map(String::as_str).collect();
    if let Err(e) = checkout::remove(workspace, &checkout_dir(paths, child), &refs) {
        return Swept::Failed(e.to_string());
    }
    if let Some(notes) = &candidate.notes
        && let Err(e) = std::fs::remove_file(notes)
        && e.kind() != ErrorKind::NotFound
    {
        return Swept::Failed(format!("cannot remove {}: {e}", notes.display()));
    }
    match store.measure_checkout(child, 0).await {
        Ok(()) => Swept::Done,
        Err(e) => Swept::of(&e),
    }
}

/// Load the checkout again, check it is as planned (and, prepared, that its child still
/// has no active run), and write the core's `removed` decision over it.
async fn decide_removed(store: &Store, candidate: &Candidate) -> Result<(), Swept> {
    let child = candidate.child;
    let loaded = store.checkout(child).await.map_err(|e| Swept::of(&e))?;
    let Some(checkout) = loaded else {
        return Err(Swept::Skipped(format!(
            "the checkout of {child} is no longer in the ledger"
        )));
    };
    if checkout.state() != candidate.state {
        return Err(Swept::Skipped(format!(
            "the checkout of {child} is {} now, not {}",
            checkout.state(),
            candidate.state
        )));
    }
    if candidate.state == CheckoutState::Prepared {
        let row = store
            .child(&candidate.scope, child)
            .await
            .map_err(|e| Swept::of(&e))?;
        if let Some(run) = row.active_run_id {
            return Err(Swept::Skipped(format!("child {child} is running ({run})")));
        }
    }
    let decided = checkout
        .remove()
        .map_err(|(_, refused)| Swept::Skipped(refused.to_string()))?;
    store
        .write_checkout(decided)
        .await
        .map(drop)
        .map_err(|e| Swept::of(&e))
}
