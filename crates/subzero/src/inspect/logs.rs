//! `subzero logs CHILD`: the child's events from a cursor on; `--follow` keeps reading
//! as any broker writes them, until SIGINT or until stdout is closed.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use subzero_core::{ChildId, EventSeq};
use subzero_protocol::ChildEvent;
use subzero_runtime::broker::{gap_event, wire_event};
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{EventPage, Store};

use super::document::{self, Read, Shown};
use super::state::ReadOnlyState;
use super::{Outcome, StateDirArg, events, runtime, written};
use crate::terminal_text::Printing;

/// Flags of `subzero logs`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogsArgs {
    /// The child (`ch_…`).
    #[arg(value_name = "CHILD")]
    pub child: String,
    /// Keep reading: print events as they are written, until Ctrl-C.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Start after this event sequence number (0 = from the oldest retained event).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub cursor: u64,
    /// Print one `ChildEvent` JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Print what the child, its model and its tools wrote as it is, control characters
    /// included (on a terminal they are shown escaped otherwise).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub state_dir: StateDirArg,
}

/// Events per store read.
const PAGE: u32 = 100;
/// How long one follow wait lasts before the loop re-checks (other brokers' commits are
/// seen within the store's poll interval either way).
const FOLLOW_WAIT: Duration = Duration::from_secs(5);

pub(super) fn run(args: LogsArgs) -> Outcome {
    let child = ChildId::parse(&args.child).map_err(|e| {
        super::InspectError::new(subzero_core::ErrorCode::InvalidRequest, e.to_string())
    })?;
    let state = ReadOnlyState::open(args.state_dir.state_dir.as_deref())?;
    let scope = state.child_scope(child)?;
    let printer = Printer {
        json: args.json,
        color: std::io::stdout().is_terminal(),
        printing: Printing::of_stdout(args.raw),
    };
    let reader = Reader {
        store: state.store()?,
        scope: &scope,
        child,
    };
    runtime()?.block_on(async {
        tokio::select! {
            outcome = reader.read(EventSeq::new(args.cursor), args.follow, &printer) => outcome,
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}

struct Reader<'a> {
    store: &'a Store,
    scope: &'a WorkspaceScope,
    child: ChildId,
}

impl Reader<'_> {
    async fn read(&self, mut cursor: EventSeq, follow: bool, printer: &Printer) -> Outcome {
        loop {
            let page = if follow {
                self.store
                    .wait_events(self.scope, self.child, cursor, PAGE, FOLLOW_WAIT)
                    .await?
            } else {
                self.store
                    .events(self.scope, self.child, cursor, PAGE)
                    .await?
            };
            printer.page(self.child, &page)?;
            let advanced = page.next_cursor > cursor;
            cursor = page.next_cursor.max(cursor);
            if !follow && (!advanced || page.events.len() < PAGE as usize) {
                return Ok(());
            }
        }
    }
}

struct Printer {
    json: bool,
    color: bool,
    printing: Printing,
}

impl Printer {
    fn page(&self, child: ChildId, page: &EventPage) -> Outcome {
        let mut lines: Vec<Read<ChildEvent>> = Vec::with_capacity(page.events.len() + 1);
        if let Some(gap) = page.gap {
            let at = page.events.first().map(|e| e.at.as_str());
            lines.push(gap_event(child, gap, at));
        }
        lines.extend(page.events.iter().map(wire_event));
        if lines.is_empty() {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        for event in &lines {
            if self.json {
                let json = document::json(&Shown::from(event))?;
                written(writeln!(out, "{}", self.printing.json(&json)))?;
            } else {
                let line = events::line(event.as_ref().ok(), self.color, self.printing);
                written(writeln!(out, "{line}"))?;
            }
        }
        written(out.flush())
    }
}
