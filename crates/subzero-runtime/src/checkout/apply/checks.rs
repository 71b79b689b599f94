//! What in the workspace blocks an apply before any merge: uncommitted changes (working
//! tree or index) and untracked or ignored files on the paths the change touches.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use super::{ConflictPath, ConflictReason};
use crate::checkout::error::CheckoutError;
use crate::checkout::git::Git;
use crate::checkout::oid::{Oid, nul_records, path_from_bytes};

/// Refuse with a [`CheckoutError::Conflict`] naming every blocked path of `touched`.
pub(super) fn refuse_blocked(
    git: &Git,
    workdir: &Path,
    head: &Oid,
    touched: &BTreeSet<Vec<u8>>,
) -> Result<(), CheckoutError> {
    if touched.is_empty() {
        return Ok(());
    }
    let dirty = uncommitted_paths(git)?;
    let tracked = tracked_paths(git, head)?;
    let mut paths = Vec::new();
    for path in touched {
        let reason = if dirty.contains(path) {
            ConflictReason::UncommittedChanges
        } else if !tracked.contains(path) && exists(workdir, path) {
            ConflictReason::UntrackedInTheWay
        } else {
            continue;
        };
        paths.push(ConflictPath {
            path: path_from_bytes(path),
            reason,
        });
    }
    if paths.is_empty() {
        Ok(())
    } else {
        Err(CheckoutError::Conflict { paths })
    }
}

/// Paths with staged or unstaged changes, from `git status --porcelain=v2 -z`.
fn uncommitted_paths(git: &Git) -> Result<HashSet<Vec<u8>>, CheckoutError> {
    let out = git.run(&[
        "status",
        "--porcelain=v2",
        "-z",
        "--untracked-files=no",
        "--ignore-submodules=none",
    ])?;
    let mut paths = HashSet::new();
    let mut records = nul_records(&out);
    while let Some(record) = records.next() {
        // Fields before the path: `1` has 8, `2` has 9 (and its original path follows
        // as the next record), `u` has 10.
        let fields = match record.first() {
            Some(b'1') => 8,
            Some(b'2') => 9,
            Some(b'u') => 10,
            _ => continue,
        };
        if let Some(path) = record.splitn(fields + 1, |b| *b == b' ').nth(fields) {
            paths.insert(path.to_vec());
        }
        if record.first() == Some(&b'2')
            && let Some(original) = records.next()
        {
            paths.insert(original.to_vec());
        }
    }
    Ok(paths)
}

/// Every path in `head`'s tree.
fn tracked_paths(git: &Git, head: &Oid) -> Result<HashSet<Vec<u8>>, CheckoutError> {
    let out = git.run(&[
        "ls-tree",
        "-r",
        "-z",
        "--name-only",
        "--full-tree",
        head.as_str(),
    ])?;
    Ok(nul_records(&out).map(<[u8]>::to_vec).collect())
}

fn exists(workdir: &Path, path: &[u8]) -> bool {
    std::fs::symlink_metadata(workdir.join(path_from_bytes(path))).is_ok()
}
