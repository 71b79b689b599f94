//! `subzero_get`: a snapshot, optionally after a bounded wait.
//!
//! The wait is what keeps a parent's token bill small: it never ends on text, only on
//! the condition the caller asked for — the active run and its queue settling (or a
//! stop/steer receipt landing), or with `waitFor: event` the first new non-text event.
//! Local commits wake it at once; commits of other brokers are seen within the store's
//! poll interval. While it waits it reports progress (tool names, phase) when the
//! caller gave a progress token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::Stream;
use serde_json::Value;
use subzero_core::events::EventKind;
use subzero_core::{ChildId, ChildState, EventSeq};
use subzero_protocol as p;
use tokio::sync::mpsc;

use super::{Command, Context};
use crate::broker::wire::{events, snapshot, wire};
use crate::broker::{Broker, BrokerError};
use crate::scope::WorkspaceScope;
use crate::store::{ChildRow, ChildView, EventPage, RunRow};

/// `subzero_get`.
impl Command for p::GetInput {
    const TOOL: &'static str = "subzero_get";
    type Output = p::ChildSnapshot;

    async fn execute(
        self,
        broker: &Arc<Broker>,
        ctx: Context,
    ) -> Result<p::ChildSnapshot, BrokerError> {
        let input = self;
        let child = ChildId::parse(input.child_id.as_str())?;
        let scope = broker.child_scope(child).await?;
        let wait = Duration::from_millis(u64::try_from(input.wait_ms_or_default()).unwrap_or(0));
        let cursor = EventSeq::new(input.cursor_or_default());
        let limit = u32::try_from(input.event_limit_or_default()).unwrap_or(50);
        let preview_limit = usize::try_from(input.preview_limit_or_default()).unwrap_or(0);
        let until_event = matches!(input.wait_for_or_default(), p::GetInputWaitFor::Event);
        let started = Instant::now();
        let deadline = started + wait;
        let mut commits = broker.store.commits();
        let mut closing = broker.gate.closing();
        let mut reported = cursor;
        let mut first = true;
        // How far the wait has looked for the event that ends it: from the caller's cursor
        // (`waitFor: event`) or from the last event when the call came in (a receipt).
        let mut scanned = cursor;
        loop {
            commits.borrow_and_update();
            let ChildView { row, runs, page } = broker
                .store
                .child_view(&scope, child, cursor, limit)
                .await?;
            if first {
                beyond_the_log(&row, cursor)?;
            }
            if first && !until_event {
                scanned = EventSeq::new(row.next_event_seq.get().saturating_sub(1));
            }
            let reason = broker
                .wait_ended(&scope, &row, &page, until_event, &mut scanned)
                .await?;
            let now = Instant::now();
            let reason = match reason {
                Some(p::WaitedReason::Settled) if first => Some(p::WaitedReason::Immediate),
                Some(r) => Some(r),
                None if now >= deadline || *closing.borrow() => Some(if wait.is_zero() {
                    p::WaitedReason::Immediate
                } else {
                    p::WaitedReason::Timeout
                }),
                None => None,
            };
            if let Some(reason) = reason {
                let waited = p::Waited {
                    ms: p::WaitMs(
                        i64::try_from(started.elapsed().as_millis().min(30_000)).unwrap_or(30_000),
                    ),
                    reason,
                };
                let view = View {
                    events: usize::try_from(limit).unwrap_or(50),
                    preview: preview_limit.min(2048),
                    waited,
                    containment: input.containment.unwrap_or(false),
                };
                return broker.answer(&row, &runs, &page, view).await;
            }
            first = false;
            if let Some(sink) = &ctx.progress {
                reported = broker
                    .report_progress(&scope, child, reported, &row, sink)
                    .await;
            }
            let nap = (deadline - now).min(broker.store.options().poll_interval);
            tokio::select! {
                _ = tokio::time::timeout(nap, commits.changed()) => {}
                _ = closing.changed() => {}
            }
        }
    }
}

/// How much of the child a snapshot shows, and how the wait before it went.
struct View {
    events: usize,
    preview: usize,
    /// Whether the answer carries the containment receipt (asked with `containment: true`;
    /// it does not change between calls, so it is not repeated in every snapshot).
    containment: bool,
    waited: p::Waited,
}

/// Events read per page while a wait looks for the one that ends it.
const SCAN_PAGE: u32 = 500;

/// Where progress messages of a waiting `get` go (the MCP layer turns them into
/// `notifications/progress`).
pub type ProgressSink = mpsc::UnboundedSender<String>;

