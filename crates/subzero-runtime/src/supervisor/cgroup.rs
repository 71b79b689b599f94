//! The broker's side of cgroup v2 containment, the fallback where the kernel gives no
//! PID namespace (or the configuration forces it): where each worker's cgroup goes, and
//! ending those nobody else will end.
//!
//! - **Detection at start** ([`CgroupParent::probe`]): a `cgroup2` mount in
//!   `/proc/self/mountinfo`, this process's cgroup from the `0::` line of
//!   `/proc/self/cgroup`, a child cgroup made there (so the subtree is writable by this
//!   user) that has `cgroup.kill` (Linux ≥ 5.14), and a writable `cgroup.procs` of the
//!   broker's own cgroup (moving a process down needs it).
//! - **Naming**: worker `n` of broker `pid` gets `<own cgroup>/subzero-<pid>-<start>-<n>`,
//!   `<start>` being the broker's start time in clock ticks (`/proc/<pid>/stat`), so a
//!   reused pid is never mistaken for the broker. The spawner makes it with its `tools`
//!   child ([`create_worker`]) and clones the worker into it; the worker moves each tool
//!   process into `tools` (`subzero-worker`'s `containment::cgroup`).
//! - **Ending** ([`kill`]): once the worker is gone the broker writes `cgroup.kill`, waits
//!   until the cgroup is empty and removes it, and only then lets go of the worker's
//!   locks (`super::conn`); at start ([`CgroupParent::sweep`]) it ends every `subzero-…`
//!   cgroup under its own whose broker is gone — the case where worker and broker were
//!   SIGKILLed at once.
//!
//! With `reap`, this is the only module of the broker that ends processes.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use subzero_sys::cgroup::{Cgroup, find};
use subzero_sys::procfs::Stat;

/// The prefix of every cgroup Subzero makes.
pub(super) const PREFIX: &str = "subzero-";
/// The child of a worker's cgroup that holds its tool processes (the worker moves each
/// tool process into it).
const TOOLS: &str = "tools";

/// How to get the cgroup fallback where the probe found none (also in `subzero doctor`).
pub const ENABLE_HINT: &str = "run the broker in a cgroup v2 subtree delegated to your user (for example start the MCP host under `systemd-run --user --scope -p Delegate=yes …`) on Linux 5.14 or later";

/// Where this broker makes its workers' cgroups: its own cgroup, proven writable.
#[derive(Debug)]
pub struct CgroupParent {
    dir: PathBuf,
    owner: String,
    next: AtomicU64,
}

impl CgroupParent {
    /// Finds this process's cgroup v2 directory and proves a worker cgroup can be made
    /// and killed there; the error says why not, and [`ENABLE_HINT`] how to get one.
    pub fn probe() -> Result<CgroupParent, String> {
        let dir = find::own_v2()?;
        let owner = owner_of(std::process::id())
            .ok_or_else(|| "cannot read this process's start time".to_owned())?;
        let parent = CgroupParent {
            dir,
            owner,
            next: AtomicU64::new(1),
        };
        parent.try_make_one()?;
        Ok(parent)
    }

    /// Makes and removes one child cgroup, checking `cgroup.kill` and `cgroup.procs`.
    fn try_make_one(&self) -> Result<(), String> {
        let probe = Cgroup::at(&self.dir).child(&format!("{PREFIX}{}-probe", self.owner));
        probe.create().map_err(|e| {
            format!(
                "cannot make a cgroup under {} ({e}): this user may not write the broker's cgroup v2 subtree",
                self.dir.display()
            )
        })?;
        let kill = probe.has("cgroup.kill");
        let _ = std::fs::remove_dir(probe.dir());
        if !kill {
            return Err(format!(
                "cgroups under {} have no cgroup.kill (Linux 5.14 or later has it)",
                self.dir.display()
            ));
        }
        let procs = self.dir.join("cgroup.procs");
        rustix::fs::access(&procs, rustix::fs::Access::WRITE_OK).map_err(|e| {
            format!(
                "{} is not writable by this user ({e}), so a worker cannot be moved below it",
                procs.display()
            )
        })
    }

    /// The broker's own cgroup directory, under which the workers' cgroups go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A fresh cgroup path for the next worker (made by [`create_worker`]).
    pub fn worker_dir(&self) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{PREFIX}{}-{n}", self.owner))
    }

    /// Kills and removes every `subzero-…` cgroup under this broker's cgroup whose broker
    /// is gone; returns how many were ended. One that does not empty within a second is
    /// left (and logged) for the next start.
    pub fn sweep(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut ended = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(owner) = name.to_str().and_then(owner_in_name) else {
                continue;
            };
            if owner_alive(owner) || !entry.path().is_dir() {
                continue;
            }
            match kill_blocking(&entry.path(), Duration::from_secs(1)) {
                Ok(true) => ended += 1,
                Ok(false) => {
                    tracing::warn!(cgroup = %entry.path().display(), "a leftover worker cgroup did not empty within 1 s; it is tried again at the next start")
                }
                Err(err) => {
                    tracing::warn!(cgroup = %entry.path().display(), %err, "cannot end a leftover worker cgroup")
                }
            }
        }
        ended
    }
}

