//! One release archive per target: `subzero-<version>-<machine>-linux-musl.tar.gz` holding a
//! directory of that name with the three binaries, the licences and a short README; and
//! `SHA256SUMS` over every archive. Built with `tar` and `gzip -n` in name order, owner root
//! and the time of the commit, so the same binaries give the same bytes.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{BINARIES, Target, VERSION, copy};

/// The licence files every artifact carries (the workspace is `MIT OR Apache-2.0`).
pub const LICENCES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

/// Writes `out/<stem>.tar.gz` from the binaries in `bin_dir`; its path.
pub fn write(
    root: &Path,
    target: Target,
    bin_dir: &Path,
    out: &Path,
) -> Result<PathBuf, Vec<String>> {
    let stem = target.archive_stem();
    let staging = out.join(&stem);
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|e| vec![format!("cannot create {staging:?}: {e}")])?;
    for name in BINARIES {
        copy(&bin_dir.join(name), &staging.join(name))?;
    }
    for name in LICENCES {
        copy(&root.join(name), &staging.join(name))?;
    }
    let readme = readme(target);
    std::fs::write(staging.join("README.md"), readme)
        .map_err(|e| vec![format!("cannot write the archive's README: {e}")])?;
    let archive = out.join(format!("{stem}.tar.gz"));
    let script = format!(
        "tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@{mtime} -cf - {stem} \
         | gzip -9n > {stem}.tar.gz",
        mtime = commit_time(root),
    );
    crate::test::run(
        Command::new("sh").args(["-c", &script]).current_dir(out),
        &format!("tar of {stem}"),
    )?;
    Ok(archive)
}

/// `out/SHA256SUMS` over every `*.tar.gz` in `out`, in `sha256sum --check`'s format.
pub fn checksums(out: &Path) -> Result<(), Vec<String>> {
    crate::test::run(
        Command::new("sh")
            .args(["-c", "sha256sum -- *.tar.gz > SHA256SUMS"])
            .current_dir(out),
        "sha256sum of the archives",
    )
}

/// The archive's README: what is in it, how to put it on `PATH`, how a host starts it.
fn readme(target: Target) -> String {
    format!(
        "# Subzero {VERSION} for {machine} Linux\n\n\
         A local MCP stdio broker that lets a coding agent delegate work to persistent child\n\
         agents. Static binaries (musl): they run on any Linux distribution.\n\n\
         - `subzero` — the broker and command line (`subzero mcp`, `subzero doctor`, …)\n\
         - `subzero-worker`, `subzero-hold` — started by `subzero` for each child, from\n  \
           beside itself: keep the three in one directory.\n\n\
         Put the directory on `PATH` (or copy the three files into one that is), then in a\n\
         project: `subzero doctor` checks the machine, `subzero hosts install codex` (or\n\
         claude-code, opencode, pi) adds Subzero to a host. Licensed MIT OR Apache-2.0\n\
         (LICENSE-MIT, LICENSE-APACHE). https://github.com/subzero-mcp/subzero\n",
        machine = target.machine()
    )
}

/// The committer time of `HEAD` (seconds), or 0 outside a repository: the archive's mtime.
fn commit_time(root: &Path) -> u64 {
    Command::new("git")
        .args(["log", "-1", "--format=%ct"])
        .current_dir(root)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}
