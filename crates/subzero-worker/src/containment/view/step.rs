//! What a tool process does between fork and exec to enter its view: each [`Step`] is
//! prepared in full beforehand (paths as C strings, slots numbered) and run here with plain
//! system calls, async-signal-safe (no allocation, no lock). They are libc's: the steps
//! keep bare descriptor numbers in slots between an `Open` and its `BindSlot`, and bind
//! through `/proc/self/fd/<n>`, which rustix's owned-descriptor calls do not fit.

use std::ffi::{CStr, CString};
use std::io;

use subzero_sys::child::errno;

use super::MAX_REBINDS;

/// Size and mode of a cover: empty, tiny, root of it readable and listable.
const COVER_OPTIONS: &CStr = c"size=16k,nr_inodes=64,mode=0755";

/// One thing to do between fork and exec, prepared in full beforehand.
#[derive(Debug)]
pub(super) enum Step {
    /// Open a path that will be bound back (`O_PATH`) into slot `n`: after the namespace is
    /// made (a bind's source must be a mount of the namespace it is made in) and before it
    /// is covered.
    Open(usize, CString),
    /// Mount an empty tmpfs over a directory.
    Cover(CString),
    /// Make a directory (a mount point inside a cover).
    MakeDir(CString),
    /// Make an empty file of mode 0 (a mount point inside a cover, or the blank file).
    MakeFile(CString),
    /// Bind the first path over the second.
    Bind(CString, CString),
    /// Bind what slot `n` holds over the path, and close the slot.
    BindSlot(usize, CString),
    /// Remove a file.
    Unlink(CString),
    /// Make a cover read-only.
    Seal(CString),
}

impl Step {
    /// Runs this step. `slots` holds the descriptors [`Step::Open`] made, for
    /// [`Step::BindSlot`].
    ///
    /// # Safety
    /// Only between fork and exec, in the single-threaded child: raw system calls on
    /// NUL-terminated strings owned by `self`, alive for the call.
    pub(super) unsafe fn run(&self, slots: &mut [libc::c_int; MAX_REBINDS]) -> io::Result<()> {
        // SAFETY: see the function's contract.
        unsafe {
            match self {
                Step::Open(slot, path) => slots[*slot] = open_path(path)?,
                Step::Cover(dir) => mount(
                    Some(c"tmpfs"),
                    dir,
                    Some(c"tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    Some(COVER_OPTIONS),
                )?,
                Step::MakeDir(path) => make_dir(path)?,
                Step::MakeFile(path) => make_file(path)?,
                Step::Bind(source, target) => bind(source, target)?,
                Step::BindSlot(slot, target) => {
                    bind_fd(slots[*slot], target)?;
                    libc::close(slots[*slot]);
                }
                Step::Unlink(path) => {
                    if libc::unlink(path.as_ptr()) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Step::Seal(dir) => seal(dir)?,
            }
        }
        Ok(())
    }
}

/// `open(O_PATH)`: a descriptor of `path` that a bind can use later.
///
/// # Safety
/// Raw system call; `path` is alive for the call.
unsafe fn open_path(path: &CStr) -> io::Result<libc::c_int> {
    // SAFETY: see the function's contract.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// `mkdir`; a directory already there is fine.
///
/// # Safety
/// Raw system call; `path` is alive for the call.
unsafe fn make_dir(path: &CStr) -> io::Result<()> {
    // SAFETY: see the function's contract.
    if unsafe { libc::mkdir(path.as_ptr(), 0o755) } != 0 && errno() != libc::EEXIST {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Creates an empty file of mode 0 (not following a link) and closes it.
///
/// # Safety
/// Raw system calls; `path` is alive for the call.
unsafe fn make_file(path: &CStr) -> io::Result<()> {
    // SAFETY: see the function's contract.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        libc::close(fd);
    }
    Ok(())
}

/// Binds `source` over `target`, with what is mounted beneath it.
///
/// # Safety
/// Raw system call; the strings are alive for the call.
unsafe fn bind(source: &CStr, target: &CStr) -> io::Result<()> {
    // SAFETY: see the function's contract.
    unsafe {
        mount(
            Some(source),
            target,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )
    }
}

/// Binds what descriptor `fd` names (through `/proc/self/fd/<fd>`, written on the stack)
/// over `target`.
///
/// # Safety
/// Raw system call; `target` is alive for the call.
unsafe fn bind_fd(fd: libc::c_int, target: &CStr) -> io::Result<()> {
    let mut source = [0u8; 32];
    fd_path(fd, &mut source);
    let source = CStr::from_bytes_until_nul(&source)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: see the function's contract; `source` lives on this frame.
    unsafe { bind(source, target) }
}

/// Makes a cover read-only. Read-only as a mount, not as a filesystem: the blank file is
/// gone from its directory but still bound, which a read-only remount of the tmpfs itself
/// would refuse (EBUSY).
///
/// # Safety
/// Raw system call; `dir` is alive for the call.
unsafe fn seal(dir: &CStr) -> io::Result<()> {
    // SAFETY: see the function's contract.
    unsafe {
        mount(
            None,
            dir,
            None,
            libc::MS_REMOUNT
                | libc::MS_BIND
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV
                | libc::MS_NOEXEC,
            None,
        )
    }
}

/// Writes `/proc/self/fd/<fd>` and a NUL into `buf` without allocating.
fn fd_path(fd: libc::c_int, buf: &mut [u8; 32]) {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let at = PREFIX.len()
        + subzero_sys::digits::write_decimal(fd.unsigned_abs(), &mut buf[PREFIX.len()..31]);
    buf[at] = 0;
}

/// `mount(2)`; async-signal-safe.
///
/// # Safety
/// Raw system call; the strings are NUL-terminated and alive for the call.
unsafe fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let ptr = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: see the function's contract.
    let rc = unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_paths_are_written_without_allocating() {
        let mut buf = [0u8; 32];
        fd_path(7, &mut buf);
        assert_eq!(
            CStr::from_bytes_until_nul(&buf).expect("nul"),
            c"/proc/self/fd/7"
        );
        fd_path(1234567, &mut buf);
        assert_eq!(
            CStr::from_bytes_until_nul(&buf).expect("nul"),
            c"/proc/self/fd/1234567"
        );
    }
}
