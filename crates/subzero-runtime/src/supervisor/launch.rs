//! The one `clone` of the broker: a worker process started straight into what contains it.
//!
//! The spawner thread ([`super::spawn`]) calls [`start`] for every worker. The broker itself
//! is the process outside the worker's tree that proves ownership — there is no keeper
//! process in between:
//!
//! - [`Placement::Namespaces`]: new PID and mount namespaces (and a user namespace mapping
//!   the broker's uid and gid 1:1 when it is not root). The worker is init of its PID
//!   namespace: when it dies for any reason the kernel kills every other process of the
//!   namespace, and the worker becomes reapable only once all of them are gone. The broker
//!   keeps its own copies of the lock descriptors until then ([`super::conn`]), so the locks
//!   are free exactly when nothing of the tree is left — also when the worker was
//!   SIGKILLed, whose own copies close before the kernel has emptied its namespace.
//! - [`Placement::Cgroup`]: a fresh cgroup v2 of its own, which the broker kills and removes
//!   once the worker is gone, before it lets go of the locks.
//! - [`Placement::Plain`]: nothing (the subreaper fallback).
//!
//! Between clone and exec the child runs [`Plan::run`]: async-signal-safe system calls only,
//! on memory prepared before the clone, allocating nothing. Where it can (no user
//! namespace to map) the clone shares the broker's memory and suspends the spawner thread
//! until the child has exec'd (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does): no page
//! table of the broker is copied. A child that maps its own ids must be dumpable to write
//! them, which a child sharing the (non-dumpable) broker's memory cannot be, so it gets a
//! copy instead.
//!
//! The child's steps are rustix's and `subzero_sys`'s where they take what the plan holds;
//! the signal mask, `dup2` onto bare descriptor numbers, `poll` and `close` of raw
//! descriptors, `execve` and `_exit` stay libc's (rustix has no safe form of them).
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::mount::MountFlags;
use subzero_sys::child::{errno, pipe, read_full};
use subzero_sys::namespace::{Failed, IdMaps, make_mounts_private, map_ids};
use subzero_sys::signal::Signal;

/// `CLONE_PIDFD` (Linux 5.2): the parent gets a descriptor that polls readable when the
/// child has exited.
const CLONE_PIDFD: libc::c_int = 0x1000;

/// The child's stack until it execs.
const STACK_BYTES: usize = 64 * 1024;

/// Descriptors at most passed besides stdio: a worker's child lock and two slots, and for
/// its lock holder a copy of its pidfd after them.
pub const MAX_LOCKS: usize = 4;

/// The first descriptor number a lock is placed at (3, 4, 5).
pub const FIRST_LOCK_FD: RawFd = 3;

/// What the worker is cloned into.
#[derive(Debug, Clone, Copy)]
pub(super) enum Placement<'a> {
    /// New PID and mount namespaces, and with `user` a user namespace mapping this
    /// process's ids 1:1.
    Namespaces { user: bool },
    /// The cgroup whose `cgroup.procs` (open for writing) this is.
    Cgroup(&'a OwnedFd),
    /// Nothing beyond its own process group (the subreaper fallback).
    Plain,
}

/// A program to start, as the C strings the child needs, built before the clone.
#[derive(Debug)]
pub(super) struct Program {
    exe: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    maps: IdMaps,
}

impl Program {
    /// `exe args…` in `cwd`, with exactly `env` as its environment.
    pub(super) fn new(
        exe: &Path,
        args: &[OsString],
        env: &[(String, String)],
        cwd: &Path,
    ) -> io::Result<Program> {
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "an argument holds a NUL byte")
            })
        };
        let exe = c(exe.as_os_str().as_bytes())?;
        let mut argv = vec![exe.clone()];
        for arg in args {
            argv.push(c(arg.as_bytes())?);
        }
        let envp = env
            .iter()
            .map(|(k, v)| c(format!("{k}={v}").as_bytes()))
            .collect::<io::Result<_>>()?;
        Ok(Program {
            exe,
            argv,
            envp,
            cwd: c(cwd.as_os_str().as_bytes())?,
            maps: IdMaps::current(),
        })
    }
}

