//! Which worker implementation runs a template's children: the Rust worker (the default) or
//! the Pi SDK worker. Chosen per template (`worker = "pi"`) and frozen into the snapshot, so a
//! child keeps its worker — and its transcript format — for life.

use serde::{Deserialize, Serialize};

/// A worker implementation, by the name its `hello` gives.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerKind {
    /// `subzero-worker worker`: the Rust worker.
    #[default]
    Rust,
    /// `subzero-worker worker --engine pi`: Node running Pi's SDK (`workers/pi`).
    Pi,
}

impl WorkerKind {
    /// Every worker, the default first.
    pub const ALL: [WorkerKind; 2] = [WorkerKind::Rust, WorkerKind::Pi];

    /// The name in templates, snapshots, `hello` and `subzero_info`.
    pub const fn as_str(self) -> &'static str {
        match self {
            WorkerKind::Rust => "rust",
            WorkerKind::Pi => "pi",
        }
    }

    /// The worker named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.as_str() == name)
    }

    /// Whether this is the default (stored as absent, so older snapshots keep their digests).
    pub fn is_default(&self) -> bool {
        *self == WorkerKind::Rust
    }
}

impl std::fmt::Display for WorkerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a write-capable child of a template writes when its spawn does not say.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// In the workspace itself (one writer at a time per workspace).
    #[default]
    Shared,
    /// In its own git checkout of the workspace.
    Checkout,
}

impl Isolation {
    /// Whether this is the default (left out when a template is written back).
    pub fn is_default(&self) -> bool {
        *self == Isolation::Shared
    }
}
