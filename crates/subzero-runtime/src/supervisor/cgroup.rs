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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The prefix of every cgroup Subzero makes.
pub(super) const PREFIX: &str = "subzero-";

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
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let membership = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let dir = own_cgroup_dir(&mountinfo, &membership)?;
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
        let probe = self.dir.join(format!("{PREFIX}{}-probe", self.owner));
        std::fs::create_dir(&probe).map_err(|e| {
            format!(
                "cannot make a cgroup under {} ({e}): this user may not write the broker's cgroup v2 subtree",
                self.dir.display()
            )
        })?;
        let kill = probe.join("cgroup.kill").exists();
        let _ = std::fs::remove_dir(&probe);
        if !kill {
            return Err(format!(
                "cgroups under {} have no cgroup.kill (Linux 5.14 or later has it)",
                self.dir.display()
            ));
        }
        let procs = self.dir.join("cgroup.procs");
        nix::unistd::access(&procs, nix::unistd::AccessFlags::W_OK).map_err(|e| {
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
pub fn create_worker(dir: &Path) -> io::Result<std::os::fd::OwnedFd> {
    std::fs::create_dir(dir)?;
    let made = if dir.join("cgroup.kill").exists() {
        std::fs::create_dir(dir.join("tools")).and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
                .map(std::os::fd::OwnedFd::from)
        })
    } else {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel has no cgroup.kill (Linux 5.14 or later has it)",
        ))
    };
    if made.is_err() {
        let _ = remove(dir);
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
    if !dir.exists() {
        return Ok(true);
    }
    let members = [dir.join("tools"), dir.to_path_buf()]
        .iter()
        .flat_map(|d| {
            std::fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>();
    write_kill(dir)?;
    let deadline = Instant::now() + limit;
    while populated(dir) {
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for pid in members {
        super::reap::collect_exited(pid, Duration::from_millis(100)).await;
    }
    remove(dir)?;
    Ok(true)
}

/// [`kill`] for a thread that may block (the start-up sweep).
fn kill_blocking(dir: &Path, limit: Duration) -> io::Result<bool> {
    write_kill(dir)?;
    let deadline = Instant::now() + limit;
    while populated(dir) {
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    remove(dir)?;
    Ok(true)
}

fn write_kill(dir: &Path) -> io::Result<()> {
    match std::fs::write(dir.join("cgroup.kill"), b"1") {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .is_ok_and(|events| events.lines().any(|line| line == "populated 1"))
}

/// Removes the child cgroups of `dir` (a worker's `tools`), then `dir`. Gone is fine.
fn remove(dir: &Path) -> io::Result<()> {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove(&entry.path())?;
            }
        }
    }
    let deadline = Instant::now() + Duration::from_millis(200);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
            // The last process of it is still being released.
            Err(err) if err.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(err) => return Err(err),
        }
    }
}

/// The cgroup v2 directory of the process whose `/proc/<pid>/mountinfo` and
/// `/proc/<pid>/cgroup` these are: the `0::` path below the `cgroup2` mount whose root
/// contains it.
fn own_cgroup_dir(mountinfo: &str, membership: &str) -> Result<PathBuf, String> {
    let path = membership
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or_else(|| {
            "this process is in no cgroup v2 hierarchy (no `0::` line in /proc/self/cgroup)"
                .to_owned()
        })?;
    if path.contains("(deleted)") || path.starts_with("/..") {
        return Err(format!(
            "this process's cgroup v2 path {path:?} is outside the visible hierarchy"
        ));
    }
    let mut mounted = false;
    for line in mountinfo.lines() {
        let Some((fields, tail)) = line.split_once(" - ") else {
            continue;
        };
        if tail.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        mounted = true;
        let fields: Vec<&str> = fields.split_whitespace().collect();
        let (Some(root), Some(point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        let below = if *root == "/" {
            Some(path)
        } else {
            path.strip_prefix(root)
                .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        if let Some(below) = below {
            let mut dir = PathBuf::from(unescape(point));
            for part in below.split('/').filter(|p| !p.is_empty()) {
                dir.push(part);
            }
            return Ok(dir);
        }
    }
    Err(if mounted {
        format!("no cgroup2 mount shows this process's cgroup {path:?}")
    } else {
        "no cgroup v2 hierarchy is mounted (no cgroup2 line in /proc/self/mountinfo)".to_owned()
    })
}

/// Mount points in mountinfo escape space, tab, newline and backslash as `\ooo`.
pub(super) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `<pid>-<start time>` of a live process.
pub(super) fn owner_of(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (state, start) = state_and_start(&stat)?;
    (state != "Z" && state != "X").then(|| format!("{pid}-{start}"))
}

/// Fields 3 (state) and 22 (start time) of a `/proc/<pid>/stat` line; the command name
/// may hold spaces and parentheses, so fields are counted after the last `)`.
fn state_and_start(stat: &str) -> Option<(&str, &str)> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?;
    Some((state, fields.nth(18)?))
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

    const HYBRID: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn the_own_cgroup_is_found_below_the_cgroup2_mount() {
        let membership = "4:memory:/x\n0::/user.slice/app.scope\n";
        assert_eq!(
            own_cgroup_dir(HYBRID, membership),
            Ok(PathBuf::from("/sys/fs/cgroup/unified/user.slice/app.scope"))
        );
        assert_eq!(
            own_cgroup_dir(HYBRID, "0::/\n"),
            Ok(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn a_bind_mounted_subtree_and_an_escaped_mount_point_resolve() {
        let mountinfo = "50 1 0:38 /user.slice /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_cgroup_dir(mountinfo, "0::/user.slice/a\n"),
            Ok(PathBuf::from("/mnt/my cgroups/a"))
        );
        assert!(own_cgroup_dir(mountinfo, "0::/system.slice/a\n").is_err());
    }

    #[test]
    fn without_cgroup2_or_a_0_line_there_is_no_cgroup_and_the_reason_says_which() {
        let v1_only = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let err = own_cgroup_dir(v1_only, "0::/\n").expect_err("no cgroup2");
        assert!(err.contains("no cgroup v2 hierarchy is mounted"), "{err}");
        let err = own_cgroup_dir(HYBRID, "4:memory:/x\n").expect_err("no 0:: line");
        assert!(err.contains("`0::`"), "{err}");
    }

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

    #[test]
    fn the_start_time_is_field_22_even_with_parentheses_in_the_name() {
        let stat = "77 (a) (b)) S 1 77 77 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 1 2";
        assert_eq!(state_and_start(stat), Some(("S", "987654")));
    }
}
