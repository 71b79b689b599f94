//! Kernel-enforced filesystem grants for tool processes (Landlock).
//!
//! The worker probes the kernel's Landlock ABI once at start ([`probe`]) and says what it
//! found in its `hello`. For every run it then builds one ruleset from the grant snapshot
//! ([`Ruleset::build`]) — before any tool process is forked — and every tool process (each
//! `bash` command and each MCP server, and so everything they start) enforces it on itself
//! between fork and exec ([`Ruleset::pre_exec`]), where only two raw syscalls run:
//! `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self`. A process cannot leave a
//! Landlock domain, and its children inherit it.
//!
//! - `read-only`: every write access the ABI knows is handled and none is allowed, except
//!   writing to the device sinks (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/tty`, ptys):
//!   `open(O_WRONLY)`, `O_TRUNC`, `mkdir`, `unlink`, `rename`, `link`, `symlink`, `mknod` and
//!   `truncate` fail with `EACCES`.
//! - `workspace`: the same, except beneath the workspace root, the worker's scratch directory
//!   and the snapshot's `writablePaths`, where every write access is allowed.
//!
//! Reads and execution are never handled, so they stay unrestricted; network access is not
//! touched. From ABI 6 the ruleset also scopes signals: a tool process may signal its own
//! tree (its domain and those nested in it) but not the worker, the lock holder, the broker,
//! the host or any other process of the user.
//!
//! The worker itself is not restricted: it is multi-threaded by the time it knows the
//! grant, and `landlock_restrict_self` binds only the calling thread before ABI 8
//! (`docs/decisions.md`).
//!
//! Landlock's three system calls go through libc's `syscall` (and its errno constants):
//! rustix has no Landlock.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI version instead of a ruleset.
const CREATE_RULESET_VERSION: libc::c_uint = 1;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// `LANDLOCK_ACCESS_FS_*` (linux/landlock.h).
mod fs {
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2: link or rename into another directory.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3: `truncate`, `ftruncate` of a file opened after, `open(O_TRUNC)`.
    pub const TRUNCATE: u64 = 1 << 14;
}

/// Written where both modes allow writing: sinks and terminals, which change no file.
const DEVICE_SINKS: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// `struct landlock_ruleset_attr`, first member only: every ABI accepts this size.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

/// `struct landlock_ruleset_attr` with `handled_access_net` and `scoped` (ABI 6).
#[repr(C)]
struct ScopedRulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `LANDLOCK_SCOPE_SIGNAL` (ABI 6): a process of the domain may signal only processes of its
/// own domain or of domains nested in it — not the worker, its lock holder, the broker, the
/// host or any other process of the user.
const SCOPE_SIGNAL: u64 = 1 << 1;

/// The first ABI that scopes signals.
pub const SIGNAL_SCOPE_ABI: u32 = 6;

/// `struct landlock_path_beneath_attr` (packed in the kernel's header).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// What the kernel lets this worker enforce, probed once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock works, with this ABI.
    Available { abi: u32 },
    /// No Landlock; the text says why and how to get it.
    Unavailable { why: String },
}

impl Support {
    /// `landlock-abi-N`, or `none: <why>`.
    pub fn summary(&self) -> String {
        match self {
            Support::Available { abi } => format!("landlock-abi-{abi}"),
            Support::Unavailable { why } => format!("none: {why}"),
        }
    }

    /// The ABI, when available.
    pub fn abi(&self) -> Option<u32> {
        match self {
            Support::Available { abi } => Some(*abi),
            Support::Unavailable { .. } => None,
        }
    }
}

static SUPPORT: OnceLock<Support> = OnceLock::new();

/// Probes the kernel once (or records that the broker turned Landlock off) and remembers it.
pub fn probe(disabled: bool) -> &'static Support {
    SUPPORT.get_or_init(|| {
        if disabled {
            return Support::Unavailable {
                why: "turned off by [containment] filesystem = \"off\" in the config".to_owned(),
            };
        }
        match abi_version() {
            Ok(abi) => Support::Available { abi },
            Err(errno) => Support::Unavailable {
                why: unavailable_reason(errno),
            },
        }
    })
}

/// What [`probe`] found (probing now if it has not run).
pub fn support() -> &'static Support {
    probe(false)
}

