//! Descriptor hygiene: every descriptor the worker holds is close-on-exec except the
//! inherited lock descriptors (the child's lock and its workspace slots), which tool
//! processes must inherit so the kernel-held locks live as long as any member of the tree.
#![allow(unsafe_code)]

use std::os::fd::RawFd;

/// Marks the lock descriptors inheritable and every other descriptor above stderr
/// close-on-exec. Fails when one of `lock_fds` is not an open descriptor above 2.
pub fn prepare(lock_fds: &[RawFd]) -> std::io::Result<()> {
    for &fd in lock_fds {
        if fd <= 2 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--lock-fd must be above 2",
            ));
        }
        set_cloexec(fd, false)?;
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
