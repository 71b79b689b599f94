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
use sha2::{Digest, Sha256};

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
    /// The worker's request for a handoff summary once a budget was reached (role user).
    BudgetNotice,
    Assistant,
    ToolResult,
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

/// An existing transcript read from its bytes and positioned at a leaf; no file is touched.
/// [`Transcript::open`] builds on it, and the fuzz targets call it directly.
#[derive(Debug)]
pub struct Parsed {
    lines: HashMap<String, (Entry, String)>,
    leaf: String,
    root: String,
    tail: Tail,
}

/// How the bytes end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// With a newline.
    Whole,
    /// With a readable entry that lacks only its newline.
    MissingNewline,
    /// With a line cut short (unreadable, no newline): `whole` bytes are the whole lines
    /// before it.
    Torn { whole: usize },
}

impl Parsed {
    /// Reads the lines of `bytes` and positions at `from_leaf` (the last entry when `None`).
    /// `Err` says why the transcript is incompatible: an unknown version, a missing leaf or a
    /// digest that does not match the root→leaf path.
    pub fn from_bytes(
        bytes: &[u8],
        from_leaf: Option<&str>,
        expected_digest: Option<&str>,
    ) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
        let complete = text.ends_with('\n');
        let mut tail = if complete {
            Tail::Whole
        } else {
            Tail::MissingNewline
        };
        let raw_lines: Vec<&str> = text.lines().collect();
        let mut lines = HashMap::new();
        let mut root = None;
        let mut last = None;
        for (n, line) in raw_lines.iter().enumerate() {
            let parsed: Result<Entry, _> = serde_json::from_str(line);
            let entry = match parsed {
                Ok(entry) => entry,
                // A torn last line from a crash mid-write is skipped; anything else is damage.
                Err(_) if n + 1 == raw_lines.len() && !complete => {
                    tail = Tail::Torn {
                        whole: text.rfind('\n').map_or(0, |i| i + 1),
                    };
                    break;
                }
                Err(_) if n == 0 => return Err("no readable header".into()),
                Err(err) => return Err(format!("line {} unreadable: {err}", n + 1)),
            };
            if n == 0 {
                if entry.kind != EntryType::Header {
                    return Err("first line is not a header".into());
                }
                if entry.version != Some(TRANSCRIPT_VERSION) {
                    return Err(format!(
                        "unknown transcript version {:?} (this worker reads {TRANSCRIPT_VERSION})",
                        entry.version
                    ));
                }
                root = Some(entry.id.clone());
            }
            last = Some(entry.id.clone());
            lines.insert(entry.id.clone(), (entry, (*line).to_owned()));
        }
        let root = root.ok_or_else(|| "no header".to_owned())?;
        // `fromLeaf: null` continues from the current end of the file (schema), which is the
        // last entry written — short of a model turn whose tool calls the run did not get
        // to answer; the root is always addressable by its id.
        let leaf = match from_leaf {
            Some(leaf) => leaf.to_owned(),
            None => answered_end(&lines, &last.unwrap_or_else(|| root.clone()), &root),
        };
        if !lines.contains_key(&leaf) {
            return Err(format!("leaf {leaf} is not in the transcript"));
        }
        let this = Self {
            lines,
            leaf,
            root,
            tail,
        };
        let digest = this
            .digest()
            .ok_or_else(|| "leaf path is broken".to_owned())?;
        if let Some(expected) = expected_digest
            && expected != digest
        {
            return Err(format!(
                "digest of leaf {} does not match the recorded checkpoint",
                this.leaf
            ));
        }
        Ok(this)
    }

    /// The leaf it is positioned at.
    pub fn leaf(&self) -> &str {
        &self.leaf
    }

    /// The digest of the root→leaf path.
    pub fn digest(&self) -> Option<String> {
        digest(&self.lines, &self.leaf, &self.root)
    }
}

