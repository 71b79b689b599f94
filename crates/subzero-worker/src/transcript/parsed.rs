//! Reading an existing transcript: its lines, the leaf it is positioned at, a torn tail,
//! and the digest of a leaf.

use std::collections::HashMap;

use super::*;

/// An existing transcript read from its bytes and positioned at a leaf; no file is touched.
/// [`Transcript::open`] builds on it, and the fuzz targets call it directly.
#[derive(Debug)]
pub struct Parsed {
    pub(super) lines: HashMap<String, (Entry, String)>,
    pub(super) leaf: String,
    pub(super) root: String,
    pub(super) tail: Tail,
}

/// How the bytes end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tail {
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
pub(super) fn torn_header(bytes: &[u8]) -> bool {
    !bytes.is_empty() && !bytes.contains(&b'\n') && serde_json::from_slice::<Entry>(bytes).is_err()
}

/// The entries and lines from the root to `leaf`, or `None` when the path is broken: an
/// unknown parent, a cycle, or a path that does not start at `root`.
pub(super) fn path_lines<'a>(
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

/// SHA-256 of the root→leaf lines, each with its `\n`, as `sha256:<hex>`: the protocol's
/// one definition, over this transcript's entries (a path must start at `root`, when known).
pub(super) fn digest(
    lines: &HashMap<String, (Entry, String)>,
    leaf: &str,
    root: &str,
) -> Option<String> {
    subzero_protocol::transcript::path_digest(
        leaf,
        (!root.is_empty()).then_some(root),
        "",
        lines.len(),
        |id| {
            lines
                .get(id)
                .map(|(entry, line)| (entry.parent_id.as_deref(), line.as_str()))
        },
    )
}
