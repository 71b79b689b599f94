//! The start of a stop: the active run becomes `stop_requested` and the queue is cleared.

use super::*;

/// A stop that was accepted.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StopBegun {
    /// The active run, now `stop_requested`.
    pub run_id: RunId,
    /// Queued runs that were cleared (now `stopped`).
    pub cleared: Vec<RunId>,
    /// The stop had already been requested; nothing changed.
    pub already_requested: bool,
}

pub(super) fn begin_stop_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    child: ChildId,
    expected: RunId,
    owner_token: &str,
) -> RuntimeResult<StopBegun> {
    let row = load_child_in(conn, scope, child)?;
    let mut decided = lifecycle::load(conn, options, &row)?;
    let receipt = match decided.stop(expected) {
        Ok(receipt) => receipt,
        // The core says `stale_run` for a child with no active run; when the caller
        // names a run of this child that already ended, the broker has always said
        // `not_running` (its callers rely on it).
        Err(LifecycleError::StaleRun(e))
            if e.active.is_none() && lifecycle::is_run_of(conn, child, expected)? =>
        {
            return Err(RuntimeError::NotRunning {
                child: child.to_string(),
                hint: "the run already ended; read its result with subzero_get",
            });
        }
        Err(e) => return Err(refused(e)),
    };
    if row.ownership != Ownership::Owned || row.owner_token.as_deref() != Some(owner_token) {
        return Err(ownership_error(&row, owner_token));
    }
    if !receipt.newly_requested {
        return Ok(StopBegun {
            run_id: expected,
            cleared: Vec::new(),
            already_requested: true,
        });
    }
    let at = now(conn)?;
    let changed = conn.execute(
        "UPDATE runs SET status = 'stop_requested' WHERE run_id = ?1 AND child_id = ?2 AND status = 'running'",
        params![expected.to_string(), child.to_string()],
    )?;
    expect_one(changed, "request stop of the active run")?;
    let withdrawn: Vec<(RunId, RunStatus)> = receipt
        .withdrawn
        .iter()
        .map(|run| (*run, RunStatus::Stopped))
        .collect();
    let cleared = withdraw(conn, child, &withdrawn, "cleared by stop", &at)?;
    let changed = conn.execute(
        "UPDATE children SET phase = 'stopping', updated_at = ?3 WHERE child_id = ?1 AND state = 'running' AND active_run_id = ?2",
        params![child.to_string(), expected.to_string(), at],
    )?;
    expect_one(changed, "mark child stopping")?;
    events::append(
        conn,
        options,
        child,
        Some(expected),
        "stop_requested",
        &json!({ "clearedQueued": cleared.len() }),
    )?;
    Ok(StopBegun {
        run_id: expected,
        cleared,
        already_requested: false,
    })
}

impl Store {
    /// Begin a stop of the active run: `expected` must be the active run (`stale_run`
    /// otherwise, `not_running` when nothing is active). Sets it `stop_requested`, clears
    /// the queue (those runs become `stopped`), phase `stopping`, and appends
    /// `stop_requested` — atomically. A repeated stop is reported as already requested.
    pub async fn begin_stop(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        expected: RunId,
        owner_token: &str,
    ) -> RuntimeResult<StopBegun> {
        let scope = scope.clone();
        let token = owner_token.to_owned();
        self.transact(move |tx, o| begin_stop_tx(tx, o, &scope, child, expected, &token))
            .await
    }
}
