//! Signals the broker and the worker send, and the termination signals a worker starts
//! with blocked.
//!
//! The broker's clone child starts the worker with [`TERMINATION`] blocked
//! ([`mask_with_termination`]); the worker unblocks them once its handlers exist
//! ([`unblock_termination`]), so a parent-death signal sent before that is pending, not
//! lost. rustix has no safe signal-mask call, so the masks are libc's.
#![allow(unsafe_code)]

pub use rustix::process::Signal;
use rustix::process::{Pid, kill_process, kill_process_group};

/// The termination signals a worker starts with blocked.
pub const TERMINATION: [Signal; 3] = [Signal::TERM, Signal::INT, Signal::HUP];

/// Sends `signal` to process `pid`; a process already gone (or a pid that names no single
/// process: 0 or less) is ignored.
pub fn send(pid: i32, signal: Signal) {
    if pid > 0
        && let Some(pid) = Pid::from_raw(pid)
    {
        let _ = kill_process(pid, signal);
    }
}

/// Sends `signal` to every process of group `pgid`; a group already gone (or 0 or less)
/// is ignored.
pub fn send_group(pgid: i32, signal: Signal) {
    if pgid > 0
        && let Some(pgid) = Pid::from_raw(pgid)
    {
        let _ = kill_process_group(pgid, signal);
    }
}

/// [`send`] for a pid as `std::process` gives it.
pub fn send_u32(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        send(pid, signal);
    }
}

/// This thread's signal mask plus [`TERMINATION`], for a child to start with.
pub fn mask_with_termination() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/pthread_sigmask/sigaddset fill the live
    // value.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask);
        for signal in TERMINATION {
            libc::sigaddset(&mut mask, signal.as_raw());
        }
        mask
    }
}

/// Unblocks [`TERMINATION`] in this process (its only thread, or the calling one).
pub fn unblock_termination() -> std::io::Result<()> {
    // SAFETY: as above; sigprocmask reads the live set and writes nothing back (null).
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in TERMINATION {
            libc::sigaddset(&mut set, signal.as_raw());
        }
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut())
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets `signal` to be ignored in this process (survives exec): no handler runs. rustix
/// has no safe `sigaction`.
pub fn ignore(signal: Signal) {
    // SAFETY: sets one signal's disposition to SIG_IGN; no handler runs, no memory is
    // passed.
    unsafe { libc::signal(signal.as_raw(), libc::SIG_IGN) };
}

/// Restores the default disposition of `signal` (for a child of a process that ignores
/// it). Async-signal-safe.
pub fn restore_default(signal: Signal) {
    // SAFETY: as in `ignore`.
    unsafe { libc::signal(signal.as_raw(), libc::SIG_DFL) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_mask_holds_the_termination_signals() {
        let mask = mask_with_termination();
        for signal in TERMINATION {
            // SAFETY: reads the live set.
            assert_eq!(unsafe { libc::sigismember(&mask, signal.as_raw()) }, 1);
        }
    }

    #[test]
    fn signals_to_no_single_process_are_ignored() {
        send(0, Signal::CONT);
        send(-1, Signal::CONT);
        send_group(0, Signal::CONT);
        send_u32(u32::MAX, Signal::CONT);
    }
}
