//! One child's event stream, as `subzero logs --follow` reads it: from a cursor on, with
//! the explicit gap marker where retention pruned events.

use subzero_core::{ChildId, EventSeq};
use subzero_protocol::ChildEvent;
use subzero_runtime::broker::{gap_event, wire_event};
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::Store;

use crate::inspect::InspectError;
use crate::inspect::document::Read;

/// Events read per store call.
const PAGE: u32 = 200;
/// Pages read per refresh at most (a child that wrote more waits for the next refresh).
const PAGES_PER_REFRESH: usize = 5;
/// Events kept in memory; the oldest go first.
const KEEP: usize = 2000;
/// How far back the stream starts when it opens.
const BACKLOG: u64 = 200;

/// The events of one child read so far, and where reading goes on.
#[derive(Debug)]
pub struct Stream {
    /// The child.
    pub child: ChildId,
    scope: WorkspaceScope,
    cursor: EventSeq,
    /// Wire `ChildEvent`s (and gap markers), oldest first; an error body where the
    /// contract refuses a stored event.
    pub events: Vec<Read<ChildEvent>>,
    /// Lines scrolled up from the newest; 0 follows the stream.
    pub scroll: usize,
}

impl Stream {
    /// A stream of `child` starting [`BACKLOG`] events before its newest.
    pub fn open(child: ChildId, scope: WorkspaceScope, next_event_seq: u64) -> Stream {
        let cursor = next_event_seq.saturating_sub(1).saturating_sub(BACKLOG);
        Stream {
            child,
            scope,
            cursor: EventSeq::new(cursor),
            events: Vec::new(),
            scroll: 0,
        }
    }

    /// Read what was written since the last read. Returns whether anything arrived.
    pub async fn refresh(&mut self, store: &Store) -> Result<bool, InspectError> {
        let before = self.events.len();
        let mut arrived = false;
        for _ in 0..PAGES_PER_REFRESH {
            let page = store
                .events(&self.scope, self.child, self.cursor, PAGE)
                .await?;
            if let Some(gap) = page.gap {
                let at = page.events.first().map(|e| e.at.as_str());
                self.events.push(gap_event(self.child, gap, at));
            }
            let full = page.events.len() == PAGE as usize;
            arrived |= page.gap.is_some() || !page.events.is_empty();
            self.events.extend(page.events.iter().map(wire_event));
            self.cursor = page.next_cursor.max(self.cursor);
            if !full {
                break;
            }
        }
        if self.scroll > 0 {
            // Scrolled back: keep the lines the reader is looking at where they are.
            self.scroll += self.events.len() - before;
        }
        if self.events.len() > KEEP {
            let extra = self.events.len() - KEEP;
            self.events.drain(..extra);
            self.scroll = self.scroll.min(self.events.len());
        }
        Ok(arrived)
    }
}
