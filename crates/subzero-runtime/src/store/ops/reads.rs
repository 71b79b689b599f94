//! Read-only queries on the read connections.

use super::*;

impl Store {
    /// One child of `scope` (`not_found` for another scope's child).
    pub async fn child(&self, scope: &WorkspaceScope, child: ChildId) -> RuntimeResult<ChildRow> {
        let scope = scope.clone();
        self.read(move |c| load_child_in(c, &scope, child)).await
    }

    /// The child as the core sees it (row, active run and queue through `AnyChild::load`),
    /// for requests the core decides without writing anything (a steer).
    pub async fn lifecycle(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
    ) -> RuntimeResult<AnyChild> {
        let scope = scope.clone();
        let options = self.options().clone();
        self.read(move |c| {
            let row = load_child_in(c, &scope, child)?;
            lifecycle::load_child(c, &options, &row)
        })
        .await
    }

    /// Children of `scope` ordered by id, after `after`, at most `limit`.
    pub async fn list_children(
        &self,
        scope: &WorkspaceScope,
        limit: u32,
        after: Option<ChildId>,
    ) -> RuntimeResult<Vec<ChildRow>> {
        self.list_children_where(scope, limit, after, ChildFilter::default())
            .await
    }

    /// [`Store::list_children`] of the children `filter` lets through.
    pub async fn list_children_where(
        &self,
        scope: &WorkspaceScope,
        limit: u32,
        after: Option<ChildId>,
        filter: ChildFilter,
    ) -> RuntimeResult<Vec<ChildRow>> {
        let key = scope.key();
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {} FROM children WHERE scope_key = ?1 AND child_id > ?2 \
                 AND (?4 IS NULL OR instr(lower(label), lower(?4)) > 0) \
                 AND (?5 IS NULL OR template_id = ?5) AND (?6 IS NULL OR state = ?6) \
                 ORDER BY child_id LIMIT ?3",
                ChildRow::columns()
            ))?;
            // Every child id sorts after the empty text.
            let after = after.map(|a| a.to_string()).unwrap_or_default();
            let state = filter.state.map(Sql);
            let rows = stmt
                .query_map(
                    params![
                        key,
                        after,
                        limit.max(1),
                        filter.label,
                        filter.template,
                        state
                    ],
                    ChildRow::from_row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// Every run of a child of `scope`, oldest first.
    pub async fn runs(&self, scope: &WorkspaceScope, child: ChildId) -> RuntimeResult<Vec<RunRow>> {
        let scope = scope.clone();
        self.read(move |c| {
            load_child_in(c, &scope, child)?;
            runs_of(c, child)
        })
        .await
    }

    /// A child of `scope` and its runs, read in one snapshot (see [`Store::child_view`]).
    pub async fn child_and_runs(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
    ) -> RuntimeResult<(ChildRow, Vec<RunRow>)> {
        let scope = scope.clone();
        self.read(move |c| Ok((load_child_in(c, &scope, child)?, runs_of(c, child)?)))
            .await
    }

    /// A child of `scope`, its runs and one page of its events (after `after`, at most
    /// `limit`), read in one snapshot. Read apart they can disagree: a run settled between
    /// the reads shows as both the active run and the last one.
    pub async fn child_view(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        after: EventSeq,
        limit: u32,
    ) -> RuntimeResult<ChildView> {
        let scope = scope.clone();
        self.read(move |c| {
            let row = load_child_in(c, &scope, child)?;
            let runs = runs_of(c, child)?;
            let page = events::page(c, &scope, child, after, limit)?;
            Ok(ChildView { row, runs, page })
        })
        .await
    }

    /// The follow-up queue of a child, in dispatch order.
    pub async fn queued_runs(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
    ) -> RuntimeResult<Vec<RunId>> {
        let scope = scope.clone();
        self.read(move |c| {
            load_child_in(c, &scope, child)?;
            queued_ids(c, child)
        })
        .await
    }

    /// An artifact of `scope` (`not_found` for another scope's artifact).
    pub async fn artifact(
        &self,
        scope: &WorkspaceScope,
        artifact: ArtifactId,
    ) -> RuntimeResult<ArtifactRow> {
        let key = scope.key();
        self.read(move |c| {
            c.query_row(
                &format!(
                    "SELECT {} FROM artifacts a JOIN children c ON c.child_id = a.child_id \
                     WHERE a.artifact_id = ?1 AND c.scope_key = ?2",
                    ArtifactRow::columns_of("a")
                ),
                params![Sql(artifact), key],
                ArtifactRow::from_row,
            )
            .optional()?
            .ok_or_else(|| RuntimeError::not_found("artifact", artifact))
        })
        .await
    }

    /// The stored receipt for a request, if any: same digest → `Some(receipt)`,
    /// another digest → `request_conflict`.
    pub async fn find_receipt(
        &self,
        scope: &WorkspaceScope,
        probe: ReceiptInput,
    ) -> RuntimeResult<Option<Value>> {
        let key = scope.key();
        self.read(move |c| existing_receipt(c, &key, &probe)).await
    }
}

/// A child, its runs and a page of its events from one snapshot ([`Store::child_view`]).
#[derive(Debug, Clone)]
pub struct ChildView {
    /// The child's row.
    pub row: ChildRow,
    /// Its runs, oldest first.
    pub runs: Vec<RunRow>,
    /// The page of events asked for.
    pub page: super::super::rows::EventPage,
}

/// Every run of `child`, oldest first.
fn runs_of(c: &Connection, child: ChildId) -> RuntimeResult<Vec<RunRow>> {
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {} FROM runs WHERE child_id = ?1 ORDER BY ordinal",
        RunRow::columns()
    ))?;
    let rows = stmt
        .query_map(params![Sql(child)], RunRow::from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Which children a listing shows (all of them by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildFilter {
    /// Only children whose label contains this (ASCII letters in any case).
    pub label: Option<String>,
    /// Only children of this template.
    pub template: Option<String>,
    /// Only children in this state.
    pub state: Option<ChildState>,
}
