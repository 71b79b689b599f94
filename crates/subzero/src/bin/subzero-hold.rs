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

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    // SAFETY: setting dispositions to SIG_IGN touches no memory of ours.
    unsafe {
        for signal in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
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
    let pidfd = 3 + count - 1;
    wait_readable(pidfd);
    if let Some(dir) = cgroup {
        end_cgroup(&dir);
    }
    ExitCode::SUCCESS
}

/// Waits until `fd` polls readable (the worker exited) or cannot be polled.
fn wait_readable(fd: i32) {
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `poll` is a live pollfd for the call.
        let ready = unsafe { libc::poll(&mut poll, 1, -1) };
        if ready > 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Kills the worker's cgroup and waits until the kernel reports it empty.
fn end_cgroup(dir: &std::path::Path) {
    loop {
        let populated = std::fs::read_to_string(dir.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|line| line == "populated 1"));
        if !populated {
            return;
        }
        if std::fs::write(dir.join("cgroup.kill"), b"1").is_err() && !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
