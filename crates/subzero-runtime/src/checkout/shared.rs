//! Heavy ignored directories (`node_modules`, `.venv`) shared with the workspace by a
//! symlink instead of copied. The child cannot write through the link (Landlock keeps the
//! workspace read-only); removing the checkout removes only the link.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::CheckoutError;
use super::git::Git;
use super::oid::{nul_records, path_bytes, path_from_bytes};
use super::placing::link_entry;

/// Link into `checkout` each ignored directory of the workspace that `wanted` names: an
/// entry with a `/` is a path from the root, one without is a directory name matched at
/// any depth. The relative paths linked.
pub(super) fn link_shared(
    workdir: &Path,
    checkout: &Path,
    wanted: &[String],
) -> Result<Vec<PathBuf>, CheckoutError> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let mut linked: Vec<PathBuf> = Vec::new();
    for dir in ignored_dirs(workdir)? {
        let inside_linked = linked.iter().any(|l| dir.starts_with(l));
        if inside_linked || !is_wanted(&dir, wanted) || !is_real_dir(&workdir.join(&dir)) {
            continue;
        }
        if link_entry(workdir, checkout, &dir)? {
            linked.push(dir);
        }
    }
    Ok(linked)
}

fn is_wanted(dir: &Path, wanted: &[String]) -> bool {
    wanted.iter().any(|w| {
        let w = w.trim_matches('/');
        if w.contains('/') {
            dir == Path::new(w)
        } else {
            dir.file_name().is_some_and(|name| name == w)
        }
    })
}

fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Ignored directories, outermost first; git does not descend into them to list them.
fn ignored_dirs(workdir: &Path) -> Result<Vec<PathBuf>, CheckoutError> {
    let out = Git::at(workdir).run(&[
        "ls-files",
        "-z",
        "-o",
        "-i",
        "--exclude-standard",
        "--directory",
    ])?;
    let mut dirs: Vec<PathBuf> = nul_records(&out)
        .filter_map(|r| r.strip_suffix(b"/"))
        .map(path_from_bytes)
        .collect();
    dirs.sort_by(|a, b| path_bytes(a).len().cmp(&path_bytes(b).len()).then(a.cmp(b)));
    Ok(dirs)
}
