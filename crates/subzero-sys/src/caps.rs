//! The one capability a worker keeps inside its own user namespace, and its removal from
//! every tool process.
//!
//! A worker of an unprivileged broker runs as init of a PID namespace inside a user
//! namespace that maps its uid 1:1, so after `execve` it would hold no capability there.
//! The broker's clone child raises `CAP_SYS_ADMIN` into the ambient set before that `execve`
//! ([`keep_sys_admin_across_exec`]), so the worker may give each tool process a mount
//! namespace of its own — a power over its own namespaces only: the user namespace owns
//! nothing of the host. Every tool process clears its ambient and inheritable sets before
//! its own `execve` ([`drop_before_exec`]), so no tool holds any (and none can undo its
//! view). Everything here is async-signal-safe (rustix's raw `capget`, `capset` and
//! `prctl`, no allocation).

use rustix::thread::{
    CapabilitySet, capabilities, clear_ambient_capability_set, configure_capability_in_ambient_set,
    set_capabilities,
};

/// Makes `CAP_SYS_ADMIN` (held now, in a fresh user namespace) survive the coming `execve`:
/// inheritable, then ambient. Between clone and exec; `Err(errno)`.
pub fn keep_sys_admin_across_exec() -> Result<(), i32> {
    let mut sets = capabilities(None).map_err(|e| e.raw_os_error())?;
    sets.inheritable |= CapabilitySet::SYS_ADMIN;
    set_capabilities(None, sets).map_err(|e| e.raw_os_error())?;
    configure_capability_in_ambient_set(CapabilitySet::SYS_ADMIN, true)
        .map_err(|e| e.raw_os_error())
}

/// Clears the ambient and inheritable sets, so the program about to be exec'd starts with
/// no capability it did not have as a plain process of its uid (root keeps root's). Between
/// fork and exec.
pub fn drop_before_exec() -> std::io::Result<()> {
    clear_ambient_capability_set()?;
    let mut sets = capabilities(None)?;
    if !sets.inheritable.is_empty() {
        sets.inheritable = CapabilitySet::empty();
        set_capabilities(None, sets)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_can_read_its_capabilities() {
        assert!(rustix::thread::capabilities(None).is_ok());
    }
}
