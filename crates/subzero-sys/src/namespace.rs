//! What a child does in fresh namespaces between clone (or fork) and exec: map its ids 1:1
//! in a new user namespace ([`map_ids`]) and make every mount private, so nothing it mounts
//! reaches its parent's namespace ([`make_mounts_private`]). The broker's clone child does
//! both for a worker, the worker's tool processes for their view. Async-signal-safe: raw
//! system calls on memory prepared before the clone, no allocation.

use std::ffi::CStr;

use rustix::fs::{Mode, OFlags};
use rustix::mount::MountPropagationFlags;
use rustix::process::DumpableBehavior;

/// A step that failed and its errno, as a child reports it to its parent.
pub type Failed = (&'static [u8], i32);

/// `uid_map` / `gid_map` lines mapping this process's effective ids 1:1, prepared before
/// the clone.
#[derive(Debug, Clone)]
pub struct IdMaps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl IdMaps {
    /// The maps of this process's effective uid and gid.
    pub fn current() -> IdMaps {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        IdMaps {
            uid: format!("{uid} {uid} 1\n").into_bytes(),
            gid: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }
}

/// In a user namespace just made: denies `setgroups` and writes the 1:1 maps. First makes
/// the process dumpable: a non-dumpable process (the broker, the worker, and so their
/// children) has a `/proc/self` owned by root and may not write its own maps; the exec
/// that follows decides again anyway.
pub fn map_ids(maps: &IdMaps) -> Result<(), Failed> {
    rustix::process::set_dumpable_behavior(DumpableBehavior::Dumpable)
        .map_err(|e| (&b"prctl(PR_SET_DUMPABLE)"[..], e.raw_os_error()))?;
    write_file(c"/proc/self/setgroups", b"deny")
        .map_err(|e| (&b"write /proc/self/setgroups"[..], e))?;
    write_file(c"/proc/self/uid_map", &maps.uid)
        .map_err(|e| (&b"write /proc/self/uid_map"[..], e))?;
    write_file(c"/proc/self/gid_map", &maps.gid)
        .map_err(|e| (&b"write /proc/self/gid_map"[..], e))?;
    Ok(())
}

/// Makes every mount of this (new) mount namespace private, recursively; `Err(errno)`.
pub fn make_mounts_private() -> Result<(), i32> {
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| e.raw_os_error())
}

/// Opens `path` for writing and writes `data` in one call; `Err(errno)`.
fn write_file(path: &CStr, data: &[u8]) -> Result<(), i32> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| e.raw_os_error())?;
    match rustix::io::write(&fd, data) {
        Ok(n) if n == data.len() => Ok(()),
        Ok(_) => Err(rustix::io::Errno::IO.raw_os_error()),
        Err(e) => Err(e.raw_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::IdMaps;

    #[test]
    fn the_maps_name_this_process_ids_once() {
        let maps = IdMaps::current();
        let uid = rustix::process::geteuid().as_raw();
        assert_eq!(maps.uid, format!("{uid} {uid} 1\n").into_bytes());
    }
}
