//! What an install lays out and how the three binaries find each other.

mod arm64;
mod cargo_install;
mod layout;
mod npm;
mod server_json;

/// The target directory this test binary was built in (`target/`), where `cargo xtask test`
/// leaves what it installed and laid out for these tests.
fn target_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_BIN_EXE_subzero"))
        .ancestors()
        .nth(2)
        .expect("the target directory")
        .to_path_buf()
}
