//! Placing files the broker owns into a checkout (included copies, shared links) without
//! ever writing through a symlink: every directory on the way must be a real directory.

use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use super::error::CheckoutError;

/// True when `rel` is a plain relative path (no root, `.` or `..`), as git prints them.
pub(super) fn is_plain_relative(rel: &Path) -> bool {
    rel.components().all(|c| matches!(c, Component::Normal(_))) && !rel.as_os_str().is_empty()
}

/// Create the directories of `rel_dir` under `root` as needed. `false` when something on
/// the way is not a real directory (a symlink, a file): nothing may be placed there.
pub(super) fn ensure_real_dirs(root: &Path, rel_dir: &Path) -> Result<bool, CheckoutError> {
    let mut at = root.to_path_buf();
    for part in rel_dir.components() {
        at.push(part);
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == ErrorKind::NotFound => fs::create_dir(&at)
                .map_err(|e| CheckoutError::io(format!("creating {}", at.display()), e))?,
            Err(e) => return Err(CheckoutError::io(format!("reading {}", at.display()), e)),
        }
    }
    Ok(true)
}

/// Where `rel` would be placed under `root`, or `None` when it must not be: its parent
/// cannot be made a real directory, or something is already there.
pub(super) fn free_slot(root: &Path, rel: &Path) -> Result<Option<PathBuf>, CheckoutError> {
    if !is_plain_relative(rel) {
        return Ok(None);
    }
    let parent = rel.parent().unwrap_or(Path::new(""));
    if !ensure_real_dirs(root, parent)? {
        return Ok(None);
    }
    let dest = root.join(rel);
    match fs::symlink_metadata(&dest) {
        Ok(_) => Ok(None),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Some(dest)),
        Err(e) => Err(CheckoutError::io(format!("reading {}", dest.display()), e)),
    }
}

/// Copy `rel` from `from` to `to`: a regular file with its mode, a symlink as a symlink
/// (never followed). `false` when it was not placed (not a file or link, or no free slot).
pub(super) fn copy_entry(from: &Path, to: &Path, rel: &Path) -> Result<bool, CheckoutError> {
    let src = from.join(rel);
    let meta = fs::symlink_metadata(&src)
        .map_err(|e| CheckoutError::io(format!("reading {}", src.display()), e))?;
    if !meta.is_file() && !meta.file_type().is_symlink() {
        return Ok(false);
    }
    let Some(dest) = free_slot(to, rel)? else {
        return Ok(false);
    };
    let copy_error = |e| {
        CheckoutError::io(
            format!("copying {} to {}", src.display(), dest.display()),
            e,
        )
    };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(&src).map_err(copy_error)?;
        std::os::unix::fs::symlink(target, &dest).map_err(copy_error)?;
    } else {
        // `fs::copy` copies the permission bits too.
        fs::copy(&src, &dest).map_err(copy_error)?;
    }
    Ok(true)
}

/// Make `rel` under `to` a symlink to the same path under `from` (an absolute target).
pub(super) fn link_entry(from: &Path, to: &Path, rel: &Path) -> Result<bool, CheckoutError> {
    let Some(dest) = free_slot(to, rel)? else {
        return Ok(false);
    };
    std::os::unix::fs::symlink(from.join(rel), &dest)
        .map_err(|e| CheckoutError::io(format!("linking {}", dest.display()), e))?;
    Ok(true)
}
