//! The worker-owned transcript: an append-only JSONL tree.
//!
//! Line 1 is the header (the root, `type: "header"`, with `version`); every other line is an
//! entry with `id` and `parentId`. A run appends below the leaf it started from and never
//! rewrites a line, so an interrupted branch stays in the file. The digest of a leaf is the
//! SHA-256 of the root→leaf lines (each with its `\n`), as `sha256:<hex>`.
//!
//! The file never keeps a malformed line. An append the file system refuses part-way (a
//! full disk) is cut off again at once, so the file ends at the last whole line; a line
//! torn by a crash mid-write is cut off when the transcript is next opened, before
//! anything is appended. Only whole lines are ever entries, and a torn line is never a
//! committed leaf (a leaf is committed after its line is written and synced), so cutting
//! it loses nothing recorded.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::redact::redact;

/// The only transcript version this worker reads or writes.
pub const TRANSCRIPT_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    Header,
    Prompt,
    Steer,
    RecoveryNotice,
    /// What the model is told when the template's setup command failed (role user).
    SetupNotice,
    /// The worker's request for a handoff summary once a budget was reached (role user).
    BudgetNotice,
    Assistant,
    ToolResult,
    /// The summary that opens a branch compaction started (role user): the earlier
    /// conversation, summarised by the child; the branch it replaces stays in the file.
    Summary,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    #[serde(rename = "type")]
    pub kind: EntryType,
    pub id: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<EntryUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steer_id: Option<String>,
    pub at: String,
}

