//! What a live worker's driver writes besides settlements: events, phase, worker
//! identity, artifacts, and the slot mirror.

use subzero_core::events::EventBody;
use subzero_core::lifecycle::CompactionReported;

use super::*;

impl Store {
    /// Append a worker event (`text`, `tool`, `steer_*`, …) to an owned child and mark
    /// progress. Its payload fits `event_payload_bytes` (`limit_exceeded` otherwise).
    pub async fn append_event(
        &self,
        child: ChildId,
        owner_token: &str,
        event: EventBody,
    ) -> RuntimeResult<EventSeq> {
        self.append_events(child, owner_token, vec![event]).await
    }

    /// Append several worker events in one transaction (a burst from the worker):
    /// all are stored, or none. Returns the last sequence number.
    pub async fn append_events(
        &self,
        child: ChildId,
        owner_token: &str,
        batch: Vec<EventBody>,
    ) -> RuntimeResult<EventSeq> {
        let token = owner_token.to_owned();
        self.transact_durable(move |tx, o| {
            let row = require_owner(tx, child, &token)?;
            let at = now(tx)?;
            tx.execute(
                "UPDATE children SET last_progress_at = ?2, updated_at = ?2 WHERE child_id = ?1",
                params![Sql(child), Sql(&at)],
            )?;
            let mut last = subzero_core::events::cursor_before(row.next_event_seq);
            for event in &batch {
                last = events::append(tx, o, child, event)?;
            }
            Ok(last)
        })
        .await
    }

    /// Record that the worker of an owned child compacted its active run's transcript:
    /// the core decides the `compacted` event from the worker's report (a report about a
    /// run that is not active is `stale_run` and nothing is written), and it is appended.
    pub async fn record_compaction(
        &self,
        child: ChildId,
        owner_token: &str,
        report: CompactionReported,
    ) -> RuntimeResult<EventSeq> {
        let token = owner_token.to_owned();
        self.transact_durable(move |tx, o| {
            let row = load_child(tx, child)?;
            let decided = lifecycle::load(tx, o, &row)?.record_compaction(report, &token)?;
            let at = now(tx)?;
            let compaction = decided.commit(|c| write::apply(tx, c, &Details::default(), &at))?;
            tx.execute(
                "UPDATE children SET last_progress_at = ?2 WHERE child_id = ?1",
                params![Sql(child), Sql(&at)],
            )?;
            events::append(tx, o, child, compaction.event())
        })
        .await
    }

    /// Record what the worker of an owned child reports it is doing; the core decides
    /// the phase (a stopping child stays `stopping`) and progress is marked.
    pub async fn report_activity(
        &self,
        child: ChildId,
        owner_token: &str,
        activity: Activity,
    ) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact_durable(move |tx, o| {
            let row = load_child(tx, child)?;
            let decided = lifecycle::load(tx, o, &row)?.report_activity(activity, &token)?;
            let at = now(tx)?;
            decided.commit(|c| write::apply(tx, c, &Details::default(), &at))?;
            tx.execute(
                "UPDATE children SET last_progress_at = ?2 WHERE child_id = ?1",
                params![Sql(child), Sql(&at)],
            )?;
            Ok(())
        })
        .await
    }

    /// Record the identity the worker announced in `hello`.
    pub async fn record_worker(
        &self,
        child: ChildId,
        owner_token: &str,
        worker: WorkerInfo,
    ) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact(move |tx, _| {
            require_owner(tx, child, &token)?;
            tx.execute(
                "UPDATE children SET worker_name = ?2, worker_version = ?3, transcript_version = ?4 WHERE child_id = ?1",
                params![
                    Sql(child),
                    worker.name,
                    worker.version,
                    worker.transcript_version
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Register an artifact file written for an owned child outside a settlement (e.g.
    /// an event payload too large for the log).
    pub async fn register_artifact(
        &self,
        child: ChildId,
        run: Option<RunId>,
        owner_token: &str,
        artifact: NewArtifact,
    ) -> RuntimeResult<()> {
        let token = owner_token.to_owned();
        self.transact(move |tx, _| {
            require_owner(tx, child, &token)?;
            let at = now(tx)?;
            insert_artifact(tx, child, run, &artifact, &at)
        })
        .await
    }

    /// Mirror a held workspace slot in the database (display only; the lock is the truth).
    pub async fn mirror_slot(
        &self,
        scope: &WorkspaceScope,
        kind: crate::locks::SlotKind,
        index: u32,
        child: ChildId,
        owner_token: &str,
    ) -> RuntimeResult<()> {
        let key = scope.key();
        let token = owner_token.to_owned();
        self.transact(move |tx, _| {
            let at = now(tx)?;
            tx.execute(
                "INSERT OR REPLACE INTO slots (scope_key, kind, slot_index, child_id, owner_token, taken_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![key, kind.as_str(), index, Sql(child), token, Sql(&at)],
            )?;
            Ok(())
        })
        .await
    }

    /// Remove a slot mirror row.
    pub async fn unmirror_slot(
        &self,
        scope: &WorkspaceScope,
        kind: crate::locks::SlotKind,
        index: u32,
    ) -> RuntimeResult<()> {
        let key = scope.key();
        self.transact(move |tx, _| {
            tx.execute(
                "DELETE FROM slots WHERE scope_key = ?1 AND kind = ?2 AND slot_index = ?3",
                params![key, kind.as_str(), index],
            )?;
            Ok(())
        })
        .await
    }
}
