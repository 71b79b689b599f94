//! cgroup v2 containment, the fallback where the kernel gives no PID namespace: the
//! broker (`subzero-runtime`'s `supervisor::cgroup`) makes a cgroup for the worker and a
//! `tools` cgroup below it and clones the worker into it; every tool process moves itself
//! into `tools` before it execs ([`confine`]). A process cannot leave a cgroup it may not
//! write to the parent of, whatever it does with sessions, process groups, parents or
//! descriptors, and one write of `1` to `cgroup.kill` SIGKILLs every process of a cgroup
//! and of its descendants at once (Linux ≥ 5.14). So every teardown of the tool tree (a
//! stop, the end of a run, stdin EOF, SIGTERM) ends with `tools/cgroup.kill` after the
//! SIGTERM grace ([`super::Containment`]); when the worker dies for any reason, the broker
//! kills the worker's cgroup, waits until the kernel reports it unpopulated and removes it
//! before it lets go of the locks, and sweeps those of brokers that are gone.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The child cgroup of a worker's cgroup that holds its tool processes.
const TOOLS: &str = "tools";

/// One cgroup v2 directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// The cgroup at `dir`, as the broker made it.
    pub fn at(dir: &Path) -> Cgroup {
        Cgroup {
            dir: dir.to_path_buf(),
        }
    }

    /// The cgroup of the worker's tool processes.
    pub fn tools(&self) -> Cgroup {
        Cgroup {
            dir: self.dir.join(TOOLS),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `cgroup.procs`, open for writing and close-on-exec: writing `0` to it moves the
    /// writing process in ([`join`]).
    pub fn procs_for_joining(&self) -> io::Result<OwnedFd> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(self.file("cgroup.procs"))?;
        Ok(OwnedFd::from(file))
    }

    /// SIGKILLs every process of this cgroup and its descendants.
    pub fn kill(&self) -> io::Result<()> {
        std::fs::write(self.file("cgroup.kill"), b"1")
    }

    /// Whether any process lives in it or below it. A cgroup that is gone is empty.
    pub fn populated(&self) -> bool {
        std::fs::read_to_string(self.file("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|line| line == "populated 1"))
    }

    /// The processes in this cgroup itself (not its descendants).
    pub fn members(&self) -> Vec<u32> {
        std::fs::read_to_string(self.file("cgroup.procs"))
            .map(|procs| procs.lines().filter_map(|l| l.parse().ok()).collect())
            .unwrap_or_default()
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `fd`. Only a
/// `write`: safe between fork and exec.
pub fn join(fd: RawFd) -> io::Result<()> {
    // SAFETY: writes one byte from a static buffer to a descriptor of this process.
    let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    if written == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The tool cgroup of this worker and its `cgroup.procs`, set once at start.
#[derive(Debug)]
struct ToolCgroup {
    cgroup: Cgroup,
    procs: OwnedFd,
}

static TOOL_CGROUP: OnceLock<ToolCgroup> = OnceLock::new();

/// Called once at worker start with the cgroup the broker put it in: every tool process
/// started from now on moves itself into its `tools` child.
pub fn enter_tools(dir: &Path) -> io::Result<()> {
    let cgroup = Cgroup::at(dir).tools();
    let procs = cgroup.procs_for_joining()?;
    TOOL_CGROUP
        .set(ToolCgroup { cgroup, procs })
        .map_err(|_| io::Error::other("the tool cgroup is already set"))
}

/// The cgroup of this worker's tool processes, when it runs in one.
pub fn tools() -> Option<&'static Cgroup> {
    TOOL_CGROUP.get().map(|t| &t.cgroup)
}

/// Adds the hook that moves a tool process into the tool cgroup before it execs (before
/// any other hook, Landlock's included). Nothing when the worker runs in no cgroup.
pub fn confine(cmd: &mut std::process::Command) {
    if let Some(tools) = TOOL_CGROUP.get() {
        let fd = tools.procs.as_raw_fd();
        // SAFETY: the hook only makes one `write` on a descriptor that lives as long as
        // the process (a static); it allocates nothing and takes no lock.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || join(fd));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cgroup;

    #[test]
    fn a_cgroup_that_is_gone_is_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gone = Cgroup::at(&dir.path().join("absent"));
        assert!(!gone.populated());
        assert!(gone.members().is_empty());
    }
}
