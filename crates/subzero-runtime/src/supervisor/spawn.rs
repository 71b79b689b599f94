//! Starting worker processes: the only place in the broker that creates a process.
//!
//! A worker is `subzero-worker` (next to the broker's executable) run as `worker --lock-fd 3
//! [--lock-fd 4 …] --scratch-parent <state>/scratch --hide PATH… [--limits-cgroup …]`,
//! cloned by [`super::launch`] straight into its own PID namespace (the worker is its
//! init), else into its own cgroup (`--cgroup DIR`, where the broker found a writable
//! cgroup v2 subtree at start), else as a plain subreaper — each fallback with
//! `--process-containment-reason` saying why the stronger one is not in force
//! (`[containment] process = "cgroup"` skips the namespace; `"subreaper"` both):
//! - in a new process group, so one signal reaches the worker and nothing of the host;
//! - with an empty environment (no ambient secret can leak into a child agent) but for
//!   `SUBZERO_LOG`;
//! - with the child's flock-held lock file as fd 3 and its workspace slots as fd 4, 5,
//!   which the worker holds close-on-exec (its tools get none, except on the subreaper
//!   fallback); the broker keeps its own copies until the worker and its whole tree are
//!   gone ([`SpawnedWorker::locks`]);
//! - with the state directory's `scratch/` as the parent of the private, flock-held
//!   directory it makes for raw tool output (a spawner started without one, such as
//!   doctor's, leaves the worker to make it in the system temp directory);
//! - with a parent-death signal (SIGTERM), so a worker whose broker vanished tears its
//!   tree down even before it notices EOF on its control pipe.
//!
//! The parent-death signal fires when the *thread* that forked the worker exits, so
//! every worker is cloned by one long-lived spawner thread, never by a pool thread.

use std::ffi::OsString;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::thread;

use tokio::net::unix::pipe;
use tokio::sync::oneshot;

use super::cgroup::CgroupParent;
use super::holder::HolderPlan;
use super::launch::{self, Alive, Placement, Program, StartError, Started};
use super::limits::LimitParents;

/// The descriptor number at which a worker finds the child's lock file; the slot
/// locks, when any, follow it (4, 5, …). Each is named to the worker by a `--lock-fd`.
pub const WORKER_LOCK_FD: RawFd = launch::FIRST_LOCK_FD;

/// At most this many lock descriptors are passed to a worker (child lock, worker slot,
/// writer slot).
const MAX_WORKER_LOCKS: usize = 3;

/// The worker binary's file name, installed next to `subzero`.
pub const WORKER_BINARY: &str = "subzero-worker";

/// The executable the broker starts workers from: `subzero-worker` next to the broker's
/// own executable (`broker_exe`). It holds the worker's code alone, so a child maps and
/// touches less and starts faster, and the broker's binary holds none of it (nor the regex
/// engine its tools bring), which is a third of the broker's cold start.
pub fn worker_executable(broker_exe: &std::path::Path) -> PathBuf {
    broker_exe.with_file_name(WORKER_BINARY)
}

/// Why `worker_exe` cannot be started, with the fix; `None` when it is an executable file.
pub fn worker_missing(worker_exe: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(worker_exe) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => None,
        Ok(_) => Some(format!(
            "{} is not an executable file: reinstall subzero (`cargo install --path crates/subzero` installs `subzero`, `{WORKER_BINARY}` and `subzero-hold` side by side)",
            worker_exe.display()
        )),
        Err(e) => Some(format!(
            "the worker binary {} cannot be found ({e}): `{WORKER_BINARY}` must be installed next to `subzero` (`cargo install --path crates/subzero` installs `subzero`, `{WORKER_BINARY}` and `subzero-hold` side by side)",
            worker_exe.display()
        )),
    }
}

/// The argument that tells a worker why it is not init of a PID namespace.
const REASON_ARG: &str = "--process-containment-reason";

/// How to get PID namespaces where the kernel refused them (also in `subzero doctor`).
pub const PID_NAMESPACE_HINT: &str = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces>0; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) or run without a seccomp profile that blocks clone";

/// Which process-tree containment the spawner asks its workers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcessMode {
    /// Each worker as init of its own PID namespace, else in its own
    /// cgroup where the broker found a writable cgroup v2 subtree, else the subreaper,
    /// each with the reason the stronger one is not in force.
    #[default]
    Auto,
    /// Each worker in its own cgroup, never a PID namespace (the config's
    /// `[containment] process = "cgroup"`); no usable cgroup is an error.
    Cgroup,
    /// `subzero-worker worker` directly: the subreaper and `/proc` sweep only (forced by the
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
    /// Never: `subzero-worker worker --landlock off`, as on a kernel without it (the config's
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
    /// `--network off`: the config's `[containment] network = "off"`.
    pub network_off: bool,
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

