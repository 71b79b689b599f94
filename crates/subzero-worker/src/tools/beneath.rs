//! Opening files for `write` and `edit` strictly beneath the workspace root.
//!
//! Everything is relative to a directory fd for the root, and the kernel resolves the path: with
//! `openat2(RESOLVE_BENEATH)` a symlink (dangling or not), an absolute link or a `..` that would
//! leave the root fails instead of being followed. Where the kernel has no `openat2`, the path
//! is walked one component at a time with `O_NOFOLLOW`, refusing every symlink on the way.
//! A path check before the open cannot give this guarantee: the check and the open look the
//! path up twice, and a dangling link is "missing" to the check but followed by the open.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Why a path could not be opened beneath the root.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BeneathError {
    /// The path leaves the root through a symlink, an absolute link or `..`.
    Outside,
    /// The kernel has no `openat2`, and the component-wise walk met a symlink: it cannot tell
    /// where the link leads, so it refuses all of them.
    Symlink,
    /// Any other OS error (missing file, permissions, not a directory, ...).
    Os(Errno),
}

/// How many times a lookup is retried when `openat2` reports a concurrent rename (`EAGAIN`).
const RETRIES: usize = 8;

/// Mode for new files: what `std::fs::write` uses; the kernel applies the umask.
const FILE_MODE: u32 = 0o666;
/// Mode for new directories: what `std::fs::create_dir_all` uses; the kernel applies the umask.
const DIR_MODE: u32 = 0o777;

/// The workspace root, held open as a directory fd that every lookup starts from.
#[derive(Debug)]
pub(crate) struct Workspace {
    root: OwnedFd,
}

impl Workspace {
    /// Opens the (canonical) workspace root.
    pub(crate) fn open(root: &Path) -> Result<Self, BeneathError> {
        let root = rustix::fs::open(root, dir_flags(), Mode::empty()).map_err(BeneathError::Os)?;
        Ok(Self { root })
    }

    /// Creates the missing parent directories of `rel`, then creates or truncates `rel` for
    /// writing. Both steps stay beneath the root.
    pub(crate) fn create_file(&self, rel: &Path) -> Result<File, BeneathError> {
        self.create_parents(rel)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC;
        open_beneath(
            self.root.as_fd(),
            rel,
            flags,
            Mode::from_raw_mode(FILE_MODE),
        )
        .map(File::from)
    }

    /// Opens an existing `rel` for reading and writing, so an edit reads and rewrites the file
    /// through one fd and nothing can be swapped in between.
    pub(crate) fn open_existing(&self, rel: &Path) -> Result<File, BeneathError> {
        open_beneath(self.root.as_fd(), rel, OFlags::RDWR, Mode::empty()).map(File::from)
    }

    /// `mkdir -p` for the parents of `rel`: each directory is created relative to an fd for its
    /// parent that was itself opened beneath the root, then reopened beneath the root.
    fn create_parents(&self, rel: &Path) -> Result<(), BeneathError> {
        let Some(parents) = rel.parent() else {
            return Ok(());
        };
        let mut prefix = PathBuf::new();
        let mut parent: Option<OwnedFd> = None;
        for part in parents.components() {
            let at = parent.as_ref().map_or(self.root.as_fd(), AsFd::as_fd);
            prefix.push(part);
            let opened = match (open_dir_beneath(self.root.as_fd(), &prefix), part) {
                (Err(BeneathError::Os(Errno::NOENT)), Component::Normal(name)) => {
                    match rustix::fs::mkdirat(at, name, Mode::from_raw_mode(DIR_MODE)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(BeneathError::Os(e)),
                    }
                    open_dir_beneath(self.root.as_fd(), &prefix)?
                }
                (opened, _) => opened?,
            };
            parent = Some(opened);
        }
        Ok(())
    }
}

