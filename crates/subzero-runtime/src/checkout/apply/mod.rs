//! Applying a child's change to the workspace, all or nothing.
//!
//! Everything that can refuse runs first and changes nothing in the workspace: the
//! workspace's uncommitted edits and untracked files on the paths the change touches,
//! then a three-way merge computed off to the side (`merge-tree`, the child's base as
//! merge base, so a HEAD that moved on unrelated files still takes the change). Only a
//! clean result lands, in one step: `git apply` (atomic) for uncommitted edits, or a
//! commit whose branch moves by compare-and-swap.

mod checks;
mod land;
mod merge;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::error::CheckoutError;
use super::git::Git;
use super::oid::{Oid, nul_records};
use super::probe::probe;
use merge::{Merged, merge_tree};

/// How the change lands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ApplyMode {
    /// As unstaged edits in the workspace's working tree (new files untracked).
    #[default]
    Uncommitted,
    /// As a commit on the current branch (or detached HEAD), index and files updated.
    Commit {
        /// The commit message.
        message: String,
    },
}

/// Why a path blocks an apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConflictReason {
    /// Both the workspace's HEAD and the change edited it, incompatibly.
    EditedOnBothSides,
    /// One side deleted (or renamed away) what the other edited.
    DeletedOnOneSide,
    /// A binary file edited on both sides.
    Binary,
    /// The workspace has uncommitted changes (working tree or index) on it.
    UncommittedChanges,
    /// The change adds it, and the workspace has an untracked (or ignored) file there.
    UntrackedInTheWay,
    /// Another kind of merge conflict, named as git names it (`file/directory`, …).
    Other(String),
}

impl ConflictReason {
    /// A stable name: `edited_on_both_sides`, `deleted_on_one_side`, `binary`,
    /// `uncommitted_changes`, `untracked_in_the_way`, `other`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ConflictReason::EditedOnBothSides => "edited_on_both_sides",
            ConflictReason::DeletedOnOneSide => "deleted_on_one_side",
            ConflictReason::Binary => "binary",
            ConflictReason::UncommittedChanges => "uncommitted_changes",
            ConflictReason::UntrackedInTheWay => "untracked_in_the_way",
            ConflictReason::Other(_) => "other",
        }
    }

    /// Which reason names a path when git gives several: the most specific.
    fn rank(&self) -> u8 {
        match self {
            ConflictReason::Other(_) => 0,
            ConflictReason::EditedOnBothSides => 1,
            ConflictReason::DeletedOnOneSide => 2,
            ConflictReason::Binary => 3,
            ConflictReason::UncommittedChanges | ConflictReason::UntrackedInTheWay => 4,
        }
    }
}

/// One path that blocks an apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictPath {
    /// The path (lossless bytes).
    pub path: PathBuf,
    /// Why.
    pub reason: ConflictReason,
}

/// A landed change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The new commit, for [`ApplyMode::Commit`].
    pub commit: Option<Oid>,
    /// The workspace paths that changed (empty when HEAD already had the change).
    pub files: Vec<PathBuf>,
}

/// Apply the change `base..head` to the workspace. A refusal
/// ([`CheckoutError::Conflict`], [`CheckoutError::HeadMoved`], or any failure) leaves the
/// workspace's files, index and HEAD as they were.
pub fn apply(
    workspace: &Path,
    base: &Oid,
    head: &Oid,
    mode: &ApplyMode,
) -> Result<Applied, CheckoutError> {
    let info = probe(workspace)?;
    let git = Git::at(&info.workdir);
    let touched = changed_paths(&git, base, head)?;
    checks::refuse_blocked(&git, &info.workdir, &info.head, &touched)?;
    let tree = match merge_tree(&git, base, &info.head, head)? {
        Merged::Clean(tree) => tree,
        Merged::Conflicted(paths) => return Err(CheckoutError::Conflict { paths }),
    };
    let landing = changed_paths(&git, &info.head, &tree)?;
    checks::refuse_blocked(&git, &info.workdir, &info.head, &landing)?;
    if landing.is_empty() {
        return Ok(Applied {
            commit: None,
            files: Vec::new(),
        });
    }
    let commit = match mode {
        ApplyMode::Uncommitted => {
            land::as_edits(&git, &info.head, &tree)?;
            None
        }
        ApplyMode::Commit { message } => Some(land::as_commit(&git, &info, &tree, message)?),
    };
    Ok(Applied {
        commit,
        files: landing
            .into_iter()
            .map(|p| super::oid::path_from_bytes(&p))
            .collect(),
    })
}

/// Every path that differs between two tree-ishes (a rename as its two paths).
fn changed_paths(git: &Git, from: &Oid, to: &Oid) -> Result<BTreeSet<Vec<u8>>, CheckoutError> {
    let out = git.run(&[
        "diff-tree",
        "-r",
        "-z",
        "--name-only",
        "--no-renames",
        from.as_str(),
        to.as_str(),
    ])?;
    Ok(nul_records(&out).map(<[u8]>::to_vec).collect())
}
