//! The tool processes' view of the filesystem: Subzero's own state directory, its
//! configuration and every `file =` credential are not in it.
//!
//! Every tool process (each `bash` command and each MCP server, and so everything they
//! start) enters a mount namespace of its own between fork and exec ([`ToolView::enter`]),
//! where
//!
//! - each hidden directory is covered by an empty, read-only `tmpfs` (reading it lists
//!   nothing; opening a file in it gives `ENOENT`; taking a lock on another child's lock
//!   file is impossible, as the file is not there);
//! - each hidden file outside those directories is covered by an empty file of mode 0
//!   (`EACCES` for a tool of an ordinary user; empty for root);
//! - what the tools need that lies beneath a hidden directory — the worker's scratch
//!   directory (their `TMPDIR`), the workspace, the grant's writable paths, an MCP
//!   server's program — is bound back at the same path, so Landlock's rules (which name
//!   those inodes) and every path the tools were given keep working.
//!
//! A worker with `CAP_SYS_ADMIN` (root, no user namespace) only unshares the mount
//! namespace; a worker without it (its uid mapped 1:1 in the user namespace the broker made)
//! makes a user namespace of its own for each tool process first, mapping its uid and gid
//! 1:1 again, so files keep their owner. Either way the tool cannot undo the covers: its
//! Landlock domain refuses `umount` and `mount` (root), and an ordinary user's tool has no
//! capability after exec and sees the covers locked in any namespace it makes itself.
//!
//! Whether the kernel allows this is probed once at worker start ([`probe`]); where it does
//! not, tools see everything as before and the receipts say why.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod namespace;
mod step;
use namespace::{IdMaps, enter_namespaces, flags, has_cap_sys_admin, try_unshare};
use rustix::thread::UnshareFlags;
use step::Step;

/// What was probed at start: which paths to hide and whether the kernel lets tool
/// processes have a mount namespace of their own.
#[derive(Debug, Clone)]
pub struct Hiding {
    /// The paths that exist, canonical, directories first.
    pub paths: Vec<Hidden>,
    /// Whether each tool process needs a user namespace of its own to mount.
    user_namespace: bool,
    /// Why tools see everything, when they do.
    pub unavailable: Option<String>,
}

/// One path to hide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hidden {
    Dir(PathBuf),
    File(PathBuf),
}

impl Hidden {
    pub fn path(&self) -> &Path {
        match self {
            Hidden::Dir(p) | Hidden::File(p) => p,
        }
    }
}

static HIDING: OnceLock<Hiding> = OnceLock::new();

/// Probes once, with the paths the broker named (`--hide`), and remembers the answer. Must
/// run while the worker is single-threaded (it forks a probe).
pub fn probe(requested: &[PathBuf]) -> &'static Hiding {
    HIDING.get_or_init(|| {
        let paths = existing(requested);
        let user_namespace = !has_cap_sys_admin();
        let unavailable = if paths.is_empty() {
            None
        } else {
            try_unshare(user_namespace).err()
        };
        Hiding {
            paths,
            user_namespace,
            unavailable,
        }
    })
}

/// What [`probe`] found (nothing to hide when it has not run).
pub fn hiding() -> &'static Hiding {
    probe(&[])
}

impl Hiding {
    /// Whether tool processes get the view without these paths.
    pub fn in_force(&self) -> bool {
        !self.paths.is_empty() && self.unavailable.is_none()
    }

    /// The hidden directories (`dirs`) or files.
    fn of_kind(&self, dirs: bool) -> impl Iterator<Item = &Path> {
        self.paths.iter().filter_map(move |h| match h {
            Hidden::Dir(d) if dirs => Some(d.as_path()),
            Hidden::File(f) if !dirs => Some(f.as_path()),
            _ => None,
        })
    }

    /// Whether each tool process makes a user namespace of its own to enter its view.
    pub fn user_namespace(&self) -> bool {
        self.user_namespace
    }

