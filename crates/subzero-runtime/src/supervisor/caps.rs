//! The one capability a worker keeps inside its own user namespace.
//!
//! A worker of an unprivileged broker runs as init of a PID namespace inside a user
//! namespace that maps its uid 1:1, so after `execve` it would hold no capability there.
//! Its clone child raises `CAP_SYS_ADMIN` into the ambient set before that `execve`
//! ([`keep_sys_admin_across_exec`]), so the worker may give each tool process a mount
//! namespace of its own — a power over its own namespaces only: the user namespace owns
//! nothing of the host. Every tool process clears its ambient and inheritable sets before
//! its own `execve` (`subzero-worker`'s `containment::caps`), so no tool holds any.
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

/// Makes `CAP_SYS_ADMIN` (held now, in a fresh user namespace) survive the coming
/// `execve`: inheritable, then ambient. Between clone and exec: async-signal-safe;
/// `Err(errno)`.
pub(super) fn keep_sys_admin_across_exec() -> Result<(), i32> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget writes two `Data` into the live array and reads the header; capset
    // reads both; prctl takes integers only.
    unsafe {
        if libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) != 0 {
            return Err(errno());
        }
        data[0].inheritable |= 1 << SYS_ADMIN;
        if libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) != 0 {
            return Err(errno());
        }
        let raise = libc::PR_CAP_AMBIENT_RAISE;
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            raise,
            libc::c_ulong::from(SYS_ADMIN),
            0,
            0,
        ) != 0
        {
            return Err(errno());
        }
    }
    Ok(())
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}
