//! Starting a child that runs code of ours before its exec: `clone` onto a stack of its own
//! ([`clone_on`]), the close-on-exec pipe through which it reports a failed step
//! ([`pipe`], [`read_full`]), and the errno of a raw call ([`errno`]).
//!
//! `clone` with a function to run stays libc's: rustix offers no safe one (only its
//! runtime's `fork`, which is for libc implementations).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::io::Errno;
use rustix::pipe::PipeFlags;

/// What the child runs: its argument is the one given to [`clone_on`]; it must end in
/// `execve` or `_exit`.
pub type ChildMain = extern "C" fn(*mut libc::c_void) -> libc::c_int;

/// `clone(main, top of stack, flags, arg, pidfd)`: the child runs `main(arg)` on `stack`.
/// Returns its pid, or the errno of the refusal.
///
/// # Safety
/// `stack` and whatever `arg` points to must stay valid for as long as the child uses them:
/// until it has exec'd or exited (with `CLONE_VM | CLONE_VFORK` the calling thread waits
/// for that; without `CLONE_VM` the child has copies). `main` may only make
/// async-signal-safe calls. With `CLONE_PIDFD` in `flags`, `pidfd` must point to a live
/// `c_int`, where the kernel stores a new descriptor the caller then owns.
pub unsafe fn clone_on(
    stack: &mut [u8],
    main: ChildMain,
    flags: libc::c_int,
    arg: *mut libc::c_void,
    pidfd: *mut libc::c_int,
) -> Result<i32, i32> {
    // SAFETY: the top of the live `stack` (16-byte aligned, as every ABI wants it); the
    // rest is the caller's contract.
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
        let top = top.map_addr(|a| a & !15);
        libc::clone(main, top, flags, arg, pidfd)
    };
    if pid < 0 { Err(errno()) } else { Ok(pid) }
}

/// The errno of the last failed libc call of this thread.
pub fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A pipe whose both ends are close-on-exec: `(read, write)`.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(PipeFlags::CLOEXEC).map_err(Into::into)
}

/// Reads until end of file or `buf` is full; returns how many bytes came.
pub fn read_full(fd: impl AsFd, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match rustix::io::read(fd.as_fd(), &mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(Errno::INTR) => {}
            Err(_) => break,
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_reads_what_was_written_until_its_end() {
        let (read, write) = pipe().expect("pipe");
        rustix::io::write(&write, b"join: errno 13").expect("write");
        drop(write);
        let mut buf = [0u8; 64];
        let n = read_full(&read, &mut buf);
        assert_eq!(&buf[..n], b"join: errno 13");
    }

    #[test]
    fn a_cloned_child_runs_on_its_own_stack_and_exits() {
        extern "C" fn exit_seven(_: *mut libc::c_void) -> libc::c_int {
            // SAFETY: `_exit` ends the child without touching the memory it shares.
            unsafe { libc::_exit(7) }
        }
        let _children = crate::reap::tests::children();
        let mut stack = vec![0u8; 16 * 1024];
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
        // SAFETY: the child only `_exit`s; with CLONE_VFORK this thread waits for that.
        let pid = unsafe {
            clone_on(
                &mut stack,
                exit_seven,
                flags,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
        .expect("clone");
        let code = loop {
            match crate::reap::reap(Some(pid)) {
                crate::reap::Reaped::Exited { code, .. } => break code,
                _ => std::thread::yield_now(),
            }
        };
        assert_eq!(code, 7);
    }
}
