//! The cgroups that bound a worker's tool tree: one per worker in each cgroup v1 `pids`
//! and `memory` hierarchy this broker may write (normally as root, on a machine that
//! mounts them: a cgroup v2 subtree cannot take these controllers below the broker's own
//! cgroup, which holds the broker itself).
//!
//! - **Detection at start** ([`LimitParents::probe`]): for each controller, a `cgroup`
//!   mount whose options name it in `/proc/self/mountinfo`, this process's cgroup in it
//!   from `/proc/self/cgroup`, and a probe cgroup made there that has the limit file.
//! - **Per worker** ([`LimitParents::make`]): `<parent>/subzero-<broker pid>-<start>-<n>`
//!   in each, passed to the worker as `--limits-cgroup pids=DIR` / `memory=DIR`; the worker
//!   writes the child's limits into it and every tool process joins it before exec
//!   (`subzero-worker`'s `containment::limits`).
//! - **Removal**: when the worker has exited ([`remove`], from `WorkerConn`), and at start
//!   for brokers that are gone ([`LimitParents::sweep`]). A cgroup that still holds a
//!   process is never removed (the kernel refuses).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use subzero_sys::cgroup::{Cgroup, find};

use super::cgroup::{PREFIX, owner_alive, owner_in_name, owner_of};

/// A controller that bounds a tool tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Pids,
    Memory,
}

impl Controller {
    pub const ALL: [Controller; 2] = [Controller::Pids, Controller::Memory];

    /// Its name in mount options, `/proc/self/cgroup` and `--limits-cgroup`.
    pub fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }

    /// The file the worker writes the limit into.
    fn limit_file(self) -> &'static str {
        match self {
            Controller::Pids => "pids.max",
            Controller::Memory => "memory.limit_in_bytes",
        }
    }
}

/// Where this broker makes its workers' limit cgroups.
#[derive(Debug)]
pub struct LimitParents {
    parents: Vec<(Controller, PathBuf)>,
    owner: String,
    next: AtomicU64,
}

impl LimitParents {
    /// None at all (a spawner that bounds nothing by cgroup).
    pub fn none() -> LimitParents {
        LimitParents {
            parents: Vec::new(),
            owner: String::new(),
            next: AtomicU64::new(1),
        }
    }

    /// Finds each controller's hierarchy and proves a cgroup with its limit file can be
    /// made there; a controller that cannot be used is left out (logged at debug).
    pub fn probe() -> LimitParents {
        let (Ok(mountinfo), Ok(membership), Some(owner)) = (
            std::fs::read_to_string("/proc/self/mountinfo"),
            std::fs::read_to_string("/proc/self/cgroup"),
            owner_of(std::process::id()),
        ) else {
            return LimitParents::none();
        };
        let mut parents = Vec::new();
        for controller in Controller::ALL {
            match find::own_v1_dir(&mountinfo, &membership, controller.name()) {
                Some(dir) if usable(&dir, controller, &owner) => parents.push((controller, dir)),
                Some(dir) => {
                    tracing::debug!(controller = controller.name(), dir = %dir.display(), "the cgroup v1 hierarchy is not writable here")
                }
                None => {
                    tracing::debug!(
                        controller = controller.name(),
                        "no cgroup v1 hierarchy of this controller"
                    )
                }
            }
        }
        LimitParents {
            parents,
            owner,
            next: AtomicU64::new(1),
        }
    }

    /// Makes one fresh cgroup per controller for the next worker; a controller whose
    /// cgroup cannot be made is left out (the worker then reports its rlimit fallback).
    pub fn make(&self) -> Vec<(Controller, PathBuf)> {
        if self.parents.is_empty() {
            return Vec::new();
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{}-{n}", self.owner);
        self.parents
            .iter()
            .filter_map(|(controller, parent)| {
                let dir = parent.join(&name);
                match std::fs::create_dir(&dir) {
                    Ok(()) => Some((*controller, dir)),
                    Err(err) => {
                        tracing::warn!(dir = %dir.display(), %err, "cannot make a limit cgroup for a worker");
                        None
                    }
                }
            })
            .collect()
    }

    /// Removes every `subzero-…` limit cgroup whose broker is gone and that holds no
    /// process any more; returns how many.
    pub fn sweep(&self) -> usize {
        let mut removed = 0;
        for (_, parent) in &self.parents {
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let gone = name
                    .to_str()
                    .and_then(owner_in_name)
                    .is_some_and(|owner| !owner_alive(owner));
                if gone && std::fs::remove_dir(entry.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }
}

/// Removes a worker's limit cgroups once it has exited; one still holding a process (a
/// tool that outlived its worker on the subreaper fallback) stays for the next sweep.
pub fn remove(dirs: &[PathBuf]) {
    for dir in dirs {
        match std::fs::remove_dir(dir) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => {
                tracing::warn!(dir = %dir.display(), %err, "a worker's limit cgroup is not empty yet; the next broker start removes it")
            }
        }
    }
}

/// The processes in a worker's limit cgroups (what `kill_leftovers` ends).
pub fn members(dirs: &[PathBuf]) -> Vec<i32> {
    dirs.iter()
        .flat_map(|dir| Cgroup::at(dir).members())
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}

/// Whether a cgroup with `controller`'s limit file can be made (and removed) in `dir`.
fn usable(dir: &Path, controller: Controller, owner: &str) -> bool {
    let probe = Cgroup::at(dir).child(&format!("{PREFIX}{owner}-probe"));
    if probe.create().is_err() {
        return false;
    }
    let has_limit = probe.has(controller.limit_file());
    let _ = std::fs::remove_dir(probe.dir());
    has_limit
}
