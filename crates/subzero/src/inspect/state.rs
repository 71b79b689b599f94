//! Opening the state read-only: refuse what is missing or of another schema version,
//! then read through the store's WAL read connections.

use std::path::{Path, PathBuf};

use rusqlite::{OpenFlags, OptionalExtension};
use subzero_core::{ArtifactId, ChildId, ErrorCode};
use subzero_runtime::paths::{PathEnv, StatePaths, resolve_state_dir};
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{SCHEMA_VERSION, Store, StoreOptions};

use super::InspectError;

/// The database file name inside a state directory (see `StatePaths::database`).
const DATABASE: &str = "subzero.db";

/// An opened state directory, for reading only.
#[derive(Debug)]
pub struct ReadOnlyState {
    paths: StatePaths,
    store: Store,
}

impl ReadOnlyState {
    /// Open the state directory named by `flag` (or the environment). Never creates a
    /// database and never migrates one.
    pub fn open(flag: Option<&Path>) -> Result<Self, InspectError> {
        let root = resolve_state_dir(flag, &PathEnv::from_process())?;
        let database = root.join(DATABASE);
        if !database.is_file() {
            return Err(InspectError::new(
                ErrorCode::NotFound,
                format!(
                    "no state database at {}; nothing has run with this state directory yet — pass --state-dir (or set SUBZERO_STATE_DIR) to the one your host's `subzero mcp` uses",
                    database.display()
                ),
            ));
        }
        check_schema(&database)?;
        // The directory exists, so this only names its layout (and recreates a
        // subdirectory someone deleted).
        let paths = StatePaths::create(&root)?;
        let store = Store::open(&paths.database(), StoreOptions::default())?;
        Ok(ReadOnlyState { paths, store })
    }

    /// The store (read methods only).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The state directory layout.
    pub fn paths(&self) -> &StatePaths {
        &self.paths
    }

    /// The workspace scope a child belongs to, whichever workspace that is.
    pub fn child_scope(&self, child: ChildId) -> Result<WorkspaceScope, InspectError> {
        let id = child.to_string();
        let found = self.store.read_blocking(move |c| {
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
                    self.store.path().display()
                ),
            )
        })
    }

    /// The workspace scope an artifact's child belongs to.
    pub fn artifact_scope(&self, artifact: ArtifactId) -> Result<WorkspaceScope, InspectError> {
        let id = artifact.to_string();
        let found = self.store.read_blocking(move |c| {
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
                    self.store.path().display()
                ),
            )
        })
    }

    /// Every workspace that has children, in path order.
    pub fn scopes(&self) -> Result<Vec<WorkspaceScope>, InspectError> {
        Ok(self.store.read_blocking(|c| {
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
        self.store.close();
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

/// Refuse a database this binary would have to migrate (or cannot read).
fn check_schema(database: &Path) -> Result<(), InspectError> {
    let version = schema_version(database).map_err(|e| {
        InspectError::new(
            ErrorCode::Internal,
            format!(
                "cannot read the state database {} ({e}); run `subzero doctor` to check it",
                database.display()
            ),
        )
    })?;
    match version.cmp(&SCHEMA_VERSION) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(InspectError::new(
            ErrorCode::Internal,
            format!(
                "the state database {} has schema version {version}, older than this subzero ({SCHEMA_VERSION}); inspection never migrates — start `subzero mcp` once (it migrates), then retry",
                database.display()
            ),
        )),
        std::cmp::Ordering::Greater => Err(InspectError::new(
            ErrorCode::Internal,
            format!(
                "the state database {} has schema version {version}, newer than this subzero ({SCHEMA_VERSION}); use the subzero that wrote it or upgrade",
                database.display()
            ),
        )),
    }
}

/// `PRAGMA user_version` through a read-only connection.
pub fn schema_version(database: &Path) -> rusqlite::Result<i64> {
    let conn = rusqlite::Connection::open_with_flags(
        database,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}
