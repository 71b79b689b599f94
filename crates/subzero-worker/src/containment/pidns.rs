//! The PID-namespace keeper: `subzero worker-ns …` starts the real worker as init (PID 1)
//! of a fresh PID namespace and then only waits for it.
//!
//! Why a keeper and not the worker itself: a process cannot move itself into a new PID
//! namespace, only its children, so something outside the namespace must start the
//! worker there. The keeper is what the broker forked (its pid is the one the broker
//! supervises, its parent-death signal is the broker's); it
//!
//! 1. clones a child straight into new PID and mount namespaces — also a new user
//!    namespace mapping the caller's uid and gid 1:1 when it is not root, so files the
//!    tools create keep their owner — without changing its own namespaces, so a refusal
//!    leaves it free to fall back;
//! 2. in that child, before `execve` of `subzero worker …`: sets `PR_SET_PDEATHSIG`
//!    (SIGTERM, kept blocked until the worker has its handler) tied to the keeper, makes
//!    every mount private (nothing propagates to the host) and mounts a fresh `/proc` for
//!    the namespace;
//! 3. then forwards SIGTERM/SIGINT/SIGHUP to the worker (escalating to SIGKILL after
//!    [`ESCALATE`]), and exits with the worker's status once it has reaped it.
//!
//! When the worker — PID 1 — dies for any reason, the kernel kills every other process
//! of the namespace and the keeper's `waitpid` returns only after all of them are gone.
//! The keeper holds the inherited lock descriptors until then, so the child lock and the
//! workspace slots are free exactly when nothing of the tree is left. The worker holds
//! its own copies close-on-exec (no tool process inherits one, `super::fds`): when the
//! keeper itself is SIGKILLed, the worker's parent-death signal (SIGTERM) makes it kill
//! and reap its whole tree while it still holds them, and only then exit.
//!
//! When the kernel refuses (no user namespaces, a seccomp filter, a masked `/proc`), or
//! the broker says not to try (`--no-pid-namespace`), and the broker named a cgroup
//! (`--cgroup DIR`), the keeper makes that cgroup, forks the worker into it and, once the
//! worker is gone, kills and removes it before it exits ([`super::cgroup`]). Without a
//! usable cgroup it `exec`s the worker in its own place with
//! `--process-containment-reason`, so it runs exactly as a directly started worker
//! (subreaper containment) and says why.
#![allow(unsafe_code)]

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::cgroup::{self, Cgroup};

/// How long the worker gets to tear its tree down after a forwarded signal before the
/// keeper SIGKILLs it (and with it, through the kernel, the whole namespace).
pub const ESCALATE: Duration = Duration::from_millis(750);

/// The argument with which the keeper tells a fallback worker why it has no namespace.
pub const REASON_ARG: &str = "--process-containment-reason";

/// What the broker tells the keeper besides the worker's own arguments.
#[derive(Debug, Clone, Default)]
pub struct KeeperOptions {
    /// The cgroup to make and run the worker in where it gets no PID namespace.
    pub cgroup: Option<PathBuf>,
    /// Why the broker gave no cgroup (its probe at start), for the fallback's reason.
    pub no_cgroup: Option<String>,
    /// Do not try PID namespaces, for this reason (the configuration forces the cgroup):
    /// then a cgroup that cannot be made is an error, not a fallback.
    pub no_pid_namespace: Option<String>,
}

/// Runs the keeper: starts `subzero worker <worker_args>` in its own PID namespace, else
/// in its own cgroup, and returns its exit status, or `exec`s it in place when neither
/// can be had.
pub fn keep(options: KeeperOptions, worker_args: Vec<OsString>) -> i32 {
    let launch = match Launch::prepare(&worker_args) {
        Ok(launch) => launch,
        Err(err) => {
            eprintln!("subzero worker-ns: {err}");
            return 2;
        }
    };
    let forwarded = forwarded_signals();
    let mut old_mask = SigSet::empty();
    if let Err(err) = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&forwarded), Some(&mut old_mask)) {
        eprintln!("subzero worker-ns: cannot block signals: {err}");
        return 2;
    }
    let mut refusals = Vec::new();
    if options.no_pid_namespace.is_none() {
        for flags in attempts() {
            match launch.clone_init(flags, &old_mask, None) {
                Ok((pid, alive)) => return supervise(pid, &forwarded, alive, None),
                Err(why) => refusals.push(why),
            }
        }
    }
    let no_namespace = options.no_pid_namespace.clone().unwrap_or_else(|| {
        format!(
            "the kernel refused a PID namespace ({}); {}",
            refusals.join("; "),
            ENABLE_HINT
        )
    });
    let no_cgroup = match &options.cgroup {
        Some(dir) => match start_in_cgroup(&worker_args, dir, &no_namespace, &old_mask) {
            Ok((pid, alive, cgroup)) => return supervise(pid, &forwarded, alive, Some(cgroup)),
            Err(why) => why,
        },
        None => options
            .no_cgroup
            .clone()
            .unwrap_or_else(|| "the broker named no cgroup".to_owned()),
    };
    if options.no_pid_namespace.is_some() {
        eprintln!("subzero worker-ns: cannot start the worker in its cgroup: {no_cgroup}");
        return 2;
    }
    // Neither: become the worker, as a directly started one.
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old_mask), None);
    let reason = format!("{no_namespace}; no cgroup v2 fallback: {no_cgroup}");
    let err = launch.exec_fallback(&reason);
    eprintln!("subzero worker-ns: cannot start the worker: {err}");
    2
}

