//! Fuzz target `transcript_lines`: see `fuzz/checks/worker.rs::transcript_lines` and docs/fuzzing.md.
#![no_main]

#[path = "../checks/worker.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::transcript_lines(data));
