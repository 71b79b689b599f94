//! The broker's own paths as anchored gitignore lines, so that neither the child's
//! `git status` nor a recorded change ever shows them.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::CheckoutError;
use super::git::Git;
use super::oid::{path_bytes, path_from_bytes};

/// True when `rel` can be written as one exclude line (no line break in it).
pub(super) fn expressible(rel: &Path) -> bool {
    !path_bytes(rel).iter().any(|b| *b == b'\n' || *b == b'\r')
}

/// One anchored line per path, with gitignore's special characters escaped so each line
/// matches exactly that path.
pub(super) fn anchored_lines(paths: &[PathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    for path in paths.iter().filter(|p| expressible(p)) {
        out.push(b'/');
        for b in path_bytes(path) {
            if matches!(b, b'\\' | b'*' | b'?' | b'[' | b' ' | b'!' | b'#') {
                out.push(b'\\');
            }
            out.push(*b);
        }
        out.push(b'\n');
    }
    out
}

/// Append the lines to the checkout's `.git/info/exclude`.
pub(super) fn append_to_checkout(checkout: &Path, paths: &[PathBuf]) -> Result<(), CheckoutError> {
    if paths.is_empty() {
        return Ok(());
    }
    let info = checkout.join(".git").join("info");
    fs::create_dir_all(&info)
        .map_err(|e| CheckoutError::io(format!("creating {}", info.display()), e))?;
    let file = info.join("exclude");
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .map_err(|e| CheckoutError::io(format!("opening {}", file.display()), e))?;
    out.write_all(&anchored_lines(paths))
        .map_err(|e| CheckoutError::io(format!("writing {}", file.display()), e))
}

/// The user's global excludes file (`core.excludesFile`, else git's XDG default), so a
/// file the user's git ignores everywhere is not recorded as a child's change either.
pub(super) fn user_excludes(workdir: &Path) -> Result<Vec<u8>, CheckoutError> {
    let out =
        Git::at(workdir).run_allowing(&["config", "--path", "--get", "core.excludesFile"], 1)?;
    let unset = String::from_utf8_lossy(&out.stdout).trim().is_empty();
    let path = if unset {
        default_excludes_file()
    } else {
        let raw = out.stdout.strip_suffix(b"\n").unwrap_or(&out.stdout);
        Some(path_from_bytes(raw))
    };
    Ok(path.and_then(|p| fs::read(p).ok()).unwrap_or_default())
}

fn default_excludes_file() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(xdg) => PathBuf::from(xdg),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some(base.join("git").join("ignore"))
}