/// Makes the worker's cgroup `dir` and forks the worker into it, telling it the cgroup
/// and why it has no PID namespace. The keeper becomes a subreaper first, so the tree's
/// orphans come back to it once the worker is gone.
fn start_in_cgroup(
    worker_args: &[OsString],
    dir: &std::path::Path,
    no_namespace: &str,
    old_mask: &SigSet,
) -> Result<(Pid, OwnedFd, Cgroup), String> {
    let mut args = worker_args.to_vec();
    args.extend([
        OsString::from(cgroup::CGROUP_ARG),
        dir.as_os_str().to_owned(),
        OsString::from(REASON_ARG),
        OsString::from(no_namespace),
    ]);
    let launch = Launch::prepare(&args)?;
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| format!("cannot become a child subreaper: {e}"))?;
    let cgroup =
        Cgroup::create(dir).map_err(|e| format!("cannot make cgroup {}: {e}", dir.display()))?;
    let started = cgroup
        .procs_for_joining()
        .map_err(|e| format!("cannot open {}/cgroup.procs: {e}", dir.display()))
        .and_then(|procs| launch.clone_init(0, old_mask, Some(procs.as_raw_fd())));
    match started {
        Ok((pid, alive)) => Ok((pid, alive, cgroup)),
        Err(why) => {
            let _ = cgroup.remove();
            Err(why)
        }
    }
}

/// How to get PID namespaces where the kernel refused them (also in `subzero doctor`).
pub const ENABLE_HINT: &str = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 or user.max_user_namespaces>0; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) or run without a seccomp profile that blocks clone";

/// The termination signals a worker starts with blocked (see [`ChildPlan::worker_mask`]).
pub const TERMINATION: [Signal; 3] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];

fn worker_mask(old_mask: &SigSet) -> SigSet {
    let mut mask = *old_mask;
    for signal in TERMINATION {
        mask.add(signal);
    }
    mask
}

fn forwarded_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        set.add(signal);
    }
    set
}

/// Namespace sets to try, best first. Root needs no user namespace (and a user
/// namespace would hide the other uids' files' owners); a root without CAP_SYS_ADMIN (a
/// container) may still get one inside a user namespace.
fn attempts() -> Vec<libc::c_int> {
    let base = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    if nix::unistd::geteuid().is_root() {
        vec![base, base | libc::CLONE_NEWUSER]
    } else {
        vec![base | libc::CLONE_NEWUSER]
    }
}

