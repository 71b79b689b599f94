//! The tools' network namespace: made once per worker on a thread of its own (`unshare`
//! moves only that thread), with loopback up and the proxy's listening socket bound in it,
//! then kept as a descriptor every tool process joins with `setns` before it execs.
#![allow(unsafe_code)]

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};

/// Where the allowlist proxy listens inside the tools' namespace.
pub const PROXY: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 3128);

/// A network namespace with loopback only, and the proxy's socket bound in it.
#[derive(Debug)]
pub struct Made {
    /// The user namespace that owns it, for a worker that could not make it in its own
    /// ([`super::forked`]): a tool process joins this first.
    pub user: Option<OwnedFd>,
    /// `/proc/thread-self/ns/net` of the thread that made it (close-on-exec).
    pub namespace: OwnedFd,
    /// Listening on [`PROXY`] inside it; accepted by the worker, outside.
    pub listener: TcpListener,
}

/// Makes the namespace, or says why the kernel refused: on a thread of this process where
/// it holds `CAP_SYS_ADMIN` and `CAP_NET_ADMIN` (root), else in a user namespace of its
/// own ([`super::forked`]; the worker must then still be single-threaded).
pub fn make() -> Result<Made, String> {
    let held = rustix::thread::capabilities(None)
        .map(|c| c.effective)
        .unwrap_or_else(|_| rustix::thread::CapabilitySet::empty());
    let needed =
        rustix::thread::CapabilitySet::SYS_ADMIN | rustix::thread::CapabilitySet::NET_ADMIN;
    if !held.contains(needed) {
        return super::forked::make();
    }
    std::thread::Builder::new()
        .name("tool-netns".to_owned())
        .spawn(make_here)
        .map_err(|e| format!("cannot start a thread to make it: {e}"))?
        .join()
        .map_err(|_| "the thread making it panicked".to_owned())?
}

/// On a thread of its own, which then ends: the namespace lives on in the descriptor and
/// the socket.
fn make_here() -> Result<Made, String> {
    // SAFETY: `unshare(CLONE_NEWNET)` changes only the calling thread's network namespace
    // (it needs no unshared file table or filesystem context); this thread ends right after.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "the kernel refused a network namespace ({})",
            io::Error::last_os_error()
        ));
    }
    loopback_up().map_err(|e| format!("cannot bring loopback up in it ({e})"))?;
    let namespace = std::fs::File::open("/proc/thread-self/ns/net")
        .map_err(|e| format!("cannot open it ({e})"))?
        .into();
    let listener =
        TcpListener::bind(PROXY).map_err(|e| format!("cannot bind the proxy in it ({e})"))?;
    Ok(Made {
        user: None,
        namespace,
        listener,
    })
}

/// `ip link set lo up`, in this thread's network namespace.
pub(super) fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain socket call; the descriptor is owned at once.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let socket = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    // SAFETY: `ifreq` is plain old data; all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: both ioctls read and write only `request`, which outlives them.
    unsafe {
        if libc::ioctl(
            socket.as_raw_fd(),
            libc::SIOCGIFFLAGS as libc::Ioctl,
            &mut request,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(
            socket.as_raw_fd(),
            libc::SIOCSIFFLAGS as libc::Ioctl,
            &request,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Joins `user` (when the namespace has its own owner), then `namespace`: between fork and
/// exec of a tool process (single-threaded), before it makes namespaces of its own.
/// Async-signal-safe.
pub fn join(user: Option<&OwnedFd>, namespace: &OwnedFd) -> io::Result<()> {
    let enter = |fd: &OwnedFd, kind: libc::c_int| {
        // SAFETY: `setns` on a descriptor this process owns; no memory is touched.
        if unsafe { libc::setns(fd.as_raw_fd(), kind) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    if let Some(user) = user {
        enter(user, libc::CLONE_NEWUSER)?;
    }
    enter(namespace, libc::CLONE_NEWNET)
}

/// Takes `CAP_SYS_ADMIN` and `CAP_NET_ADMIN` out of a root tool's bounding set, so that
/// after exec it can neither `setns` back into the worker's network nor move an interface
/// there. A process that may not change its bounding set (no `CAP_SETPCAP`) passes only
/// when it holds neither capability (then exec gives it none either). Between fork and
/// exec; async-signal-safe.
pub fn drop_network_powers_of_root() -> io::Result<()> {
    use rustix::thread::remove_capability_from_bounding_set as drop_bound;
    use rustix::thread::{CapabilitySet, capabilities};
    match drop_bound(CapabilitySet::SYS_ADMIN).and_then(|()| drop_bound(CapabilitySet::NET_ADMIN)) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::PERM) => {
            let held = capabilities(None)?.permitted;
            if held.intersects(CapabilitySet::SYS_ADMIN | CapabilitySet::NET_ADMIN) {
                Err(io::Error::from_raw_os_error(libc::EPERM))
            } else {
                Ok(())
            }
        }
        Err(e) => Err(e.into()),
    }
}
