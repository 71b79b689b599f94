//! Which workspaces can be isolated, and the typed reason when one cannot.

use super::support::{Repo, git};
use subzero_runtime::checkout::probe;
use tempfile::TempDir;

#[test]
fn a_repository_with_a_commit_reports_head_branch_and_git_dir() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let sub = repo.path().join("deep");
    std::fs::create_dir(&sub).unwrap();
    let info = probe(&sub).unwrap();
    assert_eq!(info.head.as_str(), repo.head());
    assert_eq!(info.branch.as_deref(), Some("refs/heads/main"));
    assert_eq!(info.workdir, repo.path().canonicalize().unwrap());
    assert_eq!(
        info.git_dir,
        repo.path().canonicalize().unwrap().join(".git")
    );
}

#[test]
fn a_plain_directory_is_not_a_repository() {
    let dir = TempDir::new().unwrap();
    let err = probe(dir.path()).unwrap_err();
    assert_eq!(err.code(), "not_a_repository");
    assert!(err.is_not_isolatable());
    assert!(err.to_string().contains("git init"), "{err}");
}

#[test]
fn a_bare_repository_cannot_be_isolated() {
    let dir = TempDir::new().unwrap();
    git(dir.path(), &["init", "-q", "--bare"]);
    let err = probe(dir.path()).unwrap_err();
    assert_eq!(err.code(), "bare_repository");
    assert!(err.to_string().contains("isolation shared"), "{err}");
}

#[test]
fn an_unborn_head_has_no_commit_yet() {
    let dir = TempDir::new().unwrap();
    git(dir.path(), &["init", "-q"]);
    let err = probe(dir.path()).unwrap_err();
    assert_eq!(err.code(), "no_commit_yet");
    assert!(err.to_string().contains("git commit"), "{err}");
}

#[test]
fn a_detached_head_has_no_branch() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    repo.git(&["checkout", "-q", "--detach"]);
    assert_eq!(probe(repo.path()).unwrap().branch, None);
}
