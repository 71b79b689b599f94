//! The one error boundary of the checkout engine: a stable code per variant and a message
//! that says what to do next.

use std::fmt;
use std::path::PathBuf;

use super::apply::ConflictPath;
use super::probe::MIN_GIT;

/// Everything a checkout operation can fail with. An operation that fails leaves the
/// workspace's files, index and HEAD as they were.
#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    /// `git` could not be started.
    #[error(
        "git_missing: cannot run `git` ({why}); install git {MIN_GIT} or newer, or spawn with isolation shared"
    )]
    GitMissing {
        /// The OS error.
        why: String,
    },
    /// `git` is older than the engine needs.
    #[error(
        "git_too_old: git {found} is older than {MIN_GIT}, which isolated checkouts need (`git merge-tree --write-tree --merge-base`); install a newer git or spawn with isolation shared"
    )]
    GitTooOld {
        /// The version `git --version` printed.
        found: String,
    },
    /// The workspace is not inside a git working tree.
    #[error(
        "not_a_repository: {} is not inside a git working tree; run `git init && git add -A && git commit -m init` there, or spawn with isolation shared",
        path.display()
    )]
    NotARepository {
        /// The workspace.
        path: PathBuf,
    },
    /// The workspace is a bare repository: there is no working tree to copy.
    #[error(
        "bare_repository: {} is a bare repository with no working tree; spawn in a checkout of it, or with isolation shared",
        path.display()
    )]
    BareRepository {
        /// The workspace.
        path: PathBuf,
    },
    /// HEAD is unborn: there is no commit to start a checkout from.
    #[error(
        "no_commit_yet: the repository at {} has no commit yet; run `git add -A && git commit -m init` there, or spawn with isolation shared",
        path.display()
    )]
    NoCommitYet {
        /// The workspace.
        path: PathBuf,
    },
    /// A revision the caller named does not resolve to a commit.
    #[error(
        "bad_revision: `{rev}` does not name a commit in {}; pass a branch, tag or commit id that `git rev-parse --verify` accepts",
        path.display()
    )]
    BadRevision {
        /// The revision as given.
        rev: String,
        /// The workspace.
        path: PathBuf,
    },
    /// A ref name the caller gave is not a full ref under `refs/`.
    #[error(
        "invalid_ref_name: `{name}` is not a valid ref under refs/ (e.g. refs/subzero/base/<child-id>); pass a full ref name"
    )]
    InvalidRefName {
        /// The name as given.
        name: String,
    },
    /// The checkout directory is already there.
    #[error(
        "checkout_exists: {} already exists and is not empty; remove it first or choose another directory",
        path.display()
    )]
    CheckoutExists {
        /// The directory.
        path: PathBuf,
    },
    /// A submodule could not be initialized in the checkout.
    #[error(
        "submodule_failed: submodule `{name}` (at {path}) could not be initialized in the checkout: {detail}; run `git submodule update --init --recursive` in the workspace so its commits are local, or spawn with isolation shared"
    )]
    Submodule {
        /// The submodule's name in `.gitmodules`.
        name: String,
        /// Its path in the tree.
        path: String,
        /// What git said.
        detail: String,
    },
    /// The change does not apply cleanly; nothing was changed.
    #[error(
        "apply_conflict: the change conflicts with the workspace on {}; nothing was changed. Commit or stash the workspace's edits on these paths, or have the child rebuild its change on the workspace's HEAD, then apply again",
        ConflictList(paths)
    )]
    Conflict {
        /// Every path that blocks the apply, with why.
        paths: Vec<ConflictPath>,
    },
    /// The workspace's HEAD moved between the checks and the landing; nothing was changed.
    #[error(
        "head_moved: the workspace's HEAD moved from {expected} to {found} while the change was being applied; nothing was changed, apply again"
    )]
    HeadMoved {
        /// HEAD when the apply started.
        expected: String,
        /// HEAD when it was about to land.
        found: String,
    },
    /// A git command failed.
    #[error("git_failed: `git {command}` failed ({status}): {stderr}")]
    Git {
        /// The subcommand and its first arguments.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error, trimmed and bounded.
        stderr: String,
    },
    /// Git printed something the engine cannot read.
    #[error(
        "git_output_unparsed: `git {command}` printed output this engine cannot read: {detail}"
    )]
    Unparsed {
        /// The subcommand.
        command: String,
        /// What was wrong with it.
        detail: String,
    },
    /// A file-system operation failed.
    #[error("io_error: {context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl CheckoutError {
    /// A stable code.
    pub fn code(&self) -> &'static str {
        match self {
            CheckoutError::GitMissing { .. } => "git_missing",
            CheckoutError::GitTooOld { .. } => "git_too_old",
            CheckoutError::NotARepository { .. } => "not_a_repository",
            CheckoutError::BareRepository { .. } => "bare_repository",
            CheckoutError::NoCommitYet { .. } => "no_commit_yet",
            CheckoutError::BadRevision { .. } => "bad_revision",
            CheckoutError::InvalidRefName { .. } => "invalid_ref_name",
            CheckoutError::CheckoutExists { .. } => "checkout_exists",
            CheckoutError::Submodule { .. } => "submodule_failed",
            CheckoutError::Conflict { .. } => "apply_conflict",
            CheckoutError::HeadMoved { .. } => "head_moved",
            CheckoutError::Git { .. } => "git_failed",
            CheckoutError::Unparsed { .. } => "git_output_unparsed",
            CheckoutError::Io { .. } => "io_error",
        }
    }

    /// True when the workspace cannot be isolated at all (the caller should offer
    /// isolation shared), as opposed to one operation failing.
    pub fn is_not_isolatable(&self) -> bool {
        matches!(
            self,
            CheckoutError::GitMissing { .. }
                | CheckoutError::GitTooOld { .. }
                | CheckoutError::NotARepository { .. }
                | CheckoutError::BareRepository { .. }
                | CheckoutError::NoCommitYet { .. }
        )
    }

    pub(super) fn io(context: impl Into<String>, source: std::io::Error) -> CheckoutError {
        CheckoutError::Io {
            context: context.into(),
            source,
        }
    }

    pub(super) fn unparsed(command: &str, detail: impl Into<String>) -> CheckoutError {
        CheckoutError::Unparsed {
            command: command.to_owned(),
            detail: detail.into(),
        }
    }
}

/// At most this many conflicting paths are named in the message (all are in `paths`).
const LISTED: usize = 8;

struct ConflictList<'a>(&'a [ConflictPath]);

impl fmt::Display for ConflictList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.0.iter().take(LISTED).enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{} ({})", c.path.display(), c.reason.as_str())?;
        }
        if self.0.len() > LISTED {
            write!(f, " and {} more", self.0.len() - LISTED)?;
        }
        Ok(())
    }
}
