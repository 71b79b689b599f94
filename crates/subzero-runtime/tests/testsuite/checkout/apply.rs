//! Applying a child's change to the workspace: all or nothing.

use std::fs;
use std::path::PathBuf;

use super::support::{Repo, git, prepare_in, record_in, write_in};
use subzero_runtime::checkout::{
    ApplyMode, Change, CheckoutError, ConflictPath, ConflictReason, Prepared, apply,
};

/// A workspace, one child prepared from it, and the child's recorded change after `edit`.
pub(super) fn child_change(
    repo: &Repo,
    child: &str,
    edit: impl FnOnce(&Repo),
) -> (Prepared, Change) {
    let prepared = repo.prepare(child);
    edit(repo);
    let change = repo.record_change(child, &prepared);
    (prepared, change)
}

pub(super) fn apply_edits(
    repo: &Repo,
    prepared: &Prepared,
    change: &Change,
) -> Result<Vec<PathBuf>, CheckoutError> {
    apply(
        repo.path(),
        &prepared.base,
        &change.head,
        &ApplyMode::Uncommitted,
    )
    .map(|a| a.files)
}

/// Apply, expect a conflict, and check the workspace did not change at all.
pub(super) fn refused(repo: &Repo, prepared: &Prepared, change: &Change) -> Vec<ConflictPath> {
    let before = repo.picture();
    let err = apply_edits(repo, prepared, change).unwrap_err();
    assert_eq!(
        repo.picture(),
        before,
        "a refused apply changed the workspace"
    );
    let commit = ApplyMode::Commit {
        message: "m".into(),
    };
    let err_commit = apply(repo.path(), &prepared.base, &change.head, &commit).unwrap_err();
    assert_eq!(
        repo.picture(),
        before,
        "a refused commit changed the workspace"
    );
    assert_eq!(err.code(), "apply_conflict", "{err}");
    assert_eq!(err_commit.code(), "apply_conflict", "{err_commit}");
    match err {
        CheckoutError::Conflict { paths } => paths,
        other => panic!("expected a conflict, got {other}"),
    }
}

pub(super) fn conflict(path: &str, reason: ConflictReason) -> Vec<ConflictPath> {
    vec![ConflictPath {
        path: path.into(),
        reason,
    }]
}

#[test]
fn a_clean_change_lands_as_unstaged_edits() {
    let repo = Repo::with(&[("a.txt", "1\n2\n3\n"), ("b.txt", "b\n")]);
    let head = repo.head();
    let (prepared, change) = child_change(&repo, "c1", |r| {
        r.child_write("c1", "a.txt", b"1\ntwo\n3\n");
        fs::remove_file(r.checkout_dir("c1").join("b.txt")).unwrap();
    });
    let files = apply_edits(&repo, &prepared, &change).unwrap();
    assert_eq!(files, vec![PathBuf::from("a.txt"), PathBuf::from("b.txt")]);
    assert_eq!(repo.read("a.txt"), "1\ntwo\n3\n");
    assert!(!repo.path().join("b.txt").exists());
    assert_eq!(repo.head(), head);
    assert_eq!(
        repo.git(&["diff", "--cached", "--name-only"]),
        "",
        "the index is untouched"
    );
    assert_eq!(repo.git(&["diff", "--name-only"]), "a.txt\nb.txt\n");
}

#[test]
fn a_clean_change_lands_as_a_commit_on_the_branch() {
    let repo = Repo::with(&[("a.txt", "1\n2\n3\n")]);
    let old = repo.head();
    let (prepared, change) = child_change(&repo, "c1", |r| {
        r.child_write("c1", "a.txt", b"one\n2\n3\n")
    });
    let mode = ApplyMode::Commit {
        message: "child c1's change".into(),
    };
    let applied = apply(repo.path(), &prepared.base, &change.head, &mode).unwrap();
    let commit = applied.commit.unwrap();
    assert_eq!(repo.head(), commit.as_str());
    assert_eq!(repo.git(&["rev-parse", "HEAD^"]).trim(), old);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]).trim(),
        "child c1's change"
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.read("a.txt"), "one\n2\n3\n");
}

