//! Ignored files the user wants in every checkout (`.env` and the like), named by
//! gitignore-style patterns in `.worktreeinclude` (Claude Code's file) and in config.

use std::ffi::OsStr;
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::error::CheckoutError;
use super::exclude::expressible;
use super::git::Git;
use super::oid::{nul_records, path_bytes, path_from_bytes};
use super::placing::copy_entry;

/// The file at the workspace root whose lines are include patterns.
pub const INCLUDE_FILE: &str = ".worktreeinclude";

/// Copy into `checkout` every file that the workspace's git ignores and an include
/// pattern matches; the relative paths placed.
pub(super) fn copy_included(
    workdir: &Path,
    checkout: &Path,
    extra: &[String],
) -> Result<Vec<PathBuf>, CheckoutError> {
    let patterns = patterns(workdir, extra)?;
    if patterns.is_empty() {
        return Ok(Vec::new());
    }
    let mut placed = Vec::new();
    for rel in included_files(workdir, &patterns)? {
        if expressible(&rel) && copy_entry(workdir, checkout, &rel)? {
            placed.push(rel);
        }
    }
    Ok(placed)
}

/// The pattern lines: the include file's, then the caller's. Blank lines and comments
/// are dropped, so "no patterns" costs no git call.
fn patterns(workdir: &Path, extra: &[String]) -> Result<Vec<String>, CheckoutError> {
    let file = workdir.join(INCLUDE_FILE);
    let text = match fs::read(&file) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == ErrorKind::NotFound => String::new(),
        Err(e) => return Err(CheckoutError::io(format!("reading {}", file.display()), e)),
    };
    let lines = text.lines().map(str::to_owned).chain(extra.iter().cloned());
    Ok(lines
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect())
}

/// Untracked files matching the patterns that the workspace's own rules ignore.
fn included_files(workdir: &Path, patterns: &[String]) -> Result<Vec<PathBuf>, CheckoutError> {
    let mut file = tempfile::NamedTempFile::new()
        .map_err(|e| CheckoutError::io("creating a temporary pattern file", e))?;
    file.write_all(patterns.join("\n").as_bytes())
        .map_err(|e| CheckoutError::io("writing a temporary pattern file", e))?;
    let mut from = std::ffi::OsString::from("--exclude-from=");
    from.push(file.path());
    let git = Git::at(workdir);
    let args: [&OsStr; 5] = [
        "ls-files".as_ref(),
        "-z".as_ref(),
        "-o".as_ref(),
        "-i".as_ref(),
        &from,
    ];
    let matching = git.run(&args)?;
    if matching.is_empty() {
        return Ok(Vec::new());
    }
    let ignored = git.run_allowing_with_input(&["check-ignore", "-z", "--stdin"], &matching, 1)?;
    Ok(nul_records(&ignored.stdout)
        .map(path_from_bytes)
        .filter(|p| !path_bytes(p).is_empty())
        .collect())
}
