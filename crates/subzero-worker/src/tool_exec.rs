//! `subzero-worker tool-exec`: how the Pi worker starts each `bash` command.
//!
//! Pi's tools run inside Node, and Node holds the model key in its memory. A command Pi's
//! `bash` runs must not read it, nor anything Node holds open. So Node starts every command
//! as `subzero-worker tool-exec --access … --root … --scratch … [--writable …] -- SHELL -c CMD`,
//! which — in the new process, before the shell exists —
//!
//! 1. closes every descriptor above stderr (the transcript and the init's channel that Node
//!    inherited stay with Node);
//! 2. enters a Landlock domain of its own, nested in Node's: the grant's write rules (the
//!    workspace, the scratch directory and the writable paths, or nothing for a read-only
//!    grant). A process in a nested domain cannot ptrace a process of its parent domain, so
//!    Node's `/proc/<pid>/mem`, `environ` and `fd` are closed to the command and all it
//!    starts;
//! 3. ignores SIGXFSZ again (Node reset it), so a write past the file-size bound fails with
//!    `EFBIG` as in every other tool process;
//! 4. execs the shell (in the process group Node made for it).
//!
//! Without Landlock there is no such domain: the Pi worker then offers no `bash`.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use crate::containment::landlock::{self, Access, Ruleset, Support};

/// The arguments of `subzero-worker tool-exec`.
#[derive(Debug, Clone)]
pub struct ToolExecOptions {
    /// `read-only` or `workspace`.
    pub access: String,
    /// The workspace root (writable under `workspace`).
    pub root: PathBuf,
    /// The worker's scratch directory (writable under `workspace`).
    pub scratch: PathBuf,
    /// The grant's writable paths.
    pub writable: Vec<PathBuf>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// Confines this process as the module says and execs the command; returns only on failure
/// (126, as a shell does for a command it cannot run).
pub fn tool_exec(options: ToolExecOptions) -> i32 {
    close_inherited();
    let access = match options.access.as_str() {
        "read-only" => Access::ReadOnly,
        "workspace" => Access::Workspace {
            writable: options.writable.clone(),
        },
        other => return refuse(&format!("unknown access {other:?}")),
    };
    let abi = match landlock::probe(false) {
        Support::Available { abi } => *abi,
        Support::Unavailable { why } => {
            return refuse(&format!("a tool needs a nested Landlock domain, but {why}"));
        }
    };
    let ruleset = match Ruleset::build(&access, abi, &options.root, &options.scratch) {
        Ok(ruleset) => ruleset,
        Err(e) => return refuse(&format!("the tool's Landlock ruleset cannot be built: {e}")),
    };
    let mut restrict = ruleset.pre_exec();
    if let Err(e) = restrict() {
        return refuse(&format!("cannot enter the tool's Landlock domain: {e}"));
    }
    drop(ruleset);
    ignore_file_size_signal();
    let Some((program, args)) = options.command.split_first() else {
        return refuse("no command to run");
    };
    let err = std::process::Command::new(program).args(args).exec();
    refuse(&format!("cannot run {}: {err}", program.to_string_lossy()))
}

fn refuse(why: &str) -> i32 {
    eprintln!("subzero-worker tool-exec: {why}");
    126
}

/// A write past the tool bounds' `RLIMIT_FSIZE` then fails with `EFBIG`, as in the Rust
/// worker's tool processes (`containment/limits.rs`), instead of SIGXFSZ ending the command:
/// Node (libuv) resets every signal disposition when it starts a process, so the one the
/// init set for Node does not reach the command. Ignored dispositions survive exec.
fn ignore_file_size_signal() {
    subzero_sys::signal::ignore(subzero_sys::signal::Signal::XFSZ);
}

/// Closes every descriptor above 2. (`close_range` and `close` of bare descriptor numbers
/// are libc's: rustix has no `close_range`, and its `close` wants a descriptor it owns.)
fn close_inherited() {
    // SAFETY: close_range takes three integers and touches no memory of ours.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, 3_u32, u32::MAX, 0_u32) };
    if closed == 0 {
        return;
    }
    // A kernel without close_range (before 5.9): close what /proc lists.
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    for fd in fds.into_iter().filter(|fd| *fd > 2) {
        // SAFETY: closing a descriptor number; an already closed one gives EBADF.
        unsafe { libc::close(fd) };
    }
}
