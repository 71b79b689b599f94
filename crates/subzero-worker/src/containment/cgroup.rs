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
//! before it lets go of the locks, and sweeps those of brokers that are gone. The cgroup
//! itself (files, join, kill) is `subzero_sys::cgroup`.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::OnceLock;

pub use subzero_sys::cgroup::Cgroup;

/// The child cgroup of a worker's cgroup that holds its tool processes.
const TOOLS: &str = "tools";

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
    let cgroup = Cgroup::at(dir).child(TOOLS);
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
        let procs = tools.procs.as_fd();
        // SAFETY: the hook only makes one `write` on a descriptor that lives as long as
        // the process (a static); it allocates nothing and takes no lock.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || {
                subzero_sys::cgroup::join(procs)
            });
        }
    }
}
