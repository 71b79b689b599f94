//! Starting worker processes: the only place in the broker that creates a process.
//!
//! A worker is the broker's own executable re-run as
//! `subzero worker-ns [--cgroup DIR] --lock-fd 3 [--lock-fd 4 …] --scratch-parent
//! <state>/scratch`, a keeper that starts `subzero worker …` as init of its own PID
//! namespace, else in the cgroup `DIR` (see [`super::cgroup`]), else becomes it in place,
//! saying why (`subzero worker …` directly when the config forces the subreaper
//! fallback; `--no-pid-namespace` when it forces the cgroup):
//! - in a new process group, so one signal reaches the worker and nothing of the host;
//! - with a cleared environment (no ambient secret can leak into a child agent);
//! - with the child's flock-held lock file as fd 3 and its workspace slots as fd 4, 5,
//!   which the worker passes on to every tool process, so the kernel holds the lock and
//!   the slots while any member of the tree lives;
//! - with the state directory's `scratch/` as the parent of the private, flock-held
//!   directory it makes for raw tool output (a spawner started without one, such as
//!   doctor's, leaves the worker to make it in the system temp directory);
//! - with a parent-death signal (SIGTERM), so a worker whose broker vanished tears its
//!   tree down even before it notices EOF on its control pipe.
//!
//! The parent-death signal fires when the *thread* that forked the worker exits, so
//! every worker is forked by one long-lived spawner thread, never by a pool thread.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, mpsc};
use std::thread;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;

use super::cgroup::CgroupParent;
use super::limits::LimitParents;

/// The descriptor number at which a worker finds the child's lock file; the slot
/// locks, when any, follow it (4, 5, …). Each is named to the worker by a `--lock-fd`,
/// and the worker keeps exactly those open for its tool processes.
pub const WORKER_LOCK_FD: RawFd = 3;

/// At most this many descriptors are passed (child lock, worker slot, writer slot).
const MAX_INHERITED: usize = 3;

/// Which process-tree containment the spawner asks its workers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcessMode {
    /// Each worker as init of its own PID namespace (`subzero worker-ns`), else in its own
    /// cgroup where the broker found a writable cgroup v2 subtree, else the subreaper,
    /// each with the reason the stronger one is not in force.
    #[default]
    Auto,
    /// Each worker in its own cgroup, never a PID namespace (the config's
    /// `[containment] process = "cgroup"`); no usable cgroup is an error.
    Cgroup,
    /// `subzero worker` directly: the subreaper and `/proc` sweep only (forced by the
    /// config's `[containment] process = "subreaper"`).
    Subreaper,
}

impl From<crate::config::ProcessContainmentConfig> for ProcessMode {
    fn from(configured: crate::config::ProcessContainmentConfig) -> Self {
        use crate::config::ProcessContainmentConfig as C;
        match configured {
            C::Auto => ProcessMode::Auto,
            C::Cgroup => ProcessMode::Cgroup,
            C::Subreaper => ProcessMode::Subreaper,
        }
    }
}

/// The process containment the spawner gives its workers, decided once at start: the
/// mode and where the workers' cgroups go, or why there are none.
#[derive(Debug, Clone)]
pub struct ProcessPlan {
    mode: ProcessMode,
    cgroups: Result<Arc<CgroupParent>, String>,
}

impl ProcessPlan {
    /// Probes cgroup v2 for `mode` (not for the subreaper, which uses none). Fails only
    /// when `mode` is [`ProcessMode::Cgroup`] and no cgroup can be used, saying why.
    pub fn detect(mode: ProcessMode) -> Result<ProcessPlan, String> {
        let cgroups = match mode {
            ProcessMode::Subreaper => Err("the configuration forces the subreaper".to_owned()),
            ProcessMode::Auto | ProcessMode::Cgroup => CgroupParent::probe().map(Arc::new),
        };
        if mode == ProcessMode::Cgroup
            && let Err(why) = &cgroups
        {
            return Err(format!(
                "[containment] process = \"cgroup\" needs a cgroup v2 subtree this user can write, with cgroup.kill, but {why}; {} — or set process = \"auto\"",
                super::cgroup::ENABLE_HINT
            ));
        }
        Ok(ProcessPlan { mode, cgroups })
    }

    /// The configured mode.
    pub fn mode(&self) -> ProcessMode {
        self.mode
    }

    /// Where the workers' cgroups go, when a cgroup v2 subtree was found.
    pub fn cgroups(&self) -> Option<&Arc<CgroupParent>> {
        self.cgroups.as_ref().ok()
    }

    /// Why there are no worker cgroups, when there are none.
    pub fn no_cgroup(&self) -> Option<&str> {
        self.cgroups.as_ref().err().map(String::as_str)
    }
}

/// Whether the spawner's workers apply Landlock to their tool processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilesystemMode {
    /// Where the kernel has it (the worker probes and reports it in its hello).
    #[default]
    Landlock,
    /// Never: `subzero worker --landlock off`, as on a kernel without it (the config's
    /// `[containment] filesystem = "off"`).
    Off,
}

