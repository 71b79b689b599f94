//! Applies that must be refused: conflicts of every kind, each leaving the workspace
//! exactly as it was.

use super::apply::{apply_edits, child_change, conflict, refused};
use super::support::Repo;
use subzero_runtime::checkout::{Change, ConflictReason, Prepared};

#[test]
fn edits_on_the_same_lines_conflict_and_change_nothing() {
    let repo = Repo::with(&[("a.txt", "1\n2\n3\n")]);
    let (prepared, change) = child_change(&repo, "c1", |r| {
        r.child_write("c1", "a.txt", b"1\nchild\n3\n")
    });
    repo.write("a.txt", b"1\nmain\n3\n");
    repo.commit_all("main edits the same line");
    let paths = refused(&repo, &prepared, &change);
    assert_eq!(paths, conflict("a.txt", ConflictReason::EditedOnBothSides));
}

#[test]
fn an_uncommitted_edit_on_a_touched_path_blocks_and_changes_nothing() {
    let repo = Repo::with(&[("a.txt", "1\n2\n3\n"), ("far.txt", "f\n")]);
    let (prepared, change) = child_change(&repo, "c1", |r| {
        r.child_write("c1", "a.txt", b"1\n2\nthree\n")
    });
    repo.write("a.txt", b"one\n2\n3\n");
    repo.write("far.txt", b"unrelated edit\n");
    let paths = refused(&repo, &prepared, &change);
    assert_eq!(paths, conflict("a.txt", ConflictReason::UncommittedChanges));
}

#[test]
fn a_staged_edit_on_a_touched_path_blocks_too() {
    let repo = Repo::with(&[("a.txt", "1\n2\n3\n")]);
    let (prepared, change) = child_change(&repo, "c1", |r| {
        r.child_write("c1", "a.txt", b"1\n2\nthree\n")
    });
    repo.write("a.txt", b"one\n2\n3\n");
    repo.git(&["add", "a.txt"]);
    repo.write("a.txt", b"1\n2\n3\n");
    let paths = refused(&repo, &prepared, &change);
    assert_eq!(paths, conflict("a.txt", ConflictReason::UncommittedChanges));
}

#[test]
fn an_untracked_file_where_the_change_adds_one_blocks() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let (prepared, change) =
        child_change(&repo, "c1", |r| r.child_write("c1", "new.txt", b"child\n"));
    repo.write("new.txt", b"mine\n");
    let paths = refused(&repo, &prepared, &change);
    assert_eq!(
        paths,
        conflict("new.txt", ConflictReason::UntrackedInTheWay)
    );
}

#[test]
fn a_file_deleted_on_one_side_and_edited_on_the_other_conflicts() {
    let repo = Repo::with(&[("a.txt", "a\n"), ("doomed.txt", "d\n")]);
    let (prepared, change) = child_change(&repo, "c1", |r| {
        r.child_write("c1", "doomed.txt", b"edited\n")
    });
    repo.git(&["rm", "-q", "doomed.txt"]);
    repo.commit_all("main deletes it");
    let paths = refused(&repo, &prepared, &change);
    assert_eq!(
        paths,
        conflict("doomed.txt", ConflictReason::DeletedOnOneSide)
    );
}

#[test]
fn a_binary_file_edited_on_both_sides_conflicts() {
    let repo = Repo::with(&[("img.bin", "\0\x01\x02")]);
    let (prepared, change) =
        child_change(&repo, "c1", |r| r.child_write("c1", "img.bin", b"\0child"));
    repo.write("img.bin", b"\0main");
    repo.commit_all("main edits the binary");
    let paths = refused(&repo, &prepared, &change);
    assert_eq!(paths, conflict("img.bin", ConflictReason::Binary));
}

#[test]
fn of_four_children_editing_one_file_the_first_lands_and_the_next_conflicts() {
    let repo = Repo::with(&[("shared.txt", "1\n2\n3\n")]);
    let children = ["c1", "c2", "c3", "c4"];
    let prepared: Vec<Prepared> = children.iter().map(|c| repo.prepare(c)).collect();
    let changes: Vec<Change> = children
        .iter()
        .zip(&prepared)
        .map(|(c, p)| {
            repo.child_write(c, "shared.txt", format!("1\n{c} was here\n3\n").as_bytes());
            repo.record_change(c, p)
        })
        .collect();
    apply_edits(&repo, &prepared[0], &changes[0]).unwrap();
    assert_eq!(repo.read("shared.txt"), "1\nc1 was here\n3\n");
    let paths = refused(&repo, &prepared[1], &changes[1]);
    assert_eq!(
        paths,
        conflict("shared.txt", ConflictReason::UncommittedChanges)
    );
    repo.commit_all("c1's change committed");
    let paths = refused(&repo, &prepared[2], &changes[2]);
    assert_eq!(
        paths,
        conflict("shared.txt", ConflictReason::EditedOnBothSides)
    );
}