/// Why Landlock is missing, by the error of the version query, with the fix.
pub fn unavailable_reason(errno: i32) -> String {
    match errno {
        libc::EOPNOTSUPP => "Landlock is built into this kernel but not enabled at boot; add `landlock` to the `lsm=` kernel parameter".to_owned(),
        libc::ENOSYS => "this kernel has no Landlock (it needs Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK=y)".to_owned(),
        other => format!("the Landlock version query failed (errno {other})"),
    }
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`.
fn abi_version() -> Result<u32, i32> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel reads
    // and writes no memory; it returns the ABI version or -1 with errno.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0_usize,
            CREATE_RULESET_VERSION,
        )
    };
    if version < 1 {
        return Err(io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    u32::try_from(version).map_err(|_| libc::EINVAL)
}

/// Every write access the ABI knows.
fn write_access(abi: u32) -> u64 {
    let mut access = fs::WRITE_FILE
        | fs::REMOVE_DIR
        | fs::REMOVE_FILE
        | fs::MAKE_CHAR
        | fs::MAKE_DIR
        | fs::MAKE_REG
        | fs::MAKE_SOCK
        | fs::MAKE_FIFO
        | fs::MAKE_BLOCK
        | fs::MAKE_SYM;
    if abi >= 2 {
        access |= fs::REFER;
    }
    if abi >= 3 {
        access |= fs::TRUNCATE;
    }
    access
}

/// The write accesses that apply to a file that is not a directory.
fn file_write_access(abi: u32) -> u64 {
    write_access(abi) & (fs::WRITE_FILE | fs::TRUNCATE)
}

/// What a run's tool processes may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Nothing but the device sinks.
    ReadOnly,
    /// The workspace, the scratch directory and these paths.
    Workspace { writable: Vec<PathBuf> },
}

impl Access {
    /// `read-only` or `workspace`, as the snapshot and the receipts name it.
    pub fn name(&self) -> &'static str {
        match self {
            Access::ReadOnly => "read-only",
            Access::Workspace { .. } => "workspace",
        }
    }
}

/// A ruleset built for one run, ready to be enforced by each tool process it forks.
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
    abi: u32,
    access: Access,
    summary: String,
}

impl Ruleset {
    /// Builds the ruleset for `access` with ABI `abi`: beneath `root` and `scratch` (for
    /// `workspace` access) and each writable path every write access is allowed. A listed
    /// path that does not exist is skipped (logged): nothing can be written there then.
    pub fn build(access: &Access, abi: u32, root: &Path, scratch: &Path) -> io::Result<Ruleset> {
        let handled = write_access(abi);
        let attr = RulesetAttr {
            handled_access_fs: handled,
        };
        let scoped = ScopedRulesetAttr {
            handled_access_fs: handled,
            handled_access_net: 0,
            scoped: SCOPE_SIGNAL,
        };
        // SAFETY: each attribute is a live, initialised struct of the size passed (the larger
        // one only where the ABI knows its members); the kernel only reads it and returns a
        // new descriptor (close-on-exec) or -1.
        let raw = unsafe {
            if abi >= SIGNAL_SCOPE_ABI {
                libc::syscall(
                    libc::SYS_landlock_create_ruleset,
                    &raw const scoped,
                    std::mem::size_of::<ScopedRulesetAttr>(),
                    0_u32,
                )
            } else {
                libc::syscall(
                    libc::SYS_landlock_create_ruleset,
                    &raw const attr,
                    std::mem::size_of::<RulesetAttr>(),
                    0_u32,
                )
            }
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let raw = RawFd::try_from(raw).map_err(|_| io::Error::other("ruleset fd out of range"))?;
        // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let ruleset = Ruleset {
            fd,
            abi,
            access: access.clone(),
            summary: format!("landlock-abi-{abi} {}", access.name()),
        };
        for sink in DEVICE_SINKS {
            // Absent in some containers; then there is nothing to allow.
            let _ = ruleset.allow(Path::new(sink), abi, fs::WRITE_FILE | fs::TRUNCATE);
        }
        if let Access::Workspace { writable } = access {
            ruleset.allow(root, abi, handled)?;
            ruleset.allow(scratch, abi, handled)?;
            for path in writable {
                match ruleset.allow(path, abi, handled) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        tracing::warn!(path = %path.display(), "a writable path of the grant does not exist; nothing can be written there");
                    }
                    Err(e) => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("writable path {}: {e}", path.display()),
                        ));
                    }
                }
            }
        }
        Ok(ruleset)
    }

    /// Allows `access` (masked to what the ABI handles and what applies to the file's type)
    /// beneath `path`.
    fn allow(&self, path: &Path, abi: u32, access: u64) -> io::Result<()> {
        if path.as_os_str().as_bytes().contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "path holds a NUL byte",
            ));
        }
        let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
        let parent = rustix::fs::open(path, flags, rustix::fs::Mode::empty())?;
        let is_dir = rustix::fs::fstat(&parent)
            .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
            .map_err(io::Error::from)?;
        let applicable = if is_dir {
            write_access(abi)
        } else {
            file_write_access(abi)
        };
        let rule = PathBeneathAttr {
            allowed_access: access & applicable,
            parent_fd: parent.as_raw_fd(),
        };
        // SAFETY: `rule` is a live, initialised struct of the layout the kernel expects for
        // LANDLOCK_RULE_PATH_BENEATH; both descriptors are open for the call.
        let done = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &raw const rule,
                0_u32,
            )
        };
        if done < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Allows every write beneath `path` (a directory), or to `path` itself (a file), on
    /// top of the grant: the Pi worker's Node process writes its own scratch files and the
    /// child's transcript, which its tools' nested domains do not allow.
    pub fn allow_writes(&self, path: &Path) -> io::Result<()> {
        self.allow(path, self.abi, write_access(self.abi))
    }

    /// What it lets tool processes write.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// `landlock-abi-N read-only` or `landlock-abi-N workspace`.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// The hook a tool's `Command` runs between fork and exec (`super::tool::confine`): sets `no_new_privs` (which
    /// Landlock requires of a process without `CAP_SYS_ADMIN`; it also keeps setuid
    /// programs from gaining rights) and enforces the ruleset on the new process. The
    /// ruleset must outlive the spawn.
    pub fn pre_exec(&self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let fd = self.fd.as_raw_fd();
        move || restrict_self(fd)
    }
}

/// Runs in the forked child before exec: raw syscalls only, no allocation, no lock.
pub(crate) fn restrict_self(fd: RawFd) -> io::Result<()> {
    rustix::thread::set_no_new_privs(true)?;
    // SAFETY: `fd` is the ruleset descriptor, open in this process (inherited over fork);
    // the call reads no memory of ours.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0_u32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The filesystem grant of a run's snapshot. A snapshot frozen before grants had one is
/// read-only unless it is write-capable, with no writable paths and nothing required.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub access: Access,
    /// The child must not run without the kernel enforcing `access`.
    pub require: bool,
    /// The snapshot carries an explicit `read-only` grant (every snapshot frozen since grants
    /// exist does, e.g. from a template with `read_only = true`), which alone lets a
    /// non-write-capable snapshot grant `bash`: the kernel then keeps it from writing.
    pub marked_read_only: bool,
}

impl Grant {
    /// The grant `snapshot` carries.
    pub fn of(snapshot: &subzero_protocol::GrantSnapshot) -> Grant {
        use subzero_protocol::FilesystemAccess;
        match &snapshot.filesystem {
            Some(fs) => Grant {
                access: match fs.access {
                    FilesystemAccess::ReadOnly => Access::ReadOnly,
                    FilesystemAccess::Workspace => Access::Workspace {
                        writable: fs
                            .writable_paths
                            .iter()
                            .map(|p| PathBuf::from(p.as_str()))
                            .collect(),
                    },
                },
                require: fs.require_enforcement,
                marked_read_only: fs.access == FilesystemAccess::ReadOnly,
            },
            None if snapshot.write_capable => Grant {
                access: Access::Workspace {
                    writable: Vec::new(),
                },
                require: false,
                marked_read_only: false,
            },
            None => Grant {
                access: Access::ReadOnly,
                require: false,
                marked_read_only: false,
            },
        }
    }

    /// Whether the kernel must enforce it for the run to start: when the template says so,
    /// and when a non-write-capable snapshot grants `bash` (only Landlock keeps that
    /// `bash` from writing).
    pub fn needs_kernel(&self, snapshot: &subzero_protocol::GrantSnapshot) -> bool {
        self.require
            || (!snapshot.write_capable && snapshot.tools.iter().any(|t| t.to_string() == "bash"))
    }
}

/// The ruleset of one run, or `None` when the kernel cannot enforce the grant and the grant
/// does not need it. `Err` is the `unsupported_grant` message: the grant needs the kernel
/// and the kernel cannot, or building the ruleset failed (a kernel with Landlock never runs
/// tools unconfined).
pub fn prepare(
    snapshot: &subzero_protocol::GrantSnapshot,
    root: &Path,
    scratch: &Path,
) -> Result<Option<Ruleset>, String> {
    let grant = Grant::of(snapshot);
    match support() {
        Support::Available { abi } => Ruleset::build(&grant.access, *abi, root, scratch)
            .map(|ruleset| {
                tracing::info!(filesystem = ruleset.summary(), "filesystem grant enforced");
                Some(ruleset)
            })
            .map_err(|e| {
                format!(
                    "unsupported_grant: the {} filesystem grant cannot be enforced: {e}",
                    grant.access.name()
                )
            }),
        Support::Unavailable { why } if grant.needs_kernel(snapshot) => Err(format!(
            "unsupported_grant: this grant needs a kernel-enforced {} filesystem, but {why}",
            grant.access.name()
        )),
        Support::Unavailable { why } => {
            tracing::warn!(access = grant.access.name(), %why, "filesystem grant not enforced");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_access_grows_with_the_abi_and_files_get_only_file_rights() {
        assert_eq!(write_access(1) & (fs::REFER | fs::TRUNCATE), 0);
        assert_ne!(write_access(2) & fs::REFER, 0);
        assert_ne!(write_access(3) & fs::TRUNCATE, 0);
        assert_eq!(file_write_access(1), fs::WRITE_FILE);
        assert_eq!(file_write_access(7), fs::WRITE_FILE | fs::TRUNCATE);
    }

    #[test]
    fn summaries_name_the_abi_and_the_access() {
        assert_eq!(Support::Available { abi: 7 }.summary(), "landlock-abi-7");
        assert!(
            Support::Unavailable { why: "x".into() }
                .summary()
                .starts_with("none: ")
        );
        assert_eq!(Access::ReadOnly.name(), "read-only");
    }
}
