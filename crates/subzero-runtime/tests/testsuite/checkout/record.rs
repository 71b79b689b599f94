//! Recording a child's change from its checkout's files, without trusting its `.git`.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::support::{Repo, git};
use subzero_runtime::checkout::{ChangedFile, FileStatus, Recorded};

#[test]
fn a_checkout_left_alone_records_unchanged() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let prepared = repo.prepare("c1");
    assert_eq!(repo.record("c1", &prepared), Recorded::Unchanged);
    let refs = repo.git(&["for-each-ref", "refs/subzero/children/"]);
    assert_eq!(refs, "");
}

#[test]
fn edits_deletions_and_new_files_are_recorded_with_counts() {
    let repo = Repo::with(&[
        ("a.txt", "1\n2\n3\n"),
        ("b.txt", "b\n"),
        ("img.bin", "\0\x01"),
    ]);
    let prepared = repo.prepare("c1");
    let checkout = repo.checkout_dir("c1");
    repo.child_write("c1", "a.txt", b"1\ntwo\n3\n4\n");
    fs::remove_file(checkout.join("b.txt")).unwrap();
    repo.child_write("c1", "img.bin", b"\0\x02\x03");
    repo.child_write("c1", "src/new.rs", b"fn main() {}\n");
    let change = repo.record_change("c1", &prepared);
    let summary: Vec<(&str, FileStatus, bool)> = change
        .files
        .iter()
        .map(|f| (f.path.to_str().unwrap(), f.status, f.binary))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a.txt", FileStatus::Modified, false),
            ("b.txt", FileStatus::Deleted, false),
            ("img.bin", FileStatus::Modified, true),
            ("src/new.rs", FileStatus::Added, false),
        ]
    );
    assert_eq!(
        (change.files_changed, change.insertions, change.deletions),
        (4, 3, 2)
    );
    let named = repo.git(&["rev-parse", &Repo::child_ref("c1")]);
    assert_eq!(named.trim(), change.head.as_str());
    let parent = repo.git(&["rev-parse", &format!("{}^", change.head)]);
    assert_eq!(parent.trim(), prepared.base.as_str());
}

#[test]
fn a_child_that_only_creates_files_is_not_lost() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let prepared = repo.prepare("c1");
    repo.child_write("c1", "notes/plan.md", b"plan\n");
    let change = repo.record_change("c1", &prepared);
    assert_eq!(change.files.len(), 1);
    assert_eq!(change.files[0].status, FileStatus::Added);
    let shown = repo.git(&["show", &format!("{}:notes/plan.md", change.head)]);
    assert_eq!(shown, "plan\n");
}

#[test]
fn a_rename_is_reported_with_its_old_path() {
    let repo = Repo::with(&[("old.txt", "same content, long enough to match\n")]);
    let prepared = repo.prepare("c1");
    let checkout = repo.checkout_dir("c1");
    fs::rename(checkout.join("old.txt"), checkout.join("new.txt")).unwrap();
    let change = repo.record_change("c1", &prepared);
    assert_eq!(
        change.files,
        vec![ChangedFile {
            path: "new.txt".into(),
            old_path: Some("old.txt".into()),
            status: FileStatus::Renamed,
            binary: false,
            insertions: 0,
            deletions: 0,
        }]
    );
}

#[test]
fn paths_with_spaces_newlines_and_non_utf8_bytes_round_trip() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let prepared = repo.prepare("c1");
    let checkout = repo.checkout_dir("c1");
    let names: Vec<PathBuf> = vec![
        "with space.txt".into(),
        "line\nbreak.txt".into(),
        PathBuf::from(OsStr::from_bytes(b"caf\xe9.txt")),
    ];
    for name in &names {
        fs::write(checkout.join(name), "x\n").unwrap();
    }
    let change = repo.record_change("c1", &prepared);
    let mut recorded: Vec<PathBuf> = change.files.into_iter().map(|f| f.path).collect();
    recorded.sort();
    let mut expected = names;
    expected.sort();
    assert_eq!(recorded, expected);
}

#[test]
fn the_broker_s_own_files_are_never_part_of_the_change() {
    let repo = Repo::with(&[(".gitignore", ".env\nnode_modules/\n")]);
    repo.write(".env", b"KEY=1\n");
    repo.write("node_modules/pkg/index.js", b"x\n");
    let include = vec![".env".to_owned()];
    let shared = vec!["node_modules".to_owned()];
    let prepared = repo.prepare_with(
        "c1",
        subzero_runtime::checkout::Base::WorkingTree,
        &include,
        &shared,
    );
    assert_eq!(repo.record("c1", &prepared), Recorded::Unchanged);
    repo.child_write("c1", "real.txt", b"r\n");
    let change = repo.record_change("c1", &prepared);
    let paths: Vec<PathBuf> = change.files.into_iter().map(|f| f.path).collect();
    assert_eq!(paths, vec![PathBuf::from("real.txt")]);
}

fn executable(path: &std::path::Path, script: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, script).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_hostile_clone_config_runs_nothing_during_record() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let prepared = repo.prepare("c1");
    let checkout = repo.checkout_dir("c1");
    let markers = tempfile::TempDir::new().unwrap();
    let m = markers.path().display();
    let hook = format!("#!/bin/sh\ntouch {m}/hook-$(basename $0)\n");
    for name in [
        "pre-commit",
        "post-index-change",
        "post-checkout",
        "reference-transaction",
    ] {
        executable(&checkout.join(".git/hooks").join(name), &hook);
        executable(&markers.path().join("hooks").join(name), &hook);
    }
    let fsmonitor = markers.path().join("fsmonitor.sh");
    executable(&fsmonitor, &format!("#!/bin/sh\ntouch {m}/fsmonitor\n"));
    let config = checkout.join(".git/config");
    let hooks_path = markers.path().join("hooks");
    git(
        &checkout,
        &["config", "core.fsmonitor", fsmonitor.to_str().unwrap()],
    );
    git(
        &checkout,
        &["config", "core.hooksPath", hooks_path.to_str().unwrap()],
    );
    git(
        &checkout,
        &[
            "config",
            "filter.evil.clean",
            &format!("touch {m}/filter; cat"),
        ],
    );
    git(
        &checkout,
        &["config", "alias.add", &format!("!touch {m}/alias")],
    );
    assert!(fs::read_to_string(&config).unwrap().contains("fsmonitor"));
    repo.child_write("c1", ".gitattributes", b"* filter=evil\n");
    repo.child_write("c1", "a.txt", b"changed\n");
    let change = repo.record_change("c1", &prepared);
    assert_eq!(change.files_changed, 2);
    let left: Vec<String> = fs::read_dir(markers.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "hooks" && name != "fsmonitor.sh")
        .collect();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "nothing of the clone's config ran"
    );
}