/// What a worker started with [`ProcessMode::Subreaper`] reports as its reason.
const FORCED_SUBREAPER: &str = "disabled by the configuration ([containment] process = \"subreaper\"); remove it to use PID namespaces";

/// What a worker started with [`ProcessMode::Cgroup`] reports as its reason.
const FORCED_CGROUP: &str = "PID namespaces are disabled by the configuration ([containment] process = \"cgroup\"); set it to \"auto\" to use them";

/// What every worker of one spawner gets, decided once from the configuration.
#[derive(Debug, Clone)]
pub struct WorkerSetup {
    /// `--scratch-parent`: where workers make their private scratch directories.
    pub scratch_parent: Option<PathBuf>,
    pub process: ProcessPlan,
    pub filesystem: FilesystemMode,
    /// `--hide`: what no tool process may see ([`crate::paths::hidden_from_tools`]).
    pub hide: Vec<PathBuf>,
    /// Where each worker's limit cgroups go (`--limits-cgroup`).
    pub limits: Arc<LimitParents>,
}

/// Everything needed to start one worker.
#[derive(Debug)]
pub struct WorkerLaunch {
    /// The executable to run (normally `std::env::current_exe()`).
    pub exe: PathBuf,
    /// Locks the worker tree must hold while it lives, already `flock`ed by the caller:
    /// first the child's lock, then its workspace slots. Empty for a handshake-only
    /// worker (doctor, `info`), which runs no run.
    pub inherit: Vec<OwnedFd>,
    /// Directory the worker starts in (the workspace root).
    pub cwd: PathBuf,
    /// `RUST_LOG`-style filter for the worker's stderr logs; the only variable passed.
    pub log_filter: Option<String>,
    /// The worker engine's own arguments, after the containment ones (`--engine pi …` for the
    /// Pi worker; empty for the Rust worker). Nothing secret.
    pub engine: Vec<std::ffi::OsString>,
}

/// A started worker with its three pipes.
#[derive(Debug)]
pub struct SpawnedWorker {
    /// The process handle (kill-on-drop is off: teardown is explicit, see `reap`).
    pub child: Child,
    /// Process id, which is also the worker's process-group id.
    pub pid: i32,
    /// Control messages to the worker; dropping it is the worker's cancel-and-exit signal.
    pub stdin: ChildStdin,
    /// Control messages from the worker.
    pub stdout: ChildStdout,
    /// The worker's logs.
    pub stderr: ChildStderr,
    /// The cgroup the keeper runs the worker in where it gets no PID namespace (it may
    /// never be made: the namespace path makes none).
    pub cgroup: Option<PathBuf>,
    /// The cgroups that bound its tool tree, made for it (`super::limits`).
    pub limits: Vec<PathBuf>,
}

type Reply = oneshot::Sender<io::Result<SpawnedWorker>>;

/// A handle to the long-lived spawner thread. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Spawner {
    requests: mpsc::Sender<(WorkerLaunch, Reply)>,
}

impl Spawner {
    /// Start the spawner thread. Must be called inside a Tokio runtime: the thread enters
    /// that runtime so the process handles it creates are driven by it.
    pub fn start_default() -> io::Result<Self> {
        Self::start_with(None, Self::auto()?, FilesystemMode::default())
    }

    /// The broker's spawner, with everything the configuration decides.
    pub fn configured(setup: WorkerSetup) -> io::Result<Self> {
        Self::start(setup)
    }

    fn auto() -> io::Result<ProcessPlan> {
        ProcessPlan::detect(ProcessMode::Auto).map_err(io::Error::other)
    }

    fn start_with(
        scratch_parent: Option<PathBuf>,
        process: ProcessPlan,
        filesystem: FilesystemMode,
    ) -> io::Result<Self> {
        Self::start(WorkerSetup {
            scratch_parent,
            process,
            filesystem,
            hide: Vec::new(),
            limits: Arc::new(LimitParents::none()),
        })
    }

    fn start(setup: WorkerSetup) -> io::Result<Self> {
        let handle = tokio::runtime::Handle::current();
        let (requests, inbox) = mpsc::channel::<(WorkerLaunch, Reply)>();
        thread::Builder::new()
            .name("subzero-spawner".into())
            .spawn(move || {
                let _runtime = handle.enter();
                for (launch, reply) in inbox {
                    // The receiver may have given up; the worker then sees its stdin close.
                    let _ = reply.send(spawn_now(launch, &setup));
                }
            })?;
        Ok(Self { requests })
    }

    /// Start a worker from the spawner thread.
    pub async fn spawn(&self, launch: WorkerLaunch) -> io::Result<SpawnedWorker> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send((launch, reply))
            .map_err(|_| io::Error::other("the worker spawner thread has stopped"))?;
        answer
            .await
            .map_err(|_| io::Error::other("the worker spawner thread dropped a request"))?
    }
}

