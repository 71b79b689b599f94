//! The fuzz smoke run that fits CI: every committed seed in `fuzz/seeds/<target>/` goes
//! through the same check the cargo-fuzz target runs (`fuzz/checks/worker.rs`, included by
//! path), on stable and without libFuzzer. See docs/fuzzing.md.

#[path = "../../../../fuzz/checks/worker.rs"]
mod checks;

#[path = "../../../../fuzz/checks/replay.rs"]
mod replay;

use replay::replay;

#[test]
fn transcript_seeds_pass_the_fuzz_check() {
    replay("transcript_lines", checks::transcript_lines);
}

#[test]
fn sse_stream_seeds_pass_the_fuzz_check() {
    replay("sse_stream", checks::sse_stream);
}

#[test]
fn stream_redactor_seeds_pass_the_fuzz_check() {
    replay("stream_redactor", checks::stream_redactor);
}
