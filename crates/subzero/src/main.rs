//! The `subzero` binary.
fn main() {}
