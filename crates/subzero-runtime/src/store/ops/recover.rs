//! Recovery of a child whose owner is gone, decided from what its kernel lock shows.

use subzero_core::events::EventBody;
use subzero_core::lifecycle::Recovered;

use super::*;

/// What recovery did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RecoveryOutcome {
    /// Active run interrupted, queue cancelled, child interrupted, ownership cleared.
    Interrupted {
        /// The interrupted run, if one was active.
        run_id: Option<RunId>,
        /// Cancelled queued runs.
        cancelled: Vec<RunId>,
    },
    /// The child was idle; only the stale ownership was cleared.
    Released,
    /// The lock is still held: marked `recovery_required`.
    MarkedRecoveryRequired,
    /// The row changed since it was observed (someone else acted); nothing done.
    Changed,
}

pub(super) fn recover_tx(
    conn: &Connection,
    options: &StoreOptions,
    child: ChildId,
    observed_generation: u64,
    lock: LockObservation,
    reason: &str,
) -> RuntimeResult<RecoveryOutcome> {
    let row = load_child(conn, child)?;
    let loaded = lifecycle::load(conn, options, &row)?;
    let decided = loaded.recover(observed_generation, lock, reason)?;
    let at = now(conn)?;
    let details = Details {
        ended: RunEnd {
            reason: Some(reason),
            ..RunEnd::default()
        },
        withdrawn: Some("cancelled: the active run was interrupted"),
        request_id: None,
    };
    let recovered = decided.commit(|c| write::apply(conn, c, &details, &at))?;
    Ok(match &recovered {
        Recovered::Unchanged => RecoveryOutcome::Changed,
        Recovered::Held => RecoveryOutcome::MarkedRecoveryRequired,
        Recovered::Released => RecoveryOutcome::Released,
        Recovered::Interrupted { run, abandoned } => {
            events::append(
                conn,
                options,
                child,
                &EventBody::Interrupted {
                    run_id: Some(*run),
                    reason: events::short_text(reason),
                },
            )?;
            RecoveryOutcome::Interrupted {
                run_id: Some(*run),
                cancelled: abandoned.clone(),
            }
        }
    })
}

impl Store {
    /// Recovery of one child whose owner is gone, conditional on the generation the
    /// caller observed. With the lock `Free` (the caller holds it): the active run
    /// becomes `interrupted` with `reason`, queued runs are cancelled (`interrupted`),
    /// the child is `interrupted` and unowned, and an `interrupted` event is appended.
    /// With the lock `Held`: the child is marked `recovery_required`, runs untouched.
    pub async fn recover_child(
        &self,
        child: ChildId,
        observed_generation: u64,
        lock: LockObservation,
        reason: &str,
    ) -> RuntimeResult<RecoveryOutcome> {
        let reason = reason.to_owned();
        self.transact(move |tx, o| recover_tx(tx, o, child, observed_generation, lock, &reason))
            .await
    }

    /// Blocking twin of [`Store::recover_child`] for startup.
    pub fn recover_child_blocking(
        &self,
        child: ChildId,
        observed_generation: u64,
        lock: LockObservation,
        reason: &str,
    ) -> RuntimeResult<RecoveryOutcome> {
        let reason = reason.to_owned();
        self.transact_blocking(move |tx, o| {
            recover_tx(tx, o, child, observed_generation, lock, &reason)
        })
    }

    /// Children whose row claims an owner or an active run (for startup recovery).
    pub fn children_needing_recovery_blocking(&self) -> RuntimeResult<Vec<ChildRow>> {
        self.read_blocking(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {} FROM children WHERE ownership != ?1 OR state = ?2 ORDER BY child_id",
                ChildRow::columns()
            ))?;
            let rows = stmt
                .query_map(
                    params![Sql(Ownership::None), Sql(ChildState::Running)],
                    ChildRow::from_row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}
