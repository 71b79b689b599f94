//! `subzero ls`: every child of the state directory (or of one workspace).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use serde::Serialize;
use subzero_core::ChildId;
use subzero_protocol::{self as p, ChildSummary};
use subzero_runtime::broker::child_summary;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::CheckoutRow;

use super::change::{self, checkouts_of};
use super::document::{self, Read, Shown};
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
    fn state(self) -> p::ChildState {
        match self {
            StateFilter::Ready => p::ChildState::Ready,
            StateFilter::Running => p::ChildState::Running,
            StateFilter::Interrupted => p::ChildState::Interrupted,
        }
    }
}

/// `ls --json`: `{"children": [ChildSummary…]}`.
#[derive(Serialize)]
struct Listing<'a> {
    children: Vec<Shown<'a, ChildSummary>>,
}

/// Children per store read.
const PAGE: u32 = 200;

/// A child's summary and, for an isolated child, its checkout (not part of the wire
/// document, so `--json` leaves it out).
type Listed = (Read<ChildSummary>, Option<CheckoutRow>);

pub(super) fn run(args: LsArgs) -> Outcome {
    let state = ReadOnlyState::open(args.state_dir.state_dir.as_deref())?;
    let scopes = match &args.workspace {
        Some(dir) => vec![WorkspaceScope::resolve(dir)?],
        None => state.scopes()?,
    };
    let mut children = runtime()?.block_on(summaries(&state, &scopes))?;
    if let Some(filter) = args.state {
        children.retain(|(c, _)| c.as_ref().is_ok_and(|c| c.state == filter.state()));
    }
    // A refused summary (no id) sorts first.
    children.sort_by(|(a, _), (b, _)| id(a).cmp(&id(b)));
    let printing = Printing::of_stdout(args.raw);
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = document::json(&Listing {
            children: children.iter().map(|(c, _)| Shown::from(c)).collect(),
        })?;
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
) -> Result<Vec<Listed>, super::Failure> {
    // No database yet: no children yet.
    let Ok(store) = state.store() else {
        return Ok(Vec::new());
    };
    let mut children = Vec::new();
    for scope in scopes {
        let mut checkouts = checkouts_of(store, scope).await?;
        let mut after: Option<ChildId> = None;
        loop {
            let rows = store.list_children(scope, PAGE, after).await?;
            for row in &rows {
                let runs = store.runs(scope, row.child_id).await?;
                let checkout = checkouts.remove(&row.child_id.to_string());
                children.push((child_summary(row, &runs), checkout));
            }
            match rows.last() {
                Some(last) if rows.len() == PAGE as usize => after = Some(last.child_id),
                _ => break,
            }
        }
    }
    Ok(children)
}

fn id(child: &Read<ChildSummary>) -> Option<&str> {
    child.as_ref().ok().map(|c| c.child_id.as_str())
}

fn table(children: &[Listed]) -> Table {
    let mut table = Table::new(vec![
        "CHILD",
        "LABEL",
        "TEMPLATE",
        "STATE",
        "ACTIVE RUN",
        "PHASE",
        "LAST ACTIVITY",
        "CHANGE",
        "WORKSPACE",
    ]);
    for (child, checkout) in children {
        table.push(row(child.as_ref().ok(), checkout.as_ref()));
    }
    table
}

/// The checkout's cell: its change and state, nothing for a child without one.
fn change_cell(checkout: Option<&CheckoutRow>) -> Cell {
    match checkout {
        Some(c) => Cell::new(change::change_text(c), change::tone(c.state)),
        None => Cell::plain(""),
    }
}

/// One line of the table; a refused summary shows `-` throughout.
fn row(child: Option<&ChildSummary>, checkout: Option<&CheckoutRow>) -> Vec<Cell> {
    let Some(c) = child else {
        let mut cells: Vec<Cell> = (0..8).map(|_| Cell::plain("-")).collect();
        cells.push(Cell::new("-", Tone::Dim));
        return cells;
    };
    let tone = match c.state {
        p::ChildState::Running => Tone::Green,
        p::ChildState::Interrupted => Tone::Yellow,
        p::ChildState::Ready => Tone::Plain,
    };
    let phase = c.phase.unwrap_or(p::Phase::Idle);
    let phase_tone = if phase == p::Phase::RecoveryRequired {
        Tone::Red
    } else {
        Tone::Plain
    };
    let activity = c
        .last_progress_at
        .as_ref()
        .or(c.updated_at.as_ref())
        .map_or("-", |at| at.as_str());
    vec![
        Cell::plain(c.child_id.as_str()),
        Cell::plain(c.label.as_ref().map_or("-", |l| l.as_str())),
        Cell::plain(c.template_id.as_str()),
        Cell::new(c.state.to_string(), tone),
        Cell::plain(c.active_run_id.as_ref().map_or("-", |r| r.as_str())),
        Cell::new(phase.to_string(), phase_tone),
        Cell::plain(activity),
        change_cell(checkout),
        Cell::new(
            c.workspace_root.as_ref().map_or("-", |w| w.as_str()),
            Tone::Dim,
        ),
    ]
}
