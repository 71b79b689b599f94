//! The lock holder beside each worker: `subzero-hold`, a small program next to the worker's
//! executable, started right after the worker with copies of its locks and of its pidfd.
//!
//! The broker holds a worker's locks until the worker's tree is gone (`super::process`),
//! and the worker holds its own copies while it tears its tree down. Both gone at once —
//! broker and worker SIGKILLed together — would leave nobody outside the tree holding them
//! while the kernel ends the rest of the worker's namespace (an init's descriptors close
//! before its namespace is emptied), or, on the cgroup path, while the tools live on in
//! their cgroup. The holder is that nobody: it waits for the worker's pidfd (readable for
//! an init only once its namespace is empty) and, on the cgroup path, kills the cgroup and
//! waits for it to empty, and only then exits. It is in no tool's view (outside the
//! namespace), in a process group of its own, and ignores termination signals.
//!
//! It is started after the worker's spawn was answered, so it adds nothing to a worker's
//! start. Where it cannot be started (no pidfds, the program not installed), the broker and
//! the worker still hold the locks, as the receipts say either way.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::launch::{self, Alive, Placement, Program};

/// The holder's file name, next to the worker's executable.
pub const HOLDER_BINARY: &str = "subzero-hold";

/// What the holder of one worker gets.
#[derive(Debug)]
pub(super) struct HolderPlan {
    exe: PathBuf,
    /// Copies of the worker's locks, then of its pidfd.
    fds: Vec<OwnedFd>,
    cgroup: Option<PathBuf>,
}

impl HolderPlan {
    /// The plan for a worker started from `worker_exe` holding `locks`, with `pidfd`; `None`
    /// when there is nothing to hold, no pidfd to wait on or no holder installed.
    pub(super) fn new(
        worker_exe: &Path,
        locks: &[OwnedFd],
        pidfd: Option<&OwnedFd>,
        cgroup: Option<&Path>,
    ) -> Option<HolderPlan> {
        let pidfd = pidfd?;
        if locks.is_empty() {
            return None;
        }
        let exe = worker_exe.with_file_name(HOLDER_BINARY);
        if !exe.is_file() {
            return None;
        }
        let fds = locks
            .iter()
            .map(AsFd::as_fd)
            .chain(std::iter::once(pidfd.as_fd()))
            .map(|fd| fd.try_clone_to_owned())
            .collect::<std::io::Result<Vec<_>>>()
            .ok()?;
        Some(HolderPlan {
            exe,
            fds,
            cgroup: cgroup.map(Path::to_path_buf),
        })
    }

    /// Starts the holder (from the spawner thread); its pid, or `None` (logged) when it
    /// could not start.
    pub(super) fn start(self, alive: &Alive) -> Option<i32> {
        let mut args = vec![OsString::from(self.fds.len().to_string())];
        if let Some(dir) = &self.cgroup {
            args.extend([OsString::from("--cgroup"), dir.clone().into_os_string()]);
        }
        let started = Program::new(&self.exe, &args, &[], Path::new("/"))
            .map_err(|e| e.to_string())
            .and_then(|program| {
                launch::start(&program, &self.fds, Placement::Plain, alive)
                    .map_err(|e| format!("{e:?}"))
            });
        match started {
            // Its pipes close here: it reads and writes nothing.
            Ok(started) => {
                super::process::register(started.pid);
                Some(started.pid)
            }
            Err(why) => {
                tracing::warn!(holder = %self.exe.display(), %why, "cannot start the lock holder; the broker and the worker still hold the locks");
                None
            }
        }
    }
}
