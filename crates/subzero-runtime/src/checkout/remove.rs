//! Removing a checkout, and measuring what it takes on disk. Neither ever follows a
//! symlink: a shared `node_modules` link is removed (or counted) as a link.

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::error::CheckoutError;
use super::git::Git;
use super::refs::delete_ref;

/// Delete the checkout directory (a half-created or missing one is fine), then the refs
/// the caller names in the workspace's repository (`refs/subzero/base/<id>`, …).
pub fn remove(workspace: &Path, checkout: &Path, refs: &[&str]) -> Result<(), CheckoutError> {
    remove_tree(checkout)?;
    let git = Git::at(workspace);
    for name in refs {
        delete_ref(&git, name)?;
    }
    Ok(())
}

/// Bytes actually allocated under `dir` (`st_blocks * 512`), each inode counted once,
/// symlinks counted as links. A missing directory takes 0.
pub fn disk_usage(dir: &Path) -> Result<u64, CheckoutError> {
    let mut seen = HashSet::new();
    usage_of(dir, &mut seen)
}

fn usage_of(path: &Path, seen: &mut HashSet<(u64, u64)>) -> Result<u64, CheckoutError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(CheckoutError::io(format!("reading {}", path.display()), e)),
    };
    if !seen.insert((meta.dev(), meta.ino())) {
        return Ok(0);
    }
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        for entry in read_dir(path)? {
            total += usage_of(&entry, seen)?;
        }
    }
    Ok(total)
}

/// Remove `dir` and everything in it without following symlinks; directories a child
/// made unwritable are made writable first. A missing `dir` is fine; a symlink or file
/// at `dir` is removed itself.
pub(super) fn remove_tree(dir: &Path) -> Result<(), CheckoutError> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(CheckoutError::io(format!("reading {}", dir.display()), e)),
        Ok(meta) if !meta.is_dir() => {
            return fs::remove_file(dir)
                .map_err(|e| CheckoutError::io(format!("removing {}", dir.display()), e));
        }
        Ok(_) => {}
    }
    // std's `remove_dir_all` opens each directory without following symlinks.
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            make_dirs_writable(dir)?;
            fs::remove_dir_all(dir)
                .map_err(|e| CheckoutError::io(format!("removing {}", dir.display()), e))
        }
        Err(e) => Err(CheckoutError::io(format!("removing {}", dir.display()), e)),
    }
}

fn make_dirs_writable(dir: &Path) -> Result<(), CheckoutError> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => meta,
        _ => return Ok(()),
    };
    if meta.permissions().mode() & 0o700 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| CheckoutError::io(format!("making {} writable", dir.display()), e))?;
    }
    for entry in read_dir(dir)? {
        make_dirs_writable(&entry)?;
    }
    Ok(())
}

fn read_dir(dir: &Path) -> Result<Vec<std::path::PathBuf>, CheckoutError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CheckoutError::io(format!("reading {}", dir.display()), e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| CheckoutError::io(format!("reading {}", dir.display()), e))?;
        paths.push(entry.path());
    }
    Ok(paths)
}
