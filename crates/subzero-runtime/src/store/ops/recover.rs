//! Recovery of a child whose owner is gone, decided from what its kernel lock shows.

use super::*;

/// What a recovery observed about the child lock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LockObservation {
    /// The lock was taken by the recovering broker: nothing of the old owner lives.
    Free,
    /// Some process still holds the lock.
    Held,
}

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
    let needs = row.ownership != Ownership::None || row.state == ChildState::Running;
    if row.owner_generation != observed_generation || !needs {
        return Ok(RecoveryOutcome::Changed);
    }
    let at = now(conn)?;
    let generation = i64_of(observed_generation);
    if lock == LockObservation::Held {
        let changed = conn.execute(
            "UPDATE children SET ownership = 'recovery_required', phase = 'recovery_required', updated_at = ?3 \
             WHERE child_id = ?1 AND owner_generation = ?2 AND ownership IN ('owned', 'none', 'recovery_required')",
            params![child.to_string(), generation, at],
        )?;
        expect_one(changed, "mark recovery_required")?;
        return Ok(RecoveryOutcome::MarkedRecoveryRequired);
    }
    if row.state != ChildState::Running {
        let changed = conn.execute(
            "UPDATE children SET ownership = 'none', owner_token = NULL, phase = 'idle', updated_at = ?3 \
             WHERE child_id = ?1 AND owner_generation = ?2 AND state IN ('ready', 'interrupted')",
            params![child.to_string(), generation, at],
        )?;
        expect_one(changed, "release stale owner")?;
        return Ok(RecoveryOutcome::Released);
    }
    let mut decided = lifecycle::load(conn, options, &row)?;
    let from = decided.active_run().map(|(_, status)| status);
    let lost = decided.lose_worker(reason).map_err(refused)?;
    let (run, from) = match from {
        Some(from) => (lost.run.id(), from),
        None => {
            return Err(RuntimeError::Internal(format!(
                "child {child} lost its worker without an active run"
            )));
        }
    };
    let changed = conn.execute(
        "UPDATE runs SET status = ?2, ended_at = ?3, reason = ?4 WHERE run_id = ?1 AND status = ?5",
        params![
            run.to_string(),
            lost.run.status().as_str(),
            at,
            reason,
            from.as_str()
        ],
    )?;
    expect_one(changed, "interrupt active run")?;
    let cancelled = withdraw(
        conn,
        child,
        &terminal(&lost.abandoned),
        "cancelled: the active run was interrupted",
        &at,
    )?;
    let changed = conn.execute(
        "UPDATE children SET state = ?5, phase = 'idle', ownership = 'none', owner_token = NULL, \
         active_run_id = NULL, interrupt_reason = ?3, updated_at = ?4 \
         WHERE child_id = ?1 AND owner_generation = ?2 AND state = 'running'",
        params![
            child.to_string(),
            generation,
            reason,
            at,
            decided.state().as_str()
        ],
    )?;
    expect_one(changed, "interrupt child")?;
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
                "SELECT {CHILD_COLUMNS} FROM children WHERE ownership != 'none' OR state = 'running' ORDER BY child_id"
            ))?;
            let rows = stmt
                .query_map([], child_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}