impl WorkerLaunch {
    /// A worker that is handed no lock and runs nothing: it says hello and exits when its
    /// control pipe closes (doctor's checks, the bench). `engine` as in
    /// [`WorkerLaunch::engine`].
    pub fn handshake(exe: &std::path::Path, cwd: &std::path::Path, engine: Vec<OsString>) -> Self {
        WorkerLaunch {
            exe: exe.to_path_buf(),
            inherit: Vec::new(),
            cwd: cwd.to_path_buf(),
            log_filter: None,
            engine,
        }
    }
}

/// A started worker with its three pipes and what the broker holds for it.
#[derive(Debug)]
pub struct SpawnedWorker {
    /// Process id (in the broker's PID namespace), which is also its process-group id.
    pub pid: i32,
    /// Says when it exited (`None` on a kernel without pidfds: the exit is polled).
    pub pidfd: Option<OwnedFd>,
    /// Control messages to the worker; dropping it is the worker's cancel-and-exit signal.
    pub stdin: pipe::Sender,
    /// Control messages from the worker.
    pub stdout: pipe::Receiver,
    /// The worker's logs.
    pub stderr: pipe::Receiver,
    /// The cgroup the worker runs in where it got no PID namespace, made for it.
    pub cgroup: Option<PathBuf>,
    /// The cgroups that bound its tool tree, made for it (`super::limits`).
    pub limits: Vec<PathBuf>,
    /// The broker's copies of the locks the worker holds, kept until the worker and its
    /// whole tree are gone (`super::conn`).
    pub locks: Vec<OwnedFd>,
    /// The pid of its lock holder (`super::holder`), once the spawner started it; none
    /// where it could not be.
    pub holder: Option<oneshot::Receiver<i32>>,
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
            network_off: false,
            hide: Vec::new(),
            limits: Arc::new(LimitParents::none()),
        })
    }

    fn start(setup: WorkerSetup) -> io::Result<Self> {
        let handle = tokio::runtime::Handle::current();
        let (requests, inbox) = mpsc::channel::<(WorkerLaunch, Reply)>();
        let alive = Alive::new()?;
        thread::Builder::new()
            .name("subzero-spawner".into())
            .spawn(move || {
                let _runtime = handle.enter();
                for (launch, reply) in inbox {
                    let exe = launch.exe.clone();
                    let mut spawned = spawn_now(launch, &setup, &alive);
                    let holder = spawned.as_mut().ok().and_then(|w| {
                        let plan =
                            HolderPlan::new(&exe, &w.locks, w.pidfd.as_ref(), w.cgroup.as_deref())?;
                        let (tx, rx) = oneshot::channel();
                        w.holder = Some(rx);
                        Some((plan, tx))
                    });
                    // The receiver may have given up; the worker then sees its stdin close.
                    let _ = reply.send(spawned);
                    // After the answer: the holder adds nothing to the worker's start.
                    if let Some((plan, tx)) = holder
                        && let Some(pid) = plan.start(&alive)
                    {
                        let _ = tx.send(pid);
                    }
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

fn spawn_now(
    launch: WorkerLaunch,
    setup: &WorkerSetup,
    alive: &Alive,
) -> io::Result<SpawnedWorker> {
    if launch.inherit.len() > MAX_WORKER_LOCKS {
        return Err(io::Error::other("too many descriptors to pass to a worker"));
    }
    let limit_dirs = setup.limits.make();
    let args = worker_args(&launch, setup, &limit_dirs);
    let limits: Vec<PathBuf> = limit_dirs.into_iter().map(|(_, dir)| dir).collect();
    let placed = match place(&launch, setup, args, alive) {
        Ok(placed) => placed,
        Err(err) => {
            super::limits::remove(&limits);
            return Err(err);
        }
    };
    let (started, cgroup) = placed;
    super::process::register(started.pid);
    Ok(SpawnedWorker {
        pid: started.pid,
        pidfd: started.pidfd,
        stdin: pipe::Sender::from_owned_fd(started.stdin)?,
        stdout: pipe::Receiver::from_owned_fd(started.stdout)?,
        stderr: pipe::Receiver::from_owned_fd(started.stderr)?,
        cgroup,
        limits,
        locks: launch.inherit,
        holder: None,
    })
}

/// Starts the worker in the strongest containment the configuration allows and the kernel
/// gives: its own PID namespace, else its own cgroup, else the subreaper fallback, telling
/// the worker why it got less. Returns it and the cgroup made for it.
fn place(
    launch: &WorkerLaunch,
    setup: &WorkerSetup,
    args: Vec<OsString>,
    alive: &Alive,
) -> io::Result<(Started, Option<PathBuf>)> {
    let start =
        |args: &[OsString], placement: Placement<'_>| start_as(launch, args, placement, alive);
    let with_reason = |reason: &str| {
        let mut args = args.clone();
        args.extend([OsString::from(REASON_ARG), OsString::from(reason)]);
        args
    };
    let no_namespace = match setup.process.mode {
        ProcessMode::Subreaper => {
            let started = start(&with_reason(FORCED_SUBREAPER), Placement::Plain)?;
            return started.map(|s| (s, None)).map_err(StartError::into_io);
        }
        ProcessMode::Cgroup => FORCED_CGROUP.to_owned(),
        ProcessMode::Auto => {
            let mut refusals = Vec::new();
            for &user in namespace_attempts() {
                match start(&args, Placement::Namespaces { user })? {
                    Ok(started) => return Ok((started, None)),
                    Err(StartError::Refused(why)) => refusals.push(why),
                    Err(StartError::Failed(err)) => return Err(err),
                }
            }
            format!(
                "the kernel refused a PID namespace ({}); {PID_NAMESPACE_HINT}",
                refusals.join("; ")
            )
        }
    };
    let no_cgroup = match setup.process.cgroups() {
        Some(parent) => {
            let dir = parent.worker_dir();
            let mut cgroup_args = with_reason(&no_namespace);
            cgroup_args.extend([OsString::from("--cgroup"), dir.clone().into_os_string()]);
            match super::cgroup::create_worker(&dir) {
                Ok(procs) => match start(&cgroup_args, Placement::Cgroup(&procs))? {
                    Ok(started) => return Ok((started, Some(dir))),
                    Err(failed) => {
                        let _ = std::fs::remove_dir(dir.join("tools"));
                        let _ = std::fs::remove_dir(&dir);
                        match failed {
                            StartError::Refused(why) => why,
                            StartError::Failed(err) => return Err(err),
                        }
                    }
                },
                Err(err) => format!("cannot make cgroup {}: {err}", dir.display()),
            }
        }
        None => setup
            .process
            .no_cgroup()
            .unwrap_or("none was found")
            .to_owned(),
    };
    if setup.process.mode == ProcessMode::Cgroup {
        return Err(io::Error::other(format!(
            "cannot start the worker in its cgroup: {no_cgroup}"
        )));
    }
    let reason = format!("{no_namespace}; no cgroup v2 fallback: {no_cgroup}");
    start(&with_reason(&reason), Placement::Plain)?
        .map(|s| (s, None))
        .map_err(StartError::into_io)
}

/// Starts `launch`'s program with `args` into `placement`; the outer error is a program
/// that cannot be expressed (a NUL byte), the inner one the start's.
fn start_as(
    launch: &WorkerLaunch,
    args: &[OsString],
    placement: Placement<'_>,
    alive: &Alive,
) -> io::Result<Result<Started, StartError>> {
    let program = Program::new(&launch.exe, args, &environment(launch), &launch.cwd)?;
    Ok(launch::start(&program, &launch.inherit, placement, alive))
}

/// Namespace sets to try, best first: root needs no user namespace (and one would hide
/// the owners of other uids' files); a root without `CAP_SYS_ADMIN` (a container) may still
/// get one inside a user namespace.
fn namespace_attempts() -> &'static [bool] {
    if rustix::process::geteuid().is_root() {
        &[false, true]
    } else {
        &[true]
    }
}

/// The worker's whole environment: nothing of the broker's but the log filter.
fn environment(launch: &WorkerLaunch) -> Vec<(String, String)> {
    launch
        .log_filter
        .iter()
        .map(|filter| ("SUBZERO_LOG".to_owned(), filter.clone()))
        .collect()
}

/// `worker` and the worker's containment arguments: its lock descriptors, scratch parent,
/// the paths hidden from tools, the tools' limit cgroups and Landlock.
fn worker_args(
    launch: &WorkerLaunch,
    setup: &WorkerSetup,
    limits: &[(super::limits::Controller, PathBuf)],
) -> Vec<OsString> {
    let mut args = vec![OsString::from("worker")];
    for i in 0..launch.inherit.len() {
        args.push("--lock-fd".into());
        args.push((launch::FIRST_LOCK_FD + i as RawFd).to_string().into());
    }
    if let Some(dir) = setup.scratch_parent.as_deref() {
        args.push("--scratch-parent".into());
        args.push(dir.as_os_str().to_owned());
    }
    for path in &setup.hide {
        args.push("--hide".into());
        args.push(path.as_os_str().to_owned());
    }
    for (controller, dir) in limits {
        let mut value = OsString::from(format!("{}=", controller.name()));
        value.push(dir);
        args.push("--limits-cgroup".into());
        args.push(value);
    }
    if setup.filesystem == FilesystemMode::Off {
        args.push("--landlock".into());
        args.push("off".into());
    }
    if setup.network_off {
        args.push("--network".into());
        args.push("off".into());
    }
    args.extend(launch.engine.iter().cloned());
    args
}

impl StartError {
    fn into_io(self) -> io::Error {
        match self {
            StartError::Refused(why) => io::Error::other(why),
            StartError::Failed(err) => err,
        }
    }
}
