//! Admission of spawns and follow-ups: a new child with its first run, or a run queued
//! behind (or started on) an existing child, with its receipt, in one transaction.

use subzero_core::events::EventBody;
use subzero_core::lifecycle::{Decided, Delivery};

use super::*;

/// Spawn admission: a new child with its first run, already claimed by the caller.
#[derive(Clone, Debug)]
pub struct AdmitSpawn {
    /// The child to create.
    pub child: NewChild,
    /// Id of its first run.
    pub run_id: RunId,
    /// The prompt.
    pub prompt: String,
    /// The caller's broker token (it holds the child lock and the slots).
    pub owner_token: String,
    /// Idempotency receipt, if the caller passed a requestId.
    pub receipt: Option<ReceiptInput>,
}

/// Result of a spawn admission.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Admission {
    /// The child.
    pub child_id: ChildId,
    /// Its first run, now `running`.
    pub run_id: RunId,
    /// Owner generation after the claim (1).
    pub owner_generation: u64,
}

/// A follow-up message for an existing child.
#[derive(Clone, Debug)]
pub struct AdmitFollowup {
    /// The child.
    pub child_id: ChildId,
    /// Id for the new run.
    pub run_id: RunId,
    /// The message.
    pub prompt: String,
    /// The caller's broker token.
    pub owner_token: String,
    /// Idempotency receipt.
    pub receipt: Option<ReceiptInput>,
}

/// How a follow-up was admitted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FollowupDelivery {
    /// The child was ready and claimed by the caller: the run is now active.
    Started,
    /// The child is running: the run is queued at this 1-based position.
    Queued {
        /// Position in the follow-up queue.
        position: u64,
    },
}

pub(in crate::store) fn admit_spawn_tx(
    conn: &Connection,
    options: &StoreOptions,
    input: &AdmitSpawn,
) -> RuntimeResult<Admit<Admission>> {
    let scope_key = input.child.scope.key();
    if let Some(receipt) = &input.receipt
        && let Some(stored) = existing_receipt(conn, &scope_key, receipt)?
    {
        return Ok(Admit::Replayed(stored));
    }
    let at = now(conn)?;
    let child = &input.child;
    let decided = Decided::spawn(
        child.child_id,
        input.run_id,
        input.prompt.clone(),
        options.queued_followups,
        &input.owner_token,
    );
    let request_id = input.receipt.as_ref().map(|r| r.request_id.as_str());
    let owner_generation = decided.custody().generation();
    let spawned = decided.commit(|c| write::insert(conn, child, c, request_id, &at))?;
    if let Some(receipt) = &input.receipt {
        insert_receipt(conn, &scope_key, receipt, &at)?;
    }
    events::append(
        conn,
        options,
        child.child_id,
        &EventBody::RunStarted {
            run_id: spawned.run,
        },
    )?;
    Ok(Admit::New(Admission {
        child_id: spawned.child,
        run_id: spawned.run,
        owner_generation,
    }))
}

pub(super) fn admit_followup_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    input: &AdmitFollowup,
) -> RuntimeResult<Admit<FollowupDelivery>> {
    let row = load_child_in(conn, scope, input.child_id)?;
    let scope_key = scope.key();
    if let Some(receipt) = &input.receipt
        && let Some(stored) = existing_receipt(conn, &scope_key, receipt)?
    {
        return Ok(Admit::Replayed(stored));
    }
    let loaded = lifecycle::load(conn, options, &row)?;
    let decided = loaded.followup(input.run_id, input.prompt.clone(), &input.owner_token)?;
    let at = now(conn)?;
    let details = Details {
        request_id: input.receipt.as_ref().map(|r| r.request_id.as_str()),
        ..Details::default()
    };
    let delivered = decided.commit(|c| write::apply(conn, c, &details, &at))?;
    let run_id = input.run_id;
    let (event, delivery) = match delivered {
        Delivery::Queued { position } => (
            EventBody::RunQueued {
                run_id,
                position: u32::try_from(position).unwrap_or(u32::MAX),
            },
            FollowupDelivery::Queued {
                position: u64::try_from(position).unwrap_or(u64::MAX),
            },
        ),
        Delivery::Started => (EventBody::RunStarted { run_id }, FollowupDelivery::Started),
    };
    events::append(conn, options, input.child_id, &event)?;
    if let Some(receipt) = &input.receipt {
        insert_receipt(conn, &scope_key, receipt, &at)?;
    }
    Ok(Admit::New(delivery))
}

