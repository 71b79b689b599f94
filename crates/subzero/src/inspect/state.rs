//! Opening the state read-only: the store's read-only open (no writer, no migration, no
//! write lock, nothing created). A missing database is a state with no children yet.

use std::path::{Path, PathBuf};

use rusqlite::OptionalExtension;
use subzero_core::{ArtifactId, ChildId, ErrorCode};
use subzero_runtime::paths::{PathEnv, StatePaths, resolve_state_dir};
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{Store, StoreOptions};

use super::InspectError;

/// An opened state directory, for reading only.
#[derive(Debug)]
pub struct ReadOnlyState {
    paths: StatePaths,
    /// `None` when no database exists yet: nothing has run with this state directory.
    store: Option<Store>,
}

impl ReadOnlyState {
    /// Open the state directory named by `flag` (or the environment). Never creates,
    /// migrates or writes anything, and never waits for a broker that is writing.
    pub fn open(flag: Option<&Path>) -> Result<Self, InspectError> {
        let root = resolve_state_dir(flag, &PathEnv::from_process())?;
        let paths = StatePaths::existing(&root);
        let store = Store::open_read_only(&paths.database(), StoreOptions::default())?;
        Ok(ReadOnlyState { paths, store })
    }

    /// The store, or what to tell the user when there is none yet.
    pub fn store(&self) -> Result<&Store, InspectError> {
        self.store.as_ref().ok_or_else(|| self.no_children())
    }

    /// The state directory layout.
    pub fn paths(&self) -> &StatePaths {
        &self.paths
    }

    fn no_children(&self) -> InspectError {
        InspectError::new(
            ErrorCode::NotFound,
            format!(
                "no children yet: there is no state database at {} (nothing has run with this state directory) — pass --state-dir (or set SUBZERO_STATE_DIR) to the one your host's `subzero mcp` uses",
                self.paths.database().display()
            ),
        )
    }

    /// The workspace scope a child belongs to, whichever workspace that is.
    pub fn child_scope(&self, child: ChildId) -> Result<WorkspaceScope, InspectError> {
        let id = child.to_string();
        let store = self.store()?;
        let found = store.read_blocking(move |c| {
            Ok(c.query_row(
                "SELECT scope_uid, workspace_root, scope_dev, scope_ino FROM children WHERE child_id = ?1",
                [id],
                scope_parts,
            )
            .optional()?)
        })?;
        found.ok_or_else(|| {
            InspectError::new(
                ErrorCode::NotFound,
                format!(
                    "child {child} is not in the state database at {}; list children with `subzero ls`",
                    store.path().display()
                ),
            )
        })
    }

    /// The workspace scope an artifact's child belongs to.
    pub fn artifact_scope(&self, artifact: ArtifactId) -> Result<WorkspaceScope, InspectError> {
        let id = artifact.to_string();
        let store = self.store()?;
        let found = store.read_blocking(move |c| {
            Ok(c.query_row(
                "SELECT c.scope_uid, c.workspace_root, c.scope_dev, c.scope_ino \
                 FROM artifacts a JOIN children c ON c.child_id = a.child_id WHERE a.artifact_id = ?1",
                [id],
                scope_parts,
            )
            .optional()?)
        })?;
        found.ok_or_else(|| {
            InspectError::new(
                ErrorCode::NotFound,
                format!(
                    "artifact {artifact} is not in the state database at {}; `subzero show CHILD` names the artifact of each finished run",
                    store.path().display()
                ),
            )
        })
    }

    /// Every workspace that has children, in path order (none without a database).
    pub fn scopes(&self) -> Result<Vec<WorkspaceScope>, InspectError> {
        let Some(store) = &self.store else {
            return Ok(Vec::new());
        };
        Ok(store.read_blocking(|c| {
            let mut stmt = c.prepare(
                "SELECT DISTINCT scope_uid, workspace_root, scope_dev, scope_ino FROM children ORDER BY workspace_root, scope_dev, scope_ino",
            )?;
            let scopes = stmt
                .query_map([], scope_parts)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(scopes)
        })?)
    }
}

impl Drop for ReadOnlyState {
    fn drop(&mut self) {
        if let Some(store) = &self.store {
            store.close();
        }
    }
}

fn scope_parts(row: &rusqlite::Row<'_>) -> rusqlite::Result<WorkspaceScope> {
    let uid: i64 = row.get(0)?;
    let root: String = row.get(1)?;
    let dev: i64 = row.get(2)?;
    let ino: i64 = row.get(3)?;
    let uid = u32::try_from(uid).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(0, uid))?;
    // Stored as the bit pattern of the u64 (SQLite integers are signed).
    Ok(WorkspaceScope::from_parts(
        uid,
        PathBuf::from(root),
        dev as u64,
        ino as u64,
    ))
}
