//! Preparing a child's checkout: base, carried changes, includes, shared directories,
//! submodules, and a clean `git status` for the child.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::support::{Repo, git};
use subzero_runtime::checkout::{Base, PrepareRequest, prepare};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_clean_workspace_starts_from_head_with_a_clean_status() {
    let repo = Repo::with(&[("a.txt", "a\n"), ("dir/b.txt", "b\n")]);
    let prepared = repo.prepare("c1");
    let checkout = repo.checkout_dir("c1");
    assert_eq!(prepared.head.as_str(), repo.head());
    assert_eq!(prepared.base, prepared.head);
    assert!(!prepared.dirty && !prepared.carried);
    assert_eq!(
        fs::read_to_string(checkout.join("dir/b.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(git(&checkout, &["status", "--porcelain"]), "");
    assert!(
        checkout.join(".git").is_dir(),
        "the checkout has its own .git"
    );
    let base_ref = repo.git(&["rev-parse", &Repo::base_ref("c1")]);
    assert_eq!(base_ref.trim(), repo.head());
}

#[test]
fn uncommitted_changes_are_carried_without_touching_the_workspace() {
    let repo = Repo::with(&[
        ("a.txt", "a\n"),
        ("gone.txt", "g\n"),
        (".gitignore", "*.log\n"),
    ]);
    repo.write("a.txt", b"a edited\n");
    repo.write("new.txt", b"new\n");
    repo.write("build.log", b"ignored\n");
    fs::remove_file(repo.path().join("gone.txt")).unwrap();
    repo.git(&["add", "new.txt"]);
    let before = repo.picture();
    let prepared = repo.prepare("c1");
    assert_eq!(repo.picture(), before);
    assert!(prepared.dirty && prepared.carried);
    assert_ne!(prepared.base, prepared.head);
    let parent = repo.git(&["rev-parse", &format!("{}^", prepared.base)]);
    assert_eq!(parent.trim(), prepared.head.as_str());
    let checkout = repo.checkout_dir("c1");
    assert_eq!(
        fs::read_to_string(checkout.join("a.txt")).unwrap(),
        "a edited\n"
    );
    assert_eq!(
        fs::read_to_string(checkout.join("new.txt")).unwrap(),
        "new\n"
    );
    assert!(!checkout.join("gone.txt").exists());
    assert!(
        !checkout.join("build.log").exists(),
        "ignored files are not carried"
    );
    assert_eq!(git(&checkout, &["status", "--porcelain"]), "");
}

#[test]
fn an_untracked_file_alone_makes_the_workspace_dirty() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    repo.write("untracked.txt", b"u\n");
    let prepared = repo.prepare("c1");
    assert!(prepared.dirty && prepared.carried);
    assert!(repo.checkout_dir("c1").join("untracked.txt").is_file());
}

#[test]
fn a_named_revision_is_checked_out_with_nothing_carried() {
    let repo = Repo::with(&[("a.txt", "one\n")]);
    let first = repo.head();
    repo.write("a.txt", b"two\n");
    repo.commit_all("second");
    repo.write("a.txt", b"three, uncommitted\n");
    let prepared = repo.prepare_with("c1", Base::Revision("HEAD~1".into()), &[], &[]);
    assert_eq!(prepared.base.as_str(), first);
    assert!(prepared.dirty && !prepared.carried);
    let checkout = repo.checkout_dir("c1");
    assert_eq!(fs::read_to_string(checkout.join("a.txt")).unwrap(), "one\n");
}

#[test]
fn a_bad_revision_is_a_typed_error_and_leaves_nothing_behind() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let checkout = repo.checkout_dir("c1");
    let err = prepare(&PrepareRequest {
        workspace: repo.path(),
        checkout: &checkout,
        base: Base::Revision("no-such-branch".into()),
        base_ref: &Repo::base_ref("c1"),
        include: &[],
        shared: &[],
    })
    .unwrap_err();
    assert_eq!(err.code(), "bad_revision");
    assert!(!checkout.exists());
}

#[test]
fn a_non_empty_checkout_directory_is_refused() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let checkout = repo.checkout_dir("c1");
    fs::create_dir_all(&checkout).unwrap();
    fs::write(checkout.join("x"), "x").unwrap();
    let err = prepare(&PrepareRequest {
        workspace: repo.path(),
        checkout: &checkout,
        base: Base::WorkingTree,
        base_ref: &Repo::base_ref("c1"),
        include: &[],
        shared: &[],
    })
    .unwrap_err();
    assert_eq!(err.code(), "checkout_exists");
    assert!(checkout.join("x").exists(), "the directory is left alone");
}

#[test]
fn a_ref_outside_refs_is_refused() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let checkout = repo.checkout_dir("c1");
    let err = prepare(&PrepareRequest {
        workspace: repo.path(),
        checkout: &checkout,
        base: Base::WorkingTree,
        base_ref: "HEAD",
        include: &[],
        shared: &[],
    })
    .unwrap_err();
    assert_eq!(err.code(), "invalid_ref_name");
}