/// Where a run continuing from the end of the file starts: `last`, unless the last model
/// turn on its path made tool calls that are not all answered after it (the run ended
/// mid-call: a full disk refused the result, a crash) — then the entry before that turn,
/// so no later request carries a call without its result (which Chat Completions
/// endpoints refuse). The unanswered turn stays in the file, off the path.
fn answered_end(lines: &HashMap<String, (Entry, String)>, last: &str, root: &str) -> String {
    let Some(path) = path_lines(lines, last, root) else {
        return last.to_owned();
    };
    let Some(at) = path
        .iter()
        .rposition(|(e, _)| e.kind == EntryType::Assistant && !e.tool_calls.is_empty())
    else {
        return last.to_owned();
    };
    let answered: Vec<&str> = path[at + 1..]
        .iter()
        .filter(|(e, _)| e.kind == EntryType::ToolResult)
        .filter_map(|(e, _)| e.tool_call_id.as_deref())
        .collect();
    let turn = path[at].0;
    if turn
        .tool_calls
        .iter()
        .all(|call| answered.contains(&call.id.as_str()))
    {
        return last.to_owned();
    }
    turn.parent_id.clone().unwrap_or_else(|| root.to_owned())
}

/// Whether `bytes` are only the start of a header line: no newline, not a readable entry.
fn torn_header(bytes: &[u8]) -> bool {
    !bytes.is_empty() && !bytes.contains(&b'\n') && serde_json::from_slice::<Entry>(bytes).is_err()
}

/// The entries and lines from the root to `leaf`, or `None` when the path is broken: an
/// unknown parent, a cycle, or a path that does not start at `root`.
fn path_lines<'a>(
    lines: &'a HashMap<String, (Entry, String)>,
    leaf: &str,
    root: &str,
) -> Option<Vec<(&'a Entry, &'a str)>> {
    let mut out = Vec::new();
    let mut cursor = Some(leaf);
    while let Some(id) = cursor {
        let (entry, line) = lines.get(id)?;
        out.push((entry, line.as_str()));
        if out.len() > lines.len() {
            return None; // a cycle
        }
        cursor = entry.parent_id.as_deref();
    }
    out.reverse();
    (out.first()?.0.id == root || root.is_empty()).then_some(out)
}

