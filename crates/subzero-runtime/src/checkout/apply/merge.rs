//! The three-way merge, computed off to the side with `git merge-tree --write-tree`: no
//! index, no working tree, only new objects.

use super::{ConflictPath, ConflictReason};
use crate::checkout::error::CheckoutError;
use crate::checkout::git::Git;
use crate::checkout::oid::{Oid, path_from_bytes};

/// The merge's outcome.
#[derive(Debug)]
pub(super) enum Merged {
    /// The merged tree.
    Clean(Oid),
    /// Every conflicted path, with why.
    Conflicted(Vec<ConflictPath>),
}

/// Merge `theirs` into `ours` with `base` as the merge base.
pub(super) fn merge_tree(
    git: &Git,
    base: &Oid,
    ours: &Oid,
    theirs: &Oid,
) -> Result<Merged, CheckoutError> {
    let merge_base = format!("--merge-base={base}");
    let args = [
        "merge-tree",
        "--write-tree",
        "--name-only",
        "-z",
        &merge_base,
        ours.as_str(),
        theirs.as_str(),
    ];
    let out = git.run_allowing(&args, 1)?;
    let mut records = out.stdout.split(|b| *b == 0);
    let tree = Oid::parse(records.next().unwrap_or_default(), "merge-tree")?;
    if out.code == Some(0) {
        return Ok(Merged::Clean(tree));
    }
    let paths: Vec<&[u8]> = records.by_ref().take_while(|r| !r.is_empty()).collect();
    let reasons = reasons_from_messages(records)?;
    let conflicts = paths
        .into_iter()
        .map(|p| ConflictPath {
            path: path_from_bytes(p),
            reason: reasons
                .iter()
                .filter(|(path, _)| *path == p)
                .map(|(_, reason)| reason.clone())
                .max_by_key(ConflictReason::rank)
                .unwrap_or(ConflictReason::EditedOnBothSides),
        })
        .collect();
    Ok(Merged::Conflicted(conflicts))
}

/// The informational section: `<count>\0<path>…\0<type>\0<message>\0`, repeated. Each
/// `CONFLICT (…)` type becomes a reason for each path it names.
fn reasons_from_messages<'a>(
    mut records: impl Iterator<Item = &'a [u8]>,
) -> Result<Vec<(&'a [u8], ConflictReason)>, CheckoutError> {
    let mut reasons = Vec::new();
    while let Some(count) = records.next() {
        if count.is_empty() {
            break;
        }
        let count: usize = std::str::from_utf8(count)
            .ok()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| {
                CheckoutError::unparsed("merge-tree", "a message without a path count")
            })?;
        let paths: Vec<&[u8]> = records.by_ref().take(count).collect();
        let kind = String::from_utf8_lossy(records.next().unwrap_or_default()).into_owned();
        records.next();
        if let Some(reason) = reason_of(&kind) {
            reasons.extend(paths.into_iter().map(|p| (p, reason.clone())));
        }
    }
    Ok(reasons)
}

fn reason_of(kind: &str) -> Option<ConflictReason> {
    let inner = kind.strip_prefix("CONFLICT (")?.strip_suffix(')')?;
    Some(match inner {
        "binary" => ConflictReason::Binary,
        "modify/delete" | "rename/delete" => ConflictReason::DeletedOnOneSide,
        "contents" | "add/add" => ConflictReason::EditedOnBothSides,
        other => ConflictReason::Other(other.to_owned()),
    })
}
