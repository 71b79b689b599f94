//! Ownership of an idle child: claiming it for a broker that holds its kernel lock, and
//! giving it back.

use super::*;

/// A successful claim.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Claim {
    /// The child.
    pub child_id: ChildId,
    /// The new owner generation.
    pub owner_generation: u64,
    /// The child's state at the claim.
    pub state: ChildState,
}

pub(super) fn claim_tx(
    conn: &Connection,
    options: &StoreOptions,
    scope: &WorkspaceScope,
    child: ChildId,
    owner_token: &str,
) -> RuntimeResult<Claim> {
    let row = load_child_in(conn, scope, child)?;
    let decided = lifecycle::load(conn, options, &row)?.claim(owner_token)?;
    let at = now(conn)?;
    let owner_generation = decided.custody().generation();
    decided.commit(|c| write::apply(conn, c, &Details::default(), &at))?;
    Ok(Claim {
        child_id: child,
        owner_generation,
        state: row.state,
    })
}

/// Give back the claim `owner_token` holds on the idle child.
pub(super) fn release_tx(
    conn: &Connection,
    options: &StoreOptions,
    child: ChildId,
    owner_token: &str,
) -> RuntimeResult<()> {
    let row = load_child(conn, child)?;
    let decided = lifecycle::load(conn, options, &row)?.release(owner_token)?;
    let at = now(conn)?;
    decided.commit(|c| write::apply(conn, c, &Details::default(), &at))
}

impl Store {
    /// Record ownership of an idle (`ready` or `interrupted`) child whose kernel lock
    /// the caller holds: bumps the owner generation. Fails with `busy` when another
    /// broker owns it and `recovery_required` when a previous owner's processes hold it.
    pub async fn claim(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        owner_token: &str,
    ) -> RuntimeResult<Claim> {
        let scope = scope.clone();
        let token = owner_token.to_owned();
        self.transact(move |tx, o| claim_tx(tx, o, &scope, child, &token))
            .await
    }

    /// Give up ownership of an idle child (e.g. a claim whose follow-up failed).
    pub async fn release(&self, child: ChildId, owner_token: &str) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact(move |tx, o| release_tx(tx, o, child, &token))
            .await
    }
}