#[test]
fn included_ignored_files_are_copied_with_their_mode_and_hidden_from_status() {
    let repo = Repo::with(&[
        (".gitignore", ".env*\nsecrets/\n*.log\n"),
        (".worktreeinclude", "# comment\n.env\n"),
    ]);
    repo.write(".env", b"KEY=1\n");
    fs::set_permissions(repo.path().join(".env"), fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(".env", repo.path().join(".env.link")).unwrap();
    repo.write("secrets/deep/key.pem", b"pem\n");
    repo.write("build.log", b"not included\n");
    let include = strings(&["secrets/", ".env.link"]);
    let prepared = repo.prepare_with("c1", Base::WorkingTree, &include, &[]);
    let checkout = repo.checkout_dir("c1");
    let mut own = prepared.own_paths.clone();
    own.sort();
    let expected: Vec<std::path::PathBuf> = [".env", ".env.link", "secrets/deep/key.pem"]
        .iter()
        .map(Into::into)
        .collect();
    assert_eq!(own, expected);
    let env = checkout.join(".env");
    assert_eq!(fs::read_to_string(&env).unwrap(), "KEY=1\n");
    assert_eq!(
        fs::metadata(&env).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let link = fs::symlink_metadata(checkout.join(".env.link")).unwrap();
    assert!(
        link.file_type().is_symlink(),
        "a symlink is copied as a symlink"
    );
    assert!(checkout.join("secrets/deep/key.pem").is_file());
    assert!(!checkout.join("build.log").exists());
    assert!(
        !prepared.carried,
        "ignored files do not make the workspace dirty"
    );
    assert_eq!(
        git(
            &checkout,
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        ""
    );
}

#[test]
fn shared_directories_are_links_and_the_status_stays_clean() {
    let repo = Repo::with(&[(".gitignore", "node_modules/\n"), ("web/app.js", "x\n")]);
    repo.write("node_modules/pkg/index.js", b"top\n");
    repo.write("web/node_modules/dep/index.js", b"nested\n");
    let shared = strings(&["node_modules", ".venv"]);
    let prepared = repo.prepare_with("c1", Base::WorkingTree, &[], &shared);
    let checkout = repo.checkout_dir("c1");
    for rel in ["node_modules", "web/node_modules"] {
        let link = checkout.join(rel);
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{rel}"
        );
        assert_eq!(fs::read_link(&link).unwrap(), repo.path().join(rel));
    }
    assert!(!checkout.join(".venv").exists());
    assert_eq!(prepared.own_paths.len(), 2);
    assert_eq!(
        git(
            &checkout,
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        ""
    );
}

#[test]
fn a_directory_that_is_not_ignored_is_not_shared() {
    let repo = Repo::with(&[("node_modules/tracked.js", "t\n")]);
    let prepared = repo.prepare_with("c1", Base::WorkingTree, &[], &strings(&["node_modules"]));
    assert!(prepared.own_paths.is_empty());
    let meta = fs::symlink_metadata(repo.checkout_dir("c1").join("node_modules")).unwrap();
    assert!(meta.is_dir());
}

fn repo_with_submodule() -> (Repo, tempfile::TempDir) {
    let upstream = tempfile::TempDir::new().unwrap();
    git(upstream.path(), &["init", "-q", "-b", "main"]);
    fs::write(upstream.path().join("lib.txt"), "lib\n").unwrap();
    git(upstream.path(), &["add", "-A"]);
    git(upstream.path(), &["commit", "-q", "-m", "lib"]);
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let url = upstream.path().to_str().unwrap();
    repo.git(&["submodule", "add", "-q", url, "vendor/lib"]);
    repo.commit_all("add submodule");
    (repo, upstream)
}

#[test]
fn submodules_are_initialized_in_the_checkout() {
    let (repo, upstream) = repo_with_submodule();
    drop(upstream);
    repo.prepare("c1");
    let checkout = repo.checkout_dir("c1");
    let lib = checkout.join("vendor/lib/lib.txt");
    assert_eq!(fs::read_to_string(lib).unwrap(), "lib\n");
    assert_eq!(git(&checkout, &["status", "--porcelain"]), "");
}

#[test]
fn a_submodule_that_cannot_be_fetched_is_named_and_nothing_is_left() {
    let (repo, upstream) = repo_with_submodule();
    repo.git(&["submodule", "deinit", "-q", "-f", "vendor/lib"]);
    drop(upstream);
    let checkout = repo.checkout_dir("c1");
    let err = prepare(&PrepareRequest {
        workspace: repo.path(),
        checkout: &checkout,
        base: Base::WorkingTree,
        base_ref: &Repo::base_ref("c1"),
        include: &[],
        shared: &[],
    })
    .unwrap_err();
    assert_eq!(err.code(), "submodule_failed");
    assert!(err.to_string().contains("vendor/lib"), "{err}");
    assert!(!checkout.exists());
    let refs = repo.git(&["for-each-ref", "refs/subzero/"]);
    assert_eq!(refs, "", "the base ref is removed again");
}