fn dir_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// Opens `rel` (a file) beneath `root` with `flags` (`O_CLOEXEC` is added).
fn open_beneath(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, BeneathError> {
    match kernel_open(root, rel, flags | OFlags::CLOEXEC, mode) {
        Some(result) => result,
        None => walk_open(root, rel, flags, mode),
    }
}

/// Opens the directory `rel` beneath `root` (an `O_PATH` fd, good for `*at` calls).
fn open_dir_beneath(root: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, BeneathError> {
    match kernel_open(root, rel, dir_flags(), Mode::empty()) {
        Some(result) => result,
        None => walk_dir(root, rel),
    }
}

/// `openat2(root, rel, RESOLVE_BENEATH)`, or `None` when this kernel cannot do it.
fn kernel_open(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Option<Result<OwnedFd, BeneathError>> {
    let path = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let mut tries = 0;
    loop {
        tries += 1;
        match rustix::fs::openat2(root, path, flags, mode, resolve) {
            Ok(fd) => return Some(Ok(fd)),
            // ENOSYS: no openat2 (before Linux 5.6). EPERM: a seccomp filter that predates
            // openat2; a real EPERM comes back from the walk just the same.
            Err(Errno::NOSYS | Errno::PERM) => return None,
            Err(Errno::XDEV | Errno::LOOP) => return Some(Err(BeneathError::Outside)),
            Err(Errno::AGAIN) if tries < RETRIES => {}
            Err(e) => return Some(Err(BeneathError::Os(e))),
        }
    }
}

/// The fallback for a file: walk to its directory with [`walk_dir`], then open the last
/// component with `O_NOFOLLOW`, so a symlink there (dangling or not) is refused too.
fn walk_open(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, BeneathError> {
    let mut parts: Vec<Component<'_>> = rel.components().collect();
    let last = parts.pop();
    let mut dirs = Vec::new();
    for part in parts {
        step(root, &mut dirs, part)?;
    }
    let flags = flags | OFlags::CLOEXEC;
    let last = match last {
        Some(Component::Normal(name)) => name,
        Some(other) => {
            step(root, &mut dirs, other)?;
            ".".as_ref()
        }
        None => ".".as_ref(),
    };
    let at = dirs.last().map_or(root, AsFd::as_fd);
    rustix::fs::openat(at, last, flags | OFlags::NOFOLLOW, mode).map_err(|e| match e {
        Errno::LOOP => BeneathError::Symlink,
        other => BeneathError::Os(other),
    })
}

/// The fallback for a directory: one component at a time, each opened with `O_NOFOLLOW` and
/// checked to be a real directory. `..` goes back to the directory already opened before it,
/// so the walk can never climb above `root`.
fn walk_dir(root: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, BeneathError> {
    let mut dirs = Vec::new();
    for part in rel.components() {
        step(root, &mut dirs, part)?;
    }
    match dirs.pop() {
        Some(dir) => Ok(dir),
        None => rustix::fs::openat(root, ".", dir_flags(), Mode::empty()).map_err(BeneathError::Os),
    }
}

/// One component of the fallback walk; `dirs` are the directories opened so far below `root`.
fn step(
    root: BorrowedFd<'_>,
    dirs: &mut Vec<OwnedFd>,
    part: Component<'_>,
) -> Result<(), BeneathError> {
    match part {
        Component::CurDir => Ok(()),
        Component::ParentDir => dirs.pop().map(drop).ok_or(BeneathError::Outside),
        Component::RootDir | Component::Prefix(_) => Err(BeneathError::Outside),
        Component::Normal(name) => {
            let at = dirs.last().map_or(root, AsFd::as_fd);
            let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd =
                rustix::fs::openat(at, name, flags, Mode::empty()).map_err(BeneathError::Os)?;
            let stat = rustix::fs::fstat(&fd).map_err(BeneathError::Os)?;
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => {
                    dirs.push(fd);
                    Ok(())
                }
                FileType::Symlink => Err(BeneathError::Symlink),
                _ => Err(BeneathError::Os(Errno::NOTDIR)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::unix::fs::symlink;

    use super::*;

    /// `base/ws` is the root; `base/out` is what must stay untouched.
    struct Layout {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        out: PathBuf,
        root: OwnedFd,
    }

    fn layout() -> Layout {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("ws");
        let out = dir.path().join("out");
        std::fs::create_dir(&ws).expect("ws");
        std::fs::create_dir(&out).expect("out");
        let root = rustix::fs::open(&ws, dir_flags(), Mode::empty()).expect("open root");
        Layout {
            _dir: dir,
            ws,
            out,
            root,
        }
    }

    /// What the fallback walk makes of `write rel`; the fd itself is dropped.
    fn create(l: &Layout, rel: &str) -> Result<(), BeneathError> {
        create_fd(l, rel).map(drop)
    }

    fn create_fd(l: &Layout, rel: &str) -> Result<OwnedFd, BeneathError> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC;
        let mode = Mode::from_raw_mode(FILE_MODE);
        walk_open(l.root.as_fd(), Path::new(rel), flags, mode)
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_walk_creates_and_opens_plain_files_below_the_root() {
        let l = layout();
        std::fs::create_dir_all(l.ws.join("a/b")).expect("seed");
        let mut file = File::from(create_fd(&l, "a/b/new.txt").expect("create"));
        file.write_all(b"hello").expect("write");
        assert_eq!(
            std::fs::read_to_string(l.ws.join("a/b/new.txt")).expect("read"),
            "hello"
        );

        let rel = Path::new("a/./b/../b/new.txt");
        let fd = walk_open(l.root.as_fd(), rel, OFlags::RDWR, Mode::empty()).expect("reopen");
        let mut text = String::new();
        File::from(fd).read_to_string(&mut text).expect("read back");
        assert_eq!(text, "hello");
    }

    #[test]
    fn the_walk_refuses_a_dangling_link_and_creates_nothing_outside() {
        let l = layout();
        symlink(l.out.join("planted.txt"), l.ws.join("x.txt")).expect("link");
        symlink("../out/rel.txt", l.ws.join("rel.txt")).expect("link");
        assert_eq!(create(&l, "x.txt"), Err(BeneathError::Symlink));
        assert_eq!(create(&l, "rel.txt"), Err(BeneathError::Symlink));
        assert!(entries(&l.out).is_empty());
    }

    #[test]
    fn the_walk_refuses_a_live_link_to_an_outside_file() {
        let l = layout();
        std::fs::write(l.out.join("secret.txt"), "secret").expect("seed");
        symlink(l.out.join("secret.txt"), l.ws.join("secret.txt")).expect("link");
        let opened = walk_open(
            l.root.as_fd(),
            Path::new("secret.txt"),
            OFlags::RDWR,
            Mode::empty(),
        );
        assert_eq!(opened.map(drop), Err(BeneathError::Symlink));
        assert_eq!(create(&l, "secret.txt"), Err(BeneathError::Symlink));
        assert_eq!(
            std::fs::read_to_string(l.out.join("secret.txt")).expect("read"),
            "secret"
        );
    }

    #[test]
    fn the_walk_refuses_a_linked_directory_as_a_parent() {
        let l = layout();
        symlink(&l.out, l.ws.join("outdir")).expect("link");
        assert_eq!(create(&l, "outdir/new.txt"), Err(BeneathError::Symlink));
        assert_eq!(
            walk_dir(l.root.as_fd(), Path::new("outdir")).map(drop),
            Err(BeneathError::Symlink)
        );
        assert_eq!(create(&l, "outdir/../../x"), Err(BeneathError::Symlink));
        assert!(entries(&l.out).is_empty());
    }

    #[test]
    fn the_walk_never_climbs_above_the_root() {
        let l = layout();
        std::fs::create_dir(l.ws.join("sub")).expect("seed");
        assert_eq!(create(&l, "../out/x"), Err(BeneathError::Outside));
        assert_eq!(create(&l, "sub/../../out/x"), Err(BeneathError::Outside));
        assert_eq!(
            walk_dir(l.root.as_fd(), Path::new("sub/../..")).map(drop),
            Err(BeneathError::Outside)
        );
        assert!(entries(&l.out).is_empty());
    }

    #[test]
    fn the_walk_reports_a_missing_directory_and_a_file_used_as_one() {
        let l = layout();
        std::fs::write(l.ws.join("file"), "x").expect("seed");
        assert_eq!(
            create(&l, "missing/x.txt"),
            Err(BeneathError::Os(Errno::NOENT))
        );
        assert_eq!(
            create(&l, "file/x.txt"),
            Err(BeneathError::Os(Errno::NOTDIR))
        );
        assert_eq!(create(&l, "."), Err(BeneathError::Os(Errno::ISDIR)));
    }

    #[test]
    fn the_kernel_path_keeps_inside_links_and_refuses_outside_ones() {
        let l = layout();
        std::fs::write(l.ws.join("real.txt"), "inside").expect("seed");
        symlink("real.txt", l.ws.join("link.txt")).expect("link");
        symlink(l.out.join("planted.txt"), l.ws.join("x.txt")).expect("link");
        let ws = Workspace::open(&l.ws).expect("open");
        let outcome = ws.create_file(Path::new("x.txt")).map(drop);
        // Either openat2 refuses it as outside, or (without openat2) the walk refuses the link.
        assert!(
            matches!(outcome, Err(BeneathError::Outside | BeneathError::Symlink)),
            "{outcome:?}"
        );
        assert!(entries(&l.out).is_empty());
        if kernel_open(l.root.as_fd(), Path::new("."), dir_flags(), Mode::empty()).is_some() {
            let mut file = ws.create_file(Path::new("link.txt")).expect("inside link");
            file.write_all(b"rewritten").expect("write");
            assert_eq!(
                std::fs::read_to_string(l.ws.join("real.txt")).expect("read"),
                "rewritten"
            );
        }
    }

    #[test]
    fn create_file_makes_missing_parents_below_the_root_only() {
        let l = layout();
        symlink(l.out.join("ghost"), l.ws.join("ghostdir")).expect("link");
        let ws = Workspace::open(&l.ws).expect("open");
        ws.create_file(Path::new("a/b/c.txt")).expect("nested");
        assert!(l.ws.join("a/b/c.txt").is_file());
        let outcome = ws.create_file(Path::new("ghostdir/new.txt")).map(drop);
        assert!(
            matches!(outcome, Err(BeneathError::Outside | BeneathError::Symlink)),
            "{outcome:?}"
        );
        assert!(entries(&l.out).is_empty());
    }
}
