//! Collecting the exit statuses of child processes, and the child-subreaper attribute that
//! makes a process the parent of its orphaned descendants (the broker and the worker both
//! are one).

use rustix::io::Errno;
use rustix::process::{Pid, WaitOptions, WaitStatus, wait, waitpid};

/// What one non-blocking wait found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaped {
    /// A child ended and is reaped: its exit code, or 128 + the signal that killed it.
    Exited { pid: i32, code: i32 },
    /// The child (or every child) still runs.
    Running,
    /// No such child: never ours, or already reaped (`ECHILD`).
    NoChild,
    /// Interrupted by a signal (`EINTR`): ask again.
    Interrupted,
    /// Any other failure.
    Failed,
}

/// Reaps `pid` if it has ended, without blocking; `None` reaps any child.
pub fn reap(pid: Option<i32>) -> Reaped {
    // rustix's `waitpid(None)` is `waitpid(0)`, the caller's process group only; any child
    // is `wait`.
    let found = match pid {
        None => wait(WaitOptions::NOHANG),
        Some(raw) => match positive(raw) {
            Some(pid) => waitpid(Some(pid), WaitOptions::NOHANG),
            None => return Reaped::NoChild,
        },
    };
    match found {
        Ok(None) => Reaped::Running,
        Ok(Some((pid, status))) => Reaped::Exited {
            pid: pid.as_raw_nonzero().get(),
            code: code(status),
        },
        Err(Errno::CHILD) => Reaped::NoChild,
        Err(Errno::INTR) => Reaped::Interrupted,
        Err(_) => Reaped::Failed,
    }
}

/// Waits for `pid` to end and reaps it (a child that failed before its exec, a worker
/// nothing else waits for). Nothing for a pid that is not a child.
pub fn reap_blocking(pid: i32) {
    if let Some(pid) = positive(pid) {
        let _ = waitpid(Some(pid), WaitOptions::empty());
    }
}

/// A pid that names one process (rustix's `Pid` is positive).
fn positive(raw: i32) -> Option<Pid> {
    if raw > 0 { Pid::from_raw(raw) } else { None }
}

/// The exit code of an ended child: its status, or 128 + the signal that killed it.
fn code(status: WaitStatus) -> i32 {
    status
        .exit_status()
        .or_else(|| status.terminating_signal().map(|sig| 128 + sig))
        .unwrap_or(0)
}

/// Makes this process a child subreaper: its orphaned descendants are re-parented to it.
pub fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(Pid::INIT)).map_err(Into::into)
}

/// Whether this process is a child subreaper.
pub fn is_subreaper() -> bool {
    rustix::process::child_subreaper().is_ok_and(|flag| flag.is_some())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Held by every test of this crate that starts a child: `reap(None)` would take
    /// another test's child.
    pub(crate) static CHILDREN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    pub(crate) fn children() -> std::sync::MutexGuard<'static, ()> {
        CHILDREN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[test]
    #[expect(clippy::zombie_processes, reason = "the call under test reaps it")]
    fn an_ended_child_is_reaped_with_its_code_and_then_is_no_child() {
        let _children = children();
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .expect("sh");
        let pid = i32::try_from(child.id()).expect("pid");
        let found = loop {
            match reap(Some(pid)) {
                Reaped::Running | Reaped::Interrupted => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                other => break other,
            }
        };
        assert_eq!(found, Reaped::Exited { pid, code: 3 });
        assert_eq!(reap(Some(pid)), Reaped::NoChild);
        assert_eq!(reap(Some(0)), Reaped::NoChild);
    }

    #[test]
    #[expect(clippy::zombie_processes, reason = "the call under test reaps it")]
    fn any_child_is_reaped_also_one_in_another_process_group() {
        use std::os::unix::process::CommandExt;
        let _children = children();
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 5"])
            .process_group(0)
            .spawn()
            .expect("sh");
        let pid = i32::try_from(child.id()).expect("pid");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            match reap(None) {
                Reaped::Exited { pid: found, code } if found == pid => {
                    assert_eq!(code, 5);
                    return;
                }
                _ => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        }
        panic!("the child in its own process group was never reaped");
    }
}
