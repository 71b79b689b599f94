//! The fuzz smoke run that fits CI: every committed seed in `fuzz/seeds/<target>/` goes
//! through the same check the cargo-fuzz target runs (`fuzz/checks/protocol.rs`, included by
//! path), on stable and without libFuzzer. See docs/fuzzing.md.

#[path = "../../../../fuzz/checks/protocol.rs"]
mod checks;

#[path = "../../../../fuzz/checks/replay.rs"]
mod replay;

use replay::replay;

#[test]
fn tool_argument_seeds_pass_the_fuzz_check() {
    replay("tool_arguments", checks::tool_arguments);
}

#[test]
fn control_line_seeds_pass_the_fuzz_check() {
    replay("control_lines", checks::control_line);
}
