//! The worker implementations a template may name, and where the Pi SDK worker is installed.
//!
//! The Rust worker is `subzero-worker worker`. The Pi worker is that executable too
//! (`subzero-worker worker --engine pi`, the init that confines it) plus Node running the folder
//! `workers/pi` after `npm ci` there. The folder is `[workers.pi] dir`, else the first
//! `workers/pi` found in the executable's directory or one of its parents (a checkout's
//! `target/debug/subzero` finds the checkout's); Node is `[workers.pi] node`, else the one
//! `npm ci` installed into the folder (`node_modules/node/bin/node`), else `node` on PATH —
//! 22.19 or later.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::PiWorkerConfig;

/// The Node version Pi 1.x needs at least.
pub const MIN_NODE: (u32, u32) = (22, 19);

/// The package the worker runs on (its presence means `npm ci` ran).
const PI_PACKAGE: &str = "node_modules/@earendil-works/pi-coding-agent/package.json";

/// The command that installs the Pi worker, as messages name it.
pub const INSTALL_HINT: &str = "run `npm ci --prefix workers/pi` in the Subzero checkout, or set `[workers.pi] dir` (and `node`) in the config";

/// A Pi worker ready to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PiInstall {
    /// Its folder.
    pub dir: PathBuf,
    /// The Node that runs it.
    pub node: PathBuf,
}

impl PiInstall {
    /// The worker arguments that make `subzero-worker worker` this worker's init.
    pub fn engine_args(&self) -> Vec<OsString> {
        vec![
            "--engine".into(),
            "pi".into(),
            "--pi-dir".into(),
            self.dir.clone().into(),
            "--pi-node".into(),
            self.node.clone().into(),
        ]
    }
}

/// Where the Pi worker is, or why it cannot run here and how to fix it.
pub fn locate_pi(config: &PiWorkerConfig, exe: &Path) -> Result<PiInstall, String> {
    let dir = match &config.dir {
        Some(dir) => {
            if !dir.join(PI_PACKAGE).is_file() {
                return Err(format!(
                    "the Pi worker is not installed in {} ([workers.pi] dir): no node_modules with Pi; run `npm ci --prefix {}`",
                    dir.display(),
                    dir.display()
                ));
            }
            dir.clone()
        }
        None => default_dir(exe).ok_or_else(|| {
            format!(
                "the Pi worker is not installed: no workers/pi with node_modules next to {} or above it; {INSTALL_HINT}",
                exe.display()
            )
        })?,
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let node = match &config.node {
        Some(node) => node.clone(),
        None => {
            let bundled = dir.join("node_modules/node/bin/node");
            if bundled.is_file() {
                bundled
            } else {
                PathBuf::from("node")
            }
        }
    };
    check_node(&node)?;
    Ok(PiInstall { dir, node })
}

/// The first `workers/pi` with Pi installed in `exe`'s directory or above it.
fn default_dir(exe: &Path) -> Option<PathBuf> {
    let exe = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    exe.ancestors()
        .skip(1)
        .map(|dir| dir.join("workers/pi"))
        .find(|dir| dir.join(PI_PACKAGE).is_file())
}

/// `node` runs and is at least [`MIN_NODE`].
fn check_node(node: &Path) -> Result<(), String> {
    let output = Command::new(node)
        .arg("--version")
        .env_clear()
        .output()
        .map_err(|e| {
            format!(
                "the Pi worker's Node ({}) cannot run: {e}; {INSTALL_HINT}",
                node.display()
            )
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = parse_node_version(text.trim()).ok_or_else(|| {
        format!(
            "the Pi worker's Node ({}) printed no version; {INSTALL_HINT}",
            node.display()
        )
    })?;
    if (version.0, version.1) < MIN_NODE {
        return Err(format!(
            "the Pi worker needs Node {}.{} or later but {} is {}; {INSTALL_HINT}",
            MIN_NODE.0,
            MIN_NODE.1,
            node.display(),
            text.trim()
        ));
    }
    Ok(())
}

/// `v22.23.3` → `(22, 23)`.
pub fn parse_node_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.strip_prefix('v')?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Bytes on disk beneath `path` (files only; links not followed).
pub fn installed_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_versions_are_read_and_compared() {
        assert_eq!(parse_node_version("v22.23.3"), Some((22, 23)));
        assert_eq!(parse_node_version("v20.20.2"), Some((20, 20)));
        assert_eq!(parse_node_version("22.1"), None);
        assert!((20, 20) < MIN_NODE && (22, 19) >= MIN_NODE);
    }

    #[test]
    fn a_folder_without_npm_ci_is_refused_naming_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = PiWorkerConfig {
            dir: Some(dir.path().to_path_buf()),
            node: None,
        };
        let err = locate_pi(&config, Path::new("/nonexistent/subzero")).expect_err("refused");
        assert!(err.contains("npm ci --prefix"), "{err}");
    }
}
