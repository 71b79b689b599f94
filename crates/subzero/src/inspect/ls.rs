//! `subzero ls`: every child of the state directory (or of one workspace).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use serde_json::{Value, json};
use subzero_core::ChildId;
use subzero_runtime::broker::child_summary;
use subzero_runtime::scope::WorkspaceScope;

use super::state::ReadOnlyState;
use super::table::{Cell, Table, Tone};
use super::{Outcome, StateDirArg, runtime, written};
use crate::terminal_text::Printing;

/// Flags of `subzero ls`.
#[derive(Debug, Clone, clap::Args)]
pub struct LsArgs {
    /// Only children of this workspace (default: every workspace).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Only children in this state.
    #[arg(long, value_enum, value_name = "STATE")]
    pub state: Option<StateFilter>,
    /// Print `{"children": [ChildSummary…]}` as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print what children and their hosts named (workspaces, templates) as it is, control
    /// characters included (on a terminal they are shown escaped otherwise).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub state_dir: StateDirArg,
}

/// The child states `--state` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StateFilter {
    /// Idle, ready for work.
    Ready,
    /// A run is active.
    Running,
    /// Its last run was interrupted; it needs `subzero_resume`.
    Interrupted,
}

impl StateFilter {
    fn as_str(self) -> &'static str {
        match self {
            StateFilter::Ready => "ready",
            StateFilter::Running => "running",
            StateFilter::Interrupted => "interrupted",
        }
    }
}

/// Children per store read.
const PAGE: u32 = 200;

pub(super) fn run(args: LsArgs) -> Outcome {
    let state = ReadOnlyState::open(args.state_dir.state_dir.as_deref())?;
    let scopes = match &args.workspace {
        Some(dir) => vec![WorkspaceScope::resolve(dir)?],
        None => state.scopes()?,
    };
    let mut children = runtime()?.block_on(summaries(&state, &scopes))?;
    if let Some(filter) = args.state {
        children.retain(|c| c["state"] == filter.as_str());
    }
    children.sort_by(|a, b| a["childId"].as_str().cmp(&b["childId"].as_str()));
    let printing = Printing::of_stdout(args.raw);
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = json!({ "children": children }).to_string();
        return written(writeln!(out, "{}", printing.json(&doc)));
    }
    let tty = std::io::stdout().is_terminal();
    if children.is_empty() && tty {
        return written(writeln!(out, "no children"));
    }
    written(table(&children).write(&mut out, tty, tty, printing))
}

async fn summaries(
    state: &ReadOnlyState,
    scopes: &[WorkspaceScope],
) -> Result<Vec<Value>, super::Failure> {
    // No database yet: no children yet.
    let Ok(store) = state.store() else {
        return Ok(Vec::new());
    };
    let mut children = Vec::new();
    for scope in scopes {
        let mut after: Option<ChildId> = None;
        loop {
            let rows = store.list_children(scope, PAGE, after).await?;
            for row in &rows {
                let runs = store.runs(scope, row.child_id).await?;
                children.push(child_summary(row, &runs));
            }
            match rows.last() {
                Some(last) if rows.len() == PAGE as usize => after = Some(last.child_id),
                _ => break,
            }
        }
    }
    Ok(children)
}

fn table(children: &[Value]) -> Table {
    let mut table = Table::new(vec![
        "CHILD",
        "TEMPLATE",
        "STATE",
        "ACTIVE RUN",
        "PHASE",
        "LAST ACTIVITY",
        "WORKSPACE",
    ]);
    for child in children {
        let text = |key: &str| child[key].as_str().unwrap_or("-").to_owned();
        let state = text("state");
        let tone = match state.as_str() {
            "running" => Tone::Green,
            "interrupted" => Tone::Yellow,
            _ => Tone::Plain,
        };
        let phase = text("phase");
        let phase_tone = if phase == "recovery_required" {
            Tone::Red
        } else {
            Tone::Plain
        };
        let activity = child["lastProgressAt"]
            .as_str()
            .or_else(|| child["updatedAt"].as_str())
            .unwrap_or("-");
        table.push(vec![
            Cell::plain(text("childId")),
            Cell::plain(text("templateId")),
            Cell::new(state, tone),
            Cell::plain(text("activeRunId")),
            Cell::new(phase, phase_tone),
            Cell::plain(activity),
            Cell::new(text("workspaceRoot"), Tone::Dim),
        ]);
    }
    table
}
