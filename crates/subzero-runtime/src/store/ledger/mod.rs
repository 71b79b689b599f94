//! The ledger of isolated checkouts: one row per child that has one, so no checkout
//! leaks and a restarted broker finds every one.
//!
//! A checkout's state changes only as the core decided: the ledger inserts a
//! [`CheckoutDecided<Prepared>`] and writes any other [`CheckoutDecided`] over the row it
//! was decided from, taking the decision by value (`write.rs`, the only code that writes
//! a checkout's lifecycle columns). Reading one back goes through the core's checked
//! [`AnyCheckout::load`] with the store's key. The listing and the total size are for
//! garbage collection and `subzero doctor`.

mod write;

use rusqlite::{Connection, OptionalExtension, params};
use subzero_core::lifecycle::checkout::{CheckoutPhase, Prepared};
use subzero_core::lifecycle::{
    AnyCheckout, ChangeRecord, Checkout, CheckoutDecided, CheckoutRecord, CheckoutSite, DiffStats,
    GitOid,
};
use subzero_core::{CheckoutState, ChildId};

use super::ops::admit::admit_spawn_tx;
use super::ops::settle::insert_artifact;
use super::rows::{Timestamp, table_row};
use super::sql::{Column, RowExt, Sql, int};
use super::{Admission, AdmitSpawn};
use super::{NewArtifact, Store, now, storage_key};
use crate::error::{RuntimeError, RuntimeResult};
use crate::scope::WorkspaceScope;
use crate::store::Admit;
use rusqlite::Row;

table_row! {
    /// A checkout as the ledger holds it.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct CheckoutRow in "checkouts" {
        /// The child it belongs to.
        pub child_id: ChildId,
        /// The child's workspace scope.
        pub scope_key: String,
        /// The checkout's directory.
        pub path: String,
        /// The commit it was made from.
        pub base_commit: GitOid,
        /// The recorded change's head commit.
        pub head_commit: Option<GitOid>,
        /// The main checkout's `HEAD` when it was prepared.
        pub workspace_head: GitOid,
        /// Whether the main checkout had uncommitted changes then.
        pub dirty: bool,
        /// Whether they were carried into the checkout.
        pub carried: bool,
        /// Its state.
        pub state: CheckoutState,
        /// The recorded change's size.
        pub files_changed: Option<u64>,
        /// Lines added.
        pub insertions: Option<u64>,
        /// Lines removed.
        pub deletions: Option<u64>,
        /// The artifact holding the recorded change's full diff (once written).
        pub diff_artifact: Option<String>,
        /// Bytes on disk when last measured (0 once removed).
        pub size_bytes: u64,
        /// The row version, bumped by every transition.
        pub generation: u64,
        /// When it was prepared.
        pub created_at: Timestamp,
        /// When its state last changed (a measurement does not count).
        pub updated_at: Timestamp,
    }
}

impl CheckoutRow {
    /// The row as the core's stored record.
    pub fn record(&self) -> RuntimeResult<CheckoutRecord> {
        let stats = match (self.files_changed, self.insertions, self.deletions) {
            (Some(files_changed), Some(insertions), Some(deletions)) => Some(DiffStats {
                files_changed,
                insertions,
                deletions,
            }),
            _ => None,
        };
        let change = match (self.head_commit.clone(), stats) {
            (Some(head), Some(stats)) => Some(ChangeRecord { head, stats }),
            (None, None) => None,
            _ => {
                return Err(RuntimeError::Internal(format!(
                    "the checkout of {} has a head commit without its stats, or stats without a head",
                    self.child_id
                )));
            }
        };
        Ok(CheckoutRecord {
            child: self.child_id,
            state: self.state,
            site: CheckoutSite {
                path: self.path.clone().into(),
                base: self.base_commit.clone(),
                workspace_head: self.workspace_head.clone(),
                dirty: self.dirty,
                carried: self.carried,
            },
            change,
            version: self.generation,
        })
    }
}

/// Which checkouts to list; every condition given must hold.
#[derive(Clone, Debug, Default)]
pub struct CheckoutFilter {
    /// Only this workspace's.
    pub scope: Option<WorkspaceScope>,
    /// Only in this state.
    pub state: Option<CheckoutState>,
    /// Only those last changed before this time.
    pub updated_before: Option<Timestamp>,
}

fn checkout_row(conn: &Connection, child: ChildId) -> RuntimeResult<Option<CheckoutRow>> {
    let sql = format!(
        "SELECT {} FROM checkouts WHERE child_id = ?1",
        CheckoutRow::columns()
    );
    Ok(conn
        .query_row(&sql, params![Sql(child)], CheckoutRow::from_row)
        .optional()?)
}