#[test]
fn a_change_of_only_new_files_lands() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let (prepared, change) =
        child_change(&repo, "c1", |r| r.child_write("c1", "new/file.txt", b"n\n"));
    apply_edits(&repo, &prepared, &change).unwrap();
    assert_eq!(repo.read("new/file.txt"), "n\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "?? new/\n");
}

#[test]
fn a_head_that_moved_on_unrelated_files_still_takes_the_change() {
    let repo = Repo::with(&[("a.txt", "1\n2\n3\n"), ("b.txt", "b\n")]);
    let (prepared, change) = child_change(&repo, "c1", |r| {
        r.child_write("c1", "a.txt", b"1\n2\nthree\n")
    });
    repo.write("b.txt", b"main moved on\n");
    repo.write("c.txt", b"and added\n");
    let moved = repo.commit_all("main moves on");
    let mode = ApplyMode::Commit {
        message: "land".into(),
    };
    let applied = apply(repo.path(), &prepared.base, &change.head, &mode).unwrap();
    assert_eq!(applied.files, vec![PathBuf::from("a.txt")]);
    assert_eq!(repo.git(&["rev-parse", "HEAD^"]).trim(), moved);
    assert_eq!(repo.read("a.txt"), "1\n2\nthree\n");
    assert_eq!(repo.read("b.txt"), "main moved on\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}

#[test]
fn the_same_line_edited_further_down_merges_three_way() {
    let repo = Repo::with(&[("a.txt", "1\n2\n3\n4\n5\n6\n7\n8\n")]);
    let (prepared, change) = child_change(&repo, "c1", |r| {
        r.child_write("c1", "a.txt", b"1\n2\n3\n4\n5\n6\n7\neight\n")
    });
    repo.write("a.txt", b"one\n2\n3\n4\n5\n6\n7\n8\n");
    repo.commit_all("main edits the top");
    apply_edits(&repo, &prepared, &change).unwrap();
    assert_eq!(repo.read("a.txt"), "one\n2\n3\n4\n5\n6\n7\neight\n");
}

#[test]
fn a_commit_keeps_unrelated_uncommitted_work_in_place() {
    let repo = Repo::with(&[("a.txt", "a\n"), ("mine.txt", "m\n")]);
    let (prepared, change) =
        child_change(&repo, "c1", |r| r.child_write("c1", "a.txt", b"child\n"));
    repo.write("mine.txt", b"my edit\n");
    repo.write("scratch.txt", b"untracked\n");
    let mode = ApplyMode::Commit {
        message: "land".into(),
    };
    apply(repo.path(), &prepared.base, &change.head, &mode).unwrap();
    assert_eq!(repo.read("a.txt"), "child\n");
    assert_eq!(repo.read("mine.txt"), "my edit\n");
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        " M mine.txt\n?? scratch.txt\n"
    );
}

#[test]
fn a_linked_worktree_is_a_workspace_of_its_own() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let main_head = repo.head();
    let linked = repo.state.path().join("linked");
    let linked_arg = linked.to_str().unwrap();
    repo.git(&["worktree", "add", "-q", "-b", "feature", linked_arg]);
    write_in(&linked, "wip.txt", b"work in progress\n");
    let checkout = repo.state.path().join("checkouts/w1");
    let prepared = prepare_in(&linked, &checkout, "w1");
    assert!(prepared.carried);
    let carried = fs::read_to_string(checkout.join("wip.txt")).unwrap();
    assert_eq!(carried, "work in progress\n");
    write_in(&checkout, "a.txt", b"from the child\n");
    let change = record_in(&linked, &checkout, &prepared, "w1");
    let mode = ApplyMode::Commit {
        message: "land".into(),
    };
    let applied = apply(&linked, &prepared.base, &change.head, &mode).unwrap();
    let carried_is_base = vec![PathBuf::from("a.txt")];
    assert_eq!(applied.files, carried_is_base);
    let feature = git(&linked, &["rev-parse", "refs/heads/feature"]);
    assert_eq!(feature.trim(), applied.commit.unwrap().as_str());
    let landed = fs::read_to_string(linked.join("a.txt")).unwrap();
    assert_eq!(landed, "from the child\n");
    let status = git(&linked, &["status", "--porcelain"]);
    assert_eq!(status, "?? wip.txt\n", "the carried work stays the user's");
    assert_eq!(
        repo.head(),
        main_head,
        "the main worktree's branch never moved"
    );
}
