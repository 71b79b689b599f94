//! Reading the board from the store: read-only, as `subzero ls` reads it, and no harder than
//! it must. Each refresh first compares the database and WAL files' sizes and modification
//! times with the last read and reads nothing when no broker wrote (at least every
//! [`FORCED`] it reads anyway); a child whose row did not change keeps its line, so a
//! refresh of a busy board reads the runs and newest events of the children that moved.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use subzero_core::{ChildId, EventSeq};
use subzero_runtime::broker::{child_summary, wire_event};
use subzero_runtime::paths::StatePaths;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{ChildRow, Store};

use super::child::ChildLine;
use crate::inspect::InspectError;
use crate::inspect::change::{change_text, checkouts_of};
use crate::inspect::state::ReadOnlyState;

/// Children per store read.
const PAGE: u32 = 200;
/// Newest events read per changed child (to find its current tool and last event).
const TAIL: u64 = 50;
/// The longest a refresh trusts unchanged file stamps (a write within the file system's
/// timestamp granularity keeps them equal).
const FORCED: Duration = Duration::from_secs(3);

/// Which children the board shows.
#[derive(Clone, Debug)]
pub enum Target {
    /// One workspace's.
    Workspace(WorkspaceScope),
    /// Every workspace's.
    All,
}

impl Target {
    /// What the header calls it.
    pub fn label(&self) -> String {
        match self {
            Target::Workspace(scope) => scope.root().display().to_string(),
            Target::All => "all workspaces".to_owned(),
        }
    }
}

/// The children shown, in board order, and when they were read.
#[derive(Debug, Default)]
pub struct Board {
    /// Board order: see [`ChildLine::sort_key`].
    pub lines: Vec<ChildLine>,
    /// Set once a read found the database (until then there are no children yet).
    pub has_database: bool,
}

impl Board {
    /// The line of `child`.
    pub fn line(&self, child: &str) -> Option<&ChildLine> {
        self.lines.iter().find(|l| l.id == child)
    }
}

/// Size and modification time of the database and its WAL: equal stamps, no new write.
type Stamp = [(u64, Option<SystemTime>); 2];

/// The store, read-only, and what the last read found.
#[derive(Debug)]
pub struct Reader {
    state_dir: Option<PathBuf>,
    state: ReadOnlyState,
    target: Target,
    cache: HashMap<String, ChildLine>,
    stamp: Option<Stamp>,
    read_at: Option<Instant>,
}

impl Reader {
    /// Open the state directory read-only. `workspace` picks one workspace; without it and
    /// without `all`, the nearest workspace at or above the current directory that has
    /// children, else the current directory.
    pub fn open(
        state_dir: Option<&Path>,
        workspace: Option<&Path>,
        all: bool,
    ) -> Result<Reader, InspectError> {
        let state = ReadOnlyState::open(state_dir)?;
        let target = match (all, workspace) {
            (true, _) => Target::All,
            (false, Some(dir)) => Target::Workspace(WorkspaceScope::resolve(dir)?),
            (false, None) => Target::Workspace(nearest_workspace(&state)?),
        };
        Ok(Reader {
            state_dir: state_dir.map(Path::to_path_buf),
            state,
            target,
            cache: HashMap::new(),
            stamp: None,
            read_at: None,
        })
    }

    /// The target shown.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The state directory layout.
    pub fn paths(&self) -> &StatePaths {
        self.state.paths()
    }

    /// The store, once there is a database.
    pub fn store(&self) -> Option<&Store> {
        self.state.store().ok()
    }