fn list(conn: &Connection, filter: &CheckoutFilter) -> RuntimeResult<Vec<CheckoutRow>> {
    let sql = format!(
        "SELECT {} FROM checkouts WHERE (?1 IS NULL OR scope_key = ?1) \
         AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR updated_at < ?3) \
         ORDER BY created_at, rowid",
        CheckoutRow::columns()
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt
        .query_map(
            params![
                filter.scope.as_ref().map(WorkspaceScope::key),
                filter.state.map(Sql),
                filter.updated_before.as_ref().map(Sql),
            ],
            CheckoutRow::from_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

impl Store {
    /// Record a checkout just prepared on disk for a child of `scope`, measured at
    /// `size_bytes`. `not_found` for a child of another scope; `busy`
    /// ([`RuntimeError::CheckoutChanged`]) when the child already has a checkout.
    pub async fn insert_checkout(
        &self,
        scope: &WorkspaceScope,
        decided: CheckoutDecided<Prepared>,
        size_bytes: u64,
    ) -> RuntimeResult<Checkout<Prepared>> {
        let scope = scope.clone();
        self.transact(move |tx, _| {
            let at = now(tx)?;
            decided.commit(|c| write::insert(tx, &scope, c, size_bytes, &at))
        })
        .await
    }

    /// Admission of an isolated spawn: [`Store::admit_spawn`] and the child's prepared
    /// checkout in the ledger, in one transaction, so a stored child of an isolated spawn
    /// never lacks its checkout row (a run of it would then write the workspace). A replay
    /// or a refusal writes neither.
    pub async fn admit_isolated_spawn(
        &self,
        input: AdmitSpawn,
        checkout: CheckoutDecided<Prepared>,
        size_bytes: u64,
    ) -> RuntimeResult<Admit<Admission>> {
        let scope = input.child.scope.clone();
        self.transact(move |tx, options| {
            let admitted = admit_spawn_tx(tx, options, &input)?;
            if let Admit::New(_) = &admitted {
                let at = now(tx)?;
                checkout.commit(|c| write::insert(tx, &scope, c, size_bytes, &at))?;
            }
            Ok(admitted)
        })
        .await
    }

    /// Write a checkout transition the core decided, over the row it was decided from,
    /// and give back the checkout as written. Of two brokers writing decisions made from
    /// the same row, exactly one lands; the other gets `busy`
    /// ([`RuntimeError::CheckoutChanged`]) and nothing is written.
    pub async fn write_checkout<S>(&self, decided: CheckoutDecided<S>) -> RuntimeResult<Checkout<S>>
    where
        S: CheckoutPhase + Send + 'static,
    {
        self.transact(move |tx, _| {
            let at = now(tx)?;
            decided.commit(|c| write::update(tx, c, &at))
        })
        .await
    }

    /// The checkout of `child`, through the core's checked load; `None` when it has none.
    /// A row that describes no legal checkout is `internal`.
    pub async fn checkout(&self, child: ChildId) -> RuntimeResult<Option<AnyCheckout>> {
        self.read(move |c| {
            let Some(row) = checkout_row(c, child)? else {
                return Ok(None);
            };
            let loaded = AnyCheckout::load(row.record()?, storage_key()?);
            loaded
                .map(Some)
                .map_err(|e| RuntimeError::Lifecycle(e.into()))
        })
        .await
    }

    /// The ledger row of `child`'s checkout, if it has one (for display).
    pub async fn checkout_row(&self, child: ChildId) -> RuntimeResult<Option<CheckoutRow>> {
        self.read(move |c| checkout_row(c, child)).await
    }

    /// The checkouts `filter` selects, oldest first (for garbage collection and doctor).
    pub async fn list_checkouts(&self, filter: CheckoutFilter) -> RuntimeResult<Vec<CheckoutRow>> {
        self.read(move |c| list(c, &filter)).await
    }

    /// The bytes every checkout (of `scope`, when given) held when last measured.
    pub async fn total_checkout_size(&self, scope: Option<&WorkspaceScope>) -> RuntimeResult<u64> {
        let key = scope.map(WorkspaceScope::key);
        self.read(move |c| {
            Ok(c.query_row(
                "SELECT COALESCE(SUM(size_bytes), 0) AS total FROM checkouts \
                 WHERE ?1 IS NULL OR scope_key = ?1",
                params![key],
                |r| r.col::<u64>("total"),
            )?)
        })
        .await
    }

    /// Register `artifact` (written by [`ArtifactFiles`](crate::artifacts::ArtifactFiles))
    /// as the full diff of `child`'s recorded change `head`: a note beside the change, not
    /// a transition. False, and nothing registered, when the checkout no longer holds
    /// that change.
    pub async fn note_checkout_diff(
        &self,
        child: ChildId,
        head: GitOid,
        artifact: NewArtifact,
    ) -> RuntimeResult<bool> {
        self.transact(move |tx, _| {
            let changed = tx.execute(
                "UPDATE checkouts SET diff_artifact = ?3 WHERE child_id = ?1 AND head_commit = ?2",
                params![Sql(child), Sql(&head), Sql(artifact.artifact_id)],
            )?;
            if changed == 1 {
                insert_artifact(tx, child, None, &artifact, &now(tx)?)?;
            }
            Ok(changed == 1)
        })
        .await
    }

    /// Record how many bytes `child`'s checkout holds now (a measurement, not a
    /// transition: its state, row version and `updated_at` stay). `not_found` without a
    /// checkout.
    pub async fn measure_checkout(&self, child: ChildId, size_bytes: u64) -> RuntimeResult<()> {
        self.transact(move |tx, _| {
            let changed = tx.execute(
                "UPDATE checkouts SET size_bytes = ?2 WHERE child_id = ?1",
                params![Sql(child), int(size_bytes)],
            )?;
            match changed {
                1 => Ok(()),
                _ => Err(RuntimeError::not_found("checkout", child)),
            }
        })
        .await
    }
}
