//! Subzero's build tasks: `codegen` writes `generated/`, `check` proves it is fresh and
//! agrees with `schema-src/` and the fixtures, `test` runs the whole suite with every outside
//! client and host installed, `soak` runs the seeded fault soak, `bench` writes
//! `docs/benchmarks.md`. A library so that `subzero-protocol`'s tests run the very same checks
//! in-process. The codegen and its checks (and their heavy dependencies) are behind the
//! `codegen` feature, which `subzero-protocol`'s tests turn on.

pub mod bench;
#[cfg(feature = "codegen")]
pub mod bundle;
#[cfg(feature = "codegen")]
pub mod check;
#[cfg(feature = "codegen")]
pub mod codegen;
#[cfg(feature = "codegen")]
pub mod compare;
pub mod dist;
#[cfg(feature = "codegen")]
pub mod error_table;
#[cfg(feature = "codegen")]
pub mod fixtures;
#[cfg(feature = "codegen")]
pub mod generate;
pub mod soak;
#[cfg(feature = "codegen")]
pub mod source;
pub mod test;

use std::path::PathBuf;

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or(manifest.clone(), std::path::Path::to_path_buf)
}