/// A started worker: its pid, the descriptor that says when it exited, and the broker's
/// ends of its three pipes.
#[derive(Debug)]
pub(super) struct Started {
    pub pid: i32,
    /// `None` on a kernel without `CLONE_PIDFD`: the exit is then polled.
    pub pidfd: Option<OwnedFd>,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// Why a start failed.
#[derive(Debug)]
pub(super) enum StartError {
    /// The kernel refused the placement (the text says which step and why); a weaker
    /// one may still work.
    Refused(String),
    /// Anything else: no placement would help.
    Failed(io::Error),
}

/// A pipe whose write end only the broker holds: a child polls the read end to learn
/// whether the broker died before its parent-death signal was set.
#[derive(Debug)]
pub(super) struct Alive {
    read: OwnedFd,
    write: OwnedFd,
}

impl Alive {
    pub(super) fn new() -> io::Result<Alive> {
        let (read, write) = pipe()?;
        Ok(Alive { read, write })
    }
}

/// Starts `program` into `placement` with `locks` at descriptors 3, 4, 5. Call only from
/// the spawner thread, which lives as long as the broker: the child's parent-death signal
/// is tied to it.
pub(super) fn start(
    program: &Program,
    locks: &[OwnedFd],
    placement: Placement<'_>,
    alive: &Alive,
) -> Result<Started, StartError> {
    if locks.len() > MAX_LOCKS {
        return Err(StartError::Failed(io::Error::other(
            "too many descriptors to pass to a process",
        )));
    }
    let failed = StartError::Failed;
    let (stdin_r, stdin_w) = pipe().map_err(failed)?;
    let (stdout_r, stdout_w) = pipe().map_err(failed)?;
    let (stderr_r, stderr_w) = pipe().map_err(failed)?;
    let (err_r, err_w) = pipe().map_err(failed)?;
    let argv = pointers(&program.argv);
    let envp = pointers(&program.envp);
    let mut lock_fds = [-1; MAX_LOCKS];
    for (slot, fd) in lock_fds.iter_mut().zip(locks) {
        *slot = fd.as_raw_fd();
    }
    let (namespaces, user, join) = match placement {
        Placement::Namespaces { user } => (true, user, None),
        Placement::Cgroup(procs) => (false, false, Some(procs.as_fd())),
        Placement::Plain => (false, false, None),
    };
    let plan = Plan {
        mask: subzero_sys::signal::mask_with_termination(),
        alive_read: alive.read.as_raw_fd(),
        alive_write: alive.write.as_raw_fd(),
        report: err_w.as_raw_fd(),
        stdio: [
            stdin_r.as_raw_fd(),
            stdout_w.as_raw_fd(),
            stderr_w.as_raw_fd(),
        ],
        locks: lock_fds,
        lock_count: locks.len(),
        namespaces,
        user,
        join,
        maps: &program.maps,
        cwd: &program.cwd,
        exe: &program.exe,
        argv: &argv,
        envp: &envp,
    };
    let (pid, pidfd) = clone_child(&plan, clone_flags(namespaces, user)).map_err(|errno| {
        let err = io::Error::from_raw_os_error(errno);
        if namespaces {
            StartError::Refused(format!("clone({}): {err}", describe(namespaces, user)))
        } else {
            StartError::Failed(err)
        }
    })?;
    drop((stdin_r, stdout_w, stderr_w, err_w));
    if let Some(text) = exec_failure(&err_r) {
        subzero_sys::reap::reap_blocking(pid);
        return Err(
            if namespaces || join.is_some() && text.starts_with("join") {
                StartError::Refused(format!("{} {text}", describe(namespaces, user)))
            } else {
                StartError::Failed(io::Error::other(format!("starting the worker: {text}")))
            },
        );
    }
    Ok(Started {
        pid,
        pidfd,
        stdin: stdin_w,
        stdout: stdout_r,
        stderr: stderr_r,
    })
}

/// The `clone` flags: new PID and mount namespaces when asked, a user namespace too
/// when asked (else the parent's memory is shared until the exec, as `vfork` does).
fn clone_flags(namespaces: bool, user: bool) -> libc::c_int {
    let mut flags = libc::SIGCHLD;
    if namespaces {
        flags |= libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    }
    if user {
        flags |= libc::CLONE_NEWUSER;
    } else {
        flags |= libc::CLONE_VM | libc::CLONE_VFORK;
    }
    flags
}

/// What the child reported on `report` before its exec, if it failed. Until the child
/// has exec'd, it holds the write end: end of file means it did (the descriptor is
/// close-on-exec), a line means it failed and exited.
fn exec_failure(report: &OwnedFd) -> Option<String> {
    let mut text = [0u8; 128];
    let n = read_full(report, &mut text);
    (n > 0).then(|| String::from_utf8_lossy(&text[..n]).into_owned())
}

/// Clones the child running [`Plan::run`]; on a kernel without `CLONE_PIDFD`, again
/// without it. Returns its pid and pidfd, or the errno of the refusal.
fn clone_child(plan: &Plan<'_>, flags: libc::c_int) -> Result<(i32, Option<OwnedFd>), i32> {
    let mut stack = vec![0u8; STACK_BYTES];
    let mut attempt = |flags: libc::c_int| -> Result<(i32, RawFd), i32> {
        let mut pidfd: libc::c_int = -1;
        let arg = std::ptr::from_ref(plan).cast_mut().cast::<libc::c_void>();
        // SAFETY: the child runs `child_main` on `stack` with `plan` as its argument. With
        // CLONE_VM the memory is shared and CLONE_VFORK keeps this thread (and so `stack`
        // and `plan`) waiting until the child has exec'd or exited; without CLONE_VM the
        // child has copies of both. `child_main` makes only async-signal-safe system calls
        // and ends in `execve` or `_exit`. `pidfd` is a live c_int.
        let pid = unsafe {
            subzero_sys::child::clone_on(&mut stack, child_main, flags, arg, &raw mut pidfd)
        }?;
        Ok((pid, pidfd))
    };
    let (pid, pidfd) = match attempt(flags | CLONE_PIDFD) {
        Err(libc::EINVAL) => attempt(flags)?,
        other => other?,
    };
    // SAFETY: with CLONE_PIDFD the kernel stored a new descriptor of ours in `pidfd`.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok((pid, pidfd))
}

/// Everything the child needs, borrowed from memory prepared before the clone.
struct Plan<'a> {
    mask: libc::sigset_t,
    alive_read: RawFd,
    alive_write: RawFd,
    /// Where a failed step is reported (close-on-exec).
    report: RawFd,
    stdio: [RawFd; 3],
    locks: [RawFd; MAX_LOCKS],
    lock_count: usize,
    namespaces: bool,
    user: bool,
    /// `cgroup.procs` to join.
    join: Option<BorrowedFd<'a>>,
    maps: &'a IdMaps,
    cwd: &'a CStr,
    exe: &'a CStr,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
}

extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Plan` the parent passed, alive (shared or copied) until exec.
    let plan = unsafe { &*arg.cast::<Plan<'_>>() };
    let failed = plan.run();
    report_and_exit(plan.report, failed)
}

impl Plan<'_> {
    /// The child between clone and exec. Async-signal-safe only: no allocation, no lock,
    /// no panic. Returns only on failure, naming the step and the errno.
    fn run(&self) -> Failed {
        // SAFETY: the signal mask is a live sigset_t of the plan.
        if unsafe { libc::sigprocmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut()) } < 0 {
            return (b"sigprocmask", errno());
        }
        // The broker ignores SIGPIPE; a program it starts must not inherit that.
        subzero_sys::signal::restore_default(Signal::PIPE);
        // SIGTERM, not SIGKILL: a worker that tears its tree down before it exits keeps
        // its own lock copies until the tree is gone (see the module doc).
        if let Err(e) = rustix::process::set_parent_process_death_signal(Some(Signal::TERM)) {
            return (b"prctl(PR_SET_PDEATHSIG)", e.raw_os_error());
        }
        if self.broker_died() {
            // SAFETY: `_exit` ends the child without touching memory it may share.
            unsafe { libc::_exit(70) }
        }
        if let Err(failed) = self.place_descriptors() {
            return failed;
        }
        if let Err(e) = rustix::process::setpgid(None, None) {
            return (b"setpgid", e.raw_os_error());
        }
        if let Some(procs) = self.join
            && let Err(e) = subzero_sys::cgroup::join(procs)
        {
            return (b"join the cgroup", e.raw_os_error().unwrap_or(libc::EIO));
        }
        if self.namespaces
            && let Err(failed) = self.enter_namespaces()
        {
            return failed;
        }
        if let Err(e) = rustix::process::chdir(self.cwd) {
            return (b"chdir to the workspace", e.raw_os_error());
        }
        // SAFETY: NUL-terminated strings and NULL-terminated pointer arrays the parent
        // prepared and keeps alive until the child has exec'd.
        unsafe { libc::execve(self.exe.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr()) };
        (b"execve", errno())
    }

    /// Whether the broker died before the parent-death signal was set: then no process
    /// holds the write end of the alive pipe once this copy is closed.
    fn broker_died(&self) -> bool {
        // SAFETY: closes this child's copy of a descriptor it owns and polls another one
        // through a live pollfd.
        unsafe {
            libc::close(self.alive_write);
            let mut alive = libc::pollfd {
                fd: self.alive_read,
                events: libc::POLLIN,
                revents: 0,
            };
            libc::poll(&mut alive, 1, 0) != 0
        }
    }

    /// Stdio at 0, 1, 2 and the locks at 3, 4, 5. Every source is first moved above the
    /// target range, so placing one cannot overwrite another still to be placed; `dup2`
    /// clears close-on-exec on each target.
    fn place_descriptors(&self) -> Result<(), Failed> {
        let mut sources = [-1; 3 + MAX_LOCKS];
        let count = 3 + self.lock_count;
        for (i, slot) in sources.iter_mut().enumerate().take(count) {
            let fd = if i < 3 {
                self.stdio[i]
            } else {
                self.locks[i - 3]
            };
            // SAFETY: fcntl on a descriptor of this process.
            let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 16) };
            if moved < 0 {
                return Err((b"move a descriptor", errno()));
            }
            *slot = moved;
        }
        for (target, &fd) in sources.iter().enumerate().take(count) {
            // SAFETY: dup2 between descriptors of this process.
            if unsafe { libc::dup2(fd, target as RawFd) } < 0 {
                return Err((b"dup2", errno()));
            }
        }
        Ok(())
    }

    /// In the fresh namespaces: the id maps (a user namespace), then every mount made
    /// private (nothing propagates to the host) and a `/proc` of the new PID namespace.
    fn enter_namespaces(&self) -> Result<(), Failed> {
        if self.user {
            // This child has its own copy of the broker's memory: making it dumpable (which
            // writing its own maps needs) leaves the broker non-dumpable.
            map_ids(self.maps)?;
            // The worker keeps CAP_SYS_ADMIN of this namespace (and only that) across
            // exec, to give each tool process a mount namespace of its own.
            subzero_sys::caps::keep_sys_admin_across_exec()
                .map_err(|e| (&b"keep CAP_SYS_ADMIN"[..], e))?;
        }
        make_mounts_private().map_err(|e| (&b"make / private"[..], e))?;
        let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        rustix::mount::mount(c"proc", c"/proc", c"proc", flags, None)
            .map_err(|e| (&b"mount /proc"[..], e.raw_os_error()))
    }
}

/// Writes `step: errno N` to the parent and exits; async-signal-safe.
fn report_and_exit(fd: RawFd, (step, errno): Failed) -> ! {
    let mut line = [0u8; 96];
    let mut len = 0;
    for &b in step.iter().chain(b": errno ").take(80) {
        line[len] = b;
        len += 1;
    }
    len += subzero_sys::digits::write_decimal(errno.unsigned_abs(), &mut line[len..]);
    // SAFETY: write and _exit are async-signal-safe; `line` lives on this stack. (A raw
    // descriptor number and `_exit`: libc's.)
    unsafe {
        libc::write(fd, line.as_ptr().cast(), len);
        libc::_exit(127)
    }
}

fn describe(namespaces: bool, user: bool) -> &'static str {
    match (namespaces, user) {
        (true, true) => "user+pid+mount namespaces:",
        (true, false) => "pid+mount namespaces:",
        (false, _) => "into its cgroup:",
    }
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}