/// Makes the worker cgroup `dir` and its `tools` child and opens its `cgroup.procs`, which
/// the worker's clone child writes to join it. An existing `dir` is refused: its
/// processes would not be this worker's. Nothing is left behind on failure.
pub fn create_worker(dir: &Path) -> io::Result<OwnedFd> {
    let cgroup = Cgroup::at(dir);
    cgroup.create()?;
    let made = if cgroup.has("cgroup.kill") {
        cgroup
            .child(TOOLS)
            .create()
            .and_then(|()| cgroup.procs_for_joining())
    } else {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel has no cgroup.kill (Linux 5.14 or later has it)",
        ))
    };
    if made.is_err() {
        let _ = cgroup.remove();
    }
    made
}

/// Kills every process of the worker cgroup `dir` (and its `tools`), waits up to `limit`
/// for it to empty, and removes it. `Ok(true)` when it is gone (also when it never
/// existed, as on the namespace path), `Ok(false)` when processes were still in it.
///
/// Its processes whose worker died were re-parented to this broker (a subreaper): their
/// exit statuses are collected, so none lingers as a zombie under it.
pub async fn kill(dir: &Path, limit: Duration) -> io::Result<bool> {
    let cgroup = Cgroup::at(dir);
    if !dir.exists() {
        return Ok(true);
    }
    let mut members = cgroup.child(TOOLS).members();
    members.extend(cgroup.members());
    write_kill(&cgroup)?;
    let deadline = Instant::now() + limit;
    while cgroup.populated() {
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for pid in members {
        if let Ok(pid) = i32::try_from(pid) {
            super::reap::collect_exited(pid, Duration::from_millis(100)).await;
        }
    }
    cgroup.remove()?;
    Ok(true)
}

/// [`kill`] for a thread that may block (the start-up sweep).
fn kill_blocking(dir: &Path, limit: Duration) -> io::Result<bool> {
    let cgroup = Cgroup::at(dir);
    write_kill(&cgroup)?;
    let deadline = Instant::now() + limit;
    while cgroup.populated() {
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cgroup.remove()?;
    Ok(true)
}

/// `cgroup.kill`; a cgroup that is gone is fine.
fn write_kill(cgroup: &Cgroup) -> io::Result<()> {
    match cgroup.kill() {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// `<pid>-<start time>` of a live process, the same from inside it and from any other
/// ([`Stat::start_of`]: under qemu-user a broker's own reading differed, and a second broker
/// took the first's workers for orphans).
pub(super) fn owner_of(pid: u32) -> Option<String> {
    Stat::of(pid).filter(|s| !s.is_gone())?;
    Some(format!("{pid}-{}", Stat::start_of(pid)?))
}

/// The `<pid>-<start>` owner of a cgroup named `subzero-<pid>-<start>-<n|probe>`.
pub(super) fn owner_in_name(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PREFIX)?;
    let (owner, tail) = rest.rsplit_once('-')?;
    let (pid, start) = owner.split_once('-')?;
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (numeric(pid) && numeric(start) && (numeric(tail) || tail == "probe")).then_some(owner)
}

/// Whether the broker `<pid>-<start>` still runs.
pub(super) fn owner_alive(owner: &str) -> bool {
    let Some(pid) = owner
        .split_once('-')
        .and_then(|(p, _)| p.parse::<u32>().ok())
    else {
        return false;
    };
    owner_of(pid).is_some_and(|now| now == owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_subzero_worker_and_probe_cgroups_name_an_owner() {
        assert_eq!(owner_in_name("subzero-123-456-7"), Some("123-456"));
        assert_eq!(owner_in_name("subzero-123-456-probe"), Some("123-456"));
        for other in [
            "subzero-123-7",
            "subzero-a-456-7",
            "user.slice",
            "subzero-1-2-x",
        ] {
            assert_eq!(owner_in_name(other), None, "{other}");
        }
    }

    #[test]
    fn this_process_owns_its_name_and_a_wrong_start_time_is_a_gone_owner() {
        let me = owner_of(std::process::id()).expect("own stat");
        assert!(owner_alive(&me));
        let (pid, start) = me.split_once('-').expect("pid-start");
        let later: u64 = start.parse::<u64>().expect("start time") + 1;
        assert!(!owner_alive(&format!("{pid}-{later}")));
        assert!(!owner_alive("4294967295-1"));
    }
}
