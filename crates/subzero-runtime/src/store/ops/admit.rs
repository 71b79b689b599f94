//! Admission of spawns and follow-ups: a new child with its first run, or a run queued
//! behind (or started on) an existing child, with its receipt, in one transaction.

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

pub(super) fn admit_spawn_tx(
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
    let spawned = AnyChild::spawn(
        child.child_id,
        input.run_id,
        input.prompt.clone(),
        options.queued_followups,
    );
    let Some((first, first_status)) = spawned.active_run() else {
        return Err(RuntimeError::Internal(format!(
            "a spawned child {} has no active run",
            child.child_id
        )));
    };
    let snapshot = serde_json::to_string(&child.snapshot)
        .map_err(|e| RuntimeError::Internal(format!("snapshot: {e}")))?;
    conn.execute(
        "INSERT INTO children (child_id, scope_key, scope_uid, workspace_root, scope_dev, scope_ino, \
         template_id, snapshot_json, write_capable, model_url, model_name, model_api, credential_ref, \
         state, phase, ownership, owner_token, owner_generation, active_run_id, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?17, 'starting', 'owned', ?14, 1, ?15, ?16, ?16)",
        params![
            child.child_id.to_string(),
            scope_key,
            i64::from(child.scope.uid()),
            child.scope.root().to_string_lossy(),
            child.scope.dev() as i64,
            child.scope.ino() as i64,
            child.template_id,
            snapshot,
            child.write_capable,
            child.model.url,
            child.model.model,
            child.model.api,
            child.model.credential_ref,
            input.owner_token,
            first.to_string(),
            at,
            spawned.state().as_str(),
        ],
    )?;
    let request_id = input.receipt.as_ref().map(|r| r.request_id.as_str());
    insert_run(
        conn,
        child.child_id,
        first,
        first_status,
        &input.prompt,
        request_id,
        &at,
    )?;
    if let Some(receipt) = &input.receipt {
        insert_receipt(conn, &scope_key, receipt, &at)?;
    }
    events::append(
        conn,
        options,
        child.child_id,
        Some(input.run_id),
        "run_started",
        &json!({}),
    )?;
    Ok(Admit::New(Admission {
        child_id: child.child_id,
        run_id: input.run_id,
        owner_generation: 1,
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
    let mut decided = lifecycle::load(conn, options, &row)?;
    let delivery = decided
        .followup(input.run_id, input.prompt.clone())
        .map_err(refused)?;
    let at = now(conn)?;
    let request_id = input.receipt.as_ref().map(|r| r.request_id.as_str());
    let child = input.child_id.to_string();
    let delivery = match delivery {
        Delivery::Queued { position } => {
            if row.ownership != Ownership::Owned {
                return Err(ownership_error(&row, &input.owner_token));
            }
            insert_run(
                conn,
                input.child_id,
                input.run_id,
                RunStatus::Queued,
                &input.prompt,
                request_id,
                &at,
            )?;
            let slot: i64 = conn.query_row(
                "SELECT COALESCE(MAX(position), 0) + 1 FROM followups WHERE child_id = ?1",
                params![child],
                |r| r.get(0),
            )?;
            conn.execute(
                "INSERT INTO followups (child_id, position, run_id) VALUES (?1, ?2, ?3)",
                params![child, slot, input.run_id.to_string()],
            )?;
            let active = row.active_run_id.map(|r| r.to_string());
            let changed = conn.execute(
                "UPDATE children SET updated_at = ?3 WHERE child_id = ?1 AND state = 'running' AND active_run_id = ?2",
                params![child, active, at],
            )?;
            expect_one(changed, "touch running child")?;
            events::append(
                conn,
                options,
                input.child_id,
                Some(input.run_id),
                "run_queued",
                &json!({ "position": position }),
            )?;
            FollowupDelivery::Queued {
                position: u64::try_from(position).unwrap_or(u64::MAX),
            }
        }
        Delivery::Started => {
            let changed = conn.execute(
                "UPDATE children SET state = ?5, phase = 'starting', active_run_id = ?3, updated_at = ?4 \
                 WHERE child_id = ?1 AND state = ?6 AND ownership = 'owned' AND owner_token = ?2",
                params![
                    child,
                    input.owner_token,
                    input.run_id.to_string(),
                    at,
                    decided.state().as_str(),
                    row.state.as_str()
                ],
            )?;
            if changed != 1 {
                return Err(ownership_error(&row, &input.owner_token));
            }
            insert_run(
                conn,
                input.child_id,
                input.run_id,
                RunStatus::Running,
                &input.prompt,
                request_id,
                &at,
            )?;
            events::append(
                conn,
                options,
                input.child_id,
                Some(input.run_id),
                "run_started",
                &json!({}),
            )?;
            FollowupDelivery::Started
        }
    };
    if let Some(receipt) = &input.receipt {
        insert_receipt(conn, &scope_key, receipt, &at)?;
    }
    Ok(Admit::New(delivery))
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
}
