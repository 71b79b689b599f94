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
    let s = |key: &str| doc[key].as_str().unwrap_or("-").to_owned();
    let field = |out: &mut dyn Write, name: &str, value: String| {
        writeln!(
            out,
            "{}  {}",
            paint(&format!("{name:<12}"), Tone::Dim, color),
            printing.field(&value)
        )
    };
    field(out, "child", s("childId"))?;
    field(out, "template", s("templateId"))?;
    field(out, "workspace", s("workspaceRoot"))?;
    field(out, "state", format!("{} ({})", s("state"), s("phase")))?;
    let model = &doc["model"];
    field(
        out,
        "model",
        format!(
            "{} at {} ({})",
            model["model"].as_str().unwrap_or("-"),
            model["url"].as_str().unwrap_or("-"),
            model["api"].as_str().unwrap_or("-")
        ),
    )?;
    field(out, "active run", s("activeRunId"))?;
    let queued: Vec<&str> = doc["queuedRuns"]
        .as_array()
        .map(|q| q.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    field(
        out,
        "queued",
        if queued.is_empty() {
            "-".to_owned()
        } else {
            queued.join(", ")
        },
    )?;
    field(out, "progress", s("lastProgressAt"))?;
    field(out, "created", s("createdAt"))?;
    field(out, "updated", s("updatedAt"))?;
    let last = &doc["lastRun"];
    if last.is_object() {
        let mut text = format!(
            "{} {}",
            last["runId"].as_str().unwrap_or("-"),
            last["status"].as_str().unwrap_or("-")
        );
        if let Some(artifact) = last["artifactId"].as_str() {
            text.push_str(&format!(" (full result: subzero output {artifact})"));
        }
        if let Some(code) = last["error"]["code"].as_str() {
            text.push_str(&format!(
                " — {code}: {}",
                last["error"]["message"].as_str().unwrap_or("")
            ));
        }
        field(out, "last run", text)?;
        if let Some(preview) = last["preview"].as_str().filter(|p| !p.is_empty()) {
            writeln!(out)?;
            for line in preview.lines() {
                writeln!(out, "    {}", printing.line(line))?;
            }
            if last["previewTruncated"] == true {
                writeln!(out, "    …")?;
            }
            writeln!(out)?;
        }
    } else {
        field(out, "last run", "-".to_owned())?;
    }
    let events = doc["events"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    writeln!(
        out,
        "{}",
        paint(
            &format!(
                "events (the last {}; `subzero logs {} --cursor {}` for more)",
                events.len(),
                s("childId"),
                doc["oldestCursor"]
            ),
            Tone::Dim,
            color
        )
    )?;
    for event in events {
        writeln!(out, "{}", events::line(event, color, printing))?;
    }
    Ok(())
}
