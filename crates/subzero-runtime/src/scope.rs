//! Workspace scope: who may see a child.
//!
//! A scope is the OS user plus the canonical workspace path plus the device and inode
//! of that directory, so a directory deleted and recreated at the same path is a
//! different scope and its predecessor's children stay invisible (`not_found`).

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{RuntimeError, RuntimeResult};

/// The identity of one workspace directory for one OS user.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WorkspaceScope {
    uid: u32,
    root: PathBuf,
    dev: u64,
    ino: u64,
}

impl WorkspaceScope {
    /// Resolve a workspace root: canonicalize it, check it is a directory, and record
    /// the current user, device and inode.
    pub fn resolve(root: &Path) -> RuntimeResult<Self> {
        let canonical = std::fs::canonicalize(root).map_err(|e| {
            RuntimeError::InvalidRequest(format!(
                "workspaceRoot {} cannot be resolved ({e}); pass an existing directory",
                root.display()
            ))
        })?;
        let meta = std::fs::metadata(&canonical).map_err(|e| {
            RuntimeError::InvalidRequest(format!(
                "workspaceRoot {} cannot be read ({e})",
                canonical.display()
            ))
        })?;
        if !meta.is_dir() {
            return Err(RuntimeError::InvalidRequest(format!(
                "workspaceRoot {} is not a directory",
                canonical.display()
            )));
        }
        Ok(WorkspaceScope {
            uid: rustix::process::getuid().as_raw(),
            root: canonical,
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// Rebuild a scope from stored parts (no file-system access).
    pub fn from_parts(uid: u32, root: PathBuf, dev: u64, ino: u64) -> Self {
        WorkspaceScope {
            uid,
            root,
            dev,
            ino,
        }
    }

    /// The OS user id.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The canonical workspace path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory's device number.
    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// The directory's inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// A stable, file-name-safe key: hex SHA-256 of every part (first 32 hex digits).
    /// Stored with every child, artifact and receipt, and used in slot lock file names.
    pub fn key(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(self.uid.to_le_bytes());
        hash.update(self.dev.to_le_bytes());
        hash.update(self.ino.to_le_bytes());
        hash.update(self.root.as_os_str().as_encoded_bytes());
        let digest = hex::encode(hash.finalize());
        digest[..32].to_owned()
    }
}

impl fmt::Display for WorkspaceScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (uid {}, dev {}, ino {})",
            self.root.display(),
            self.uid,
            self.dev,
            self.ino
        )
    }
}
