//! Resume: a ready child at its verified checkpoint, or a new run from it.

use subzero_core::events::EventBody;

use super::*;

/// What a resume commits: the (possibly new) model, what the transcript holds at the
/// recorded leaf, the first run when the resume carries a message, and the receipt.
#[derive(Debug)]
pub struct ResumeCommit {
    /// The model the child runs against from now on (never a key).
    pub model: ModelRow,
    /// The transcript's leaf at the recorded checkpoint, as the broker read it; the core
    /// checks it against the leaf recorded in the same transaction.
    pub observed: Option<subzero_core::lifecycle::ObservedLeaf>,
    /// The run started with the resume message, if any.
    pub first: Option<(RunId, String)>,
    /// Idempotency receipt.
    pub receipt: Option<ReceiptInput>,
}

/// Result of a resume.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Resumed {
    /// State afterwards (`ready` or `running`).
    pub state: ChildState,
    /// The run started with the resume message, if any.
    pub run_id: Option<RunId>,
    /// Owner generation.
    pub owner_generation: u64,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn resume_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    child: ChildId,
    owner_token: &str,
    model: &ModelRow,
    observed: Option<&subzero_core::lifecycle::ObservedLeaf>,
    first: Option<&(RunId, String)>,
    receipt: Option<&ReceiptInput>,
) -> RuntimeResult<Admit<Resumed>> {
    let row = load_child_in(conn, scope, child)?;
    let scope_key = scope.key();
    if let Some(receipt) = receipt
        && let Some(stored) = existing_receipt(conn, &scope_key, receipt)?
    {
        // The resume already happened; the claim this call took is given back with it.
        super::claim::release_tx(conn, options, child, owner_token)?;
        return Ok(Admit::Replayed(stored));
    }
    let loaded = lifecycle::load(conn, options, &row)?;
    // `observed` is what the transcript holds at the recorded leaf, read by the broker
    // (`broker::checkpoint`); the core checks it against the leaf recorded in this very
    // transaction, so a leaf recorded in between is refused, not resumed past.
    let decided = loaded.resume(observed, first.cloned(), owner_token)?;
    let at = now(conn)?;
    let details = Details {
        request_id: receipt.map(|r| r.request_id.as_str()),
        ..Details::default()
    };
    let admitted = decided.admitted().map(|a| a.run());
    let resumed = decided.commit(|c| write::apply(conn, c, &details, &at))?;
    conn.execute(
        "UPDATE children SET model_url = ?2, model_name = ?3, model_api = ?4, credential_ref = ?5, \
         model_context_window = ?6 WHERE child_id = ?1",
        params![
            Sql(child),
            model.url,
            model.model,
            Sql(model.api),
            model.credential_ref,
            model.context_window
        ],
    )?;
    if let Some(run_id) = admitted {
        events::append(conn, options, child, &EventBody::RunStarted { run_id })?;
    }
    if let Some(receipt) = receipt {
        insert_receipt(conn, &scope_key, receipt, &at)?;
    }
    Ok(Admit::New(Resumed {
        state: resumed.state,
        run_id: resumed.run,
        owner_generation: row.owner_generation,
    }))
}

/// A resume as one transaction: a replayed receipt first (nothing claimed), then the
/// claim and the resume, so a refusal of either leaves neither.
pub(super) fn claim_and_resume_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    child: ChildId,
    owner_token: &str,
    resume: &ResumeCommit,
) -> RuntimeResult<Admit<Resumed>> {
    if let Some(receipt) = &resume.receipt
        && let Some(stored) = existing_receipt(conn, &scope.key(), receipt)?
    {
        return Ok(Admit::Replayed(stored));
    }
    super::claim::claim_tx(conn, options, scope, child, owner_token)?;
    resume_tx(
        conn,
        options,
        scope,
        child,
        owner_token,
        &resume.model,
        resume.observed.as_ref(),
        resume.first.as_ref(),
        resume.receipt.as_ref(),
    )
}

impl Store {
    /// Commit a resume of a `ready`/`interrupted` child claimed by `owner_token`:
    /// rewrites the model metadata; with a message it starts a run (`running`), without
    /// one the child is `ready` and ownership is released.
    pub async fn commit_resume(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        owner_token: &str,
        resume: ResumeCommit,
    ) -> RuntimeResult<Admit<Resumed>> {
        let scope = scope.clone();
        let token = owner_token.to_owned();
        self.transact(move |tx, o| {
            resume_tx(
                tx,
                o,
                &scope,
                child,
                &token,
                &resume.model,
                resume.observed.as_ref(),
                resume.first.as_ref(),
                resume.receipt.as_ref(),
            )
        })
        .await
    }

    /// [`Store::commit_resume`] with the claim in the same transaction (see
    /// [`Store::claim`]: the caller holds the child's kernel lock whenever the resume
    /// starts a run or brings an interrupted child back). A refusal — `busy` or
    /// `recovery_required` from the claim, anything from the resume — writes nothing: no
    /// owner generation bump, no run, no event, no receipt. A known requestId replays.
    pub async fn claim_and_resume(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        owner_token: &str,
        resume: ResumeCommit,
    ) -> RuntimeResult<Admit<Resumed>> {
        let scope = scope.clone();
        let token = owner_token.to_owned();
        self.transact(move |tx, o| claim_and_resume_tx(tx, o, &scope, child, &token, &resume))
            .await
    }
}
