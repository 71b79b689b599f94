//! The soak's view of the machine, read from `/proc` rather than from the store: which
//! workers run, which child lock and writer slot each holds a descriptor of (and whether
//! the kernel shows the `flock` on it), which processes carry a run's tag.

use std::path::{Path, PathBuf};

/// One live `subzero-worker worker` process of the soak.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerProc {
    pub pid: u32,
    /// The child whose lock file it has open (`locks/children/<child>.lock`).
    pub child: Option<String>,
    /// Whether `/proc/<pid>/fdinfo` shows the kernel's `flock` on that descriptor.
    pub child_lock_held: bool,
    /// The writer-slot lock files it has open.
    pub writer_slots: Vec<PathBuf>,
    /// Stopped (`T`) rather than running or sleeping.
    pub stopped: bool,
}

pub use subzero_testkit::procs::{Proc as ProcInfo, alive};

/// Every live process but this one.
pub fn processes() -> Vec<ProcInfo> {
    let me = std::process::id();
    subzero_testkit::procs::processes()
        .into_iter()
        .filter(|p| p.pid != me)
        .collect()
}

/// The soak's processes: those running in `root` or naming it in their arguments
/// (brokers, workers, lock holders, tools), wherever they were re-parented.
pub fn soak_processes(root: &Path) -> Vec<ProcInfo> {
    let text = root.to_string_lossy().into_owned();
    processes()
        .into_iter()
        .filter(|p| {
            p.cwd.as_ref().is_some_and(|c| c.starts_with(root))
                || p.argv.iter().any(|a| a.contains(&text))
        })
        .collect()
}

/// Every live worker whose arguments name `state` (the soak's state directory).
///
/// A worker forks before it execs each tool process; until the exec the fork has the
/// worker's arguments and descriptors (the same open lock, not a second one). Such a fork
/// is part of its worker, not a second worker: only processes whose parent is not itself a
/// worker are workers.
pub fn workers(state: &Path) -> Vec<WorkerProc> {
    let text = state.to_string_lossy().into_owned();
    let candidates: Vec<ProcInfo> = processes()
        .into_iter()
        .filter(|p| {
            p.argv
                .first()
                .is_some_and(|a| a.ends_with("subzero-worker"))
                && p.argv.get(1).is_some_and(|a| a == "worker")
                && p.argv.iter().any(|a| a.contains(&text))
        })
        .collect();
    candidates
        .iter()
        .filter(|p| !candidates.iter().any(|parent| parent.pid == p.ppid))
        .map(|p| worker_of(p, state))
        .collect()
}

/// What a worker process holds, read from its descriptors.
pub fn worker_of(p: &ProcInfo, state: &Path) -> WorkerProc {
    let children = state.join("locks/children");
    let slots = state.join("locks/slots");
    let mut worker = WorkerProc {
        pid: p.pid,
        child: None,
        child_lock_held: false,
        writer_slots: Vec::new(),
        stopped: p.state == 'T' || p.state == 't',
    };
    let Ok(fds) = std::fs::read_dir(format!("/proc/{}/fd", p.pid)) else {
        return worker;
    };
    for fd in fds.flatten() {
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue;
        };
        if target.parent() == Some(children.as_path()) {
            let name = target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            worker.child = name.strip_suffix(".lock").map(str::to_owned);
            worker.child_lock_held = holds_flock(p.pid, &fd.file_name().to_string_lossy());
        } else if target.parent() == Some(slots.as_path())
            && target.to_string_lossy().contains(".writer.")
        {
            worker.writer_slots.push(target);
        }
    }
    worker
}

/// Whether the kernel lists a lock on descriptor `fd` of `pid` (`/proc/<pid>/fdinfo`).
fn holds_flock(pid: u32, fd: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).is_ok_and(|info| {
        info.lines()
            .any(|l| l.starts_with("lock:") && l.contains("FLOCK"))
    })
}

/// Processes running in `root` whose environment carries `SOAK_TAG=…`, with the tag. The
/// soak passes its whole directory: a shared coder's tools run in the workspace, an
/// isolated coder's in its checkout beside the state directory.
pub fn tagged(root: &Path) -> Vec<(u32, String)> {
    processes()
        .into_iter()
        .filter(|p| p.cwd.as_ref().is_some_and(|c| c.starts_with(root)))
        .filter_map(|p| {
            let environ = std::fs::read(format!("/proc/{}/environ", p.pid)).ok()?;
            let tag = environ
                .split(|b| *b == 0)
                .find_map(|var| var.strip_prefix(b"SOAK_TAG="))?;
            Some((p.pid, String::from_utf8_lossy(tag).into_owned()))
        })
        .collect()
}

/// Sends `signal` to `pid` (ignoring a process that is already gone).
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
    }
}

/// Every live descendant of `root`, found by parent links.
pub fn descendants(root: u32) -> Vec<u32> {
    let table = processes();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in table.iter().filter(|p| p.ppid == parent) {
            if !found.contains(&p.pid) {
                found.push(p.pid);
                frontier.push(p.pid);
            }
        }
    }
    found
}
