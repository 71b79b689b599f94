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
            return Err(decided.ended_run("stop").into());
        }
        Err(e) => return Err(e.into()),
    };
    let custody = row.custody();
    custody.check_owner(owner_token)?;
    if !receipt.newly_requested {
        return Ok(StopBegun {
            run_id: expected,
            cleared: Vec::new(),
            already_requested: true,
        });
    }
    let at = now(conn)?;
    write::run(
        conn,
        child,
        expected,
        RunStatus::Running,
        RunStatus::StopRequested,
        &RunEnd::default(),
        &at,
    )?;
    let withdrawn: Vec<(RunId, RunStatus)> = receipt
        .withdrawn
        .iter()
        .map(|run| (*run, RunStatus::Stopped))
        .collect();
    let cleared = write::withdraw(conn, child, &withdrawn, "cleared by stop", &at)?;
    write::child_at_rest(conn, &row, &decided, &custody, &at)?;
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
