//! `subzero show CHILD`: the child's snapshot, as `subzero_get` would return it.

use std::io::{IsTerminal, Write};

use serde::Serialize;
use subzero_core::{ChildId, EventSeq};
use subzero_protocol::{self as p, ChildSnapshot};
use subzero_runtime::broker::child_snapshot;

use super::document;
use super::state::ReadOnlyState;
use super::table::{Tone, paint};
use super::{Outcome, StateDirArg, events, runtime, written};
use crate::terminal_text::Printing;

/// Flags of `subzero show`.
#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    /// The child (`ch_…`).
    #[arg(value_name = "CHILD")]
    pub child: String,
    /// How many of the most recent events to include.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=200))]
    pub events: u32,
    /// Print the `ChildSnapshot` document as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print what the child, its model and its tools wrote as it is, control characters
    /// included (on a terminal they are shown escaped otherwise).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub state_dir: StateDirArg,
}

/// Longest preview shown (the wire maximum).
const PREVIEW_LIMIT: usize = 2048;

pub(super) fn run(args: ShowArgs) -> Outcome {
    let child = ChildId::parse(&args.child).map_err(|e| {
        super::InspectError::new(subzero_core::ErrorCode::InvalidRequest, e.to_string())
    })?;
    let state = ReadOnlyState::open(args.state_dir.state_dir.as_deref())?;
    let scope = state.child_scope(child)?;
    let store = state.store()?;
    let doc = runtime()?.block_on(async {
        let row = store.child(&scope, child).await?;
        let runs = store.runs(&scope, child).await?;
        // The most recent events: start `events` before the newest one.
        let newest = row.next_event_seq.get().saturating_sub(1);
        let from = newest
            .saturating_sub(u64::from(args.events))
            .max(row.oldest_event_seq.get().saturating_sub(1));
        let page = store
            .events(&scope, child, EventSeq::new(from), args.events)
            .await?;
        Ok::<_, super::Failure>(child_snapshot(&row, &runs, &page, PREVIEW_LIMIT))
    })?;
    let printing = Printing::of_stdout(args.raw);
    let mut out = std::io::stdout().lock();
    if args.json {
        let json = match &doc {
            Ok(doc) => document::json(doc)?,
            Err(body) => document::json(&Refused::new(body))?,
        };
        return written(writeln!(out, "{}", printing.json(&json)));
    }
    written(render(
        &mut out,
        doc.as_ref().ok(),
        std::io::stdout().is_terminal(),
        printing,
    ))
}

/// `show --json` of a child whose stored values the contract refuses: the error body, with
/// the `waited` of an immediate snapshot after it.
#[derive(Serialize)]
struct Refused<'a> {
    #[serde(flatten)]
    body: &'a p::ErrorBody,
    waited: p::Waited,
}

impl<'a> Refused<'a> {
    fn new(body: &'a p::ErrorBody) -> Self {
        Refused {
            body,
            waited: p::Waited {
                ms: p::WaitMs(0),
                reason: p::WaitedReason::Immediate,
            },
        }
    }
}

/// The snapshot as a sheet; a refused one (`None`) shows `-` throughout.
fn render(
    out: &mut dyn Write,
    doc: Option<&ChildSnapshot>,
    color: bool,
    printing: Printing,
) -> std::io::Result<()> {
    let mut sheet = Sheet {
        out,
        color,
        printing,
    };
    summary(&mut sheet, doc)?;
    last_run(&mut sheet, doc.and_then(|d| d.last_run.as_ref()))?;
    recent_events(&mut sheet, doc)
}

/// Where the snapshot is written, and how.
struct Sheet<'a> {
    out: &'a mut dyn Write,
    color: bool,
    printing: Printing,
}

impl Sheet<'_> {
    /// One `name  value` line, the name dimmed, the value escaped as `printing` says.
    fn field(&mut self, name: &str, value: String) -> std::io::Result<()> {
        writeln!(
            self.out,
            "{}  {}",
            paint(&format!("{name:<12}"), Tone::Dim, self.color),
            self.printing.field(&value)
        )
    }
}