/// SHA-256 of the root→leaf lines, each with its `\n`, as `sha256:<hex>`.
fn digest(lines: &HashMap<String, (Entry, String)>, leaf: &str, root: &str) -> Option<String> {
    let mut hasher = Sha256::new();
    for (_, line) in path_lines(lines, leaf, root)? {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    Some(format!("sha256:{}", hex::encode(hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_keeps_later_entries_and_a_wrong_digest_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let mut t = Transcript::open(&path, None, None).expect("create");
        let root = t.leaf().to_owned();
        let mut prompt = Entry::new(EntryType::Prompt, "user");
        prompt.content = Some("hello".into());
        t.append(prompt.clone()).expect("append");
        let (leaf, digest) = t.commit().expect("commit");
        t.append(prompt.clone()).expect("append interrupted");
        drop(t);

        let before = std::fs::read(&path).expect("read");
        let err = Transcript::open(&path, Some(&leaf), Some("sha256:00")).expect_err("refused");
        assert!(matches!(err, TranscriptError::Incompatible(_)));
        assert_eq!(before, std::fs::read(&path).expect("read"));

        let mut t = Transcript::open(&path, Some(&leaf), Some(&digest)).expect("resume");
        t.append(prompt.clone()).expect("append");
        assert_eq!(t.path().len(), 3);
        drop(t);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.lines().count(), 4, "the interrupted entry is kept");

        let t = Transcript::open(&path, Some(&root), None).expect("root is a leaf");
        assert_eq!(t.path().len(), 1);
    }

    /// Every line of the file is a readable entry (what the broker's checkpoint check and
    /// a later open require).
    fn every_line_reads(path: &Path) -> usize {
        let text = std::fs::read_to_string(path).expect("read");
        assert!(text.ends_with('\n'), "the file ends at a whole line");
        for line in text.lines() {
            serde_json::from_str::<Entry>(line)
                .unwrap_or_else(|e| panic!("a malformed line was left ({e}): {line:.80}"));
        }
        text.lines().count()
    }

    #[test]
    fn a_torn_last_line_is_cut_off_at_open_and_never_becomes_a_malformed_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let mut t = Transcript::open(&path, None, None).expect("create");
        let mut prompt = Entry::new(EntryType::Prompt, "user");
        prompt.content = Some("hello".into());
        t.append(prompt.clone()).expect("append");
        let (leaf, digest) = t.commit().expect("commit");
        drop(t);
        // What a write cut short leaves: the start of a line, no newline.
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(br#"{"type":"assistant","id":"e_torn","parentId":"#)
            .expect("torn write");
        drop(file);

        // The next run continues from the recorded leaf; the torn bytes are gone.
        let mut t = Transcript::open(&path, Some(&leaf), Some(&digest)).expect("resume");
        assert_eq!(every_line_reads(&path), 2);
        t.append(prompt.clone()).expect("append");
        let (next, next_digest) = t.commit().expect("commit");
        drop(t);
        assert_eq!(every_line_reads(&path), 3);
        // And a later open (a resume verifying its checkpoint) reads the file whole.
        let t = Transcript::open(&path, Some(&next), Some(&next_digest)).expect("reopen");
        assert_eq!(t.path().len(), 3);
        // Continuing from the end finds the last whole entry, never the torn one.
        drop(t);
        let t = Transcript::open(&path, None, None).expect("from the end");
        assert_eq!(t.leaf(), next);
    }

    #[test]
    fn continuing_from_the_end_skips_a_model_turn_whose_calls_were_not_answered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let mut t = Transcript::open(&path, None, None).expect("create");
        let prompt = t
            .append(Entry::new(EntryType::Prompt, "user"))
            .expect("prompt");
        let mut turn = Entry::new(EntryType::Assistant, "assistant");
        turn.tool_calls = vec![
            ToolCallRecord {
                id: "call_1".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            },
            ToolCallRecord {
                id: "call_2".into(),
                name: "read".into(),
                arguments: "{}".into(),
            },
        ];
        t.append(turn.clone()).expect("turn");
        let mut result = Entry::new(EntryType::ToolResult, "tool");
        result.tool_call_id = Some("call_1".into());
        t.append(result).expect("first result");
        // The second result was never written (the disk was full).
        drop(t);
        let t = Transcript::open(&path, None, None).expect("open");
        assert_eq!(t.leaf(), prompt, "the unanswered turn is off the path");
        drop(t);

        // A turn whose calls were all answered is continued from its last result.
        let mut t = Transcript::open(&path, None, None).expect("open");
        t.append(turn).expect("turn again");
        for id in ["call_1", "call_2"] {
            let mut result = Entry::new(EntryType::ToolResult, "tool");
            result.tool_call_id = Some(id.into());
            t.append(result).expect("result");
        }
        let (end, _) = t.commit().expect("commit");
        drop(t);
        let t = Transcript::open(&path, None, None).expect("open");
        assert_eq!(t.leaf(), end);
    }

    #[test]
    fn a_torn_header_starts_the_transcript_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, br#"{"type":"header","id":"e_01"#).expect("torn header");
        let t = Transcript::open(&path, None, None).expect("started over");
        assert_eq!(t.path().len(), 1);
        drop(t);
        assert_eq!(every_line_reads(&path), 1);
    }

    #[test]
    fn a_whole_last_entry_without_its_newline_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let mut t = Transcript::open(&path, None, None).expect("create");
        t.append(Entry::new(EntryType::Prompt, "user"))
            .expect("append");
        let (leaf, _) = t.commit().expect("commit");
        drop(t);
        let mut bytes = std::fs::read(&path).expect("read");
        assert_eq!(bytes.pop(), Some(b'\n'));
        std::fs::write(&path, &bytes).expect("newline lost");
        let t = Transcript::open(&path, None, None).expect("open");
        assert_eq!(t.leaf(), leaf);
        drop(t);
        assert_eq!(every_line_reads(&path), 2);
    }
}
