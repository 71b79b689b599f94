//! Repositories for the checkout tests: a workspace with a first commit, a state directory
//! for checkouts, and a byte-level picture of the workspace to prove "nothing changed".
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use subzero_runtime::checkout::{
    Base, Change, Oid, PrepareRequest, Prepared, RecordRequest, Recorded, prepare, record,
};
use tempfile::TempDir;

/// Run git in `dir` with a test identity; panics with git's stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "protocol.file.allow=always",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Prepare a checkout of `workspace` from its working tree, nothing included or shared.
pub fn prepare_in(workspace: &Path, checkout: &Path, child: &str) -> Prepared {
    let base_ref = Repo::base_ref(child);
    prepare(&PrepareRequest {
        workspace,
        checkout,
        base: Base::WorkingTree,
        base_ref: &base_ref,
        include: &[],
        shared: &[],
    })
    .unwrap()
}

/// Record `checkout`'s change and expect one.
pub fn record_in(workspace: &Path, checkout: &Path, prepared: &Prepared, child: &str) -> Change {
    let child_ref = Repo::child_ref(child);
    let recorded = record(&RecordRequest {
        workspace,
        checkout,
        base: &prepared.base,
        child_ref: &child_ref,
        child,
        own_paths: &prepared.own_paths,
    })
    .unwrap();
    match recorded {
        Recorded::Changed(change) => change,
        Recorded::Unchanged => panic!("{child} recorded no change"),
    }
}

/// A workspace repository with a state directory beside it.
pub struct Repo {
    pub dir: TempDir,
    pub state: TempDir,
}

impl Repo {
    /// A repository on `main` whose first commit holds `files`.
    pub fn with(files: &[(&str, &str)]) -> Repo {
        let repo = Repo {
            dir: TempDir::new().unwrap(),
            state: TempDir::new().unwrap(),
        };
        git(repo.path(), &["init", "-q", "-b", "main"]);
        for (path, content) in files {
            repo.write(path, content.as_bytes());
        }
        repo.commit_all("first");
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }

    pub fn write(&self, rel: &str, content: &[u8]) {
        write_in(self.path(), rel, content);
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path().join(rel)).unwrap()
    }

    pub fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.head()
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }

    pub fn checkout_dir(&self, child: &str) -> PathBuf {
        self.state.path().join("checkouts").join(child)
    }

    pub fn base_ref(child: &str) -> String {
        format!("refs/subzero/base/{child}")
    }

    pub fn child_ref(child: &str) -> String {
        format!("refs/subzero/children/{child}")
    }

    /// Prepare `child`'s checkout from the working tree, with no includes or shared dirs.
    pub fn prepare(&self, child: &str) -> Prepared {
        self.prepare_with(child, Base::WorkingTree, &[], &[])
    }

    pub fn prepare_with(
        &self,
        child: &str,
        base: Base,
        include: &[String],
        shared: &[String],
    ) -> Prepared {
        let checkout = self.checkout_dir(child);
        let base_ref = Repo::base_ref(child);
        prepare(&PrepareRequest {
            workspace: self.path(),
            checkout: &checkout,
            base,
            base_ref: &base_ref,
            include,
            shared,
        })
        .unwrap()
    }

    pub fn record(&self, child: &str, prepared: &Prepared) -> Recorded {
        let checkout = self.checkout_dir(child);
        let child_ref = Repo::child_ref(child);
        record(&RecordRequest {
            workspace: self.path(),
            checkout: &checkout,
            base: &prepared.base,
            child_ref: &child_ref,
            child,
            own_paths: &prepared.own_paths,
        })
        .unwrap()
    }

    /// Record and expect a change.
    pub fn record_change(&self, child: &str, prepared: &Prepared) -> Change {
        match self.record(child, prepared) {
            Recorded::Changed(change) => change,
            Recorded::Unchanged => panic!("{child} recorded no change"),
        }
    }

    /// Write into `child`'s checkout.
    pub fn child_write(&self, child: &str, rel: &str, content: &[u8]) {
        write_in(&self.checkout_dir(child), rel, content);
    }

    /// Everything a refused apply must leave as it was.
    pub fn picture(&self) -> Picture {
        Picture {
            files: files_under(self.path()),
            status: self.git(&["status", "--porcelain=v2", "--untracked-files=all"]),
            index: self
                .git(&["ls-files", "-s", "--debug"])
                .lines()
                .filter(|l| {
                    !l.trim_start().starts_with("ctime") && !l.trim_start().starts_with("mtime")
                })
                .map(str::to_owned)
                .collect(),
            head: self.head(),
        }
    }
}

/// Files (content, or link target for symlinks) outside `.git`, and the index and status.
#[derive(Debug, PartialEq, Eq)]
pub struct Picture {
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    pub status: String,
    pub index: Vec<String>,
    pub head: String,
}

pub fn write_in(root: &Path, rel: &str, content: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn files_under(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let kind = entry.file_type().unwrap();
            if rel == Path::new(".git") {
                continue;
            } else if kind.is_symlink() {
                let target = fs::read_link(&path).unwrap();
                out.insert(rel, target.as_os_str().as_bytes().to_vec());
            } else if kind.is_dir() {
                stack.push(path);
            } else {
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// An oid as the engine's type.
pub fn oid(hex: &str) -> Oid {
    Oid::parse(hex.as_bytes(), "test").unwrap()
}
