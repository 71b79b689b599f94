//! The worker's private scratch directory, where tool output is captured raw (before it is
//! redacted and shown to the model).
//!
//! Its parent may be writable by other users (the system temp directory when the broker names
//! no parent), so nothing about it may be predictable or taken over:
//! - it is made fresh: `mkdir` of a new random name, mode 0700, in a parent opened once; an
//!   entry that already has the name is never reused (`EEXIST` → another name);
//! - it is checked through the descriptor that holds it: a directory, owned by our euid,
//!   mode 0700 (a umask that took bits away is undone);
//! - it is held open and exclusively `flock`ed while the worker lives, so a broker sweeping
//!   its state directory's `scratch/` tells a live worker's directory from a dead one's;
//! - files in it are created `O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`, mode 0600, relative to
//!   the directory descriptor, so no planted name or link is ever followed;
//! - [`Scratch::remove`] deletes it at teardown; a SIGKILLed worker's directory is
//!   reclaimed by the next broker that opens the state directory.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, Stat};

/// Scratch directory names: this prefix and a ULID (80 random bits).
const PREFIX: &str = "subzero-worker-";
/// Names tried before giving up (each is new randomness, so a miss means something is wrong).
const ATTEMPTS: usize = 16;

/// A private directory this worker created and holds; see the module docs.
#[derive(Debug)]
pub struct Scratch {
    /// The parent, opened once: every later step is relative to it, not to its path.
    parent: OwnedFd,
    name: String,
    /// The directory itself, flock-held for as long as the worker lives.
    dir: OwnedFd,
    path: PathBuf,
    next: AtomicU64,
}

/// A file created in the scratch directory; unlinked when dropped.
#[derive(Debug)]
pub struct ScratchFile<'a> {
    scratch: &'a Scratch,
    name: String,
    file: File,
}

impl Scratch {
    /// Creates a fresh directory in `parent`, or in the system temp directory without one.
    pub fn create(parent: Option<&Path>) -> io::Result<Scratch> {
        let parent_path = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let parent = rustix::fs::open(
            &parent_path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| in_context(e.into(), "cannot open", &parent_path))?;
        for _ in 0..ATTEMPTS {
            let name = format!("{PREFIX}{}", ulid::Ulid::new().to_string().to_lowercase());
            let path = parent_path.join(&name);
            match rustix::fs::mkdirat(&parent, name.as_str(), Mode::RWXU) {
                Ok(()) => {}
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(in_context(e.into(), "cannot create", &path)),
            }
            if let Some(dir) =
                claim(&parent, &name).map_err(|e| in_context(e, "cannot secure", &path))?
            {
                return Ok(Scratch {
                    parent,
                    name,
                    dir,
                    path,
                    next: AtomicU64::new(0),
                });
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "no fresh scratch directory could be made in {} after {ATTEMPTS} names",
                parent_path.display()
            ),
        ))
    }

    /// Where the directory is (for logs; every operation goes through its descriptor).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates a new private file (mode 0600) named `<stem>-<n>.out`, open for reading and
    /// writing; a name that exists already is skipped, never opened.
    pub fn create_file(&self, stem: &str) -> io::Result<ScratchFile<'_>> {
        for _ in 0..ATTEMPTS {
            let name = format!("{stem}-{}.out", self.next.fetch_add(1, Ordering::Relaxed));
            match rustix::fs::openat(
                &self.dir,
                name.as_str(),
                OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::RUSR | Mode::WUSR,
            ) {
                Ok(fd) => {
                    return Ok(ScratchFile {
                        scratch: self,
                        name,
                        file: File::from(fd),
                    });
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("every {stem}-N.out name tried in the scratch directory exists"),
        ))
    }

    /// Deletes the directory and everything in it, only while the name still is this
    /// directory. `std::fs::remove_dir_all` never follows a link (it unlinks the link).
    pub fn remove(&self) -> io::Result<()> {
        let held = rustix::fs::fstat(&self.dir)?;
        let named =
            rustix::fs::statat(&self.parent, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        if !same_file(&held, &named) {
            return Err(io::Error::other(format!(
                "{} is no longer this worker's scratch directory; left in place",
                self.path.display()
            )));
        }
        std::fs::remove_dir_all(&self.path)
    }
}

impl ScratchFile<'_> {
    /// The open file (its descriptor is close-on-exec; hand out clones to tool processes).
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Drop for ScratchFile<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::unlinkat(&self.scratch.dir, self.name.as_str(), AtFlags::empty());
    }
}

/// Opens the directory just made as `name`, checks it is ours and private, and locks it.
/// `None` when it vanished or is locked by someone else before we held it (a broker sweeping
/// `scratch/` at that moment): the caller then tries a new name.
fn claim(parent: &OwnedFd, name: &str) -> io::Result<Option<OwnedFd>> {
    let dir = match rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(dir) => dir,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let stat = rustix::fs::fstat(&dir)?;
    check_private(&stat)?;
    if stat.st_mode & 0o7777 != 0o700 {
        rustix::fs::fchmod(&dir, Mode::RWXU)?;
    }
    match rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    // Held now: nobody removes it any more. It must still be what the name leads to.
    match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(named) if same_file(&stat, &named) => Ok(Some(dir)),
        Ok(_) | Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn check_private(stat: &Stat) -> io::Result<()> {
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        return Err(io::Error::other("it is not a directory"));
    }
    let euid = rustix::process::geteuid().as_raw();
    if stat.st_uid != euid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "it is owned by uid {}, not by this worker's uid {euid}",
                stat.st_uid
            ),
        ));
    }
    Ok(())
}

fn same_file(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

fn in_context(err: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(err.kind(), format!("{what} {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, symlink};

    use super::*;

    #[test]
    fn a_fresh_directory_is_private_and_removed_without_following_links() {
        let base = tempfile::tempdir().expect("tempdir");
        let outside = base.path().join("outside.txt");
        std::fs::write(&outside, "keep").expect("seed");
        let scratch = Scratch::create(Some(base.path())).expect("scratch");
        let meta = std::fs::symlink_metadata(scratch.path()).expect("lstat");
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o7777, 0o700);
        {
            let out = scratch.create_file("bash").expect("file");
            let meta = out.file().metadata().expect("fstat");
            assert_eq!(meta.mode() & 0o7777, 0o600);
        }
        symlink(&outside, scratch.path().join("link")).expect("link");
        std::fs::create_dir(scratch.path().join("sub")).expect("sub");
        symlink(base.path(), scratch.path().join("sub/up")).expect("link");
        scratch.remove().expect("remove");
        assert!(!scratch.path().exists());
        assert_eq!(std::fs::read_to_string(&outside).expect("kept"), "keep");
    }

    #[test]
    fn a_planted_output_name_is_skipped_not_opened() {
        let base = tempfile::tempdir().expect("tempdir");
        let victim = base.path().join("victim.txt");
        std::fs::write(&victim, "keep").expect("seed");
        let scratch = Scratch::create(Some(base.path())).expect("scratch");
        symlink(&victim, scratch.path().join("bash-0.out")).expect("plant");
        let out = scratch.create_file("bash").expect("file");
        assert_eq!(out.name, "bash-1.out");
        drop(out);
        assert_eq!(std::fs::read_to_string(&victim).expect("kept"), "keep");
        scratch.remove().expect("remove");
    }
}
