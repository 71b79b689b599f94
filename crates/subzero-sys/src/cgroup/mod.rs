//! One cgroup directory and what the broker, the worker and the lock holder do with it: make
//! it, write a limit, move a process in through `cgroup.procs` ([`join`], between fork and
//! exec), list its members, ask the kernel whether anything still lives in it, kill it whole
//! with `cgroup.kill` (Linux ≥ 5.14), remove it. Where a process's own cgroup is found is
//! [`find`]. What to make, where and when is the callers' policy.

pub mod find;

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long [`Cgroup::remove`] retries a cgroup whose last process is still being released.
const RELEASE: Duration = Duration::from_millis(200);

/// One cgroup directory (v2, or a v1 controller's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// The cgroup at `dir` (made or not).
    pub fn at(dir: &Path) -> Cgroup {
        Cgroup {
            dir: dir.to_path_buf(),
        }
    }

    /// Its child cgroup `name`.
    pub fn child(&self, name: &str) -> Cgroup {
        Cgroup {
            dir: self.dir.join(name),
        }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Makes it; one that exists already is refused (`AlreadyExists`).
    pub fn create(&self) -> io::Result<()> {
        std::fs::create_dir(&self.dir)
    }

    /// Whether it has `file` (`cgroup.kill`, `pids.max`, …): what its kernel and
    /// controllers offer.
    pub fn has(&self, file: &str) -> bool {
        self.file(file).exists()
    }

    /// Writes `value` into its limit file `file` (`pids.max`, `memory.limit_in_bytes`); the
    /// error names the file.
    pub fn set_limit(&self, file: &str, value: u64) -> io::Result<()> {
        std::fs::write(self.file(file), value.to_string()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot set {}/{file}: {e}", self.dir.display()),
            )
        })
    }

    /// `cgroup.procs`, open for writing and close-on-exec: writing `0` to it moves the
    /// writing process in ([`join`]).
    pub fn procs_for_joining(&self) -> io::Result<OwnedFd> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.file("cgroup.procs"))
            .map(OwnedFd::from)
    }

    /// SIGKILLs every process of this cgroup and its descendants at once (`cgroup.kill`).
    pub fn kill(&self) -> io::Result<()> {
        std::fs::write(self.file("cgroup.kill"), b"1")
    }

    /// Whether any process lives in it or below it, as the kernel reports it
    /// (`cgroup.events`). A cgroup that is gone is empty.
    pub fn populated(&self) -> bool {
        std::fs::read_to_string(self.file("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|line| line == "populated 1"))
    }

    /// The processes in this cgroup itself (not its descendants); none when it is gone.
    pub fn members(&self) -> Vec<u32> {
        std::fs::read_to_string(self.file("cgroup.procs"))
            .map(|procs| procs.lines().filter_map(|l| l.parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Removes its child cgroups, then it. Gone is fine; one whose last process is still
    /// being released (`EBUSY`) is tried again for a moment.
    pub fn remove(&self) -> io::Result<()> {
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    Cgroup::at(&entry.path()).remove()?;
                }
            }
        }
        let deadline = Instant::now() + RELEASE;
        loop {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(err)
                    if err.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error())
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(err) => return Err(err),
            }
        }
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`. Only a
/// `write`: safe between fork and exec.
pub fn join(procs: BorrowedFd<'_>) -> io::Result<()> {
    match rustix::io::write(procs, b"0") {
        Ok(1) => Ok(()),
        Ok(_) => Err(io::Error::from(rustix::io::Errno::IO)),
        Err(errno) => Err(errno.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::Cgroup;

    #[test]
    fn a_cgroup_that_is_gone_is_empty_and_removing_it_is_fine() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gone = Cgroup::at(&dir.path().join("absent"));
        assert!(!gone.populated());
        assert!(gone.members().is_empty());
        assert!(gone.remove().is_ok());
    }

    #[test]
    fn remove_takes_the_children_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let parent = Cgroup::at(&dir.path().join("worker"));
        parent.create().expect("parent");
        parent.child("tools").create().expect("child");
        assert!(parent.create().is_err(), "an existing cgroup is refused");
        parent.remove().expect("remove");
        assert!(!parent.dir().exists());
    }
}
