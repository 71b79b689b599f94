//! Kernel features the supervisor relies on (subreaper, parent-death signal) and the
//! Landlock ABI, which the workers use to enforce filesystem grants on tool processes.
//! The Landlock query is libc's `syscall`: rustix has no Landlock.
#![allow(unsafe_code)]

use rustix::io::Errno;
use rustix::process::{Signal, parent_process_death_signal, set_parent_process_death_signal};
use subzero_runtime::config::{Config, FilesystemContainmentConfig};
use subzero_runtime::supervisor::reap;

use super::report::Check;

/// Every kernel check, Landlock as the configuration (`[containment] filesystem`) has
/// it. Sets this (short-lived) process's own subreaper and parent-death flags to prove
/// they can be set, and clears the latter again.
pub fn check_kernel(config: Option<&Config>) -> Vec<Check> {
    let filesystem = config.map_or(FilesystemContainmentConfig::Auto, |c| {
        c.containment.filesystem
    });
    vec![
        check_subreaper(),
        check_pdeathsig(),
        check_landlock(filesystem),
    ]
}

fn check_subreaper() -> Check {
    match reap::become_subreaper() {
        Ok(()) => Check::pass("subreaper", "PR_SET_CHILD_SUBREAPER can be set"),
        Err(e) => Check::warn(
            "subreaper",
            format!(
                "PR_SET_CHILD_SUBREAPER failed: {e}; brokers run, but escaped tool processes of a crashed worker can survive"
            ),
            "run on Linux ≥ 3.4 outside a seccomp profile that filters prctl",
        ),
    }
}

fn check_pdeathsig() -> Check {
    let set = set_parent_process_death_signal(Some(Signal::TERM))
        .and_then(|()| parent_process_death_signal());
    let _ = set_parent_process_death_signal(None);
    match set {
        Ok(Some(Signal::TERM)) => {
            Check::pass("parent-death signal", "PR_SET_PDEATHSIG works (SIGTERM)")
        }
        Ok(other) => Check::fail(
            "parent-death signal",
            format!("PR_SET_PDEATHSIG did not stick (read back {other:?})"),
            "run on Linux outside a seccomp profile that filters prctl; every worker start sets it, so workers cannot start without it",
        ),
        Err(e) => Check::fail(
            "parent-death signal",
            format!("PR_SET_PDEATHSIG failed: {e}"),
            "run on Linux outside a seccomp profile that filters prctl; every worker start sets it, so workers cannot start without it",
        ),
    }
}

fn check_landlock(configured: FilesystemContainmentConfig) -> Check {
    let abi = landlock_abi();
    if configured == FilesystemContainmentConfig::Off {
        let kernel = match abi {
            Ok(abi) => format!("the kernel has Landlock ABI {abi}"),
            Err(errno) => format!("the kernel has no Landlock either ({errno})"),
        };
        return Check::warn(
            "landlock",
            format!(
                "off by configuration ([containment] filesystem = \"off\"; {kernel}): filesystem grants are not enforced, so tool processes write wherever you can, and templates with require_enforcement = true or a read-only bash fail with unsupported_grant"
            ),
            "remove `filesystem = \"off\"` from [containment] in the config file (or set it to \"auto\")",
        );
    }
    match abi {
        Ok(abi) => Check::pass(
            "landlock",
            format!(
                "ABI {abi}: every bash and MCP server process of a read-only child (researcher, read_only = true) gets a read-only filesystem, and a write-capable child's write only its workspace, scratch space and writable_paths (reads and network are not restricted; `[containment] filesystem = \"off\"` turns it off)"
            ),
        ),
        Err(errno) => {
            let why = match errno {
                Errno::OPNOTSUPP => "built into the kernel but not enabled at boot",
                Errno::NOSYS => "not built into this kernel",
                _ => "unavailable",
            };
            Check::warn(
                "landlock",
                format!(
                    "Landlock is {why} ({errno}): filesystem grants are not enforced, so tool processes write wherever you can, and templates with require_enforcement = true or a read-only bash fail with unsupported_grant"
                ),
                "enable it: on Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK=y, add `landlock` to the `lsm=` kernel parameter (keep the modules listed in /sys/kernel/security/lsm) and reboot",
            )
        }
    }
}

/// The kernel's Landlock ABI version: `landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)`, the query the kernel documents for this.
fn landlock_abi() -> Result<i64, Errno> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel
    // reads and writes no memory; it only returns the ABI version or an error.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0_usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if version < 0 {
        Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::NOSYS))
    } else {
        Ok(version)
    }
}
