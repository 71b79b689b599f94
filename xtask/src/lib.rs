//! Subzero's build tasks: `codegen` writes `generated/`, `check` proves it is fresh and
//! agrees with `schema-src/` and the fixtures, `test` runs the whole suite with every outside
//! client and host installed, `soak` runs the seeded fault soak, `startup-order` writes the broker's start-up link order. A library so that `subzero-protocol`'s tests run the very same
//! checks in-process.

pub mod bench;
pub mod bundle;
pub mod check;
pub mod codegen;
pub mod compare;
pub mod error_table;
pub mod fixtures;
pub mod link_map;
pub mod soak;
pub mod source;
pub mod startup_order;
pub mod test;

use std::path::PathBuf;

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or(manifest.clone(), std::path::Path::to_path_buf)
}
