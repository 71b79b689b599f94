//! Landing a merged tree in the workspace in one step.

use crate::checkout::error::CheckoutError;
use crate::checkout::git::Git;
use crate::checkout::oid::Oid;
use crate::checkout::probe::{RepoInfo, head_commit};

/// The merged tree's difference from HEAD, as unstaged edits: one `git apply`, which
/// applies every hunk or none.
pub(super) fn as_edits(git: &Git, head: &Oid, tree: &Oid) -> Result<(), CheckoutError> {
    refuse_if_moved(git, head)?;
    let patch = git.run(&[
        "diff-tree",
        "-r",
        "-p",
        "--binary",
        "--full-index",
        "--no-renames",
        "--no-textconv",
        "--no-ext-diff",
        "--no-color",
        head.as_str(),
        tree.as_str(),
    ])?;
    git.run_with_input(&["apply", "--whitespace=nowarn", "-"], Some(&patch))?;
    Ok(())
}

/// A commit of the merged tree on HEAD. The branch moves by compare-and-swap (a HEAD that
/// moved meanwhile is refused), then index and files follow (`read-tree -m -u`); if they
/// cannot, the branch is moved back.
pub(super) fn as_commit(
    git: &Git,
    info: &RepoInfo,
    tree: &Oid,
    message: &str,
) -> Result<Oid, CheckoutError> {
    let old = &info.head;
    let author = with_identity(git)?;
    let out = author.run(&[
        "commit-tree",
        tree.as_str(),
        "-p",
        old.as_str(),
        "-m",
        message,
    ])?;
    let new = Oid::parse(&out, "commit-tree")?;
    git.run_allowing(&["update-index", "-q", "--refresh"], 1)?;
    let target = info.branch.as_deref().unwrap_or("HEAD");
    let swap = [
        "update-ref",
        "-m",
        "subzero: apply",
        target,
        new.as_str(),
        old.as_str(),
    ];
    if let Err(e) = git.run(&swap) {
        refuse_if_moved(git, old)?;
        return Err(e);
    }
    if let Err(e) = git.run(&["read-tree", "-m", "-u", old.as_str(), new.as_str()]) {
        let _ = git.run(&[
            "update-ref",
            "-m",
            "subzero: apply undone",
            target,
            old.as_str(),
            new.as_str(),
        ]);
        return Err(e);
    }
    Ok(new)
}

/// The user's identity when configured, else Subzero's, so the commit never fails for
/// want of a name.
fn with_identity(git: &Git) -> Result<Git, CheckoutError> {
    let configured = |key: &str| -> Result<bool, CheckoutError> {
        Ok(git.run_allowing(&["config", "--get", key], 1)?.code == Some(0))
    };
    if configured("user.name")? && configured("user.email")? {
        return Ok(git.clone());
    }
    Ok(git
        .clone()
        .env("GIT_AUTHOR_NAME", "Subzero")
        .env("GIT_AUTHOR_EMAIL", "subzero@localhost")
        .env("GIT_COMMITTER_NAME", "Subzero")
        .env("GIT_COMMITTER_EMAIL", "subzero@localhost"))
}

fn refuse_if_moved(git: &Git, expected: &Oid) -> Result<(), CheckoutError> {
    let found = head_commit(git)?;
    if found.as_ref() == Some(expected) {
        return Ok(());
    }
    Err(CheckoutError::HeadMoved {
        expected: expected.to_string(),
        found: found.map_or_else(|| "nothing".to_owned(), |o| o.to_string()),
    })
}
