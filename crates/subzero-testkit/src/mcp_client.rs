//! The MCP client tests use to drive the real `subzero mcp` binary: the parent's client
//! of `subzero_runtime::mcp::client` (the one `subzero demo` and `subzero watch` ship),
//! and where to find the binaries a test built.

use std::path::{Path, PathBuf};

pub use subzero_runtime::mcp::client::*;

/// The path of a binary built next to the running test or program.
pub fn sibling_binary(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.to_path_buf(), dir.parent().map(Path::to_path_buf)?]
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
