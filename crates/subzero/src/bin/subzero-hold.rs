//! `subzero-hold`: holds one worker's locks until the worker's tree is gone, whoever dies
//! first.
//!
//! The broker starts it beside each worker it clones — not in the worker's tree, not in its
//! namespace, in a process group of its own — with the child lock and the workspace slots
//! at descriptors 3, 4, … and the worker's pidfd last (`subzero-hold N`: N descriptors in
//! all; `--cgroup DIR` when the worker runs in a cgroup instead of a PID namespace). The
//! broker holds the same locks itself; this process only matters when the broker and the
//! worker are SIGKILLed together: a namespace's init releases its own descriptors before the
//! kernel has ended the rest of its namespace, and nothing else outside the tree would hold
//! them. It ends when the worker's pidfd polls readable — for the init of a PID namespace,
//! only once every other process of the namespace is gone — and, on the cgroup path, once it
//! has killed the worker's cgroup and seen it empty. Termination signals do not end it (the
//! broker's, the host's); only SIGKILL does.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use subzero_sys::cgroup::Cgroup;
use subzero_sys::signal::{Signal, ignore};

#[path = "../build_info.rs"]
mod build_info;

fn main() -> ExitCode {
    let asked: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if build_info::print_if_asked("subzero-hold", &asked) {
        return ExitCode::SUCCESS;
    }
    for signal in [
        Signal::TERM,
        Signal::INT,
        Signal::HUP,
        Signal::QUIT,
        Signal::PIPE,
    ] {
        ignore(signal);
    }
    let mut args = std::env::args_os().skip(1);
    let Some(count) = args
        .next()
        .and_then(|a| a.into_string().ok())
        .and_then(|a| a.parse::<i32>().ok())
        .filter(|n| (1..=8).contains(n))
    else {
        eprintln!("subzero-hold: started by `subzero mcp` beside a worker; it is not run by hand");
        return ExitCode::from(2);
    };
    let cgroup = match (args.next(), args.next()) {
        (Some(flag), Some(dir)) if flag == "--cgroup" => Some(PathBuf::from(dir)),
        _ => None,
    };
    // SAFETY: the broker passed the worker's pidfd at this number, for this process alone;
    // nothing else here owns or closes it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(3 + count - 1) };
    wait_readable(&pidfd);
    if let Some(dir) = cgroup {
        end_cgroup(&dir);
    }
    ExitCode::SUCCESS
}

/// Waits until `fd` polls readable (the worker exited) or cannot be polled.
fn wait_readable(fd: &OwnedFd) {
    loop {
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, None) {
            Err(Errno::INTR) => {}
            _ => return,
        }
    }
}

/// Kills the worker's cgroup and waits until the kernel reports it empty.
fn end_cgroup(dir: &std::path::Path) {
    let cgroup = Cgroup::at(dir);
    while cgroup.populated() {
        if cgroup.kill().is_err() && !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