/// A cursor past the child's last event names events that do not exist: this child
/// never returned it (another child's cursor, or a made-up one). Answering `events: []`
/// would hide every event up to that number once it is written, so it is refused.
fn beyond_the_log(row: &crate::store::ChildRow, cursor: EventSeq) -> Result<(), BrokerError> {
    let last = row.next_event_seq.get().saturating_sub(1);
    if cursor.get() <= last {
        return Ok(());
    }
    Err(BrokerError::invalid(
        "cursor",
        format!(
            "cursor {} is past the last event of child {} (seq {last}); pass 0 or a nextCursor this child returned",
            cursor.get(),
            row.child_id
        ),
    ))
}

impl Broker {
    /// Why a `get` that waits for an event (`until_event`) or for the run to settle or
    /// post a receipt can answer now, if it can: scanning on from `scanned`.
    async fn wait_ended(
        &self,
        scope: &WorkspaceScope,
        row: &ChildRow,
        page: &EventPage,
        until_event: bool,
        scanned: &mut EventSeq,
    ) -> Result<Option<p::WaitedReason>, BrokerError> {
        let child = row.child_id;
        if until_event {
            let found = page.gap.is_some()
                || self
                    .scan_for(scope, child, scanned, |kind| kind != EventKind::Text)
                    .await?;
            return Ok(found.then_some(p::WaitedReason::Event));
        }
        if row.state != ChildState::Running {
            return Ok(Some(p::WaitedReason::Settled));
        }
        Ok(self
            .scan_for(scope, child, scanned, events::is_receipt)
            .await?
            .then_some(p::WaitedReason::Event))
    }

    /// The process-tree containment the child's live worker reported, if one runs it.
    fn live_process(&self, child: ChildId) -> Option<p::ProcessContainment> {
        let live = self.workers.live();
        live.get(&child)?.worker.as_ref()?.process.clone()
    }

    /// The snapshot a `get` answers with: the child, its runs and one page of events (all
    /// from one read), its checkout, and its containment when the call asked for it.
    async fn answer(
        &self,
        row: &ChildRow,
        runs: &[RunRow],
        page: &EventPage,
        view: View,
    ) -> Result<p::ChildSnapshot, BrokerError> {
        let child = row.child_id;
        let mut snap = snapshot::snapshot(row, runs, page, view.events, view.preview, view.waited)?;
        // What a parent's model reads: no child, time, or run and preview `lastRun`
        // repeats in its events, and no row times (`subzero show` keeps them all).
        let described = snap.last_run.as_ref().map(|run| run.run_id.clone());
        for event in &mut snap.events.0 {
            event.compact(described.as_ref());
        }
        snap.created_at = None;
        snap.updated_at = None;
        snap.checkout = self.checkout_view(child).await?;
        if view.containment {
            self.containment(row, &mut snap).await;
        }
        Ok(snap)
    }

    /// The child's containment receipt: its live worker's process tree, its filesystem
    /// grant, the receipts every worker of this broker shares, and where an isolated child
    /// may write.
    async fn containment(&self, row: &ChildRow, snap: &mut p::ChildSnapshot) {
        if let Some(process) = self.live_process(row.child_id) {
            snap.containment
                .get_or_insert_with(Default::default)
                .process = Some(process);
        }
        // A stored snapshot the contract refuses says nothing rather than guess.
        if let Ok(grant) = row.snapshot.grant() {
            if let Some(filesystem) = self.filesystem_receipt(grant).await {
                snap.containment
                    .get_or_insert_with(Default::default)
                    .filesystem = Some(filesystem);
            }
            self.child_receipts(grant, snap.containment.get_or_insert_with(Default::default))
                .await;
        }
        isolated_receipt(snap);
    }

    /// Whether an event whose type satisfies `wanted` landed after `scanned`, reading every
    /// event since (page by page, however many there are); `scanned` moves past what was
    /// read, so the next look starts where this one ended.
    async fn scan_for(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        scanned: &mut EventSeq,
        wanted: impl Fn(EventKind) -> bool,
    ) -> Result<bool, BrokerError> {
        loop {
            let page = self.store.events(scope, child, *scanned, SCAN_PAGE).await?;
            if page.events.iter().any(|e| wanted(e.body.kind())) {
                return Ok(true);
            }
            match page.events.last() {
                Some(last) if last.seq > *scanned => *scanned = last.seq,
                _ => return Ok(false),
            }
        }
    }

