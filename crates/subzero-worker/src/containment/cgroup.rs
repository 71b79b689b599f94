//! cgroup v2 containment, the fallback where the kernel gives no PID namespace: the
//! keeper ([`super::pidns`]) makes a cgroup for the worker and a `tools` cgroup below
//! it, moves the worker in before it execs, and every tool process moves itself into
//! `tools` before it execs ([`confine`]). A process cannot leave a cgroup it may not
//! write to the parent of, whatever it does with sessions, process groups, parents or
//! descriptors, and one write of `1` to `cgroup.kill` SIGKILLs every process of a
//! cgroup and of its descendants at once (Linux ≥ 5.14). So:
//!
//! - every teardown of the tool tree (a stop, the end of a run, stdin EOF, SIGTERM)
//!   ends with `tools/cgroup.kill` after the SIGTERM grace ([`super::Containment`]);
//! - when the worker dies for any reason, the keeper kills the worker's cgroup, waits
//!   until the kernel reports it unpopulated, removes it and only then exits, dropping
//!   the lock descriptors — as on the namespace path ([`end`]);
//! - the broker names the cgroup (`subzero-runtime`'s `supervisor::cgroup`), kills it
//!   too when it loses a worker, and sweeps those of brokers that are gone.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The argument with which the keeper tells the worker which cgroup it is in.
pub const CGROUP_ARG: &str = "--cgroup";

/// The child cgroup of a worker's cgroup that holds its tool processes.
const TOOLS: &str = "tools";

/// How long the keeper waits between two rounds of `cgroup.kill` and SIGKILL to its
/// orphans while anything of the tree is left (a process that was forking, an orphan
/// that came back after its parent died).
const REKILL: Duration = Duration::from_millis(20);

/// How often an emptiness check reads `cgroup.events` again.
const POLL: Duration = Duration::from_millis(1);

/// One cgroup v2 directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// Makes the fresh cgroup `dir` and its `tools` child. An existing `dir` is refused:
    /// its processes would not be this worker's.
    pub fn create(dir: &Path) -> io::Result<Cgroup> {
        std::fs::create_dir(dir)?;
        let cgroup = Cgroup {
            dir: dir.to_path_buf(),
        };
        let made = if !cgroup.file("cgroup.kill").exists() {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel has no cgroup.kill (Linux 5.14 or later has it)",
            ))
        } else {
            std::fs::create_dir(cgroup.tools().dir)
        };
        if let Err(err) = made {
            let _ = cgroup.remove();
            return Err(err);
        }
        Ok(cgroup)
    }

    /// The cgroup at `dir`, as made by [`Cgroup::create`].
    pub fn at(dir: &Path) -> Cgroup {
        Cgroup {
            dir: dir.to_path_buf(),
        }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
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

    /// Removes `tools`, then the cgroup itself. A cgroup that is already gone is fine;
    /// one whose last process is still being released answers `EBUSY` for a moment.
    pub fn remove(&self) -> io::Result<()> {
        for dir in [self.tools().dir, self.dir.clone()] {
            let deadline = Instant::now() + Duration::from_millis(200);
            loop {
                match std::fs::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => break,
                    Err(err)
                        if err.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
                    {
                        std::thread::sleep(POLL);
                    }
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(())
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

/// The keeper's end of a worker: kills its cgroup (the worker is already gone), waits
/// until the kernel reports nothing left in it and the keeper — a subreaper — has no
/// child left, and removes it. Orphans of the tree come back to the keeper and are
/// SIGKILLed too: so is a tool process that moved itself out of its cgroup (which only
/// a process that may write the cgroup tree can do; Landlock keeps tools from it). There
/// is no time limit, as a PID namespace has none: the lock descriptors are released only
/// when the tree is gone (the broker SIGKILLs a keeper that takes too long).
pub fn end(cgroup: &Cgroup) {
    let mut kill_at = Instant::now();
    loop {
        let childless = reap_orphans();
        if childless && !cgroup.populated() {
            break;
        }
        if Instant::now() >= kill_at {
            if let Err(err) = cgroup.kill() {
                eprintln!(
                    "subzero worker-ns: cannot kill cgroup {}: {err}",
                    cgroup.dir().display()
                );
            }
            for orphan in super::descendants(std::process::id()) {
                if !orphan.zombie {
                    super::signal(orphan.pid, nix::sys::signal::Signal::SIGKILL);
                }
            }
            kill_at = Instant::now() + REKILL;
        }
        std::thread::sleep(POLL);
    }
    if let Err(err) = cgroup.remove() {
        eprintln!(
            "subzero worker-ns: cannot remove cgroup {}: {err}",
            cgroup.dir().display()
        );
    }
}

/// Reaps every exited child without blocking; true when no child is left at all.
fn reap_orphans() -> bool {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Err(Errno::ECHILD) => return true,
            Ok(WaitStatus::StillAlive) => return false,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return false,
        }
    }
}

/// The tool cgroup of this worker and its `cgroup.procs`, set once at start.
#[derive(Debug)]
struct ToolCgroup {
    cgroup: Cgroup,
    procs: OwnedFd,
}

static TOOL_CGROUP: OnceLock<ToolCgroup> = OnceLock::new();

/// Called once at worker start with the cgroup the keeper put it in: every tool process
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
    fn a_cgroup_that_is_gone_is_empty_and_removing_it_again_is_fine() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gone = Cgroup::at(&dir.path().join("absent"));
        assert!(!gone.populated());
        assert!(gone.members().is_empty());
        assert!(gone.remove().is_ok());
    }
}
