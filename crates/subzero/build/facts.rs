//! Build facts every binary of the package reports (`--version`, `subzero_info.build`,
//! `subzero doctor`): the commit it was built from and the target triple.
//!
//! The commit is `git rev-parse HEAD` of the checkout being built, else the `sha1` of
//! `.cargo_vcs_info.json` that `cargo package` writes (a build from a registry), else
//! `unknown`. The script re-runs when the checkout's HEAD moves (a commit, a checkout).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Sets `SUBZERO_TARGET`, `SUBZERO_COMMIT` and `SUBZERO_COMMIT_SHORT` (12 digits) for the
/// package's binaries.
pub fn emit() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_owned());
    println!("cargo:rustc-env=SUBZERO_TARGET={target}");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = git_commit(&manifest)
        .or_else(|| packaged_commit(&manifest))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=SUBZERO_COMMIT={commit}");
    let short = commit.get(..12).unwrap_or(&commit);
    println!("cargo:rustc-env=SUBZERO_COMMIT_SHORT={short}");
}

/// The checkout's HEAD, watching the files that move it.
fn git_commit(dir: &Path) -> Option<String> {
    let git_dir = git(dir, &["rev-parse", "--absolute-git-dir"])?;
    let git_dir = PathBuf::from(git_dir);
    // Only files that exist: cargo re-runs a script on every build for a missing one.
    let mut watched = vec![git_dir.join("HEAD"), git_dir.join("packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git_dir.join(branch));
    }
    for file in watched.iter().filter(|f| f.is_file()) {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let commit = git(dir, &["rev-parse", "HEAD"])?;
    (commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit())).then_some(commit)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The commit `cargo package` recorded, for a build of a published package.
fn packaged_commit(dir: &Path) -> Option<String> {
    let info = dir.join(".cargo_vcs_info.json");
    let text = std::fs::read_to_string(&info).ok()?;
    println!("cargo:rerun-if-changed={}", info.display());
    let at = text.find("\"sha1\"")?;
    let rest = &text[at + 6..];
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    Some(rest[start..start + len].to_owned())
}
