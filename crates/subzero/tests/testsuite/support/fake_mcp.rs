//! The fake MCP server of `subzero-testkit`, as a test finds or builds it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The fake server binary of `subzero-testkit`: next to `subzero` when cargo built it (any
/// `cargo test` run that includes `-p subzero-testkit`), otherwise built once into a private
/// target directory (the outer cargo holds the lock of the shared one).
pub fn fake_server() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let subzero = Path::new(env!("CARGO_BIN_EXE_subzero"));
        let sibling = subzero.with_file_name("fake-mcp-server");
        if sibling.exists() {
            return sibling;
        }
        let target = subzero
            .parent()
            .and_then(Path::parent)
            .expect("target dir")
            .join("fake-mcp-server");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .args(["build", "-p", "subzero-testkit", "--bin", "fake-mcp-server"])
            .arg("--target-dir")
            .arg(&target)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build for the fake MCP server");
        assert!(status.success(), "building fake-mcp-server failed");
        target.join("debug").join("fake-mcp-server")
    })
}
