//! `subzero show CHILD`: the child's snapshot, as `subzero_get` would return it.

use std::io::{IsTerminal, Write};

use serde_json::{Value, json};
use subzero_core::{ChildId, EventSeq};
use subzero_runtime::broker::child_snapshot;

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
        let mut doc = child_snapshot(&row, &runs, &page, PREVIEW_LIMIT);
        doc["waited"] = json!({"ms": 0, "reason": "immediate"});
        Ok::<_, super::Failure>(doc)
    })?;
    let printing = Printing::of_stdout(args.raw);
    let mut out = std::io::stdout().lock();
    if args.json {
        return written(writeln!(out, "{}", printing.json(&doc.to_string())));
    }
    written(render(
        &mut out,
        &doc,
        std::io::stdout().is_terminal(),
        printing,
    ))
}

fn render(
    out: &mut dyn Write,
    doc: &Value,
    color: bool,
    printing: Printing,
) -> std::io::Result<()> {
    let mut sheet = Sheet {
        out,
        color,
        printing,
    };
    summary(&mut sheet, doc)?;
    last_run(&mut sheet, &doc["lastRun"])?;
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

/// The text of `doc[key]`, `-` when there is none.
fn text(doc: &Value, key: &str) -> String {
    doc[key].as_str().unwrap_or("-").to_owned()
}

/// Which child, where, its state, model and runs, and when it last moved.
fn summary(sheet: &mut Sheet, doc: &Value) -> std::io::Result<()> {
    sheet.field("child", text(doc, "childId"))?;
    sheet.field("template", text(doc, "templateId"))?;
    sheet.field("workspace", text(doc, "workspaceRoot"))?;
    sheet.field(
        "state",
        format!("{} ({})", text(doc, "state"), text(doc, "phase")),
    )?;
    let model = &doc["model"];
    sheet.field(
        "model",
        format!(
            "{} at {} ({})",
            model["model"].as_str().unwrap_or("-"),
            model["url"].as_str().unwrap_or("-"),
            model["api"].as_str().unwrap_or("-")
        ),
    )?;
    sheet.field("active run", text(doc, "activeRunId"))?;
    let queued: Vec<&str> = doc["queuedRuns"]
        .as_array()
        .map(|q| q.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    sheet.field(
        "queued",
        if queued.is_empty() {
            "-".to_owned()
        } else {
            queued.join(", ")
        },
    )?;
    sheet.field("progress", text(doc, "lastProgressAt"))?;
    sheet.field("created", text(doc, "createdAt"))?;
    sheet.field("updated", text(doc, "updatedAt"))
}

/// The last run's id and status, where its full result is, its error, then its preview.
fn last_run(sheet: &mut Sheet, last: &Value) -> std::io::Result<()> {
    if !last.is_object() {
        return sheet.field("last run", "-".to_owned());
    }
    let mut line = format!(
        "{} {}",
        last["runId"].as_str().unwrap_or("-"),
        last["status"].as_str().unwrap_or("-")
    );
    if let Some(artifact) = last["artifactId"].as_str() {
        line.push_str(&format!(" (full result: subzero output {artifact})"));
    }
    if let Some(code) = last["error"]["code"].as_str() {
        line.push_str(&format!(
            " — {code}: {}",
            last["error"]["message"].as_str().unwrap_or("")
        ));
    }
    sheet.field("last run", line)?;
    if let Some(preview) = last["preview"].as_str().filter(|p| !p.is_empty()) {
        writeln!(sheet.out)?;
        for line in preview.lines() {
            writeln!(sheet.out, "    {}", sheet.printing.line(line))?;
        }
        if last["previewTruncated"] == true {
            writeln!(sheet.out, "    …")?;
        }
        writeln!(sheet.out)?;
    }
    Ok(())
}

/// The events the snapshot holds, under a heading that says how to read more.
fn recent_events(sheet: &mut Sheet, doc: &Value) -> std::io::Result<()> {
    let events = doc["events"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    writeln!(
        sheet.out,
        "{}",
        paint(
            &format!(
                "events (the last {}; `subzero logs {} --cursor {}` for more)",
                events.len(),
                text(doc, "childId"),
                doc["oldestCursor"]
            ),
            Tone::Dim,
            sheet.color
        )
    )?;
    for event in events {
        writeln!(
            sheet.out,
            "{}",
            events::line(event, sheet.color, sheet.printing)
        )?;
    }
    Ok(())
}
