//! Descriptor hygiene: every descriptor the worker holds is close-on-exec, the inherited
//! lock descriptors (the child's lock and its workspace slots) included — unless the
//! worker runs on the subreaper fallback.
//!
//! - Inside a PID namespace or a cgroup of its own, the broker outside the tree holds the
//!   locks until the kernel reports the tree gone, and the worker holds its copies until
//!   it has torn the tree down (also when the broker dies first). No tool process gets one,
//!   so none can `flock(LOCK_UN)` them, close them or keep them past its tree.
//! - On the subreaper fallback nothing outside the tree can prove it gone, so the tool
//!   processes inherit the locks: the kernel then releases them only when the last member of
//!   the tree exits. The receipts say so (`containment.ownership`).
#![allow(unsafe_code)]

use std::os::fd::RawFd;

/// Who holds the lock descriptors while the worker lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockHolders {
    /// The broker and the worker, close-on-exec: no tool process gets one.
    BrokerAndWorker,
    /// Every process of the tree, the tools included (the subreaper fallback).
    WholeTree,
}

impl LockHolders {
    /// Whether tool processes inherit the locks.
    pub fn tools_hold_locks(self) -> bool {
        self == LockHolders::WholeTree
    }

    /// `containment.ownership.summary`.
    pub fn summary(self) -> &'static str {
        match self {
            LockHolders::BrokerAndWorker => {
                "the broker and the worker hold the child lock and the workspace slots close-on-exec; no tool process holds one, and they are released only once the whole tree is gone"
            }
            LockHolders::WholeTree => {
                "subreaper fallback: tool processes inherit the child lock and the workspace slots, so a tool could release them; enable PID namespaces or a cgroup v2 subtree to keep them out of the tools"
            }
        }
    }
}

/// Marks every descriptor above stderr close-on-exec, except the lock descriptors when
/// `holders` is [`LockHolders::WholeTree`]. Fails when one of `lock_fds` is not an open
/// descriptor above 2.
pub fn prepare(lock_fds: &[RawFd], holders: LockHolders) -> std::io::Result<()> {
    let inherit = holders.tools_hold_locks();
    for &fd in lock_fds {
        if fd <= 2 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--lock-fd must be above 2",
            ));
        }
        set_cloexec(fd, !inherit)?;
    }
    let entries = std::fs::read_dir("/proc/self/fd")?;
    let fds: Vec<RawFd> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    for fd in fds {
        if fd > 2 && !lock_fds.contains(&fd) {
            // The read_dir descriptor itself is already closed (EBADF): ignore failures.
            let _ = set_cloexec(fd, true);
        }
    }
    Ok(())
}

/// libc's `fcntl`: the descriptor is a bare number (from `--lock-fd` or `/proc/self/fd`) this
/// process holds no `OwnedFd` of, which rustix's `fcntl` would want borrowed.
fn set_cloexec(fd: RawFd, on: bool) -> std::io::Result<()> {
    // SAFETY: F_GETFD/F_SETFD only read and write the descriptor flags of `fd`; an invalid
    // descriptor yields -1/EBADF, which is reported. No memory is passed to the kernel.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let wanted = if on {
        flags | libc::FD_CLOEXEC
    } else {
        flags & !libc::FD_CLOEXEC
    };
    if wanted != flags {
        // SAFETY: as above; sets only the descriptor flags.
        let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, wanted) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
