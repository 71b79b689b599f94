//! Removing a checkout and measuring it, never following its symlinks.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::support::Repo;
use subzero_runtime::checkout::{Base, disk_usage, remove};

#[test]
fn removing_a_checkout_leaves_the_workspace_s_node_modules_intact() {
    let repo = Repo::with(&[(".gitignore", "node_modules/\n")]);
    repo.write("node_modules/pkg/index.js", b"keep me\n");
    let shared = vec!["node_modules".to_owned()];
    repo.prepare_with("c1", Base::WorkingTree, &[], &shared);
    let checkout = repo.checkout_dir("c1");
    repo.child_write("c1", "x.txt", b"x\n");
    let c1 = repo.prepare("c2");
    let _ = repo.record("c2", &c1);
    let base = Repo::base_ref("c1");
    remove(repo.path(), &checkout, &[&base, &Repo::child_ref("c1")]).unwrap();
    assert!(!checkout.exists());
    assert_eq!(repo.read("node_modules/pkg/index.js"), "keep me\n");
    let refs = repo.git(&["for-each-ref", "--format=%(refname)", "refs/subzero/"]);
    assert_eq!(refs, "refs/subzero/base/c2\n");
}

#[test]
fn a_missing_or_half_created_checkout_is_removed_without_complaint() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let checkout = repo.checkout_dir("c1");
    remove(repo.path(), &checkout, &[]).unwrap();
    let locked = checkout.join("partial/locked");
    fs::create_dir_all(&locked).unwrap();
    fs::write(locked.join("f"), "f").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o500)).unwrap();
    fs::set_permissions(checkout.join("partial"), fs::Permissions::from_mode(0o000)).unwrap();
    remove(repo.path(), &checkout, &[]).unwrap();
    assert!(!checkout.exists());
}

#[test]
fn disk_usage_counts_each_inode_once_and_never_a_link_s_target() {
    let dir = tempfile::TempDir::new().unwrap();
    let big = tempfile::TempDir::new().unwrap();
    fs::write(big.path().join("huge"), vec![7u8; 1 << 20]).unwrap();
    let root = dir.path().join("c");
    fs::create_dir(&root).unwrap();
    let empty = disk_usage(&root).unwrap();
    fs::write(root.join("f"), vec![1u8; 64 * 1024]).unwrap();
    let one = disk_usage(&root).unwrap();
    assert!(one >= empty + 64 * 1024, "{one} vs {empty}");
    fs::hard_link(root.join("f"), root.join("g")).unwrap();
    std::os::unix::fs::symlink(big.path(), root.join("link")).unwrap();
    let after = disk_usage(&root).unwrap();
    assert!(
        after < one + 64 * 1024,
        "a hard link or the symlink's target was counted: {after}"
    );
    assert_eq!(disk_usage(&dir.path().join("missing")).unwrap(), 0);
}