impl Entry {
    /// A new entry of `kind`; `id`, `parentId` and `at` are filled in by [`Transcript::append`].
    pub fn new(kind: EntryType, role: &str) -> Self {
        Self {
            kind,
            id: String::new(),
            parent_id: None,
            version: None,
            role: Some(role.to_owned()),
            content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            is_error: None,
            usage: None,
            run_id: None,
            steer_id: None,
            at: String::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// Maps to `checkpoint_incompatible`; the file was not touched.
    #[error("{0}")]
    Incompatible(String),
    #[error("transcript i/o failed: {0}")]
    Io(#[from] std::io::Error),
}

/// An open transcript positioned at a leaf.
#[derive(Debug)]
pub struct Transcript {
    file: File,
    /// Bytes of the file that are whole lines: where a refused append is cut back to.
    len: u64,
    lines: HashMap<String, (Entry, String)>,
    leaf: String,
    root: String,
}

impl Transcript {
    /// Opens (or creates) the transcript and positions it at `from_leaf` (the last entry of
    /// the file when `None`).
    /// Refuses — leaving the file untouched — an unknown version, a missing leaf or a digest
    /// that does not match the root→leaf path.
    pub fn open(
        path: &Path,
        from_leaf: Option<&str>,
        expected_digest: Option<&str>,
    ) -> Result<Self, TranscriptError> {
        let existing = match std::fs::read(path) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => return Err(err.into()),
        };
        match existing {
            // Only a header cut short by a crash: nothing was ever written below it.
            Some(bytes) if torn_header(&bytes) && from_leaf.is_none() => {
                tracing::warn!(transcript = %path.display(), "starting over a transcript whose header was cut short");
                OpenOptions::new().write(true).open(path)?.set_len(0)?;
                Self::create(path)
            }
            Some(bytes) if !bytes.is_empty() => {
                Self::open_existing(path, &bytes, from_leaf, expected_digest)
            }
            _ => {
                if let Some(leaf) = from_leaf {
                    return Err(TranscriptError::Incompatible(format!(
                        "checkpoint_incompatible: transcript {} does not exist, so leaf {leaf} cannot be resumed",
                        path.display()
                    )));
                }
                Self::create(path)
            }
        }
    }

    fn create(path: &Path) -> Result<Self, TranscriptError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let mut this = Self {
            file,
            len: 0,
            lines: HashMap::new(),
            leaf: String::new(),
            root: String::new(),
        };
        let mut header = Entry::new(EntryType::Header, "system");
        header.role = None;
        header.version = Some(TRANSCRIPT_VERSION);
        let root = this.append(header)?;
        this.root.clone_from(&root);
        this.file.sync_all()?;
        Ok(this)
    }

    fn open_existing(
        path: &Path,
        bytes: &[u8],
        from_leaf: Option<&str>,
        expected_digest: Option<&str>,
    ) -> Result<Self, TranscriptError> {
        let Parsed {
            lines,
            leaf,
            root,
            tail,
        } = Parsed::from_bytes(bytes, from_leaf, expected_digest).map_err(|why| {
            TranscriptError::Incompatible(format!(
                "checkpoint_incompatible: transcript {}: {why}",
                path.display()
            ))
        })?;
        // Validated: only now open for appending, after making the file end at a whole line.
        let mut file = OpenOptions::new().append(true).open(path)?;
        let len = match tail {
            Tail::Whole => bytes.len() as u64,
            Tail::MissingNewline => {
                file.write_all(b"\n")?;
                bytes.len() as u64 + 1
            }
            Tail::Torn { whole } => {
                let whole = whole as u64;
                tracing::warn!(
                    transcript = %path.display(),
                    cut = bytes.len() as u64 - whole,
                    "cutting a torn last line off the transcript (a write cut short by a crash or a full disk)"
                );
                file.set_len(whole)?;
                file.sync_all()?;
                whole
            }
        };
        Ok(Self {
            file,
            len,
            lines,
            leaf,
            root,
        })
    }

    /// Appends `entry` below the current leaf, which it becomes. Content is redacted.
    pub fn append(&mut self, mut entry: Entry) -> Result<String, TranscriptError> {
        entry.id = format!("e_{}", ulid::Ulid::new());
        entry.parent_id = if self.leaf.is_empty() {
            None
        } else {
            Some(self.leaf.clone())
        };
        entry.at = subzero_protocol::timestamp::now();
        let line = redact(&serde_json::to_string(&entry).map_err(std::io::Error::other)?);
        let stored: Entry = serde_json::from_str(&line).map_err(std::io::Error::other)?;
        let mut buf = line.clone().into_bytes();
        buf.push(b'\n');
        if let Err(err) = self.file.write_all(&buf) {
            // Part of the line may be on disk (a full file system takes what fits): cut it
            // off, so the file still ends at its last whole line and the space is free.
            if let Err(cut) = self.file.set_len(self.len) {
                tracing::error!(%cut, "cannot cut a refused transcript append off again");
            }
            return Err(err.into());
        }
        self.len += buf.len() as u64;
        self.leaf.clone_from(&stored.id);
        let id = stored.id.clone();
        self.lines.insert(id.clone(), (stored, line));
        Ok(id)
    }

    /// Moves to the root, so the next entry starts a new branch there; the branch left
    /// stays in the file, whole. Returns the leaf it ended at.
    pub fn branch_from_root(&mut self) -> String {
        std::mem::replace(&mut self.leaf, self.root.clone())
    }

    /// Flushes the file to disk and returns `(leafId, digest)`.
    pub fn commit(&mut self) -> Result<(String, String), TranscriptError> {
        self.file.sync_all()?;
        let digest = self.digest().ok_or_else(|| {
            TranscriptError::Incompatible("transcript leaf path is broken".to_owned())
        })?;
        Ok((self.leaf.clone(), digest))
    }

    /// Entries from the root to the current leaf (inclusive).
    pub fn path(&self) -> Vec<&Entry> {
        self.path_lines()
            .unwrap_or_default()
            .into_iter()
            .map(|(e, _)| e)
            .collect()
    }

    fn path_lines(&self) -> Option<Vec<(&Entry, &str)>> {
        path_lines(&self.lines, &self.leaf, &self.root)
    }

    /// The digest of the root→leaf path.
    pub fn digest(&self) -> Option<String> {
        digest(&self.lines, &self.leaf, &self.root)
    }

    #[cfg(test)]
    pub fn leaf(&self) -> &str {
        &self.leaf
    }
}

mod parsed;
pub use parsed::Parsed;
use parsed::{Tail, digest, path_lines, torn_header};

#[cfg(test)]
mod tests;
