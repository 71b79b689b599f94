//! A change's patch in bounded chunks, so a caller can page through a large diff without
//! holding it whole.

use std::io::{BufReader, Read};
use std::path::Path;

use super::error::CheckoutError;
use super::git::Git;
use super::oid::Oid;

/// One page of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffChunk {
    /// The patch bytes from the requested offset: raw bytes, since a patch may carry any
    /// file content. Cut after a line end when the page holds one.
    pub text: Vec<u8>,
    /// Where the next page starts, `None` when this page reaches the end.
    pub next_offset: Option<u64>,
    /// The whole patch's size.
    pub total_bytes: u64,
}

/// Read `[offset, offset + max_bytes)` of the patch from `base` to `head` (full object
/// ids, binary hunks, renames detected; plumbing, so the user's diff settings such as
/// `diff.noprefix` or colour do not change it). `max_bytes` 0 reads as 1.
pub fn diff_chunk(
    workspace: &Path,
    base: &Oid,
    head: &Oid,
    offset: u64,
    max_bytes: usize,
) -> Result<DiffChunk, CheckoutError> {
    let max = max_bytes.max(1) as u64;
    let git = Git::at(workspace);
    let args = [
        "diff-tree",
        "-r",
        "-p",
        "-M",
        "--binary",
        "--full-index",
        "--no-textconv",
        "--no-ext-diff",
        "--no-color",
        base.as_str(),
        head.as_str(),
    ];
    let mut child = git.spawn(&args)?;
    let stdout = child.stdout.take();
    let window = match stdout {
        Some(out) => read_window(out, offset, max),
        None => Ok((Vec::new(), 0)),
    };
    git.wait(&args, child)?;
    let (mut text, total) = window?;
    let end = offset.saturating_add(text.len() as u64);
    if end < total
        && let Some(last) = text.iter().rposition(|b| *b == b'\n')
    {
        text.truncate(last + 1);
    }
    let end = offset.saturating_add(text.len() as u64);
    Ok(DiffChunk {
        next_offset: (end < total).then_some(end),
        text,
        total_bytes: total,
    })
}

/// The bytes of `[offset, offset + max)` and the stream's total length.
fn read_window(out: impl Read, offset: u64, max: u64) -> Result<(Vec<u8>, u64), CheckoutError> {
    let mut reader = BufReader::new(out);
    let mut buf = [0u8; 64 * 1024];
    let mut window = Vec::new();
    let mut pos = 0u64;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| CheckoutError::io("reading git's diff", e))?;
        if n == 0 {
            return Ok((window, pos));
        }
        let start = pos;
        pos += n as u64;
        let from = offset.max(start);
        let to = offset.saturating_add(max).min(pos);
        if from < to {
            window.extend_from_slice(&buf[(from - start) as usize..(to - start) as usize]);
        }
    }
}
