//! Can this workspace be isolated? One call that says yes (with what the other steps need)
//! or which reason it cannot.

use std::path::{Path, PathBuf};

use super::error::CheckoutError;
use super::git::Git;
use super::oid::{Oid, path_from_bytes};

/// The oldest git the engine works with: `merge-tree --write-tree` came in 2.38 and its
/// `--merge-base` option, which applying a child's change needs, in 2.40.
pub const MIN_GIT: &str = "2.40";
const MIN_GIT_PARTS: (u32, u32) = (2, 40);

/// What the other operations need to know about a workspace's repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoInfo {
    /// The top of the working tree.
    pub workdir: PathBuf,
    /// The repository's (common) git directory, absolute: where objects and refs live,
    /// also for a linked worktree.
    pub git_dir: PathBuf,
    /// The commit HEAD points at.
    pub head: Oid,
    /// The branch HEAD is on (`refs/heads/…`), or `None` when detached.
    pub branch: Option<String>,
    /// The version `git --version` printed.
    pub git_version: String,
}

/// Check that `workspace` is inside a non-bare repository with a commit, using a git new
/// enough; each reason it is not has its own error code.
pub fn probe(workspace: &Path) -> Result<RepoInfo, CheckoutError> {
    let git_version = check_git_version()?;
    if !workspace.is_dir() {
        return Err(CheckoutError::NotARepository {
            path: workspace.to_path_buf(),
        });
    }
    let git = Git::at(workspace);
    let (workdir, git_dir) = locate(&git, workspace)?;
    let git = Git::at(&workdir);
    let head = head_commit(&git)?.ok_or_else(|| CheckoutError::NoCommitYet {
        path: workdir.clone(),
    })?;
    let branch = current_branch(&git)?;
    Ok(RepoInfo {
        workdir,
        git_dir,
        head,
        branch,
        git_version,
    })
}

/// The commit HEAD points at, `None` for an unborn branch.
pub(super) fn head_commit(git: &Git) -> Result<Option<Oid>, CheckoutError> {
    let out = git.run_allowing(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], 1)?;
    match out.code {
        Some(0) => Oid::parse(&out.stdout, "rev-parse").map(Some),
        _ => Ok(None),
    }
}

/// The full name of the branch HEAD is on, `None` when detached.
pub(super) fn current_branch(git: &Git) -> Result<Option<String>, CheckoutError> {
    let out = git.run_allowing(&["symbolic-ref", "--quiet", "HEAD"], 1)?;
    match out.code {
        Some(0) => Ok(Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())),
        _ => Ok(None),
    }
}

fn check_git_version() -> Result<String, CheckoutError> {
    let out = Git::at(Path::new("/")).run(&["--version"])?;
    version_ok(String::from_utf8_lossy(&out).trim())
}

/// The version in `git --version`'s output when it is at least [`MIN_GIT`].
fn version_ok(text: &str) -> Result<String, CheckoutError> {
    let found = text.strip_prefix("git version ").unwrap_or(text).to_owned();
    let mut parts = found.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) if (major, minor) >= MIN_GIT_PARTS => Ok(found),
        _ => Err(CheckoutError::GitTooOld { found }),
    }
}

/// The working tree's top and the common git directory, or why there is none.
fn locate(git: &Git, workspace: &Path) -> Result<(PathBuf, PathBuf), CheckoutError> {
    let not_a_repo = || CheckoutError::NotARepository {
        path: workspace.to_path_buf(),
    };
    let kinds = match git.run(&["rev-parse", "--is-bare-repository", "--is-inside-work-tree"]) {
        Ok(out) => String::from_utf8_lossy(&out).into_owned(),
        Err(CheckoutError::Git { stderr, .. }) if stderr.contains("not a git repository") => {
            return Err(not_a_repo());
        }
        Err(e) => return Err(e),
    };
    let mut lines = kinds.lines();
    if lines.next() == Some("true") {
        return Err(CheckoutError::BareRepository {
            path: workspace.to_path_buf(),
        });
    }
    if lines.next() != Some("true") {
        return Err(not_a_repo());
    }
    let out = git.run(&[
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--git-common-dir",
    ])?;
    let mut paths = out.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    match (paths.next(), paths.next()) {
        (Some(top), Some(dir)) => Ok((path_from_bytes(top), path_from_bytes(dir))),
        _ => Err(CheckoutError::unparsed(
            "rev-parse",
            "expected the top-level and git directories",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::version_ok;

    #[test]
    fn a_git_older_than_the_minimum_is_too_old() {
        for old in ["git version 2.39.5", "git version 1.9.0", "nonsense"] {
            let err = version_ok(old).unwrap_err();
            assert_eq!(err.code(), "git_too_old", "{old}");
            assert!(err.is_not_isolatable());
        }
        for new in [
            "git version 2.40.0",
            "git version 2.47.3",
            "git version 3.0.0.windows.1",
        ] {
            assert!(version_ok(new).is_ok(), "{new}");
        }
    }
}
