//! The tools' network namespace for a worker without `CAP_NET_ADMIN` (an unprivileged
//! broker's): a forked child makes a user namespace mapping the worker's ids 1:1 and a
//! network namespace it owns — where it may bring loopback up — binds the proxy's socket
//! there, and hands the three descriptors back over a socket pair before it exits. A tool
//! process joins the user namespace, then the network namespace (it owns both through its
//! uid; it gains nothing over the host's network). Must run while the worker is
//! single-threaded (it forks).
#![allow(unsafe_code)]

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use subzero_sys::namespace::{IdMaps, map_ids};

use super::namespace::{Made, PROXY, loopback_up};

/// How many descriptors the child hands back: the user namespace, the network namespace
/// and the listening socket.
const HANDED: usize = 3;

/// Forks the child that makes the namespaces and takes what it hands back.
pub fn make() -> Result<Made, String> {
    let maps = IdMaps::current();
    let mut pair = [0 as RawFd; 2];
    // SAFETY: `pair` has room for the two descriptors.
    let made = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    };
    if made != 0 {
        return Err(format!(
            "cannot make a socket pair ({})",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: both descriptors are fresh and owned here once.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    // SAFETY: the worker is single-threaded when it probes (before its runtime starts); the
    // child only makes system calls, writes one message and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("cannot fork ({})", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(ours);
        let answer = in_the_child(&maps);
        let sent = match &answer {
            Ok(fds) => send(&theirs, b"ok", &fds.each()),
            Err(why) => send(&theirs, why.as_bytes(), &[]),
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(i32::from(sent.is_err())) }
    }
    drop(theirs);
    let received = receive(&ours);
    // SAFETY: reaps the child just forked (it has exited or is about to).
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    received
}

/// The child's three descriptors, kept open until they are sent.
struct Handed {
    user: OwnedFd,
    net: OwnedFd,
    listener: TcpListener,
}

impl Handed {
    fn each(&self) -> [RawFd; HANDED] {
        [
            self.user.as_raw_fd(),
            self.net.as_raw_fd(),
            self.listener.as_raw_fd(),
        ]
    }
}

fn in_the_child(maps: &IdMaps) -> Result<Handed, String> {
    // SAFETY: this process is single-threaded (a child forked from a single-threaded one).
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "the kernel refused a user and network namespace ({})",
            io::Error::last_os_error()
        ));
    }
    map_ids(maps).map_err(|(what, errno)| {
        format!(
            "cannot map the ids in it ({}: {})",
            String::from_utf8_lossy(what),
            io::Error::from_raw_os_error(errno)
        )
    })?;
    loopback_up().map_err(|e| format!("cannot bring loopback up in it ({e})"))?;
    let open = |path: &str| {
        std::fs::File::open(path)
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open {path} ({e})"))
    };
    Ok(Handed {
        user: open("/proc/self/ns/user")?,
        net: open("/proc/self/ns/net")?,
        listener: TcpListener::bind(PROXY)
            .map_err(|e| format!("cannot bind the proxy in it ({e})"))?,
    })
}

/// One message: `text`, with `fds` attached.
fn send(socket: &OwnedFd, text: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: text.as_ptr().cast_mut().cast(),
        iov_len: text.len(),
    };
    let bytes = std::mem::size_of_val(fds);
    // SAFETY: pure arithmetic on a length.
    let space = unsafe { libc::CMSG_SPACE(bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: `msghdr` is plain old data; all zeroes is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer has room for one header with `bytes` of data.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&msg);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(bytes as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(header).cast(), fds.len());
        }
    }
    // SAFETY: every buffer `msg` points at outlives the call.
    if unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The child's message: the three descriptors, or why it could not make them.
fn receive(socket: &OwnedFd) -> Result<Made, String> {
    let mut text = [0u8; 512];
    let mut iov = libc::iovec {
        iov_base: text.as_mut_ptr().cast(),
        iov_len: text.len(),
    };
    let bytes = HANDED * std::mem::size_of::<RawFd>();
    // SAFETY: pure arithmetic on a length.
    let space = unsafe { libc::CMSG_SPACE(bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: `msghdr` is plain old data; all zeroes is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: every buffer `msg` points at outlives the call.
    let got = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if got < 0 {
        return Err(format!(
            "the namespace helper did not answer ({})",
            io::Error::last_os_error()
        ));
    }
    let said = &text[..usize::try_from(got).unwrap_or(0)];
    let fds = attached(&msg);
    match (said, fds) {
        (b"ok", Some([user, net, listener])) => Ok(Made {
            user: Some(user),
            namespace: net,
            listener: TcpListener::from(listener),
        }),
        (b"", _) => Err("the namespace helper exited without an answer".to_owned()),
        (why, _) => Err(String::from_utf8_lossy(why).into_owned()),
    }
}

/// The descriptors a received message carries, owned (exactly [`HANDED`], or none).
fn attached(msg: &libc::msghdr) -> Option<[OwnedFd; HANDED]> {
    // SAFETY: `msg` was filled by `recvmsg`; the header and its data lie in its buffer.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(msg);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
        let count = bytes / std::mem::size_of::<RawFd>();
        let data = libc::CMSG_DATA(header).cast::<RawFd>();
        let owned: Vec<OwnedFd> = (0..count)
            .map(|i| OwnedFd::from_raw_fd(data.add(i).read_unaligned()))
            .collect();
        owned.try_into().ok()
    }
}