    /// Read the board again if a broker may have written since the last read (or `force`).
    /// Returns whether it read.
    pub async fn refresh(&mut self, board: &mut Board, force: bool) -> Result<bool, InspectError> {
        if self.state.store().is_err() {
            // No database yet: one may appear once a broker runs.
            self.state = ReadOnlyState::open(self.state_dir.as_deref())?;
        }
        let stamp = stamp(&self.state.paths().database());
        let stale = self.read_at.is_none_or(|at| at.elapsed() >= FORCED);
        if !force && !stale && self.stamp == Some(stamp) {
            return Ok(false);
        }
        let Ok(store) = self.state.store() else {
            board.has_database = false;
            board.lines.clear();
            self.read_at = Some(Instant::now());
            return Ok(true);
        };
        let scopes = match &self.target {
            Target::Workspace(scope) => vec![scope.clone()],
            Target::All => self.state.scopes()?,
        };
        let mut lines = Vec::new();
        for scope in &scopes {
            // Read every refresh: landing or discarding a change leaves the child's row as
            // it was, so a cached line may hold an old checkout.
            let checkouts = checkouts_of(store, scope).await?;
            for row in rows(store, scope).await? {
                if let Some(mut line) = self.line(store, &row).await? {
                    line.change = checkouts.get(&line.id).map(|c| (change_text(c), c.state));
                    lines.push(line);
                }
            }
        }
        lines.sort_by_key(ChildLine::sort_key);
        self.cache = lines.iter().map(|l| (l.id.clone(), l.clone())).collect();
        self.stamp = Some(stamp);
        self.read_at = Some(Instant::now());
        board.lines = lines;
        board.has_database = true;
        Ok(true)
    }

    /// The child's line: the cached one while its row is unchanged, else read afresh.
    /// `None` when the child went away between the listing and this read.
    async fn line(&self, store: &Store, row: &ChildRow) -> Result<Option<ChildLine>, InspectError> {
        let id = row.child_id.to_string();
        if let Some(line) = self.cache.get(&id)
            && line.next_event_seq == row.next_event_seq.get()
            && line.updated_at == row.updated_at.as_str()
        {
            return Ok(Some(line.clone()));
        }
        let newest = row.next_event_seq.get().saturating_sub(1);
        let from = newest
            .saturating_sub(TAIL)
            .max(row.oldest_event_seq.get().saturating_sub(1));
        // Row, runs and tail from one read, so the line never shows a run both active
        // and ended.
        let Ok(view) = store
            .child_view(&row.scope, row.child_id, EventSeq::new(from), TAIL as u32)
            .await
        else {
            return Ok(None);
        };
        let summary = child_summary(&view.row, &view.runs);
        let tail: Vec<_> = view.page.events.iter().map(wire_event).collect();
        Ok(Some(ChildLine::build(
            &view.row, &view.runs, &summary, &tail,
        )))
    }
}

/// Every child of `scope`, page by page.
async fn rows(store: &Store, scope: &WorkspaceScope) -> Result<Vec<ChildRow>, InspectError> {
    let mut all = Vec::new();
    let mut after: Option<ChildId> = None;
    loop {
        let page = store.list_children(scope, PAGE, after).await?;
        let full = page.len() == PAGE as usize;
        after = page.last().map(|r| r.child_id);
        all.extend(page);
        if !full {
            return Ok(all);
        }
    }
}

fn stamp(database: &Path) -> Stamp {
    let of =
        |path: &Path| std::fs::metadata(path).map_or((0, None), |m| (m.len(), m.modified().ok()));
    let mut wal = database.as_os_str().to_owned();
    wal.push("-wal");
    [of(database), of(Path::new(&wal))]
}

/// The workspace at or above the current directory that has children, nearest first;
/// the current directory when none has.
fn nearest_workspace(state: &ReadOnlyState) -> Result<WorkspaceScope, InspectError> {
    let here = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .map_err(|e| {
            InspectError::new(
                subzero_core::ErrorCode::InvalidRequest,
                format!("cannot read the current directory ({e}); pass --workspace DIR"),
            )
        })?;
    let nearest = state
        .scopes()?
        .into_iter()
        .filter(|s| here.starts_with(s.root()))
        .max_by_key(|s| s.root().components().count());
    match nearest {
        Some(scope) => Ok(scope),
        None => Ok(WorkspaceScope::resolve(&here)?),
    }
}
