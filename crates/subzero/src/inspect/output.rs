//! `subzero output ARTIFACT`: a run's full result, read chunk by chunk.

use std::io::Write;

use serde_json::json;
use subzero_core::{ArtifactId, ErrorCode};
use subzero_runtime::artifacts::{ArtifactFiles, MAX_CHUNK_BYTES};

use super::state::ReadOnlyState;
use super::{InspectError, Outcome, StateDirArg, runtime, written};
use crate::terminal_text::Printing;

/// Flags of `subzero output`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// The artifact (`art_…`), as named by `subzero show` or `subzero_get`.
    #[arg(value_name = "ARTIFACT")]
    pub artifact: String,
    /// Start at this byte offset (a character boundary: a previous `nextOffset`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub offset: u64,
    /// Read at most this many bytes (default: everything from the offset on).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub length: Option<u64>,
    /// Print each chunk as a `subzero_output` JSON object, one per line.
    #[arg(long)]
    pub json: bool,
    /// Print the artifact's bytes as they are, control characters included (on a terminal
    /// they are shown escaped otherwise; to a pipe or a file they always are as they are).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub state_dir: StateDirArg,
}

pub(super) fn run(args: OutputArgs) -> Outcome {
    let artifact = ArtifactId::parse(&args.artifact)
        .map_err(|e| InspectError::new(ErrorCode::InvalidRequest, e.to_string()))?;
    let state = ReadOnlyState::open(args.state_dir.state_dir.as_deref())?;
    let scope = state.artifact_scope(artifact)?;
    let row = runtime()?.block_on(state.store()?.artifact(&scope, artifact))?;
    let files = ArtifactFiles::new(state.paths());
    let mut offset = args.offset;
    let mut left = args.length.unwrap_or(u64::MAX);
    let printing = Printing::of_stdout(args.raw);
    let mut out = std::io::stdout().lock();
    loop {
        let chunk = files.read_chunk(&row, offset, left.min(MAX_CHUNK_BYTES))?;
        if args.json {
            let doc = json!({
                "artifactId": artifact.to_string(),
                "offset": chunk.offset,
                "text": chunk.text,
                "nextOffset": chunk.next_offset,
                "eof": chunk.eof,
                "totalBytes": chunk.total_bytes,
            });
            written(writeln!(out, "{}", printing.json(&doc.to_string())))?;
        } else {
            written(out.write_all(printing.text(&chunk.text).as_bytes()))?;
        }
        let read = chunk.next_offset.saturating_sub(offset);
        offset = chunk.next_offset;
        left = left.saturating_sub(read);
        if chunk.eof || left == 0 || read == 0 {
            written(out.flush())?;
            if !chunk.eof && !args.json {
                let _ = writeln!(
                    std::io::stderr(),
                    "(more: {} of {} bytes read; continue with `subzero output {artifact} --offset {offset}`)",
                    offset,
                    chunk.total_bytes
                );
            }
            return Ok(());
        }
    }
}
