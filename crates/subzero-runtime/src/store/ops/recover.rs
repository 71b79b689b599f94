//! Recovery of a child whose owner is gone, decided from what its kernel lock shows.

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
    let mut decided = lifecycle::load(conn, options, &row)?;
    let at = now(conn)?;
    let custody = match row.custody().recover(observed_generation, lock) {
        Recovery::Unchanged => return Ok(RecoveryOutcome::Changed),
        // Already marked: a recovery that finds the lock still held changes nothing
        // (every access to such a child re-checks it; none may look like a change).
        Recovery::Hold(held) if held == row.custody() && row.phase == held.phase_of(&decided) => {
            return Ok(RecoveryOutcome::MarkedRecoveryRequired);
        }
        Recovery::Hold(held) => {
            write::child_at_rest(conn, &row, &decided, &held, &at)?;
            return Ok(RecoveryOutcome::MarkedRecoveryRequired);
        }
        Recovery::Release(freed) => {
            write::child_at_rest(conn, &row, &decided, &freed, &at)?;
            return Ok(RecoveryOutcome::Released);
        }
        Recovery::LoseWorker(custody) => custody,
    };
    let Some((run, from)) = decided.active_run() else {
        return Err(RuntimeError::Internal(format!(
            "child {child} lost its worker without an active run"
        )));
    };
    let lost = decided.lose_worker(reason)?;
    let end = RunEnd {
        reason: Some(reason),
        ..RunEnd::default()
    };
    write::run(conn, child, run, from, lost.run.status(), &end, &at)?;
    let cancelled = write::withdraw(
        conn,
        child,
        &terminal(&lost.abandoned),
        "cancelled: the active run was interrupted",
        &at,
    )?;
    write::child_at_rest(conn, &row, &decided, &custody, &at)?;
    events::append(
        conn,
        options,
        child,
        Some(run),
        "interrupted",
        &json!({ "reason": events::short_text(reason) }),
    )?;
    Ok(RecoveryOutcome::Interrupted {
        run_id: Some(run),
        cancelled,
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
                "SELECT {CHILD_COLUMNS} FROM children WHERE ownership != ?1 OR state = ?2 ORDER BY child_id"
            ))?;
            let rows = stmt
                .query_map(
                    params![Ownership::None.as_str(), ChildState::Running.as_str()],
                    child_from_row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}