/// What `of` reads of `doc`, `-` when there is none.
fn text(doc: Option<&ChildSnapshot>, of: impl Fn(&ChildSnapshot) -> Option<String>) -> String {
    doc.and_then(of).unwrap_or_else(|| "-".to_owned())
}

/// Which child, where, its state, model and runs, and when it last moved.
fn summary(sheet: &mut Sheet, doc: Option<&ChildSnapshot>) -> std::io::Result<()> {
    let owned = |s: &str| Some(s.to_owned());
    sheet.field("child", text(doc, |d| owned(&d.child_id)))?;
    sheet.field(
        "label",
        text(doc, |d| d.label.as_deref().and_then(|l| owned(l))),
    )?;
    sheet.field("template", text(doc, |d| owned(&d.template_id)))?;
    sheet.field("workspace", text(doc, |d| owned(&d.workspace_root)))?;
    let state = |d: &ChildSnapshot| format!("{} ({})", d.state, d.phase);
    sheet.field("state", doc.map_or_else(|| "- (-)".to_owned(), state))?;
    let model = |d: &ChildSnapshot| {
        let m = &d.model;
        format!("{} at {} ({})", m.model.as_str(), m.url.as_str(), m.api)
    };
    sheet.field("model", doc.map_or_else(|| "- at - (-)".to_owned(), model))?;
    sheet.field(
        "active run",
        text(doc, |d| d.active_run_id.as_deref().cloned()),
    )?;
    let queued = |d: &ChildSnapshot| {
        let ids: Vec<&str> = d.queued_runs.iter().map(|r| r.as_str()).collect();
        (!ids.is_empty()).then(|| ids.join(", "))
    };
    sheet.field("queued", text(doc, queued))?;
    sheet.field(
        "progress",
        text(doc, |d| d.last_progress_at.as_deref().cloned()),
    )?;
    sheet.field(
        "created",
        text(doc, |d| d.created_at.as_deref().and_then(|at| owned(at))),
    )?;
    sheet.field(
        "updated",
        text(doc, |d| d.updated_at.as_deref().and_then(|at| owned(at))),
    )
}

/// The last run's id and status, where its full result is, its error, then its preview.
fn last_run(sheet: &mut Sheet, last: Option<&p::LastRun>) -> std::io::Result<()> {
    let Some(last) = last else {
        return sheet.field("last run", "-".to_owned());
    };
    let mut line = format!("{} {}", last.run_id.as_str(), last.status);
    if let Some(artifact) = &last.artifact_id {
        line.push_str(&format!(
            " (full result: subzero output {})",
            artifact.as_str()
        ));
    }
    if let Some(error) = &last.error {
        line.push_str(&format!(" — {}: {}", error.code, error.message.as_str()));
    }
    sheet.field("last run", line)?;
    if !last.preview.is_empty() {
        writeln!(sheet.out)?;
        for line in last.preview.lines() {
            writeln!(sheet.out, "    {}", sheet.printing.line(line))?;
        }
        if last.preview_truncated {
            writeln!(sheet.out, "    …")?;
        }
        writeln!(sheet.out)?;
    }
    Ok(())
}

/// The events the snapshot holds, under a heading that says how to read more.
fn recent_events(sheet: &mut Sheet, doc: Option<&ChildSnapshot>) -> std::io::Result<()> {
    let events = doc.map(|d| d.events.as_slice()).unwrap_or_default();
    let cursor = doc.map_or_else(|| "null".to_owned(), |d| d.oldest_cursor.to_string());
    writeln!(
        sheet.out,
        "{}",
        paint(
            &format!(
                "events (the last {}; `subzero logs {} --cursor {cursor}` for more)",
                events.len(),
                text(doc, |d| Some(d.child_id.as_str().to_owned())),
            ),
            Tone::Dim,
            sheet.color
        )
    )?;
    for event in events {
        writeln!(
            sheet.out,
            "{}",
            events::line(Some(event), sheet.color, sheet.printing)
        )?;
    }
    Ok(())
}
