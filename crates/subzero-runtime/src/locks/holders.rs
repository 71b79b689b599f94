//! Naming the processes that keep a lock file open, for `doctor` and `get`.

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
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::metadata(fd.path())
                .is_ok_and(|m| m.dev() == target.dev() && m.ino() == target.ino())
        });
        if holds {
            let command = std::fs::read_to_string(entry.path().join("comm"))
                .map(|c| c.trim_end().to_owned())
                .unwrap_or_default();
            found.push(LockHolder { pid, command });
        }
    }
    found.sort_by_key(|h| h.pid);
    found
}
