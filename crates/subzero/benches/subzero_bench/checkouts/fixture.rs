//! The repository the isolation figures run on: 10,000 small tracked files, committed,
//! and a 200 MB ignored `node_modules` of many files, in a temp dir, made once per run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use subzero_runtime::checkout::disk_usage;
use tempfile::TempDir;

use crate::Fail;

/// Tracked files: `DIRS` directories of `FILES_PER_DIR` small text files.
pub const DIRS: usize = 100;
pub const FILES_PER_DIR: usize = 100;
/// Ignored `node_modules`: `PACKAGES` packages of `FILES_PER_PACKAGE` files of
/// `MODULE_FILE_BYTES` each (2,000 × 100 KB = 200 MB).
pub const PACKAGES: usize = 100;
pub const FILES_PER_PACKAGE: usize = 20;
pub const MODULE_FILE_BYTES: usize = 100 * 1000;

/// The generated workspace and what it weighs.
pub struct Fixture {
    dir: TempDir,
    /// The workspace: a git repository, its HEAD the committed tracked files.
    pub workspace: PathBuf,
    /// Bytes the tracked files take on disk (the workspace without `.git` and
    /// `node_modules`).
    pub tracked_bytes: u64,
    /// Bytes `node_modules` takes on disk.
    pub modules_bytes: u64,
    /// How long making it took.
    pub seconds: f64,
}

impl Fixture {
    pub fn create() -> Result<Fixture, Fail> {
        let started = Instant::now();
        let dir = tempfile::tempdir()?;
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace)?;
        git(&workspace, &["init", "--quiet", "--initial-branch=main"])?;
        write_tracked(&workspace)?;
        write_modules(&workspace.join("node_modules"))?;
        git(&workspace, &["add", "--all"])?;
        git(&workspace, &["commit", "--quiet", "--message", "fixture"])?;
        settle_index(&workspace)?;
        let modules_bytes = disk_usage(&workspace.join("node_modules"))?;
        let tracked_bytes =
            disk_usage(&workspace)? - disk_usage(&workspace.join(".git"))? - modules_bytes;
        Ok(Fixture {
            dir,
            workspace,
            tracked_bytes,
            modules_bytes,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// A fresh path beside the workspace (not created), e.g. `checkouts/3`.
    pub fn scratch(&self, kind: &str, run: usize) -> PathBuf {
        self.dir.path().join(kind).join(run.to_string())
    }
}

/// The relative path of tracked file `file` in directory `dir`.
pub fn tracked_path(dir: usize, file: usize) -> PathBuf {
    PathBuf::from(format!("src{dir:03}/file{file:03}.txt"))
}

fn write_tracked(workspace: &Path) -> Result<(), Fail> {
    std::fs::write(workspace.join(".gitignore"), "node_modules/\n")?;
    for d in 0..DIRS {
        std::fs::create_dir(workspace.join(format!("src{d:03}")))?;
        for f in 0..FILES_PER_DIR {
            let text: String = (0..8)
                .map(|line| format!("file {d}/{f}, line {line}: some small text\n"))
                .collect();
            std::fs::write(workspace.join(tracked_path(d, f)), text)?;
        }
    }
    Ok(())
}

fn write_modules(modules: &Path) -> Result<(), Fail> {
    let content: Vec<u8> = (0..MODULE_FILE_BYTES).map(|i| (i % 251) as u8).collect();
    for p in 0..PACKAGES {
        let package = modules.join(format!("package-{p:03}"));
        std::fs::create_dir_all(&package)?;
        for f in 0..FILES_PER_PACKAGE {
            std::fs::write(package.join(format!("chunk-{f:02}.js")), &content)?;
        }
    }
    Ok(())
}

/// Files written in the same second as the index are "racily clean" and git would rehash
/// them on every status: once the clock has moved past the index's mtime, refresh it.
fn settle_index(workspace: &Path) -> Result<(), Fail> {
    let index = workspace.join(".git/index");
    let written = std::fs::metadata(&index)?.modified()?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while SystemTime::now() < written + Duration::from_secs(1) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    git(workspace, &["update-index", "-q", "--really-refresh"])
}

/// Run git in `dir` with no user or system config (the bench's own identity); fail with
/// its stderr.
pub fn git(dir: &Path, args: &[&str]) -> Result<(), Fail> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "subzero-bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "subzero-bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git {} in {} failed ({}): {}",
            args.join(" "),
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into())
    }
}
