//! What a binary of this package says it is: `<name> <version> (<commit>, <target>)`, the
//! same line from `subzero`, `subzero-worker` and `subzero-hold` when they come from one build
//! (`subzero doctor` compares them). The commit and target come from `build.rs`.

/// The commit built from (40 hex digits), or `unknown`.
#[allow(dead_code, reason = "the sibling binaries print only the version line")]
pub const COMMIT: &str = env!("SUBZERO_COMMIT");
/// The target triple built for.
#[allow(dead_code, reason = "the sibling binaries print only the version line")]
pub const TARGET: &str = env!("SUBZERO_TARGET");
/// `<version> (<commit, 12 digits>, <target>)`: what `--version` prints after the name.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SUBZERO_COMMIT_SHORT"),
    ", ",
    env!("SUBZERO_TARGET"),
    ")"
);

/// Prints `<name> <version line>` when the arguments are exactly `--version`; says whether it
/// did.
#[allow(dead_code, reason = "the sibling binaries use it; `subzero` has clap")]
pub fn print_if_asked(name: &str, args: &[std::ffi::OsString]) -> bool {
    if args.len() == 1 && args[0] == "--version" {
        println!("{name} {VERSION_LINE}");
        return true;
    }
    false
}