/// Everything the cloned child needs, built before the clone so that the child between
/// clone and exec allocates nothing and calls only async-signal-safe functions.
struct Launch {
    exe: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl Launch {
    fn prepare(worker_args: &[OsString]) -> Result<Self, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find its own executable: {e}"))?;
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| "an argument contains a NUL byte".to_owned())
        };
        let mut argv = vec![c(exe.as_os_str().as_bytes())?, c(b"worker")?];
        for arg in worker_args {
            argv.push(c(arg.as_bytes())?);
        }
        let envp = std::env::vars_os()
            .map(|(k, v)| {
                let mut pair = k.as_bytes().to_vec();
                pair.push(b'=');
                pair.extend_from_slice(v.as_bytes());
                c(&pair)
            })
            .collect::<Result<_, _>>()?;
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        Ok(Self {
            exe: c(exe.as_os_str().as_bytes())?,
            argv,
            envp,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        })
    }

    /// Clones the worker into new namespaces (`flags`; none: a plain fork into the cgroup
    /// whose `cgroup.procs` is `join`) and waits until it has exec'd. Returns its pid and
    /// the keeper's end of the liveness pipe, or why it failed.
    fn clone_init(
        &self,
        flags: libc::c_int,
        old_mask: &SigSet,
        join: Option<RawFd>,
    ) -> Result<(Pid, OwnedFd), String> {
        let (err_r, err_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        let (alive_r, alive_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        let worker_mask = worker_mask(old_mask);
        let argv = pointers(&self.argv);
        let envp = pointers(&self.envp);
        let user = flags & libc::CLONE_NEWUSER != 0;
        // SAFETY: a raw `clone` without CLONE_VM is a fork: the child gets a copy of this
        // single-threaded process (the keeper starts no thread). The child runs only
        // `init_child`, which calls async-signal-safe functions on memory prepared above
        // and ends in `execve` or `_exit`; it never returns here.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                libc::c_long::from(flags | libc::SIGCHLD),
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
                0 as libc::c_long,
            )
        };
        if pid == 0 {
            let failed = init_child(&ChildPlan {
                worker_mask: &worker_mask,
                alive: alive_r.as_raw_fd(),
                join: join.unwrap_or(-1),
                user,
                uid_map: &self.uid_map,
                gid_map: &self.gid_map,
                exe: &self.exe,
                argv: &argv,
                envp: &envp,
            });
            report_and_exit(err_w.as_raw_fd(), failed);
        }
        if pid < 0 {
            return Err(format!("clone({}): {}", describe(flags), Errno::last()));
        }
        let pid = Pid::from_raw(pid as i32);
        drop(err_w);
        drop(alive_r);
        let mut report = [0u8; 128];
        let n = read_all(&err_r, &mut report);
        if n == 0 {
            return Ok((pid, alive_w));
        }
        let _ = waitpid(pid, None);
        let text = String::from_utf8_lossy(&report[..n]).into_owned();
        Err(format!("{} {text}", describe(flags)))
    }

    /// `exec`s `subzero worker … --process-containment-reason REASON` in this process.
    fn exec_fallback(&self, reason: &str) -> std::io::Error {
        let mut argv = self.argv.clone();
        argv.push(CString::new(REASON_ARG).unwrap_or_default());
        argv.push(CString::new(reason.replace('\0', " ")).unwrap_or_default());
        let argv = pointers(&argv);
        let envp = pointers(&self.envp);
        // SAFETY: both arrays are NULL-terminated and point into CStrings that outlive
        // the call; execve only returns on failure.
        unsafe { libc::execve(self.exe.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        std::io::Error::last_os_error()
    }
}

/// What the cloned child does before `execve`, borrowed from the keeper's memory.
struct ChildPlan<'a> {
    /// The signal mask the worker starts with: the keeper's own, plus the termination
    /// signals, which the worker unblocks once it has installed its handlers.
    worker_mask: &'a SigSet,
    alive: RawFd,
    /// `cgroup.procs` of the worker's cgroup (the cgroup path), or -1 (namespaces).
    join: RawFd,
    user: bool,
    uid_map: &'a [u8],
    gid_map: &'a [u8],
    exe: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
}

/// The child between clone and exec. Async-signal-safe only: no allocation, no lock, no
/// panic. Returns only on failure, naming the step and the errno.
fn init_child(plan: &ChildPlan<'_>) -> (&'static [u8], i32) {
    let errno = || Errno::last_raw();
    // SAFETY (whole function): every call is a plain system call on descriptors and
    // NUL-terminated strings owned by the keeper, which outlive the child's use of them.
    unsafe {
        if libc::sigprocmask(
            libc::SIG_SETMASK,
            plan.worker_mask.as_ref(),
            std::ptr::null_mut(),
        ) < 0
        {
            return (b"sigprocmask", errno());
        }
        // SIGTERM, not SIGKILL: the worker holds its own copies of the locks, and only a
        // worker that tears its tree down before it exits keeps them held until the tree
        // is gone when the keeper dies first (a SIGKILLed init releases its descriptors
        // before the kernel has killed the rest of its namespace). The signal stays
        // blocked (`worker_mask`) until the worker has its handler, so it is never lost.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) < 0 {
            return (b"prctl(PR_SET_PDEATHSIG)", errno());
        }
        // The keeper may have died before the prctl: then its end of the pipe is closed.
        let mut alive = libc::pollfd {
            fd: plan.alive,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut alive, 1, 0) != 0 {
            libc::_exit(70);
        }
        if plan.join >= 0 {
            if cgroup::join(plan.join).is_err() {
                return (b"join the cgroup", errno());
            }
            libc::execve(plan.exe.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
            return (b"execve", errno());
        }
        if plan.user {
            if !write_file(c"/proc/self/setgroups", b"deny") {
                return (b"write /proc/self/setgroups", errno());
            }
            if !write_file(c"/proc/self/uid_map", plan.uid_map) {
                return (b"write /proc/self/uid_map", errno());
            }
            if !write_file(c"/proc/self/gid_map", plan.gid_map) {
                return (b"write /proc/self/gid_map", errno());
            }
            // The worker keeps CAP_SYS_ADMIN of this namespace (and only that) across
            // exec, to give each tool process its own mount namespace (`super::caps`).
            if super::caps::keep_sys_admin_across_exec().is_err() {
                return (b"keep CAP_SYS_ADMIN", errno());
            }
        }
        // Private first: neither the /proc mount nor anything later reaches the host.
        let none = std::ptr::null::<libc::c_char>();
        if libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) < 0
        {
            return (b"make / private", errno());
        }
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) < 0
        {
            return (b"mount /proc", errno());
        }
        libc::execve(plan.exe.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
        (b"execve", errno())
    }
}

