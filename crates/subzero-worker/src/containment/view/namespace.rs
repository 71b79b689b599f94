//! The namespaces a tool process enters before its view is built: a mount namespace, and
//! (for a worker without `CAP_SYS_ADMIN`) a user namespace of its own mapping its ids 1:1;
//! and the probe that finds whether the kernel allows them.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;

/// Whether this process has `CAP_SYS_ADMIN` in its user namespace (bit 21 of `CapEff`).
pub(super) fn has_cap_sys_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// Starts a child that makes the namespaces a tool process would, and reports whether the
/// kernel allowed it — without waiting for the child to exit: tearing a mount namespace
/// down takes the kernel a while (an RCU grace period), and the worker's hello should not
/// wait for it. The child is reaped later with every other child of the worker.
pub(super) fn try_unshare(user_namespace: bool) -> Result<(), String> {
    let refused = |errno: i32| {
        format!(
            "the kernel refused a {} for tool processes ({})",
            if user_namespace {
                "user and mount namespace"
            } else {
                "mount namespace"
            },
            io::Error::from_raw_os_error(errno)
        )
    };
    if !user_namespace {
        // The common case, on the worker's start path: a vfork-style clone straight into a
        // new mount namespace (the kernel makes it or refuses the clone), whose child only
        // exits — on a stack of its own.
        extern "C" fn exit_at_once(_: *mut libc::c_void) -> libc::c_int {
            // SAFETY: `_exit` ends the child without touching the memory it shares.
            unsafe { libc::_exit(0) }
        }
        let mut stack = vec![0u8; 16 * 1024];
        // SAFETY: the child runs `exit_at_once` on `stack` (its top, 16-byte aligned, is
        // passed), which outlives it: with CLONE_VFORK this thread waits until the child has
        // released the shared memory (at its exit) before `clone` returns.
        let pid = unsafe {
            let top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
            let top = top.map_addr(|a| a & !15);
            libc::clone(
                exit_at_once,
                top,
                libc::CLONE_VM | libc::CLONE_VFORK | flags(false) | libc::SIGCHLD,
                std::ptr::null_mut(),
            )
        };
        return if pid < 0 {
            Err(refused(errno()))
        } else {
            Ok(())
        };
    }
    let maps = IdMaps::current();
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| format!("cannot make a pipe for the namespace probe: {e}"))?;
    // SAFETY: the worker is single-threaded when it probes (before its runtime starts); the
    // child makes only raw system calls on memory prepared above and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!(
            "cannot fork a probe: {}",
            io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        // SAFETY: as above; the child reports one byte (0, or the errno) and never returns.
        unsafe {
            let code: u8 = match enter_namespaces(flags(true), true, &maps) {
                Ok(()) => 0,
                Err(errno) => u8::try_from(errno.clamp(1, 255)).unwrap_or(u8::MAX),
            };
            libc::write(write.as_raw_fd(), (&raw const code).cast(), 1);
            libc::_exit(0)
        }
    }
    drop(write);
    let mut code = [0u8; 1];
    match nix::unistd::read(&read, &mut code) {
        Ok(1) if code[0] == 0 => Ok(()),
        Ok(1) => Err(refused(i32::from(code[0]))),
        _ => Err("the namespace probe did not answer".to_owned()),
    }
}

pub(super) fn flags(user_namespace: bool) -> libc::c_int {
    if user_namespace {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS
    } else {
        libc::CLONE_NEWNS
    }
}

/// `uid_map` / `gid_map` lines mapping this process's ids 1:1.
#[derive(Debug, Clone)]
pub(super) struct IdMaps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl IdMaps {
    pub(super) fn current() -> IdMaps {
        // SAFETY: geteuid/getegid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        IdMaps {
            uid: format!("{uid} {uid} 1\n").into_bytes(),
            gid: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }
}

/// `unshare` and, with a user namespace, the 1:1 maps. Async-signal-safe; `Err(errno)`.
///
/// # Safety
/// Call only in a single-threaded process (a forked child).
pub(super) unsafe fn enter_namespaces(
    flags: libc::c_int,
    user_namespace: bool,
    maps: &IdMaps,
) -> Result<(), i32> {
    // SAFETY: plain system calls on NUL-terminated static paths and live buffers.
    unsafe {
        if libc::unshare(flags) != 0 {
            return Err(errno());
        }
        if user_namespace {
            // The worker is non-dumpable, which makes /proc/self root's: only a dumpable
            // process may write its own maps. This process execs (and is dumpable again)
            // right after; its Landlock domain-to-be has no power over it meanwhile.
            if libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 {
                return Err(errno());
            }
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &maps.uid)?;
            write_file(c"/proc/self/gid_map", &maps.gid)?;
        }
    }
    Ok(())
}

/// Writes `data` to `path` in one call; async-signal-safe.
///
/// # Safety
/// Raw system calls; `path` is NUL-terminated.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> Result<(), i32> {
    // SAFETY: see the function's contract.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        let failed = written != data.len() as isize;
        let err = errno();
        libc::close(fd);
        if failed { Err(err.max(1)) } else { Ok(()) }
    }
}

pub(super) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
