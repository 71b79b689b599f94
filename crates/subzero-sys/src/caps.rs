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
//! view). Everything here is async-signal-safe.
#![allow(unsafe_code)]

/// `_LINUX_CAPABILITY_VERSION_3`.
const VERSION_3: u32 = 0x2008_0522;
/// `CAP_SYS_ADMIN`.
const SYS_ADMIN: u32 = 21;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Reads this thread's capability sets.
fn get() -> Result<[Data; 2], i32> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget writes two `Data` into the live array and reads the header.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    if rc != 0 {
        return Err(errno());
    }
    Ok(data)
}

/// Sets this thread's capability sets.
fn set(data: &[Data; 2]) -> Result<(), i32> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    // SAFETY: capset reads the header and two `Data` from live memory.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    if rc != 0 {
        return Err(errno());
    }
    Ok(())
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}

/// `prctl(PR_CAP_AMBIENT, op, cap)`.
fn ambient(op: libc::c_int, cap: u32) -> Result<(), i32> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_CAP_AMBIENT, op, libc::c_ulong::from(cap), 0, 0) };
    if rc != 0 { Err(errno()) } else { Ok(()) }
}

/// Makes `CAP_SYS_ADMIN` (held now, in a fresh user namespace) survive the coming `execve`:
/// inheritable, then ambient. Between clone and exec; `Err(errno)`.
pub fn keep_sys_admin_across_exec() -> Result<(), i32> {
    let mut data = get()?;
    data[0].inheritable |= 1 << SYS_ADMIN;
    set(&data)?;
    ambient(libc::PR_CAP_AMBIENT_RAISE, SYS_ADMIN)
}

/// Clears the ambient and inheritable sets, so the program about to be exec'd starts with
/// no capability it did not have as a plain process of its uid (root keeps root's). Between
/// fork and exec.
pub fn drop_before_exec() -> std::io::Result<()> {
    ambient(libc::PR_CAP_AMBIENT_CLEAR_ALL, 0).map_err(std::io::Error::from_raw_os_error)?;
    let mut data = get().map_err(std::io::Error::from_raw_os_error)?;
    if data.iter().any(|d| d.inheritable != 0) {
        for d in &mut data {
            d.inheritable = 0;
        }
        set(&data).map_err(std::io::Error::from_raw_os_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_can_read_its_capabilities() {
        assert!(get().is_ok());
    }
}