    /// `containment.view.summary`.
    pub fn summary(&self) -> String {
        match (&self.unavailable, self.paths.is_empty()) {
            (Some(why), _) => format!(
                "none: {why}; tool processes can read Subzero's state directory, configuration and credential files"
            ),
            (None, true) => "none: the broker named nothing to hide".to_owned(),
            (None, false) => {
                let how = if self.user_namespace {
                    "a user and mount namespace per tool process"
                } else {
                    "a mount namespace per tool process"
                };
                format!(
                    "{how}: {} hidden (empty read-only tmpfs over directories, an unreadable empty file over files)",
                    self.paths
                        .iter()
                        .map(|p| p.path().display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        }
    }
}

/// The canonical form of each requested path that exists, directories before files, a
/// path beneath another hidden directory left out (it is hidden with it).
fn existing(requested: &[PathBuf]) -> Vec<Hidden> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for path in requested {
        let Ok(real) = std::fs::canonicalize(path) else {
            continue;
        };
        match std::fs::metadata(&real) {
            Ok(meta) if meta.is_dir() => dirs.push(real),
            Ok(_) => files.push(real),
            Err(_) => {}
        }
    }
    dirs.sort();
    dirs.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        if !kept.iter().any(|outer| dir.starts_with(outer)) {
            kept.push(dir);
        }
    }
    files.sort();
    files.dedup();
    files.retain(|f| !kept.iter().any(|d| f.starts_with(d)));
    kept.into_iter()
        .map(Hidden::Dir)
        .chain(files.into_iter().map(Hidden::File))
        .collect()
}

/// Most paths a run may bind back into its view (scratch, workspace, 16 writable paths,
/// 16 MCP server programs, with room to spare).
const MAX_REBINDS: usize = 40;

/// A run's view, prepared before any tool process is forked; each tool process enters it
/// with [`ToolView::enter`].
#[derive(Debug)]
pub struct ToolView {
    flags: UnshareFlags,
    user_namespace: bool,
    maps: IdMaps,
    steps: Vec<Step>,
}

impl ToolView {
    /// The view for a run whose tools need `keep` (the scratch directory, the workspace,
    /// the writable paths, the MCP server programs), or `None` when nothing is hidden.
    pub fn prepare(keep: &[PathBuf]) -> io::Result<Option<ToolView>> {
        let hiding = hiding();
        if !hiding.in_force() {
            return Ok(None);
        }
        let keep: Vec<PathBuf> = keep
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        // A path the tools need (the workspace being the state directory, say) is not
        // hidden; one that lies inside the workspace is.
        let needed = |p: &Path| keep.iter().any(|k| k.as_path() == p);
        let dirs: Vec<&Path> = hiding.of_kind(true).filter(|d| !needed(d)).collect();
        let files: Vec<&Path> = hiding.of_kind(false).filter(|f| !needed(f)).collect();
        let rebinds = rebinds(&keep, &dirs)?;
        let steps = steps(&dirs, &files, &rebinds)?;
        Ok(Some(ToolView {
            flags: flags(hiding.user_namespace),
            user_namespace: hiding.user_namespace,
            maps: IdMaps::current(),
            steps,
        }))
    }

    /// Enters the view: runs between fork and exec, async-signal-safe (no allocation, no
    /// lock). `Err` carries the errno of the step that failed; the spawn then fails.
    pub fn enter(&self) -> io::Result<()> {
        // Bare descriptor numbers, as the libc steps take them (see `step`).
        let mut slots: [libc::c_int; MAX_REBINDS] = [-1; MAX_REBINDS];
        // SAFETY: the forked child is single-threaded; every call below is a plain
        // system call on NUL-terminated strings owned by `self` or on this stack frame,
        // alive for the call.
        unsafe {
            enter_namespaces(self.flags, self.user_namespace, &self.maps)
                .map_err(io::Error::from_raw_os_error)?;
            // Nothing this process mounts may reach the worker's namespace.
            subzero_sys::namespace::make_mounts_private().map_err(io::Error::from_raw_os_error)?;
            for step in &self.steps {
                step.run(&mut slots)?;
            }
        }
        Ok(())
    }
}

/// Each kept path that lies beneath a directory to hide, with that directory: it is bound
/// back into the view. `Err` when there are more than [`MAX_REBINDS`].
fn rebinds<'k, 'd>(
    keep: &'k [PathBuf],
    dirs: &[&'d Path],
) -> io::Result<Vec<(&'k Path, &'d Path)>> {
    let rebinds: Vec<(&Path, &Path)> = keep
        .iter()
        .filter_map(|k| {
            dirs.iter()
                .find(|d| k.starts_with(d) && k.as_path() != **d)
                .map(|d| (k.as_path(), *d))
        })
        .collect();
    if rebinds.len() > MAX_REBINDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} paths would have to be bound back into the tools' view (at most {MAX_REBINDS})",
                rebinds.len()
            ),
        ));
    }
    Ok(rebinds)
}

