//! Artifact files: full results owned by a child, read back in bounded chunks.
//!
//! Files live at `<state>/artifacts/<childId>/<artifactId>.txt` and are written whole
//! (temp file, fsync, rename), so a reader never sees a partial result. Chunks start
//! and end on UTF-8 character boundaries; nothing is cut without `eof: false` and a
//! `nextOffset` to continue from.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use subzero_core::{ArtifactId, ChildId};

use crate::error::{RuntimeError, RuntimeResult};
use crate::paths::StatePaths;
use crate::store::{ArtifactRow, NewArtifact};

/// Largest chunk `read_chunk` returns (the `length` bound of `subzero_output`).
pub const MAX_CHUNK_BYTES: u64 = 64 * 1024;

/// A bounded preview of a longer text.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Preview {
    /// At most the requested bytes, ending on a character boundary.
    pub text: String,
    /// Whether `text` is shorter than the original.
    pub truncated: bool,
}

/// The first at most `max_bytes` bytes of `text`, cut on a character boundary.
pub fn preview(text: &str, max_bytes: usize) -> Preview {
    if text.len() <= max_bytes {
        return Preview {
            text: text.to_owned(),
            truncated: false,
        };
    }
    let cut = text.floor_char_boundary(max_bytes);
    Preview {
        text: text[..cut].to_owned(),
        truncated: true,
    }
}

/// One chunk of an artifact.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ArtifactChunk {
    /// The offset the chunk starts at.
    pub offset: u64,
    /// The text.
    pub text: String,
    /// Where the next chunk starts.
    pub next_offset: u64,
    /// Whether the chunk reaches the end of the artifact.
    pub eof: bool,
    /// The artifact's size in bytes.
    pub total_bytes: u64,
}

/// Artifact files under one state directory.
#[derive(Clone, Debug)]
pub struct ArtifactFiles {
    dir: PathBuf,
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

impl ArtifactFiles {
    /// The artifact directory of `paths`.
    pub fn new(paths: &StatePaths) -> ArtifactFiles {
        ArtifactFiles {
            dir: paths.artifacts_dir(),
        }
    }

    fn child_dir(&self, child: ChildId) -> PathBuf {
        self.dir.join(child.to_string())
    }

    /// Write `text` as a new artifact of `child`; register the returned record in the
    /// store (normally with the run's settlement).
    pub fn write(&self, child: ChildId, text: &str) -> RuntimeResult<NewArtifact> {
        let dir = self.child_dir(child);
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| RuntimeError::io_at("cannot create", &dir, e))?;
        let artifact_id = ArtifactId::generate();
        let file_name = format!("{artifact_id}.txt");
        let final_path = dir.join(&file_name);
        let tmp_path = dir.join(format!(".{file_name}.tmp"));
        let write = || -> std::io::Result<()> {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp_path)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&tmp_path, &final_path)?;
            File::open(&dir)?.sync_all()
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp_path);
            RuntimeError::io_at("cannot write artifact", &final_path, e)
        })?;
        Ok(NewArtifact {
            artifact_id,
            file_name,
            total_bytes: text.len() as u64,
        })
    }

    /// Read `length` bytes (1..=64 KiB) from `offset`. The chunk ends on a character
    /// boundary at or before `offset + length` — unless the first character alone is
    /// wider than `length`, in which case that whole character is returned so reading
    /// always progresses. An offset inside a character is `invalid_request`.
    pub fn read_chunk(
        &self,
        artifact: &ArtifactRow,
        offset: u64,
        length: u64,
    ) -> RuntimeResult<ArtifactChunk> {
        if !(1..=MAX_CHUNK_BYTES).contains(&length) {
            return Err(RuntimeError::InvalidRequest(format!(
                "length {length} is out of bounds; pass 1..={MAX_CHUNK_BYTES}"
            )));
        }
        let path = self.child_dir(artifact.child_id).join(&artifact.file_name);
        let unavailable = |why: String| {
            RuntimeError::ArtifactUnavailable(format!(
                "artifact {} {why}; the run's preview in subzero_get is all that remains",
                artifact.artifact_id
            ))
        };
        let mut file =
            File::open(&path).map_err(|e| unavailable(format!("cannot be opened ({e})")))?;
        let total = file
            .metadata()
            .map_err(|e| unavailable(format!("cannot be read ({e})")))?
            .len();
        if total != artifact.total_bytes {
            return Err(unavailable(format!(
                "changed on disk ({total} bytes, recorded {})",
                artifact.total_bytes
            )));
        }
        if offset > total {
            return Err(RuntimeError::InvalidRequest(format!(
                "offset {offset} is past the end of artifact {} ({total} bytes)",
                artifact.artifact_id
            )));
        }
        let want = (length + 3).min(total - offset);
        let mut buf = vec![0_u8; usize::try_from(want).unwrap_or(0)];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut buf))
            .map_err(|e| unavailable(format!("cannot be read ({e})")))?;
        if buf.first().is_some_and(|b| is_continuation(*b)) {
            return Err(RuntimeError::InvalidRequest(format!(
                "offset {offset} is inside a UTF-8 character; continue from the nextOffset of the previous chunk"
            )));
        }
        let limit = usize::try_from(length).unwrap_or(usize::MAX).min(buf.len());
        let mut end = limit;
        while end > 0 && end < buf.len() && is_continuation(buf[end]) {
            end -= 1;
        }
        if end == 0 && !buf.is_empty() {
            end = 1;
            while end < buf.len() && is_continuation(buf[end]) {
                end += 1;
            }
        }
        buf.truncate(end);
        let text =
            String::from_utf8(buf).map_err(|_| unavailable("is not valid UTF-8".to_owned()))?;
        let next_offset = offset + end as u64;
        Ok(ArtifactChunk {
            offset,
            text,
            next_offset,
            eof: next_offset == total,
            total_bytes: total,
        })
    }

    /// Delete every artifact file of a child.
    pub fn remove_child(&self, child: ChildId) -> RuntimeResult<()> {
        let dir = self.child_dir(child);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(RuntimeError::io(
                format!("cannot remove {}", dir.display()),
                e,
            )),
        }
    }
}
