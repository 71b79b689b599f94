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
    scope: &WorkspaceScope,
    child: ChildId,
    owner_token: &str,
) -> RuntimeResult<Claim> {
    let row = load_child_in(conn, scope, child)?;
    let at = now(conn)?;
    let changed = conn.execute(
        "UPDATE children SET ownership = 'owned', owner_token = ?2, owner_generation = owner_generation + 1, updated_at = ?3 \
         WHERE child_id = ?1 AND ownership = 'none' AND state IN ('ready', 'interrupted')",
        params![child.to_string(), owner_token, at],
    )?;
    if changed != 1 {
        return Err(match (row.ownership, row.state) {
            (Ownership::RecoveryRequired, _) => ownership_error(&row, owner_token),
            (Ownership::Owned, _) if row.owner_token.as_deref() == Some(owner_token) => {
                RuntimeError::Busy(format!("child {child} is already claimed by this broker"))
            }
            (Ownership::Owned, _) => ownership_error(&row, owner_token),
            (Ownership::None, _) => RuntimeError::RecoveryRequired(format!(
                "child {child} is recorded as running without an owner; run startup recovery first"
            )),
        });
    }
    Ok(Claim {
        child_id: child,
        owner_generation: row.owner_generation + 1,
        state: row.state,
    })
}

/// Give back the claim `owner_token` holds on the idle child; whether there was one.
pub(super) fn release_tx(
    conn: &Connection,
    child: ChildId,
    owner_token: &str,
) -> RuntimeResult<bool> {
    let at = now(conn)?;
    let changed = conn.execute(
        "UPDATE children SET ownership = 'none', owner_token = NULL, updated_at = ?3 \
         WHERE child_id = ?1 AND owner_token = ?2 AND ownership = 'owned' AND state IN ('ready', 'interrupted')",
        params![child.to_string(), owner_token, at],
    )?;
    Ok(changed == 1)
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
        self.transact(move |tx, _| claim_tx(tx, &scope, child, &token))
            .await
    }

    /// Give up ownership of an idle child (e.g. a claim whose follow-up failed).
    pub async fn release(&self, child: ChildId, owner_token: &str) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact(move |tx, _| {
            if release_tx(tx, child, &token)? {
                Ok(())
            } else {
                Err(ownership_error(&load_child(tx, child)?, &token))
            }
        })
        .await
    }
}
