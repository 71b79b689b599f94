//! The Rust worker: `subzero-worker worker`, beside the broker, with nothing else to find.

use std::ffi::OsString;
use std::path::PathBuf;

use subzero_core::template::WorkerKind;
use subzero_protocol as p;

use super::{ChildWorker, Engine};
use crate::broker::checkpoint::Format;
use crate::workers::installed_bytes;

/// The Rust worker engine.
#[derive(Debug)]
pub(super) struct RustEngine {
    /// `subzero-worker`.
    pub(super) exe: PathBuf,
}

impl Engine for RustEngine {
    fn kind(&self) -> WorkerKind {
        WorkerKind::Rust
    }

    fn wire_name(&self) -> p::WorkerName {
        p::WorkerName::Rust
    }

    fn locate(&self) -> Result<Vec<OsString>, String> {
        Ok(Vec::new())
    }

    fn handshake_label(&self) -> &'static str {
        "handshake"
    }

    fn start_failed(&self, error: &str) -> String {
        crate::supervisor::worker_missing(&self.exe).unwrap_or_else(|| {
            format!(
                "the worker (`{} worker`) could not be started: {error}; run `subzero doctor`",
                self.exe.display()
            )
        })
    }

    fn child_args(&self, base: Vec<OsString>, _: ChildWorker<'_>) -> Result<Vec<OsString>, String> {
        Ok(base)
    }

    fn installed_bytes(&self) -> Option<u64> {
        Some(installed_bytes(&self.exe))
    }

    fn transcript_format(&self) -> Format {
        Format::Rust
    }

    fn reports_own_containment(&self) -> bool {
        // The Rust worker's receipts are `enforcement.containment` itself.
        false
    }
}