fn spawn_now(launch: WorkerLaunch, setup: &WorkerSetup) -> io::Result<SpawnedWorker> {
    if launch.inherit.len() > MAX_INHERITED {
        return Err(io::Error::other("too many descriptors to pass to a worker"));
    }
    let mut cmd = Command::new(&launch.exe);
    let cgroup = keeper_args(&mut cmd, &setup.process);
    let limits = containment_args(&mut cmd, &launch, setup);
    cmd.env_clear()
        .current_dir(&launch.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    if let Some(filter) = &launch.log_filter {
        cmd.env("SUBZERO_LOG", filter);
    }
    place_locks(&mut cmd, &launch);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => {
            super::limits::remove(&limits);
            return Err(err);
        }
    };
    // Our copies go away with `launch`: from now on only the worker tree holds the locks,
    // so they are free exactly when every process of that tree is gone.
    drop(launch.inherit);
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| io::Error::other("worker exited before it could be tracked"))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(io::Error::other("worker pipes were not created"));
    };
    Ok(SpawnedWorker {
        child,
        pid,
        stdin,
        stdout,
        stderr,
        cgroup,
        limits,
    })
}

/// The first arguments: `worker` under the subreaper fallback, else the keeper
/// (`worker-ns`) with its cgroup. Returns the worker's cgroup directory, if it gets one.
fn keeper_args(cmd: &mut Command, process: &ProcessPlan) -> Option<PathBuf> {
    if process.mode == ProcessMode::Subreaper {
        cmd.arg("worker");
        return None;
    }
    // The keeper's own options come before the worker's arguments.
    cmd.arg("worker-ns");
    let cgroup = match process.cgroups() {
        Some(parent) => {
            let dir = parent.worker_dir();
            cmd.arg("--cgroup").arg(&dir);
            Some(dir)
        }
        None => {
            cmd.arg("--no-cgroup")
                .arg(process.no_cgroup().unwrap_or("none was found"));
            None
        }
    };
    if process.mode == ProcessMode::Cgroup {
        cmd.arg("--no-pid-namespace").arg(FORCED_CGROUP);
    }
    cgroup
}

/// The worker's containment arguments: its lock descriptors, scratch parent, the paths
/// hidden from tools, the tools' limit cgroups (made here; returned so they are removed
/// with the worker), the subreaper reason and Landlock.
fn containment_args(cmd: &mut Command, launch: &WorkerLaunch, setup: &WorkerSetup) -> Vec<PathBuf> {
    for i in 0..launch.inherit.len() {
        cmd.arg("--lock-fd")
            .arg((WORKER_LOCK_FD + i as RawFd).to_string());
    }
    if let Some(dir) = setup.scratch_parent.as_deref() {
        cmd.arg("--scratch-parent").arg(dir);
    }
    for path in &setup.hide {
        cmd.arg("--hide").arg(path);
    }
    let limits = setup.limits.make();
    for (controller, dir) in &limits {
        let mut value = std::ffi::OsString::from(format!("{}=", controller.name()));
        value.push(dir);
        cmd.arg("--limits-cgroup").arg(value);
    }
    if setup.process.mode == ProcessMode::Subreaper {
        cmd.arg("--process-containment-reason")
            .arg(FORCED_SUBREAPER);
    }
    if setup.filesystem == FilesystemMode::Off {
        cmd.arg("--landlock").arg("off");
    }
    cmd.args(&launch.engine);
    limits.into_iter().map(|(_, dir)| dir).collect()
}

/// In the forked child: the lock descriptors at `WORKER_LOCK_FD..`, the parent-death
/// signal, and an exit if the broker is already gone.
fn place_locks(cmd: &mut Command, launch: &WorkerLaunch) {
    // Source descriptors, padded with -1; copied into the closure so it allocates nothing.
    let mut sources: [RawFd; MAX_INHERITED] = [-1; MAX_INHERITED];
    for (slot, fd) in sources.iter_mut().zip(&launch.inherit) {
        *slot = fd.as_raw_fd();
    }
    let count = launch.inherit.len();
    let broker_pid = std::process::id() as i32;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (dup, dup2, fcntl, prctl, getppid, _exit); it
    // allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            // First move every source out of the target range, so placing one cannot
            // overwrite another that still has to be placed.
            let mut moved: [RawFd; MAX_INHERITED] = [-1; MAX_INHERITED];
            for i in 0..count {
                let fd = libc::fcntl(sources[i], libc::F_DUPFD_CLOEXEC, 16);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                moved[i] = fd;
            }
            for (i, &fd) in moved.iter().enumerate().take(count) {
                let target = WORKER_LOCK_FD + i as RawFd;
                // dup2 clears close-on-exec on the new descriptor.
                if libc::dup2(fd, target) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            // The broker may have died between fork and prctl; then nobody would signal us.
            if libc::getppid() != broker_pid {
                libc::_exit(70);
            }
            Ok(())
        });
    }
}
