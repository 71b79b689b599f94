//! Turning a working tree into a commit without touching any real index: a temporary
//! index, `read-tree` of a start commit (so unchanged files keep their entries), `add -A`,
//! `write-tree`, `commit-tree`.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::error::CheckoutError;
use super::git::Git;
use super::oid::Oid;

/// The identity of the commits the broker makes for itself (bases and recorded changes).
const NAME: &str = "Subzero";
const EMAIL: &str = "subzero@localhost";

/// An index file in a private directory, deleted when dropped. Git creates it (and its
/// `.lock`) there; nothing else reads it.
#[derive(Debug)]
pub(super) struct TempIndex {
    _dir: TempDir,
    path: PathBuf,
}

impl TempIndex {
    pub fn new() -> Result<TempIndex, CheckoutError> {
        let dir = tempfile::Builder::new()
            .prefix("subzero-index-")
            .tempdir()
            .map_err(|e| CheckoutError::io("creating a temporary index directory", e))?;
        let path = dir.path().join("index");
        Ok(TempIndex { _dir: dir, path })
    }

    /// A temporary copy of `real` (if it exists), so files whose stat data it holds are
    /// not hashed again. The real index is only read.
    pub fn seeded_from(real: &Path) -> Result<TempIndex, CheckoutError> {
        let index = TempIndex::new()?;
        match std::fs::copy(real, &index.path) {
            Ok(_) => Ok(index),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(index),
            Err(e) => Err(CheckoutError::io(format!("copying {}", real.display()), e)),
        }
    }

    /// `git` with this index as its `GIT_INDEX_FILE` (written whole, never split).
    pub fn apply_to(&self, git: Git) -> Git {
        git.env("GIT_INDEX_FILE", &self.path)
            .config("core.splitIndex=false")
    }
}

/// The tree of the working tree `git` sees (tracked and untracked files, not ignored
/// ones), staged into `git`'s index starting from `start`'s tree. `read-tree -m` keeps
/// the stat data of entries that match `start` (a seeded index); an index it refuses
/// (unmerged entries) is replaced whole.
pub(super) fn tree_of_working_tree(git: &Git, start: &Oid) -> Result<Oid, CheckoutError> {
    if git.run(&["read-tree", "-m", start.as_str()]).is_err() {
        git.run(&["read-tree", start.as_str()])?;
    }
    git.run(&["add", "-A"])?;
    let out = git.run(&["write-tree"])?;
    Oid::parse(&out, "write-tree")
}

/// The tree a commit points at.
pub(super) fn tree_of(git: &Git, commit: &Oid) -> Result<Oid, CheckoutError> {
    let spec = format!("{commit}^{{tree}}");
    let out = git.run(&["rev-parse", "--verify", &spec])?;
    Oid::parse(&out, "rev-parse")
}

/// A broker-made commit of `tree` on `parent`, unsigned, by Subzero.
pub(super) fn broker_commit(
    git: &Git,
    tree: &Oid,
    parent: &Oid,
    message: &str,
) -> Result<Oid, CheckoutError> {
    let git = git
        .clone()
        .env("GIT_AUTHOR_NAME", NAME)
        .env("GIT_AUTHOR_EMAIL", EMAIL)
        .env("GIT_COMMITTER_NAME", NAME)
        .env("GIT_COMMITTER_EMAIL", EMAIL);
    let out = git.run(&[
        "commit-tree",
        "--no-gpg-sign",
        tree.as_str(),
        "-p",
        parent.as_str(),
        "-m",
        message,
    ])?;
    Oid::parse(&out, "commit-tree")
}
