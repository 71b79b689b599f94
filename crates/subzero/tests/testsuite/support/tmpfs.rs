//! A tmpfs mounted over a test's state directory: a disk the test fills and grows again.
//! Mounting needs root (CI runs as root); elsewhere the tests say why they did not run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted over a test's state directory; unmounted (lazily) when dropped.
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mount a 2 MiB tmpfs at `path`, or say why not.
    pub fn mount(path: &Path) -> Option<Tmpfs> {
        std::fs::create_dir_all(path).expect("mount point");
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root and must run the full-disk tests"
            );
            eprintln!(
                "SKIPPED: mounting a tmpfs needs root; the full-disk test did not run (run the tests as root)"
            );
            return None;
        }
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs"])
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root and must be able to mount a tmpfs for the full-disk tests"
            );
            eprintln!(
                "SKIPPED: `mount -t tmpfs` failed (no CAP_SYS_ADMIN in this container?); the full-disk test did not run"
            );
            return None;
        }
        Some(Tmpfs {
            path: path.to_path_buf(),
        })
    }

    /// Space returns: the same file system, grown to 64 MiB.
    pub fn grow(&self) {
        let grown = Command::new("mount")
            .args(["-o", "remount,size=64m"])
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        assert!(grown, "remount the state directory to 64 MiB");
    }

    /// Fill the file system to its last byte (what a runaway log elsewhere does).
    pub fn fill(&self) {
        let mut file = std::fs::File::create(self.path.join("filler")).expect("filler");
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        let one = [0u8; 512];
        while file.write_all(&one).is_ok() {}
        let _ = file.sync_all();
    }
}

impl Tmpfs {
    /// Space returns: what [`Tmpfs::fill`] wrote is removed.
    pub fn free(&self) {
        std::fs::remove_file(self.path.join("filler")).expect("remove the filler");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