/// A follow-up on a `ready` child as one transaction: a replayed receipt first (nothing
/// claimed), then the claim and the admission, so a refusal of either leaves neither.
pub(super) fn start_followup_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    input: &AdmitFollowup,
) -> RuntimeResult<Admit<FollowupDelivery>> {
    if let Some(receipt) = &input.receipt
        && let Some(stored) = existing_receipt(conn, &scope.key(), receipt)?
    {
        return Ok(Admit::Replayed(stored));
    }
    super::claim::claim_tx(conn, options, scope, input.child_id, &input.owner_token)?;
    admit_followup_tx(conn, options, scope, input)
}

/// A follow-up queued behind the active run, or `None` — nothing written — when the child
/// has no active run any more (it settled since the caller read it).
pub(super) fn queue_followup_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    input: &AdmitFollowup,
) -> RuntimeResult<Option<Admit<FollowupDelivery>>> {
    if let Some(receipt) = &input.receipt
        && let Some(stored) = existing_receipt(conn, &scope.key(), receipt)?
    {
        return Ok(Some(Admit::Replayed(stored)));
    }
    if load_child_in(conn, scope, input.child_id)?.state == ChildState::Ready {
        return Ok(None);
    }
    match admit_followup_tx(conn, options, scope, input)? {
        Admit::New(FollowupDelivery::Started) => Err(RuntimeError::Internal(format!(
            "a follow-up to be queued on child {} was started instead",
            input.child_id
        ))),
        admitted => Ok(Some(admitted)),
    }
}

impl Store {
    /// Admission of a spawn: creates the child (`running`, owned by `owner_token`,
    /// generation 1), its first run (`running`), a `run_started` event and the receipt —
    /// all or nothing. A known requestId with the same digest replays its receipt;
    /// with another digest it is `request_conflict`. The caller holds the child lock
    /// and the workspace slots before calling.
    pub async fn admit_spawn(&self, input: AdmitSpawn) -> RuntimeResult<Admit<Admission>> {
        self.transact(move |tx, o| admit_spawn_tx(tx, o, &input))
            .await
    }

    /// Admission of a follow-up. A `running` child (owned by any broker) gets the run
    /// queued at the end of its ordered queue with a `run_queued` event; a `ready` child
    /// claimed by `owner_token` starts it at once (`run_started`). `interrupted` →
    /// `interrupted`; not owned by the caller → `busy` / `recovery_required`.
    pub async fn admit_followup(
        &self,
        scope: &WorkspaceScope,
        input: AdmitFollowup,
    ) -> RuntimeResult<Admit<FollowupDelivery>> {
        let scope = scope.clone();
        self.transact(move |tx, o| admit_followup_tx(tx, o, &scope, &input))
            .await
    }

    /// A follow-up that starts on a `ready` child: the claim (see [`Store::claim`]; the
    /// caller holds the child's kernel lock and its workspace slots) and the admission
    /// (`run_started`, receipt) in one transaction. A refusal — `busy` or
    /// `recovery_required` from the claim, anything from the admission — writes nothing:
    /// no owner generation bump, no run, no event, no receipt. A known requestId replays.
    pub async fn start_followup(
        &self,
        scope: &WorkspaceScope,
        input: AdmitFollowup,
    ) -> RuntimeResult<Admit<FollowupDelivery>> {
        let scope = scope.clone();
        self.transact(move |tx, o| start_followup_tx(tx, o, &scope, &input))
            .await
    }

    /// A follow-up for a `running` child, queued behind its active run (`run_queued`), or
    /// `None` with nothing written when the child is `ready` by now: the caller then takes
    /// the locks a start needs and calls [`Store::start_followup`]. A queued follow-up never
    /// starts a run, so this needs no lock. A known requestId replays.
    pub async fn queue_followup(
        &self,
        scope: &WorkspaceScope,
        input: AdmitFollowup,
    ) -> RuntimeResult<Option<Admit<FollowupDelivery>>> {
        let scope = scope.clone();
        self.transact(move |tx, o| queue_followup_tx(tx, o, &scope, &input))
            .await
    }
}
