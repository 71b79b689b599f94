//! What a change touched, file by file, from `git diff-tree -z` (paths as raw bytes, so
//! spaces, newlines and non-UTF-8 names survive).

use std::path::PathBuf;

use super::error::CheckoutError;
use super::git::Git;
use super::oid::{Oid, nul_records, path_from_bytes};

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    /// New in the change.
    Added,
    /// Content, mode or type changed.
    Modified,
    /// Gone in the change.
    Deleted,
    /// Moved (possibly also edited); `old_path` says from where.
    Renamed,
}

impl FileStatus {
    /// A stable name: `added`, `modified`, `deleted`, `renamed`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Added => "added",
            FileStatus::Modified => "modified",
            FileStatus::Deleted => "deleted",
            FileStatus::Renamed => "renamed",
        }
    }
}

/// One file of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    /// The path after the change (for a deletion, the path deleted). Lossless bytes.
    pub path: PathBuf,
    /// For a rename, the path before.
    pub old_path: Option<PathBuf>,
    /// How it changed.
    pub status: FileStatus,
    /// Git sees the file as binary (no line counts).
    pub binary: bool,
    /// Lines added (0 for binary).
    pub insertions: u64,
    /// Lines removed (0 for binary).
    pub deletions: u64,
}

/// A recorded change: a commit on the child's base and its summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The commit holding the change (parent: the base).
    pub head: Oid,
    /// How many files changed.
    pub files_changed: usize,
    /// Lines added, over all text files.
    pub insertions: u64,
    /// Lines removed, over all text files.
    pub deletions: u64,
    /// Each file, in git's order.
    pub files: Vec<ChangedFile>,
}

/// Summarize `base..head` (renames detected).
pub(super) fn describe(git: &Git, base: &Oid, head: &Oid) -> Result<Change, CheckoutError> {
    let diff = |format: &str| {
        git.run(&[
            "diff-tree",
            "-r",
            "-z",
            "-M",
            format,
            base.as_str(),
            head.as_str(),
        ])
    };
    let statuses = parse_name_status(&diff("--name-status")?)?;
    let counts = parse_numstat(&diff("--numstat")?)?;
    if statuses.len() != counts.len() {
        return Err(CheckoutError::unparsed(
            "diff-tree",
            "--name-status and --numstat listed different numbers of files",
        ));
    }
    let files: Vec<ChangedFile> = statuses
        .into_iter()
        .zip(counts)
        .map(|((status, path, old_path), count)| ChangedFile {
            path,
            old_path,
            status,
            binary: count.is_none(),
            insertions: count.map_or(0, |c| c.0),
            deletions: count.map_or(0, |c| c.1),
        })
        .collect();
    Ok(Change {
        head: head.clone(),
        files_changed: files.len(),
        insertions: files.iter().map(|f| f.insertions).sum(),
        deletions: files.iter().map(|f| f.deletions).sum(),
        files,
    })
}

type Named = (FileStatus, PathBuf, Option<PathBuf>);

/// `STATUS\0path\0`, or `R<score>\0old\0new\0`.
fn parse_name_status(out: &[u8]) -> Result<Vec<Named>, CheckoutError> {
    let mut records = nul_records(out);
    let mut files = Vec::new();
    let missing = || CheckoutError::unparsed("diff-tree", "a status without its path");
    while let Some(token) = records.next() {
        let path = records.next().ok_or_else(missing)?;
        let status = match token.first() {
            Some(b'A') => FileStatus::Added,
            Some(b'D') => FileStatus::Deleted,
            Some(b'R') => FileStatus::Renamed,
            Some(b'M' | b'T') => FileStatus::Modified,
            _ => {
                let seen = String::from_utf8_lossy(token).into_owned();
                return Err(CheckoutError::unparsed(
                    "diff-tree",
                    format!("status `{seen}`"),
                ));
            }
        };
        if status == FileStatus::Renamed {
            let new = records.next().ok_or_else(missing)?;
            files.push((status, path_from_bytes(new), Some(path_from_bytes(path))));
        } else {
            files.push((status, path_from_bytes(path), None));
        }
    }
    Ok(files)
}

/// `added\tdeleted\tpath\0`, or `added\tdeleted\t\0old\0new\0`; `-\t-` for binary.
fn parse_numstat(out: &[u8]) -> Result<Vec<Option<(u64, u64)>>, CheckoutError> {
    let mut records = nul_records(out);
    let mut counts = Vec::new();
    while let Some(token) = records.next() {
        let mut fields = token.splitn(3, |b| *b == b'\t');
        let (Some(added), Some(deleted), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(CheckoutError::unparsed(
                "diff-tree",
                "a --numstat line without tabs",
            ));
        };
        if path.is_empty() {
            // A rename: the two paths follow as their own records.
            records.next();
            records.next();
        }
        counts.push(match (number(added), number(deleted)) {
            (Some(a), Some(d)) => Some((a, d)),
            _ => None,
        });
    }
    Ok(counts)
}

fn number(field: &[u8]) -> Option<u64> {
    std::str::from_utf8(field).ok()?.parse().ok()
}
