//! Naming the processes that keep a lock file open, for `doctor` and `get`.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A process with an open descriptor on a lock file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LockHolder {
    /// The process id.
    pub pid: u32,
    /// `/proc/<pid>/comm`, or empty when unreadable.
    pub command: String,
}

/// Every process (visible to this user) with a descriptor open on `lock_path`, found
/// by scanning `/proc/*/fd` and comparing device and inode. Processes whose `fd`
/// directory is unreadable are skipped, so the list may be incomplete, never wrong.
pub fn holders(lock_path: &Path) -> Vec<LockHolder> {
    let Ok(target) = std::fs::metadata(lock_path) else {
        return Vec::new();
    };
    let key = (target.dev(), target.ino());
    holders_by_inode(vec![key]).remove(&key).unwrap_or_default()
}

/// Processes with a descriptor open on any of `targets` (device, inode), from one scan
/// of `/proc`. Unreadable processes are skipped: the list may be incomplete, never wrong.
pub fn holders_by_inode(targets: Vec<(u64, u64)>) -> HashMap<(u64, u64), Vec<LockHolder>> {
    let mut found: HashMap<(u64, u64), Vec<LockHolder>> = HashMap::new();
    if targets.is_empty() {
        return found;
    }
    for (pid, dir) in subzero_sys::procfs::pids() {
        let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
            continue;
        };
        let mut hit: Vec<(u64, u64)> = Vec::new();
        for fd in fds.flatten() {
            if let Ok(m) = std::fs::metadata(fd.path()) {
                let key = (m.dev(), m.ino());
                if targets.contains(&key) && !hit.contains(&key) {
                    hit.push(key);
                }
            }
        }
        if hit.is_empty() {
            continue;
        }
        let command = std::fs::read_to_string(dir.join("comm"))
            .map(|c| c.trim_end().to_owned())
            .unwrap_or_default();
        for key in hit {
            found.entry(key).or_default().push(LockHolder {
                pid,
                command: command.clone(),
            });
        }
    }
    for holders in found.values_mut() {
        holders.sort_by_key(|h| h.pid);
    }
    found
}