    /// Send one progress line per new non-text event since `after`; returns the new mark.
    async fn report_progress(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        after: EventSeq,
        row: &crate::store::ChildRow,
        sink: &ProgressSink,
    ) -> EventSeq {
        let Ok(page) = self.store.events(scope, child, after, 50).await else {
            return after;
        };
        for event in page
            .events
            .iter()
            .filter(|e| e.body.kind() != EventKind::Text)
        {
            let line = match p::ChildEvent::try_from(event) {
                Ok(p::ChildEvent::Tool { name, state, .. }) => {
                    format!("{child}: tool {} {state}", name.as_str())
                }
                _ => format!("{child}: {}", event.body.kind()),
            };
            let _ = sink.send(line);
        }
        let phase = format!("{child}: {} ({})", row.state, row.phase.as_str());
        if page.events.is_empty() && self.phase_changed(child, &phase) {
            let _ = sink.send(phase);
        }
        page.events.last().map_or(after, |e| e.seq)
    }

    /// Whether `line` differs from the last phase line reported for `child` (so a long
    /// wait reports each phase once, not once per poll).
    fn phase_changed(&self, child: ChildId, line: &str) -> bool {
        let mut last = crate::broker::lock(&self.last_phase);
        if last.get(&child).is_some_and(|l| l == line) {
            return false;
        }
        last.insert(child, line.to_owned());
        true
    }

    /// The child's events from `cursor` on, as they are written (by this broker or any
    /// other), for Rust embedders. A pruned stretch shows up as a `gap` event, also when
    /// pruning happens while the stream is being read. The stream ends when the child
    /// cannot be read any more (e.g. it is not in this broker's scopes).
    pub fn subscribe(
        &self,
        child: ChildId,
        cursor: EventSeq,
    ) -> impl Stream<Item = Result<Value, BrokerError>> + '_ {
        futures::stream::unfold(
            (
                cursor,
                Vec::<Result<Value, BrokerError>>::new(),
                None::<WorkspaceScope>,
                false,
            ),
            move |(mut cursor, mut buffered, mut scope, done)| async move {
                if done {
                    return None;
                }
                loop {
                    if !buffered.is_empty() {
                        let next = buffered.remove(0);
                        return Some((next, (cursor, buffered, scope, false)));
                    }
                    let scope_now = match &scope {
                        Some(s) => s.clone(),
                        None => match self.child_scope(child).await {
                            Ok(s) => {
                                scope = Some(s.clone());
                                s
                            }
                            Err(e) => return Some((Err(e), (cursor, buffered, scope, true))),
                        },
                    };
                    let page: EventPage = match self
                        .store
                        .wait_events(&scope_now, child, cursor, 50, Duration::from_secs(30))
                        .await
                    {
                        Ok(page) => page,
                        Err(e) => return Some((Err(e.into()), (cursor, buffered, scope, true))),
                    };
                    buffered.extend(stream_page(child, &page));
                    cursor = page.next_cursor.max(cursor);
                }
            },
        )
    }
}

/// A page as the documents a subscription stream carries: the gap marker first (placed at
/// the first event's time, else now), then each event.
fn stream_page(child: ChildId, page: &EventPage) -> Vec<Result<Value, BrokerError>> {
    let mut out = Vec::with_capacity(page.events.len() + 1);
    if let Some(gap) = page.gap {
        let at = match page.events.first() {
            Some(first) => Ok(first.at.clone()),
            None => events::timestamp_now(),
        };
        out.push(
            at.and_then(|at| events::gap_marker(child, gap, at))
                .and_then(|marker| events::to_value(&marker)),
        );
    }
    out.extend(
        page.events
            .iter()
            .map(|row| p::ChildEvent::try_from(row).and_then(|e| events::to_value(&e))),
    );
    out
}

/// An isolated child's filesystem receipt says where its writes are confined: its checkout
/// is the `workspace` its tool processes may write.
fn isolated_receipt(snap: &mut p::ChildSnapshot) {
    let Some(checkout) = &snap.checkout else {
        return;
    };
    let Some(filesystem) = snap
        .containment
        .as_mut()
        .and_then(|c| c.filesystem.as_mut())
        .filter(|f| f.enforced)
    else {
        return;
    };
    let summary = format!(
        "{}: writes only its checkout {}",
        filesystem.summary.as_str(),
        checkout.path
    );
    if let Ok(summary) = wire(
        summary.as_str(),
        "subzero_get",
        "containment.filesystem.summary",
    ) {
        filesystem.summary = summary;
    }
}
