//! The namespaces a tool process enters before its view is built: a mount namespace, and
//! (for a worker without `CAP_SYS_ADMIN`) a user namespace of its own mapping its ids 1:1;
//! and the probe that finds whether the kernel allows them. The id maps and the clone are
//! `subzero_sys`'s; `fork` and `_exit` stay libc's (rustix has no safe form of them).
#![allow(unsafe_code)]

use std::io;

use rustix::thread::UnshareFlags;
use subzero_sys::child::{clone_on, pipe, read_full};
pub(super) use subzero_sys::namespace::IdMaps;

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
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_NEWNS | libc::SIGCHLD;
        // SAFETY: the child runs `exit_at_once` on `stack`, which outlives it: with
        // CLONE_VFORK this thread waits until the child has released the shared memory (at
        // its exit) before `clone` returns. No pidfd is asked for.
        let cloned = unsafe {
            clone_on(
                &mut stack,
                exit_at_once,
                flags,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        return cloned.map(|_| ()).map_err(refused);
    }
    let maps = IdMaps::current();
    let (read, write) =
        pipe().map_err(|e| format!("cannot make a pipe for the namespace probe: {e}"))?;
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
            let _ = rustix::io::write(&write, &[code]);
            libc::_exit(0)
        }
    }
    drop(write);
    let mut code = [0u8; 1];
    match read_full(&read, &mut code) {
        1 if code[0] == 0 => Ok(()),
        1 => Err(refused(i32::from(code[0]))),
        _ => Err("the namespace probe did not answer".to_owned()),
    }
}

pub(super) fn flags(user_namespace: bool) -> UnshareFlags {
    if user_namespace {
        UnshareFlags::NEWUSER | UnshareFlags::NEWNS
    } else {
        UnshareFlags::NEWNS
    }
}

/// `unshare` and, with a user namespace, the 1:1 maps. Async-signal-safe; `Err(errno)`.
///
/// # Safety
/// Call only in a single-threaded process (a forked child).
pub(super) unsafe fn enter_namespaces(
    flags: UnshareFlags,
    user_namespace: bool,
    maps: &IdMaps,
) -> Result<(), i32> {
    // SAFETY: the caller's contract: no other thread shares this process's file table or
    // filesystem context.
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(|e| e.raw_os_error())?;
    if user_namespace {
        // The worker is non-dumpable, which makes /proc/self root's: only a dumpable
        // process may write its own maps. This process execs (and is dumpable again)
        // right after; its Landlock domain-to-be has no power over it meanwhile.
        subzero_sys::namespace::map_ids(maps).map_err(|(_, errno)| errno)?;
    }
    Ok(())
}
