//! Recording what a child changed in its checkout, as a commit on its base, without
//! trusting anything under the checkout's own `.git`.
//!
//! A child may have set `core.fsmonitor`, hooks, filters or aliases in its clone's
//! config. None of it is read: git runs with the workspace's repository as `GIT_DIR`, the
//! checkout as `GIT_WORK_TREE`, a temporary index, the broker's own excludes file, and
//! hooks and fsmonitor switched off. Git never adds a `.git` entry, so the checkout's
//! repository is never part of the change; new untracked files are.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::changes::{Change, describe};
use super::error::CheckoutError;
use super::exclude::{anchored_lines, user_excludes};
use super::git::Git;
use super::oid::Oid;
use super::probe::probe;
use super::refs::{check_ref_name, delete_ref, set_ref};
use super::snapshot::{TempIndex, broker_commit, tree_of, tree_of_working_tree};

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordRequest<'a> {
    /// The workspace whose repository holds the base (and will hold the change).
    pub workspace: &'a Path,
    /// The child's checkout.
    pub checkout: &'a Path,
    /// The checkout's base ([`super::Prepared::base`]).
    pub base: &'a Oid,
    /// The ref to point at the change, e.g. `refs/subzero/children/<child-id>`.
    pub child_ref: &'a str,
    /// Names the child in the commit message.
    pub child: &'a str,
    /// The broker's own paths in the checkout ([`super::Prepared::own_paths`]).
    pub own_paths: &'a [PathBuf],
}

/// The outcome of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// The checkout's files equal the base; the child ref was deleted, so it never names
    /// a stale change.
    Unchanged,
    /// The change, committed on the base and named by the child ref.
    Changed(Change),
}

/// Snapshot the checkout's files as a commit on the base.
pub fn record(req: &RecordRequest<'_>) -> Result<Recorded, CheckoutError> {
    let info = probe(req.workspace)?;
    let git = Git::at(&info.workdir);
    check_ref_name(&git, req.child_ref)?;
    let mut excludes = tempfile::NamedTempFile::new()
        .map_err(|e| CheckoutError::io("creating a temporary excludes file", e))?;
    let mut lines = user_excludes(&info.workdir)?;
    lines.push(b'\n');
    lines.extend(anchored_lines(req.own_paths));
    excludes
        .write_all(&lines)
        .map_err(|e| CheckoutError::io("writing a temporary excludes file", e))?;
    let index = TempIndex::new()?;
    let untrusted = index.apply_to(
        Git::at(req.checkout)
            .env("GIT_DIR", &info.git_dir)
            .env("GIT_WORK_TREE", req.checkout)
            .config(setting("core.excludesFile=", excludes.path()))
            .config("core.hooksPath=/dev/null")
            .config("core.fsmonitor=false")
            .config("core.untrackedCache=false"),
    );
    let tree = tree_of_working_tree(&untrusted, req.base)?;
    if tree == tree_of(&git, req.base)? {
        delete_ref(&git, req.child_ref)?;
        return Ok(Recorded::Unchanged);
    }
    let message = format!("subzero: change recorded from child {}", req.child);
    let head = broker_commit(&git, &tree, req.base, &message)?;
    set_ref(&git, req.child_ref, &head)?;
    Ok(Recorded::Changed(describe(&git, req.base, &head)?))
}

fn setting(key: &str, path: &Path) -> std::ffi::OsString {
    let mut s = std::ffi::OsString::from(key);
    s.push(path);
    s
}