/// Writes `step: errno N` to the keeper and exits; async-signal-safe.
fn report_and_exit(fd: RawFd, (step, errno): (&'static [u8], i32)) -> ! {
    let mut line = [0u8; 96];
    let mut len = 0;
    for &b in step.iter().chain(b": errno ").take(80) {
        line[len] = b;
        len += 1;
    }
    let mut digits = [0u8; 10];
    let mut n = errno.unsigned_abs();
    let mut d = 0;
    loop {
        digits[d] = b'0' + (n % 10) as u8;
        d += 1;
        n /= 10;
        if n == 0 || d == digits.len() {
            break;
        }
    }
    while d > 0 && len < line.len() {
        d -= 1;
        line[len] = digits[d];
        len += 1;
    }
    // SAFETY: write and _exit are async-signal-safe; `line` lives on this stack.
    unsafe {
        libc::write(fd, line.as_ptr().cast(), len);
        libc::_exit(127)
    }
}

/// Opens `path` for writing and writes `data` in one call; async-signal-safe.
///
/// # Safety
/// Only system calls; `path` is NUL-terminated.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> bool {
    // SAFETY: see the function's contract.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        written == data.len() as isize
    }
}

fn describe(flags: libc::c_int) -> &'static str {
    if flags & libc::CLONE_NEWUSER != 0 {
        "user+pid+mount namespaces:"
    } else if flags & libc::CLONE_NEWPID != 0 {
        "pid+mount namespaces:"
    } else {
        "into its cgroup:"
    }
}

fn pipe() -> nix::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Reads until end of file or `buf` is full; returns how many bytes came.
fn read_all(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match nix::unistd::read(fd, &mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    n
}

/// The keeper's life after the worker exec'd: give up its own stdin and stdout (the
/// worker owns the control pipes), forward termination signals, reap the worker — and,
/// on the cgroup path, end its cgroup before returning.
fn supervise(worker: Pid, forwarded: &SigSet, alive: OwnedFd, cgroup: Option<Cgroup>) -> i32 {
    detach_stdio();
    let mut escalate_at: Option<Instant> = None;
    loop {
        if let Some(code) = reaped(worker) {
            if let Some(cgroup) = &cgroup {
                cgroup::end(cgroup);
            }
            drop(alive);
            return code;
        }
        let timeout = escalate_at.map(|at| at.saturating_duration_since(Instant::now()));
        match wait_signal(forwarded, timeout) {
            Some(Signal::SIGCHLD) | None => {}
            Some(signal) => {
                let _ = kill(worker, signal);
                escalate_at.get_or_insert_with(|| Instant::now() + ESCALATE);
            }
        }
        if escalate_at.is_some_and(|at| Instant::now() >= at) {
            let _ = kill(worker, Signal::SIGKILL);
            escalate_at = Some(Instant::now() + ESCALATE);
        }
    }
}

/// The worker's exit code once it is reaped (128 + signal when killed).
fn reaped(worker: Pid) -> Option<i32> {
    match waitpid(worker, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Some(code),
        Ok(WaitStatus::Signaled(_, signal, _)) => Some(128 + signal as i32),
        Err(Errno::ECHILD) => Some(1),
        _ => None,
    }
}

/// Waits for one of the blocked `set` (at most `timeout`); `None` on timeout.
fn wait_signal(set: &SigSet, timeout: Option<Duration>) -> Option<Signal> {
    let spec = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let spec_ptr = spec
        .as_ref()
        .map_or(std::ptr::null(), |s| s as *const libc::timespec);
    // SAFETY: `set` is a valid sigset; `spec_ptr` is null or points at `spec`, alive for
    // the call; no siginfo is requested.
    let signal = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), spec_ptr) };
    Signal::try_from(signal).ok()
}

/// Points the keeper's stdin and stdout at /dev/null, so the worker alone holds the
/// control pipes (their end of file is the worker's).
fn detach_stdio() {
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    for target in [0, 1] {
        // SAFETY: dup2 onto the standard descriptors; `null` is open.
        unsafe { libc::dup2(null.as_raw_fd(), target) };
    }
}
