//! The start of a stop: the active run becomes `stop_requested` and the queue is cleared.

use subzero_core::events::EventBody;
use subzero_core::lifecycle::NamedRun;

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
    let loaded = lifecycle::load(conn, options, &row)?;
    let named = if lifecycle::is_run_of(conn, child, expected)? {
        NamedRun::OfThisChild
    } else {
        NamedRun::Unknown
    };
    let decided = loaded.stop(expected, named, owner_token)?;
    if !decided.outcome().newly_requested {
        return Ok(StopBegun {
            run_id: expected,
            cleared: Vec::new(),
            already_requested: true,
        });
    }
    let at = now(conn)?;
    let details = Details {
        withdrawn: Some("cleared by stop"),
        ..Details::default()
    };
    let receipt = decided.commit(|c| write::apply(conn, c, &details, &at))?;
    let cleared = receipt.withdrawn;
    events::append(
        conn,
        options,
        child,
        &EventBody::StopRequested {
            run_id: expected,
            cleared_queued: u32::try_from(cleared.len()).unwrap_or(u32::MAX),
        },
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