/// The steps that make the view, in order: open what is bound back, cover the directories,
/// blank the files, bind back, seal the covers.
fn steps(dirs: &[&Path], files: &[&Path], rebinds: &[(&Path, &Path)]) -> io::Result<Vec<Step>> {
    let mut steps = Vec::new();
    for (slot, (path, _)) in rebinds.iter().enumerate() {
        steps.push(Step::Open(slot, c_path(path)?));
    }
    for dir in dirs {
        steps.push(Step::Cover(c_path(dir)?));
    }
    blank_files(dirs, files, &mut steps)?;
    for (slot, (path, cover)) in rebinds.iter().enumerate() {
        bind_back(slot, path, cover, &mut steps)?;
    }
    for dir in dirs {
        steps.push(Step::Seal(c_path(dir)?));
    }
    Ok(steps)
}

/// Binds an empty file over each hidden file: one made in the first cover and unlinked once
/// bound.
fn blank_files(dirs: &[&Path], files: &[&Path], steps: &mut Vec<Step>) -> io::Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    // Where there is no cover to make a blank file in, /dev/null reads as empty.
    let blank = match dirs.first() {
        Some(first) => first.join(".subzero-hidden"),
        None => PathBuf::from("/dev/null"),
    };
    if !dirs.is_empty() {
        steps.push(Step::MakeFile(c_path(&blank)?));
    }
    for file in files {
        steps.push(Step::Bind(c_path(&blank)?, c_path(file)?));
    }
    if !dirs.is_empty() {
        steps.push(Step::Unlink(c_path(&blank)?));
    }
    Ok(())
}

/// Makes the mount points from `cover` down to `path` inside the cover (directories, and a
/// file last when `path` is one), then binds what slot `slot` holds over `path`.
fn bind_back(slot: usize, path: &Path, cover: &Path, steps: &mut Vec<Step>) -> io::Result<()> {
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    let mut at = cover.to_path_buf();
    let parts: Vec<_> = path
        .strip_prefix(cover)
        .unwrap_or(path)
        .components()
        .collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        if i + 1 == parts.len() && !is_dir {
            steps.push(Step::MakeFile(c_path(&at)?));
        } else {
            steps.push(Step::MakeDir(c_path(&at)?));
        }
    }
    steps.push(Step::BindSlot(slot, c_path(path)?));
    Ok(())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| nul())
}

fn nul() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_the_kernel_refuses_the_receipt_says_nothing_is_hidden_and_why() {
        let refused = Hiding {
            paths: vec![Hidden::Dir(PathBuf::from("/s"))],
            user_namespace: true,
            unavailable: Some("the kernel refused a user and mount namespace".to_owned()),
        };
        assert!(!refused.in_force());
        assert!(refused.summary().starts_with("none: the kernel refused"));
        let nothing = Hiding {
            paths: Vec::new(),
            user_namespace: false,
            unavailable: None,
        };
        assert!(!nothing.in_force());
        assert!(nothing.summary().starts_with("none: "));
        let hidden = Hiding {
            paths: vec![
                Hidden::Dir(PathBuf::from("/s")),
                Hidden::File(PathBuf::from("/k")),
            ],
            user_namespace: false,
            unavailable: None,
        };
        assert!(hidden.in_force());
        assert!(
            hidden.summary().contains("/s, /k hidden"),
            "{}",
            hidden.summary()
        );
    }

    #[test]
    fn a_path_beneath_a_hidden_directory_is_hidden_with_it_and_absent_paths_are_skipped() {
        let dir = tempfile::tempdir().expect("dir");
        let state = dir.path().join("state");
        let inner = state.join("locks");
        std::fs::create_dir_all(&inner).expect("dirs");
        let key = dir.path().join("key");
        std::fs::write(&key, "k").expect("key");
        let inner_key = state.join("key");
        std::fs::write(&inner_key, "k").expect("key");
        let found = existing(&[
            inner.clone(),
            state.clone(),
            key.clone(),
            inner_key,
            dir.path().join("absent"),
        ]);
        let state = state.canonicalize().expect("canonical");
        let key = key.canonicalize().expect("canonical");
        assert_eq!(found, vec![Hidden::Dir(state), Hidden::File(key)]);
    }
}
